package cpu

import (
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// moeState is a program's MoE scratch, reused across steps: moeFast
// allocates only when a step needs more than an earlier one did.
type moeState struct {
	choice       []int
	weight, prob []float32
	order        []int
	rows         []int     // slots routed to the expert being run
	x, g, u, y   []float32 // the expert's gathered rows, gate, up, down outputs
	results      []float32 // [T*TopK, E]
	// experts holds, per MoE op (by output tensor id), the views of each
	// expert's rows of the stacked gate, up and down weights: made once,
	// not every step.
	experts map[int][]*weights.Tensor
	// Activation preparation, owned here so that it never disturbs the
	// matmul path's caches (matmulState).
	rx     []float32
	qx     []int8
	qd     []float32
	qz     []byte
	aq     actQuant
	prep   prepTask
	aPre   blockPrepTask
	gateUp matmulGroup
	down   matmulTask
	swiglu elemTask
}

// moeFast is moeRef on the fast matmul kernels: the same routing, each
// expert's gate and up run as one parallel job over its gathered rows, its
// down as another, results combined in routing order. The matmuls differ
// from the reference kernels as matmulFast does (see matmul.go).
func (p *program) moeFast(out []float32, op tensor.Op) {
	a, m := op.MoE, &p.moeScr
	h, router := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID]
	T, E, F := op.Out.Rows(), op.Out.Cols(), a.FFN
	slots := T * a.TopK
	m.choice = grow(m.choice, slots)
	m.order = grow(m.order, a.Experts)
	m.weight = grow(m.weight, slots)
	m.prob = grow(m.prob, a.Experts)
	route(m.choice, m.weight, router, a, T, m.prob, m.order)
	m.results = grow(m.results, slots*E)
	ex := p.expertViews(op)
	for e := range a.Experts {
		m.rows = m.rows[:0]
		for s, c := range m.choice {
			if c == e {
				m.rows = append(m.rows, s)
			}
		}
		n := len(m.rows)
		if n == 0 {
			continue
		}
		m.x, m.g, m.u, m.y = grow(m.x, n*E), grow(m.g, n*F), grow(m.u, n*F), grow(m.y, n*E)
		for i, s := range m.rows {
			copy(m.x[i*E:(i+1)*E], h[(s/a.TopK)*E:(s/a.TopK+1)*E])
		}
		gw, uw, dw := ex[3*e], ex[3*e+1], ex[3*e+2]
		grp := &m.gateUp
		grp.n = 2
		parts := p.moeSetup(&grp.tasks[0], m.g, m.x, n, gw)
		p.moeShare(&grp.tasks[1], &grp.tasks[0], m.u, uw)
		grp.ends[0], grp.ends[1] = F, 2*F
		p.b.pool.run(2*F, grp.tasks[0].grain(), parts, grp)
		m.swiglu = elemTask{kind: tensor.OpSwiGLU, out: m.g, x: m.g, y: m.u, cols: F}
		workers := p.b.pool.n
		if n*F < parallelElems {
			workers = 1
		}
		p.b.pool.run(n*F, 1024, workers, &m.swiglu)
		parts = p.moeSetup(&m.down, m.y, m.g, n, dw)
		p.b.pool.run(E, m.down.grain(), parts, &m.down)
		for i, s := range m.rows {
			copy(m.results[s*E:(s+1)*E], m.y[i*E:(i+1)*E])
		}
	}
	combine(out, m.results, m.weight, T, a.TopK, E)
}

// expertViews returns op's per-expert weight views (gate, up, down of
// expert e at 3e, 3e+1, 3e+2), made on first use.
func (p *program) expertViews(op tensor.Op) []*weights.Tensor {
	m := &p.moeScr
	if v, ok := m.experts[op.Out.ID]; ok {
		return v
	}
	if m.experts == nil {
		m.experts = map[int][]*weights.Tensor{}
	}
	a, E := op.MoE, op.Out.Cols()
	gate, up, down := p.w[op.Args[2].ID], p.w[op.Args[3].ID], p.w[op.Args[4].ID]
	v := make([]*weights.Tensor, 3*a.Experts)
	for e := range a.Experts {
		v[3*e], v[3*e+1], v[3*e+2] = rowsOf(gate, e*a.FFN, a.FFN), rowsOf(up, e*a.FFN, a.FFN), rowsOf(down, e*E, E)
	}
	m.experts[op.Out.ID] = v
	return v
}

// moeSetup prepares x [T, K] for the weight w (as setupMatmul does, in the
// MoE's own buffers) and fills t to compute x w^T into out; it returns how
// many workers the matmul is worth.
func (p *program) moeSetup(t *matmulTask, out, x []float32, T int, w *weights.Tensor) int {
	m := &p.moeScr
	K, N := w.RowLen(), w.Rows()
	parts := p.b.pool.n
	if T*K*N < parallelMACs {
		parts = 1
	}
	x = x[:T*K]
	*t = matmulTask{dt: w.DType, w: w.Data, rowBytes: w.RowBytes(), out: out[:T*N], T: T, K: K, N: N, x: x, tiles: p.mm.tiles,
		layout: w.Layout}
	switch {
	case w.DType == tensor.F16 || w.DType == tensor.BF16:
		m.rx = grow(m.rx, len(x))
		m.prep = prepTask{dt: w.DType, x: x, K: K, rx: m.rx}
		p.b.pool.run(T, 1, min(parts, T), &m.prep)
		t.x = m.rx
		if T >= 4 {
			p.mm.tiles = growTiles(p.mm.tiles, p.b.pool.n, K)
			t.tiles = p.mm.tiles
		}
	case q8Activations(w):
		if unpacksQ4(w, T) {
			p.mm.unpacked = growUnpacked(p.mm.unpacked, p.b.pool.n, K)
			t.unpacked = p.mm.unpacked
		}
		lay := q8LayoutFor(w, T)
		p.quantizeQ8(&m.prep, &m.qx, &m.qd, &m.qz, x, T, K, parts, lay)
		t.qx, t.qd = m.qx, m.qd
		if lay != q8Plain {
			t.qz = m.qz
		}
	}
	if kernelOf(w.DType).kind == kindBlock && !q8GroupLayout(w) {
		p.prepareBlock(&m.aPre, &m.aq, x, w.DType.DotType(), T, K, parts, false, blockKernels(w))
		t.aq = &m.aq
	}
	return parts
}

// moeShare fills t to multiply the activations prepared for from by w (of
// the same dtype, row length and layout) into out.
func (p *program) moeShare(t, from *matmulTask, out []float32, w *weights.Tensor) {
	*t = *from
	t.w, t.rowBytes, t.N, t.out = w.Data, w.RowBytes(), w.Rows(), out[:from.T*w.Rows()]
}
