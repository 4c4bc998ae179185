// Package cpu is the pure-Go CPU backend: it interprets a recorded op list
// with reference kernels, splitting matrix work across a persistent worker pool.
package cpu

import (
	"context"
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	exec.Register("cpu", func(o exec.Options) exec.Backend { return New(o) })
}

// Backend is the CPU backend. It is driven by one goroutine.
type Backend struct {
	pool    *pool
	file    *weights.File
	weights map[string]*weights.Tensor
	kv      exec.KVLayout
	k, v    [][]float32 // [layer][slot*KVDim]
}

// New returns a CPU backend using o.Threads workers.
func New(o exec.Options) *Backend {
	return &Backend{pool: newPool(o.Threads)}
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return "cpu" }

// Threads is the number of worker threads.
func (b *Backend) Threads() int { return b.pool.n }

// Load implements exec.Backend. Weights stay in the file's mapping.
func (b *Backend) Load(f *weights.File) error {
	b.file = f
	b.weights = make(map[string]*weights.Tensor, len(f.Tensors))
	for _, t := range f.Tensors {
		b.weights[t.Name] = t
	}
	return nil
}

// Reserve implements exec.Backend.
func (b *Backend) Reserve(l exec.KVLayout) error {
	if l.DType != "f32" && l.DType != "" {
		return fmt.Errorf("cpu: kv dtype %q not supported", l.DType)
	}
	if l.Layers <= 0 || l.KVDim <= 0 || l.BlockTokens <= 0 || l.Blocks <= 0 {
		return fmt.Errorf("cpu: bad kv layout %+v", l)
	}
	b.kv = l
	b.k = make([][]float32, l.Layers)
	b.v = make([][]float32, l.Layers)
	for i := range b.k {
		b.k[i] = make([]float32, l.Slots()*l.KVDim)
		b.v[i] = make([]float32, l.Slots()*l.KVDim)
	}
	return nil
}

// Close implements exec.Backend.
func (b *Backend) Close() error {
	b.pool.close()
	b.k, b.v = nil, nil
	return nil
}

type program struct {
	b     *Backend
	g     *tensor.Graph
	f32   [][]float32       // per op: f32 output buffer
	i32   [][]int32         // per op: bound int32 input
	w     []*weights.Tensor // per op: weight
	xq    []q8Blocks        // scratch: quantized activation rows
	xr    []float32         // scratch: activations rounded to the dot type
	score [][]float32       // per worker attention scores
	trig  [][]float32       // per worker rope cos/sin
}

// Prepare implements exec.Backend.
func (b *Backend) Prepare(g *tensor.Graph) (exec.Executable, error) {
	p := &program{b: b, g: g,
		f32: make([][]float32, len(g.Ops)), i32: make([][]int32, len(g.Ops)), w: make([]*weights.Tensor, len(g.Ops)),
		score: make([][]float32, b.pool.n), trig: make([][]float32, b.pool.n)}
	for i, op := range g.Ops {
		switch op.Kind {
		case tensor.OpInput:
		case tensor.OpWeight:
			t, ok := b.weights[op.Name]
			if !ok {
				return nil, fmt.Errorf("cpu: weight %q not loaded", op.Name)
			}
			p.w[i] = t
		case tensor.OpAttention:
			if b.k == nil {
				return nil, fmt.Errorf("cpu: attention needs a reserved kv cache")
			}
			if op.Attn.Layer < 0 || op.Attn.Layer >= b.kv.Layers || op.Args[1].Cols() != b.kv.KVDim {
				return nil, fmt.Errorf("cpu: attention layer %d width %d does not fit kv layout %+v", op.Attn.Layer, op.Args[1].Cols(), b.kv)
			}
			p.f32[i] = make([]float32, op.Out.Rows()*op.Out.Cols())
		default:
			p.f32[i] = make([]float32, op.Out.Rows()*op.Out.Cols())
		}
	}
	return p, nil
}

func (p *program) Close() error { p.f32, p.xr, p.xq = nil, nil, nil; return nil }

func (p *program) Output(name string) ([]float32, int, int, error) {
	t, ok := p.g.Outputs[name]
	if !ok {
		return nil, 0, 0, fmt.Errorf("cpu: no output %q", name)
	}
	return p.f32[t.ID], t.Rows(), t.Cols(), nil
}

