package cpu

import "github.com/ninfer/ninfer-go/runtime/tensor"

// parallelElems is the smallest element-wise op (in elements) worth
// splitting across workers; smaller ones run on the calling goroutine.
const parallelElems = 1 << 14

// elemTask runs one element-wise op (add, swiglu, rms_norm) over items
// [lo, hi): elements for add and swiglu, groups for rms_norm. Each element
// is computed the same way whatever the split.
type elemTask struct {
	kind  tensor.OpKind
	out   []float32
	x, y  []float32 // add: x + y; swiglu: silu(x) * y; rms_norm: x, weight y
	cols  int       // swiglu: the row width (ggml's SiLU treats each row's last cols%16 apart)
	group int
	eps   float32
}

func (t *elemTask) run(_, lo, hi int) {
	switch t.kind {
	case tensor.OpAdd:
		out, x, y := t.out[lo:hi], t.x[lo:hi], t.y[lo:hi]
		if useSIMD && len(out) > 0 {
			addV(&out[0], &x[0], &y[0], len(out))
			return
		}
		for j := range out {
			out[j] = x[j] + y[j]
		}
	case tensor.OpSwiGLU:
		if level != levelRef {
			swigluFast(t.out, t.x, t.y, lo, hi, t.cols)
			return
		}
		swigluRows(t.out[lo:hi], t.x[lo:hi], t.y[lo:hi], lo, t.cols)
	case tensor.OpRMSNorm:
		rmsNormSpan(t.out[lo*t.group:hi*t.group], t.x[lo*t.group:hi*t.group], t.y, t.group, t.eps)
	}
}

// rmsNormSpan writes rmsNorm of each group of group values of x into dst
// (len(x) a multiple of group): 16 or 8 groups at a time (rmsNormGroups)
// where the level and the width allow, the rest one by one.
func rmsNormSpan(dst, x, w []float32, group int, eps float32) {
	g, n := 0, len(x)/group
	if useSIMD && group%16 == 0 {
		for k := 16; k >= 8; k -= 8 {
			for ; g+k <= n; g += k {
				s := g * group
				rmsNormGroups(dst[s:], x[s:], w, k, group, eps)
			}
		}
	}
	for ; g < n; g++ {
		s := g * group
		if useSIMD {
			rmsNormFast(dst[s:s+group], x[s:s+group], w, eps)
			continue
		}
		rmsNorm(dst[s:s+group], x[s:s+group], w, eps)
	}
}

// elementwise computes an add, swiglu or rms_norm op into out, split across
// workers when it is large.
func (p *program) elementwise(out []float32, op tensor.Op) {
	t := &p.elem
	*t = elemTask{kind: op.Kind, out: out, x: p.f32[op.Args[0].ID]}
	n, grain := len(out), 1024
	switch op.Kind {
	case tensor.OpRMSNorm:
		t.y, t.group, t.eps = p.f32[op.Args[1].ID], op.Group, op.Eps
		n, grain = len(out)/op.Group, 16 // rmsNormGroups' 16s
	default:
		t.y, t.cols = p.f32[op.Args[1].ID], op.Out.Cols()
	}
	workers := p.b.pool.n
	if len(out) < parallelElems {
		workers = 1
	}
	p.b.pool.run(n, grain, workers, t)
}

// swigluFast is swigluRows over elements [lo, hi) of out, g and u, bit
// for bit, with the level's kernel swigluV16 for 16s of elements in their
// rows' whole 16s (siluV is lane by lane, so their alignment is free).
func swigluFast(out, g, u []float32, lo, hi, cols int) {
	whole := cols - cols%16
	for s := lo; s < hi; {
		r0 := s - s%cols
		e := min(hi, r0+cols)
		if w := min(e, r0+whole); w-s >= 16 {
			n := (w - s) &^ 15
			if useSIMD {
				swigluV16(&out[s], &g[s], &u[s], n/16)
			} else {
				swigluV16AVX2(&out[s], &g[s], &u[s], n/16)
			}
			s += n
		}
		swigluRows(out[s:e], g[s:e], u[s:e], s, cols)
		s = e
	}
}
