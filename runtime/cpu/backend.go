// Package cpu is the pure-Go CPU backend: it interprets a recorded op list
// with reference kernels, splitting matrix work across a persistent worker pool.
package cpu

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

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
	cache   kvPages
	state   stateMemory // hybrid.go
	// programs are the open programs (workspace.go accounts their scratch);
	// ws is the workspace noteStep recorded, guarded by wsMu.
	programs map[*program]struct{}
	wsMu     sync.Mutex
	ws       exec.Workspace
	opTimes  *opTimes // NINFER_CPU_OPTIMES: op wall times (optimes.go), else nil
}

// New returns a CPU backend using o.Threads workers.
func New(o exec.Options) *Backend {
	return &Backend{pool: newPool(o.Threads), opTimes: newOpTimes()}
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return "cpu" }

// TakesStateInside implements exec.InnerStateTaker: the delta rule runs a
// sequence's rows in runs of one slot (deltaTask.run), short_conv row by
// row.
func (b *Backend) TakesStateInside() bool { return true }

// Threads is the number of worker threads.
func (b *Backend) Threads() int { return b.pool.n }

// StreamsHostWeights implements exec.HostStreamer: decode reads every
// weight from the file's memory each step.
func (b *Backend) StreamsHostWeights() bool { return true }

// Load implements exec.Backend. Weights stay in the file's memory; in a
// Private file (weights.Load) the Q8_0, Q4_0 and IQ4_NL tensors whose rows
// come in groups of 16 are repacked there, in place, into weights.LayoutQ8x16
// (q8groups.go) and weights.LayoutQ4x16 (q4groups.go), and at the AVX-512
// level the Q5_0, Q4_1 and Q5_1 ones into LayoutQ4x16 and the Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K and IQ4_XS ones into their group layouts
// (kgroups.go), once: a tensor already repacked (a draft sharing the
// target's file) is left as it is. See docs/cpu-memory.md.
func (b *Backend) Load(f *weights.File) error {
	b.file = f
	b.weights = make(map[string]*weights.Tensor, len(f.Tensors))
	var scratch [][]byte // per worker: one group of the widest rows repacked
	for _, t := range f.Tensors {
		b.weights[t.Name] = t
		if f.Private() && (repackableQ8(t) || repackableQ4(t) || repackableK(t)) {
			if scratch == nil || len(scratch[0]) < q8GroupRows*t.RowBytes() {
				scratch = make([][]byte, b.pool.n)
				for i := range scratch {
					scratch[i] = make([]byte, q8GroupRows*t.RowBytes())
				}
			}
			switch {
			case repackableQ4(t):
				repackQ4(b.pool, t, scratch)
			case repackableK(t):
				repackK(b.pool, t, scratch)
			default:
				repackQ8(b.pool, t, scratch)
			}
		}
	}
	return nil
}

// Close implements exec.Backend.
func (b *Backend) Close() error {
	if b.opTimes != nil {
		b.opTimes.write(os.Stderr)
	}
	b.pool.close()
	b.cache = kvPages{}
	b.state = stateMemory{}
	b.programs = nil
	return nil
}

type program struct {
	b        *Backend
	g        *tensor.Graph
	f32      [][]float32       // per op: f32 output buffer
	i32      [][]int32         // per op: bound int32 input
	w        []*weights.Tensor // per op: weight
	mm       matmulState       // matmul scratch (matmul.go)
	visible  []int             // per row of the attention op in flight: positions it attends to (attention.go)
	elem     elemTask          // element-wise op in flight (elementwise.go)
	ropeTask ropeTask          // rope op in flight
	ropeTab  ropeTable         // this step's rope cosines and sines
	score    [][]float32       // per worker attention scores (reference path)
	attn     attnTask          // attention op in flight (attention.go)
	kvWrite  kvWriteTask       // K and V rows being written (attention.go)
	attnScr  []attnScratch     // per worker attention scratch
	fused    [][]int           // per op: matmuls run together (fuseMatmuls); nil on the reference path
	normRoPE []int             // per op: the rope op an rms_norm computes with it, or -1 (fuseNormRoPE); nil on the reference path
	trig     [][]float32       // per worker MRoPE cos/sin (mrope)
	attnKV   []float32         // self_attention's per-head keys and transposed values (vision.go)
	stateful bool              // the graph has short_conv or delta_rule ops
	arena    [][]float32       // the distinct buffers of f32 (assignBuffers)
	// stateRead and stateWrite are the state slot each row of the batch
	// being run reads and writes (hybrid.go).
	stateRead, stateWrite []int32
	// hy is the hybrid ops' scratch (hybrid_fast.go) and moeScr the MoE op's
	// (moe_fast.go).
	hy     hybridState
	moeScr moeState
	rowBuf []byte // get_rows: one row of a repacked table in the file's layout
}