// Run implements exec.Executable.
func (p *program) Run(ctx context.Context, batch *exec.Batch) error {
	inputs := batch.Inputs()
	if err := p.checkBatch(batch); err != nil {
		return err
	}
	for i, op := range p.g.Ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		out := p.f32[i]
		switch op.Kind {
		case tensor.OpInput:
			v, ok := inputs[op.Name]
			if !ok {
				return fmt.Errorf("cpu: no binding for input %q", op.Name)
			}
			if len(v) != op.Out.Rows() {
				return fmt.Errorf("cpu: input %q has %d values, graph recorded %d", op.Name, len(v), op.Out.Rows())
			}
			p.i32[i] = v
		case tensor.OpWeight:
		case tensor.OpGetRows:
			if err := p.getRows(out, op); err != nil {
				return err
			}
		case tensor.OpRMSNorm:
			x, w := p.f32[op.Args[0].ID], p.weightF32(op.Args[1])
			for s := 0; s < len(x); s += op.Group {
				rmsNorm(out[s:s+op.Group], x[s:s+op.Group], w, op.Eps)
			}
		case tensor.OpMatMul:
			if err := p.matmul(out, op); err != nil {
				return err
			}
		case tensor.OpRoPE:
			p.rope(out, op)
		case tensor.OpAttention:
			p.attention(out, op, batch)
		case tensor.OpAdd:
			x, y := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID]
			for j := range out {
				out[j] = x[j] + y[j]
			}
		case tensor.OpSwiGLU:
			g, u := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID]
			for j := range out {
				out[j] = silu(g[j]) * u[j]
			}
		case tensor.OpSelectRows:
			x, rows, w := p.f32[op.Args[0].ID], p.i32[op.Args[1].ID], op.Out.Cols()
			for j, r := range rows {
				if r < 0 || int(r) >= op.Args[0].Rows() {
					return fmt.Errorf("cpu: select_rows: row %d out of range [0,%d)", r, op.Args[0].Rows())
				}
				copy(out[j*w:(j+1)*w], x[int(r)*w:(int(r)+1)*w])
			}
		default:
			return fmt.Errorf("cpu: op %v not implemented", op.Kind)
		}
	}
	return nil
}

func (p *program) checkBatch(b *exec.Batch) error {
	if len(b.Positions) != len(b.Tokens) || len(b.RowSeq) != len(b.Tokens) {
		return fmt.Errorf("cpu: batch has %d tokens, %d positions, %d row sequences", len(b.Tokens), len(b.Positions), len(b.RowSeq))
	}
	bt := p.b.kv.BlockTokens
	for i, s := range b.RowSeq {
		if s < 0 || int(s) >= len(b.Tables) {
			return fmt.Errorf("cpu: row %d: sequence %d out of range", i, s)
		}
		pos := int(b.Positions[i])
		if pos < 0 || bt == 0 || pos/bt >= len(b.Tables[s]) {
			return fmt.Errorf("cpu: row %d: position %d has no kv block", i, pos)
		}
		for _, blk := range b.Tables[s][:pos/bt+1] {
			if blk < 0 || int(blk) >= p.b.kv.Blocks {
				return fmt.Errorf("cpu: row %d: kv block %d out of range", i, blk)
			}
		}
	}
	return nil
}

// weightF32 returns a small f32 weight (norm vectors) as float32s.
func (p *program) weightF32(t tensor.Tensor) []float32 {
	w := p.w[t.ID]
	if p.f32[t.ID] == nil {
		v, err := w.Float32s()
		if err != nil {
			v = make([]float32, t.Rows()*t.Cols())
		}
		p.f32[t.ID] = v
	}
	return p.f32[t.ID]
}

func (p *program) getRows(out []float32, op tensor.Op) error {
	w, ids, d := p.w[op.Args[0].ID], p.i32[op.Args[1].ID], op.Out.Cols()
	if w == nil {
		return fmt.Errorf("cpu: get_rows: table must be a weight")
	}
	for j, id := range ids {
		if id < 0 || int(id) >= w.Rows() {
			return fmt.Errorf("cpu: get_rows: id %d out of range [0,%d)", id, w.Rows())
		}
		if err := tensor.DequantizeRow(w.DType, w.Row(int(id)), out[j*d:(j+1)*d]); err != nil {
			return err
		}
	}
	return nil
}

