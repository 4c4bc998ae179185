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
	group int
	eps   float32
}

func (t *elemTask) run(_, lo, hi int) {
	switch t.kind {
	case tensor.OpAdd:
		out, x, y := t.out[lo:hi], t.x[lo:hi], t.y[lo:hi]
		for j := range out {
			out[j] = x[j] + y[j]
		}
	case tensor.OpSwiGLU:
		out, g, u := t.out[lo:hi], t.x[lo:hi], t.y[lo:hi]
		if useSIMD {
			swigluFast(out, g, u)
			return
		}
		for j := range out {
			out[j] = silu(g[j]) * u[j]
		}
	case tensor.OpRMSNorm:
		for s := lo * t.group; s < hi*t.group; s += t.group {
			if useSIMD {
				rmsNormFast(t.out[s:s+t.group], t.x[s:s+t.group], t.y, t.eps)
				continue
			}
			rmsNorm(t.out[s:s+t.group], t.x[s:s+t.group], t.y, t.eps)
		}
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
		n, grain = len(out)/op.Group, 1
	default:
		t.y = p.f32[op.Args[1].ID]
	}
	workers := p.b.pool.n
	if len(out) < parallelElems {
		workers = 1
	}
	p.b.pool.run(n, grain, workers, t)
}

// swigluFast is out[j] = silu(g[j]) * u[j] with the AVX-512 kernel, bit for
// bit: the elements swigluF32 cannot guarantee are computed with silu.
func swigluFast(out, g, u []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	g, u = g[:n], u[:n]
	for i := 0; i < n; {
		i += swigluF32(&out[i], &g[i], &u[i], n-i)
		for end := min(i+16, n); i < end; i++ {
			out[i] = silu(g[i]) * u[i]
		}
	}
}