// Prepare implements exec.Backend.
func (b *Backend) Prepare(g *tensor.Graph) (exec.Executable, error) {
	p := &program{b: b, g: g,
		f32: make([][]float32, len(g.Ops)), i32: make([][]int32, len(g.Ops)), w: make([]*weights.Tensor, len(g.Ops)),
		score: make([][]float32, b.pool.n), trig: make([][]float32, b.pool.n),
		attnScr: make([]attnScratch, b.pool.n)}
	for i, op := range g.Ops {
		switch op.Kind {
		case tensor.OpWeight:
			t, ok := b.weights[op.Name]
			if !ok {
				return nil, fmt.Errorf("cpu: weight %q not loaded", op.Name)
			}
			p.w[i] = t
		case tensor.OpAttention:
			if err := b.checkAttention(op); err != nil {
				return nil, err
			}
		case tensor.OpShortConv, tensor.OpDeltaRule:
			if err := b.checkState(op); err != nil {
				return nil, err
			}
			p.stateful = true
		}
	}
	if level != levelRef {
		p.fused = fuseMatmuls(g, p.w)
		p.normRoPE = fuseNormRoPE(g)
	}
	p.assignBuffers()
	if err := p.prepareVectors(); err != nil {
		return nil, err
	}
	if b.programs == nil {
		b.programs = map[*program]struct{}{}
	}
	b.programs[p] = struct{}{}
	b.noteStep(nil)
	return p, nil
}

// assignBuffers gives every op that computes a float32 tensor its output
// buffer, reusing the buffers of tensors no later op reads: a tensor's
// buffer is free after its last reader has run (an op never writes over its
// own inputs), the graph's outputs keep theirs (they are read after Run),
// and the members of a fused matmul group get theirs when the group runs,
// at its first op. Without reuse a step's activations would take about
// 3.4 MB per token of a 0.6B model, for every step shape prepared.
func (p *program) assignBuffers() {
	ops := p.g.Ops
	last := make([]int, len(ops)) // index of the last op reading each tensor
	for i, op := range ops {
		for _, a := range op.Args {
			last[a.ID] = max(last[a.ID], i)
		}
	}
	for _, t := range p.g.Outputs {
		last[t.ID] = len(ops)
	}
	defined := make([]int, len(ops)) // where each op's output is written
	for i := range ops {
		defined[i] = i
	}
	for i, grp := range p.fused {
		for _, j := range grp {
			defined[j] = i
		}
	}
	for i, j := range p.normRoPE {
		if j >= 0 {
			defined[j] = i
		}
	}
	byDef := make([][]int, len(ops))
	for j := range ops {
		byDef[defined[j]] = append(byDef[defined[j]], j)
	}
	var free [][]float32
	take := func(n int) []float32 {
		best := -1
		for k, buf := range free {
			if cap(buf) >= n && (best < 0 || cap(buf) < cap(free[best])) {
				best = k
			}
		}
		if best < 0 {
			buf := make([]float32, n)
			p.arena = append(p.arena, buf)
			return buf
		}
		buf := free[best][:n]
		free = append(free[:best], free[best+1:]...)
		return buf
	}
	for i := range ops {
		for _, j := range byDef[i] {
			switch {
			case ops[j].Kind == tensor.OpInput, ops[j].Kind == tensor.OpWeight:
				continue
			case p.normRoPE != nil && p.normRoPE[j] >= 0:
				continue // computed into its rope's buffer
			}
			p.f32[j] = take(ops[j].Out.Rows() * ops[j].Out.Cols())
			if last[j] < i {
				last[j] = i // never read: free after it is written
			}
		}
		release := func(id int) {
			if last[id] == i && p.f32[id] != nil && ops[id].Kind != tensor.OpWeight {
				free = append(free, p.f32[id])
				last[id] = -1 // freed once even if op i reads it twice
			}
		}
		for _, a := range ops[i].Args {
			release(a.ID)
		}
		for _, j := range byDef[i] {
			release(j)
		}
	}
}