// matmul computes out [T, N] = x [T, K] * W^T for W [N, K] in its stored dtype.
func (p *program) matmul(out []float32, op tensor.Op) error {
	x, w := p.f32[op.Args[0].ID], p.w[op.Args[1].ID]
	if w == nil {
		return fmt.Errorf("cpu: matmul: right operand must be a weight")
	}
	T, K, N := op.Args[0].Rows(), op.Args[0].Cols(), op.Out.Cols()
	switch w.DType {
	case tensor.F32:
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := p.weightRowF32(w, r)
				for t := 0; t < T; t++ {
					out[t*N+r] = dotF32(x[t*K:(t+1)*K], row)
				}
			}
		})
	case tensor.F16, tensor.BF16:
		xr := p.roundActivations(x, w.DType)
		dot := dotF16
		if w.DType == tensor.BF16 {
			dot = dotBF16
		}
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := w.Row(r)
				for t := 0; t < T; t++ {
					out[t*N+r] = dot(xr[t*K:(t+1)*K], row)
				}
			}
		})
	case tensor.Q8_0, tensor.Q4_0:
		if cap(p.xq) < T {
			p.xq = make([]q8Blocks, T)
		}
		xq := p.xq[:T]
		for t := range xq {
			quantizeQ8(x[t*K:(t+1)*K], &xq[t])
		}
		dot := dotQ8
		if w.DType == tensor.Q4_0 {
			dot = dotQ4
		}
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := w.Row(r)
				for t := 0; t < T; t++ {
					out[t*N+r] = dot(row, &xq[t])
				}
			}
		})
	default:
		return fmt.Errorf("cpu: matmul: weight dtype %v not supported", w.DType)
	}
	return nil
}

// weightRowF32 views row r of an F32 weight as float32s without copying.
func (p *program) weightRowF32(w *weights.Tensor, r int) []float32 {
	return bytesAsF32(w.Row(r))
}

// roundActivations rounds x to the values of dtype dt (f16 or bf16), as ggml
// converts activations to the weight's dot type before the dot product.
func (p *program) roundActivations(x []float32, dt tensor.DType) []float32 {
	if cap(p.xr) < len(x) {
		p.xr = make([]float32, len(x))
	}
	xr := p.xr[:len(x)]
	for i, v := range x {
		if dt == tensor.F16 {
			xr[i] = f16tab[tensor.F32ToF16(v)]
		} else {
			xr[i] = math.Float32frombits(uint32(tensor.F32ToBF16(v)) << 16)
		}
	}
	return xr
}

func (p *program) rope(out []float32, op tensor.Op) {
	x, pos := p.f32[op.Args[0].ID], p.i32[op.Args[1].ID]
	copy(out, x)
	w := op.Out.Cols()
	p.b.pool.parallel(op.Out.Rows(), 1, func(worker, lo, hi int) {
		trig := p.scratch(p.trig, worker, op.RoPE.Dims)
		for t := lo; t < hi; t++ {
			ropeRow(out[t*w:(t+1)*w], pos[t], op.RoPE, trig[:op.RoPE.Dims/2], trig[op.RoPE.Dims/2:])
		}
	})
}

func (p *program) scratch(s [][]float32, worker, n int) []float32 {
	if cap(s[worker]) < n {
		s[worker] = make([]float32, n)
	}
	return s[worker][:n]
}

// attention writes this step's K and V rows into the cache, then computes
// causal attention for every (row, head) pair in parallel.
func (p *program) attention(out []float32, op tensor.Op, b *exec.Batch) {
	a, kv := op.Attn, p.b.kv
	q, k, v := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	kc, vc := p.b.k[a.Layer], p.b.v[a.Layer]
	kvd, qd := kv.KVDim, a.Heads*a.HeadDim
	slot := func(seq int32, pos int) int {
		return int(b.Tables[seq][pos/kv.BlockTokens])*kv.BlockTokens + pos%kv.BlockTokens
	}
	T := op.Out.Rows()
	for t := 0; t < T; t++ {
		s := slot(b.RowSeq[t], int(b.Positions[t]))
		copy(kc[s*kvd:(s+1)*kvd], k[t*kvd:(t+1)*kvd])
		copy(vc[s*kvd:(s+1)*kvd], v[t*kvd:(t+1)*kvd])
	}
	group := a.Heads / a.KVHeads
	hd := a.HeadDim
	p.b.pool.parallel(T*a.Heads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/a.Heads, i%a.Heads
			seq, n := b.RowSeq[t], int(b.Positions[t])+1
			kvh := h / group
			qh := q[t*qd+h*hd : t*qd+(h+1)*hd]
			scores := p.scratch(p.score, worker, n)
			for j := 0; j < n; j++ {
				s := slot(seq, j)
				scores[j] = dotFMA(qh, kc[s*kvd+kvh*hd:s*kvd+(kvh+1)*hd]) * a.Scale
			}
			softmaxInPlace(scores)
			o := out[t*qd+h*hd : t*qd+(h+1)*hd]
			clear(o)
			for j := 0; j < n; j++ {
				s := slot(seq, j)
				vr := vc[s*kvd+kvh*hd : s*kvd+(kvh+1)*hd]
				wj := scores[j]
				for d, v := range vr {
					o[d] += wj * v
				}
			}
		}
	})
}
