package cpu

import (
	"cmp"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// moe computes a mixture-of-experts FFN: on the fast matmul path (moeFast)
// where the level has the experts' kernels, otherwise with the reference
// loop moeRef.
func (p *program) moe(out []float32, op tensor.Op) {
	if fastMatmul(p.w[op.Args[2].ID].DType) && fastMatmul(p.w[op.Args[4].ID].DType) {
		p.moeFast(out, op)
		return
	}
	p.moeRef(out, op)
}

// moeRef computes a mixture-of-experts FFN (tensor.Builder.MoE): the rows are
// routed first, then each expert runs once over the rows routed to it
// (gathered), its gate, up and down matmuls on that expert's rows of the
// stacked weights; rows then sum their experts' outputs in routing order.
func (p *program) moeRef(out []float32, op tensor.Op) {
	a := op.MoE
	h, router := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID]
	gate, up, down := p.w[op.Args[2].ID], p.w[op.Args[3].ID], p.w[op.Args[4].ID]
	T, E := op.Out.Rows(), op.Out.Cols()
	// Routing: per row, TopK (expert, weight) pairs in routing order.
	choice := make([]int, T*a.TopK)
	weight := make([]float32, T*a.TopK)
	route(choice, weight, router, a, T, make([]float32, a.Experts), make([]int, a.Experts))
	// Each expert over its rows: results[t*TopK+k] is row t's k-th expert output.
	results := make([]float32, T*a.TopK*E)
	var rows []int // slots t*TopK+k routed to the expert
	for e := range a.Experts {
		rows = rows[:0]
		for s, c := range choice {
			if c == e {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		n := len(rows)
		x := make([]float32, n*E)
		for i, s := range rows {
			copy(x[i*E:(i+1)*E], h[(s/a.TopK)*E:(s/a.TopK+1)*E])
		}
		g, u := make([]float32, n*a.FFN), make([]float32, n*a.FFN)
		p.matmulInto(g, x, n, rowsOf(gate, e*a.FFN, a.FFN))
		p.matmulInto(u, x, n, rowsOf(up, e*a.FFN, a.FFN))
		swigluRows(g, g, u, 0, a.FFN)
		y := make([]float32, n*E)
		p.matmulInto(y, g, n, rowsOf(down, e*E, E))
		for i, s := range rows {
			copy(results[s*E:(s+1)*E], y[i*E:(i+1)*E])
		}
	}
	combine(out, results, weight, T, a.TopK, E)
}

// route writes, per row t of router [T, Experts], its TopK experts in
// routing order (highest probability first, ties by index) and their
// weights (renormalised to sum 1 with a.Normalize); prob and order are
// scratch of Experts.
func route(choice []int, weight, router []float32, a tensor.MoEArgs, T int, prob []float32, order []int) {
	for t := range T {
		softmaxRow(prob, router[t*a.Experts:(t+1)*a.Experts])
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(prob[y], prob[x]) })
		var sum float32
		for k := range a.TopK {
			choice[t*a.TopK+k], weight[t*a.TopK+k] = order[k], prob[order[k]]
			sum += prob[order[k]]
		}
		if a.Normalize {
			for k := range a.TopK {
				weight[t*a.TopK+k] /= sum
			}
		}
	}
}

// combine writes out[t] = sum over k in order of weight[t,k] * results[t,k].
func combine(out, results, weight []float32, T, topK, E int) {
	for t := range T {
		o := out[t*E : (t+1)*E]
		clear(o)
		for k := range topK {
			s, w := t*topK+k, weight[t*topK+k]
			for j := range o {
				o[j] += w * results[s*E+j]
			}
		}
	}
}

// rowsOf is a view of rows [lo, lo+n) of w, as a tensor of its own, in
// w's layout (for a layout of 16-row groups, lo and n are whole groups: an
// expert's rows, Shape[1] of them).
func rowsOf(w *weights.Tensor, lo, n int) *weights.Tensor {
	rb := w.RowBytes()
	return &weights.Tensor{Name: w.Name, DType: w.DType, Shape: []int{w.RowLen(), n}, Data: w.Data[lo*rb : (lo+n)*rb], Layout: w.Layout}
}

// softmaxRow writes the softmax of x to dst as ggml's soft_max does
// (softmaxInPlace).
func softmaxRow(dst, x []float32) {
	copy(dst, x)
	softmaxInPlace(dst)
}