func (p *program) Close() error {
	delete(p.b.programs, p)
	p.f32, p.arena, p.mm = nil, nil, matmulState{}
	p.b.noteStep(nil)
	return nil
}

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
	p.ropeTab.valid = false
	if p.stateful {
		if err := p.bindStateRows(batch); err != nil {
			return err
		}
	}
	for i, op := range p.g.Ops {
		if err := ctx.Err(); err != nil {
			return err
		}
		out := p.f32[i]
		var start time.Time
		if p.b.opTimes != nil {
			start = time.Now()
		}
		switch op.Kind {
		case tensor.OpInput:
			if op.Out.DType == tensor.F32 {
				v, ok := batch.Floats[op.Name]
				if !ok {
					return fmt.Errorf("cpu: no binding for f32 input %q", op.Name)
				}
				if len(v) != op.Out.Rows()*op.Out.Cols() {
					return fmt.Errorf("cpu: f32 input %q has %d values, graph recorded %dx%d", op.Name, len(v), op.Out.Rows(), op.Out.Cols())
				}
				p.f32[i] = v
				break
			}
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
			if p.normRoPE != nil && p.normRoPE[i] >= 0 {
				j := p.normRoPE[i]
				p.rope(p.f32[j], p.g.Ops[j], &op)
				break
			}
			p.elementwise(out, op)
		case tensor.OpMatMul:
			if p.fused != nil && p.fused[i] != nil {
				if len(p.fused[i]) > 0 {
					p.matmulFused(p.fused[i])
				}
				break
			}
			if err := p.matmul(out, op); err != nil {
				return err
			}
		case tensor.OpRoPE:
			if p.normRoPE != nil && p.normRoPE[op.Args[0].ID] == i {
				break // computed with its norm
			}
			p.rope(out, op, nil)
		case tensor.OpAttention:
			p.attention(out, op, batch)
		case tensor.OpAdd, tensor.OpSwiGLU:
			p.elementwise(out, op)
		case tensor.OpAddRow:
			p.addRow(out, op)
		case tensor.OpSelectRows:
			x, rows, w := p.f32[op.Args[0].ID], p.i32[op.Args[1].ID], op.Out.Cols()
			for j, r := range rows {
				if r < 0 || int(r) >= op.Args[0].Rows() {
					return fmt.Errorf("cpu: select_rows: row %d out of range [0,%d)", r, op.Args[0].Rows())
				}
				copy(out[j*w:(j+1)*w], x[int(r)*w:(int(r)+1)*w])
			}
		default:
			if !p.runHybrid(out, op, batch) && !p.runVision(out, op) {
				return fmt.Errorf("cpu: op %v not implemented", op.Kind)
			}
		}
		if p.b.opTimes != nil {
			p.b.opTimes.add(len(batch.Tokens), opLabel(op), time.Since(start))
		}
	}
	if p.b.opTimes != nil {
		p.b.opTimes.step(len(batch.Tokens))
	}
	p.b.noteStep(p)
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

func (p *program) getRows(out []float32, op tensor.Op) error {
	w, ids, d := p.w[op.Args[0].ID], p.i32[op.Args[1].ID], op.Out.Cols()
	if w == nil {
		return fmt.Errorf("cpu: get_rows: table must be a weight")
	}
	for j, id := range ids {
		if id < 0 || int(id) >= w.Rows() {
			return fmt.Errorf("cpu: get_rows: id %d out of range [0,%d)", id, w.Rows())
		}
		p.rowBuf = grow(p.rowBuf, w.RowBytes())
		row := fileRow(w, int(id), p.rowBuf)
		if err := tensor.DequantizeRow(w.DType, row, out[j*d:(j+1)*d]); err != nil {
			return err
		}
	}
	return nil
}

