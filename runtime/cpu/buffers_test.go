package cpu

import (
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// layeredGraph records a small transformer-shaped graph over rows tokens:
// embeddings, then per layer a norm, a fused q/k/v group, head norms of q
// and k with RoPE (q's norm read by its rope alone, k's by the residual add
// too), residual adds and a SwiGLU FFN, with the logits and the last
// hidden state as outputs.
func layeredGraph(t *testing.T, rows, layers int) *tensor.Graph {
	t.Helper()
	const d, ff, vocab, hd = 64, 96, 50, 16
	shapes := map[string][2]int{"emb": {vocab, d}, "norm": {1, d}, "wq": {d, d}, "wk": {d, d}, "wv": {d, d},
		"qnorm": {1, hd}, "wg": {ff, d}, "wu": {ff, d}, "wd": {d, ff}, "out": {vocab, d}}
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		s, ok := shapes[name]
		dt := tensor.Q8_0
		if name == "emb" || name == "norm" || name == "qnorm" {
			dt = tensor.F32
		}
		return dt, s[0], s[1], ok
	})
	x := b.GetRows(b.Weight("emb"), b.Input("tokens", rows))
	pos := b.Input("positions", rows)
	rope := tensor.RoPEArgs{HeadDim: hd, Dims: hd, Base: 1e4, Mode: tensor.RoPENeox}
	for range layers {
		n := b.RMSNorm(x, b.Weight("norm"), d, 1e-6)
		q, k, v := b.MatMul(n, b.Weight("wq")), b.MatMul(n, b.Weight("wk")), b.MatMul(n, b.Weight("wv"))
		q = b.RoPE(b.RMSNorm(q, b.Weight("qnorm"), hd, 1e-6), pos, rope)
		kn := b.RMSNorm(k, b.Weight("qnorm"), hd, 1e-6)
		x = b.Add(x, kn)
		k = b.RoPE(kn, pos, rope)
		x = b.Add(x, b.Add(b.Add(q, k), v))
		g, u := b.MatMul(x, b.Weight("wg")), b.MatMul(x, b.Weight("wu"))
		x = b.Add(x, b.MatMul(b.SwiGLU(g, u), b.Weight("wd")))
	}
	b.Output("hidden", x)
	b.Output("logits", b.MatMul(x, b.Weight("out")))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAssignBuffers checks the buffer plan of a recorded graph: no two
// tensors that are alive at the same time (from the op that writes them to
// the last op that reads them; the outputs to the end) share memory, every
// computed tensor has a buffer of its size, and reuse keeps the total far
// below one buffer per tensor.
func TestAssignBuffers(t *testing.T) {
	const rows = 8
	g := layeredGraph(t, rows, 6)
	p := &program{g: g, f32: make([][]float32, len(g.Ops)), w: make([]*weights.Tensor, len(g.Ops))}
	for i, op := range g.Ops {
		if op.Kind == tensor.OpWeight {
			p.w[i] = &weights.Tensor{Name: op.Name, DType: op.Out.DType}
		}
	}
	defer setLevel(levelAVX512)() // fuseMatmuls groups the matmuls the running level's kernels take; nothing runs here
	p.fused = fuseMatmuls(g, p.w)
	if p.fused == nil || func() bool {
		for _, grp := range p.fused {
			if len(grp) > 1 {
				return false
			}
		}
		return true
	}() {
		t.Fatal("the graph has no fused matmul group: the test would not cover them")
	}
	p.normRoPE = fuseNormRoPE(g)
	fusedNorms := 0
	for i, j := range p.normRoPE {
		if j < 0 {
			continue
		}
		if g.Ops[i].Kind != tensor.OpRMSNorm || g.Ops[j].Kind != tensor.OpRoPE || g.Ops[j].Args[0].ID != i {
			t.Fatalf("fuseNormRoPE paired op %d (%v) with op %d (%v)", i, g.Ops[i].Kind, j, g.Ops[j].Kind)
		}
		fusedNorms++
	}
	if fusedNorms != 6 {
		t.Fatalf("fuseNormRoPE fused %d norms into their ropes, want 6 (each layer's q norm, not its k norm, read twice)", fusedNorms)
	}
	p.assignBuffers()

	start := make([]int, len(g.Ops))
	end := make([]int, len(g.Ops))
	for i := range g.Ops {
		start[i], end[i] = i, i
	}
	for i, grp := range p.fused {
		for _, j := range grp {
			start[j] = i
		}
	}
	for i, j := range p.normRoPE {
		if j >= 0 {
			start[j] = i
		}
	}
	for i, op := range g.Ops {
		for _, a := range op.Args {
			end[a.ID] = max(end[a.ID], i)
		}
	}
	for _, o := range g.Outputs {
		end[o.ID] = len(g.Ops)
	}
	computed := func(i int) bool {
		return g.Ops[i].Kind != tensor.OpWeight && g.Ops[i].Kind != tensor.OpInput && p.normRoPE[i] < 0 // a fused norm writes its rope's buffer
	}
	var sum, distinct int
	seen := map[*float32]bool{}
	for i, op := range g.Ops {
		if !computed(i) {
			continue
		}
		if n := op.Out.Rows() * op.Out.Cols(); len(p.f32[i]) != n {
			t.Fatalf("op %d (%v): buffer of %d floats, want %d", i, op.Kind, len(p.f32[i]), n)
		}
		sum += len(p.f32[i])
		if base := unsafe.SliceData(p.f32[i][:cap(p.f32[i])]); !seen[base] {
			seen[base] = true
			distinct += cap(p.f32[i])
		}
		for j := range i {
			if !computed(j) || end[j] < start[i] || end[i] < start[j] {
				continue
			}
			if overlap(p.f32[i], p.f32[j]) {
				t.Fatalf("ops %d (%v, alive %d..%d) and %d (%v, alive %d..%d) share memory",
					i, op.Kind, start[i], end[i], j, g.Ops[j].Kind, start[j], end[j])
			}
		}
	}
	if distinct*4 > sum {
		t.Errorf("%d floats allocated for %d floats of tensors: want reuse to cut it to under a quarter", distinct, sum)
	}
}

// overlap reports whether two slices share any element.
func overlap(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b))*4 && b0 < a0+uintptr(len(a))*4
}