// rope rotates the rows of a rope op into out; with norm, the rms_norm op
// whose output the rope reads (fuseNormRoPE), each row is normalised from
// the norm's input first, on the same worker. The cosines and sines of
// each row's angles are computed once per step for all the rope ops that
// share positions, frequency factors and arguments (a model's Q and K of
// every layer), into p.ropeTab.
func (p *program) rope(out []float32, op tensor.Op, norm *tensor.Op) {
	key := ropeKey{pos: op.Args[1].ID, factors: -1, a: op.RoPE}
	p.ropeTask = ropeTask{out: out, in: p.f32[op.Args[0].ID], pos: p.i32[op.Args[1].ID], w: op.Out.Cols(), a: op.RoPE}
	if len(op.Args) > 2 {
		key.factors = op.Args[2].ID
		p.ropeTask.factors = p.f32[op.Args[2].ID]
	}
	grain := 1
	if norm != nil {
		p.ropeTask.in, p.ropeTask.normW, p.ropeTask.eps = p.f32[norm.Args[0].ID], p.f32[norm.Args[1].ID], norm.Eps
		p.ropeTask.normRows = max(1, 16/(op.Out.Cols()/op.RoPE.HeadDim))
		grain = p.ropeTask.normRows
	}
	t := &p.ropeTab
	rows, d := op.Out.Rows(), op.RoPE.Dims
	if !t.valid || t.key != key {
		t.key, t.valid = key, true
		t.trig = grow(t.trig, rows*d)
		p.ropeTask.fill = true
	}
	p.ropeTask.trig = t.trig[:rows*d]
	workers := p.b.pool.n
	if len(out) < parallelElems {
		workers = 1
	}
	p.b.pool.run(rows, grain, workers, &p.ropeTask)
}

// ropeKey names the rope angles of a step: the ids of the positions and
// frequency factors (-1: none) ops, and the rope arguments.
type ropeKey struct {
	pos, factors int
	a            tensor.RoPEArgs
}

// ropeTable is the cosines and sines of the last rope op's angles in this
// step; Run invalidates it.
type ropeTable struct {
	key   ropeKey
	valid bool
	trig  []float32 // [T][Dims/2 cosines, Dims/2 sines]
}

// ropeTask rotates rows [lo, hi) of a rope op: row r of in (with normW,
// normalised per head first), rotated, into out, by the angles in row r of
// trig, which it computes first with fill.
type ropeTask struct {
	out, in []float32 // [T, w]
	pos     []int32   // [T]
	w       int
	a       tensor.RoPEArgs
	// factors divide the angle of each pair (rope frequency factors); nil
	// for none.
	factors []float32
	trig    []float32 // [T, Dims]
	fill    bool
	normW   []float32 // [HeadDim] the fused rms_norm's weight; nil for none
	eps     float32
	// normRows is how many rows the fused norm takes at once: enough for
	// 16 heads (rmsNormGroups' widest).
	normRows int
}

func (t *ropeTask) run(_, lo, hi int) {
	d, w := t.a.Dims, t.w
	for r := lo; r < hi; {
		e := r + 1
		if t.normW != nil {
			e = min(hi, r+t.normRows)
			rmsNormSpan(t.out[r*w:e*w], t.in[r*w:e*w], t.normW, t.a.HeadDim, t.eps)
		}
		for ; r < e; r++ {
			trig := t.trig[r*d : (r+1)*d]
			if t.fill {
				ropeAngles(t.pos[r], t.a, t.factors, trig[:d/2], trig[d/2:])
			}
			row := t.out[r*w : (r+1)*w]
			if t.normW == nil {
				copy(row, t.in[r*w:(r+1)*w])
			}
			rotateHeads(row, t.a, trig[:d/2], trig[d/2:])
		}
	}
}

func (p *program) scratch(s [][]float32, worker, n int) []float32 {
	if cap(s[worker]) < n {
		s[worker] = make([]float32, n)
	}
	return s[worker][:n]
}
