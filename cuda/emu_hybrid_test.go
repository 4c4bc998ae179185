//go:build cudaemu

package cuda

// Emulator parity of the stateless hybrid-model and row-broadcast kernels
// (kernels/hybrid.cuh) against the CPU backend. Every case also runs a
// deliberately broken launch (a wrong function, offset, group or operand)
// and checks that the comparison rejects it, so a case cannot pass by
// comparing something the kernel does not compute.
//
// Tolerances as emu_test.go: exact for the copies and single float
// operations (columns, concat, mul, add_row, mul_row); 1e-6 for unary and
// l2_norm (exp, log and sqrt in double, where Go's math and the host libm
// may differ in the last bit of the double).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// mustDiffer fails t when a deliberately broken launch's got passes the
// parity check against want.
func mustDiffer(t *testing.T, what string, want, got []float32, tol float64) {
	t.Helper()
	if nearDiff(want, got, tol) == "" {
		t.Errorf("%s: a broken launch matches the CPU reference, so the case cannot fail", what)
	}
}

// f32Weight is a weight [rows, cols] f32 holding v.
func f32Weight(name string, rows, cols int, v []float32) *weights.Tensor {
	return &weights.Tensor{Name: name, DType: tensor.F32, Shape: []int{cols, rows}, Data: f32Bytes(v)}
}

// hybridRef runs op on the CPU backend over x = rows of weight "a" [rows,
// ac] (and y = rows of "b" [rows, bc] when bc > 0), the weights ws
// besides, and returns x, y and op's output "z".
func hybridRef(t *testing.T, a []float32, rows, ac int, b []float32, bc int, op func(bl *tensor.Builder, x, y tensor.Tensor) tensor.Tensor, ws ...*weights.Tensor) (x, y, z []float32) {
	t.Helper()
	ws = append(ws, f32Weight("a", rows, ac, a))
	if bc > 0 {
		ws = append(ws, f32Weight("b", rows, bc, b))
	}
	f := memFile(t, ws...)
	out := cpuRun(t, f, smallKV, func(bl *tensor.Builder, n, logitRows int) {
		tok := bl.Input("tokens", n)
		bl.Input("positions", n)
		bl.Input("logit_rows", logitRows)
		xt := bl.GetRows(bl.Weight("a"), tok)
		yt := tensor.Tensor{ID: -1}
		if bc > 0 {
			yt = bl.GetRows(bl.Weight("b"), tok)
		}
		bl.Output("z", op(bl, xt, yt))
	}, noAttention(count(0, rows), []int32{0}))[0]
	return a, b, out["z"]
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}

func TestEmuColumns(t *testing.T) {
	for _, c := range []struct {
		name                        string
		rows, cols, group, off, wid int
	}{
		{"a column range", 7, 96, 96, 32, 48},
		{"query half of every head", 9, 8 * 64, 64, 0, 32},
		{"gate half of every head", 9, 8 * 64, 64, 32, 32},
		{"a partial slice of groups of 48", 5, 480, 48, 5, 17},
	} {
		parityCase(t, c.name, func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(11, uint64(c.cols+c.off)))
			x, _, want := hybridRef(t, randF32(r, c.rows*c.cols, 1), c.rows, c.cols, nil, 0, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
				return b.Columns(x, c.group, c.off, c.wid)
			})
			var mem emuMem
			out := mem.nanBuf(4 * len(want))
			xb := mem.buf(f32Bytes(x), false)
			l, err := columnsLaunch(out.dev, xb.dev, c.rows, c.cols, c.group, c.off, c.wid)
			e.launch(t, l, err, &mem)
			near(t, "columns", want, bytesF32(out.data), 0)
			// Broken: the columns one to the left.
			off := c.off - 1
			if off < 0 {
				off = c.off + 1
			}
			l, err = columnsLaunch(out.dev, xb.dev, c.rows, c.cols, c.group, off, c.wid)
			e.launch(t, l, err, &mem)
			mustDiffer(t, "columns at a shifted offset", want, bytesF32(out.data), 0)
		})
	}
}

func TestEmuConcat(t *testing.T) {
	parityCase(t, "rows of 64 and 96", func(t *testing.T, e *emulator) {
		const rows, a, c = 11, 64, 96
		r := rand.New(rand.NewPCG(12, 1))
		x, y, want := hybridRef(t, randF32(r, rows*a, 1), rows, a, randF32(r, rows*c, 1), c, func(b *tensor.Builder, x, y tensor.Tensor) tensor.Tensor {
			return b.Concat(x, y)
		})
		var mem emuMem
		out := mem.nanBuf(4 * len(want))
		xb, yb := mem.buf(f32Bytes(x), false), mem.buf(f32Bytes(y), false)
		l, err := concatLaunch(out.dev, xb.dev, yb.dev, rows, a, c)
		e.launch(t, l, err, &mem)
		near(t, "concat", want, bytesF32(out.data), 0)
		// Broken: y's row first.
		l, err = concatLaunch(out.dev, yb.dev, xb.dev, rows, c, a)
		e.launch(t, l, err, &mem)
		mustDiffer(t, "concat split a column late", want, bytesF32(out.data), 0)
	})
}

// unaryInputs are normal values and the edges of the functions: zero,
// ggml's softplus threshold (20) and around it, arguments whose exp
// overflows float (above 88.7) and large negative values.
func unaryInputs(r *rand.Rand, n int) []float32 {
	v := randF32(r, n, 4)
	edges := []float32{0, 20, 20.000002, 19.999998, 25, 88.8, 100, -100, -88.8, -20, 1e-30, -1e-30}
	for i, x := range edges {
		v[i*7%n] = x
	}
	return v
}

func TestEmuUnary(t *testing.T) {
	for _, fn := range []tensor.UnaryFn{tensor.Sigmoid, tensor.SiLU, tensor.Softplus} {
		for _, shape := range [][2]int{{5, 128}, {3, 1000}} {
			parityCase(t, fmt.Sprintf("%v %dx%d", fn, shape[0], shape[1]), func(t *testing.T, e *emulator) {
				rows, cols := shape[0], shape[1]
				r := rand.New(rand.NewPCG(13, uint64(fn)*10+uint64(cols)))
				x, _, want := hybridRef(t, unaryInputs(r, rows*cols), rows, cols, nil, 0, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
					return b.Unary(x, fn)
				})
				var mem emuMem
				out := mem.nanBuf(4 * len(want))
				xb := mem.buf(f32Bytes(x), false)
				l, err := unaryLaunch(out.dev, xb.dev, len(x), fn)
				e.launch(t, l, err, &mem)
				near(t, fn.String(), want, bytesF32(out.data), 1e-6)
				// Broken: another of the three functions.
				l, err = unaryLaunch(out.dev, xb.dev, len(x), fn%3+1)
				e.launch(t, l, err, &mem)
				mustDiffer(t, fmt.Sprintf("%v launched for %v", fn%3+1, fn), want, bytesF32(out.data), 1e-6)
			})
		}
	}
}

func TestEmuMul(t *testing.T) {
	for _, c := range []struct {
		name       string
		rows, cols int
		rowScalar  bool // y [T, 1]
	}{
		{"element-wise", 7, 200, false},
		{"a scalar per row", 7, 200, true},
	} {
		parityCase(t, c.name, func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(14, uint64(c.cols)))
			yc := c.cols
			if c.rowScalar {
				yc = 1
			}
			x, y, want := hybridRef(t, randF32(r, c.rows*c.cols, 1), c.rows, c.cols, randF32(r, c.rows*yc, 1), yc, func(b *tensor.Builder, x, y tensor.Tensor) tensor.Tensor {
				return b.Mul(x, y)
			})
			d := 0
			if c.rowScalar {
				d = c.cols
			}
			var mem emuMem
			out := mem.nanBuf(4 * len(want))
			xb, yb := mem.buf(f32Bytes(x), false), mem.buf(f32Bytes(y), false)
			l, err := mulLaunch(out.dev, xb.dev, yb.dev, len(x), d)
			e.launch(t, l, err, &mem)
			near(t, "mul", want, bytesF32(out.data), 0)
			// Broken: x times itself.
			l, err = mulLaunch(out.dev, xb.dev, xb.dev, len(x), 0)
			e.launch(t, l, err, &mem)
			mustDiffer(t, "mul of x by x", want, bytesF32(out.data), 0)
		})
	}
}

func TestEmuRowOps(t *testing.T) {
	for _, k := range []tensor.OpKind{tensor.OpAddRow, tensor.OpMulRow} {
		parityCase(t, k.String(), func(t *testing.T, e *emulator) {
			const rows, cols = 9, 320
			r := rand.New(rand.NewPCG(15, uint64(k)))
			w := randF32(r, cols, 1)
			x, _, want := hybridRef(t, randF32(r, rows*cols, 1), rows, cols, nil, 0, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
				if k == tensor.OpAddRow {
					return b.AddRow(x, b.Weight("w"))
				}
				return b.MulRow(x, b.Weight("w"))
			}, &weights.Tensor{Name: "w", DType: tensor.F32, Shape: []int{cols}, Data: f32Bytes(w)})
			var mem emuMem
			out := mem.nanBuf(4 * len(want))
			xb, wb := mem.buf(f32Bytes(x), false), mem.buf(f32Bytes(w), false)
			l, err := rowLaunch(k.String(), out.dev, xb.dev, wb.dev, len(x), cols)
			e.launch(t, l, err, &mem)
			near(t, k.String(), want, bytesF32(out.data), 0)
			// Broken: the other row op.
			other := map[tensor.OpKind]string{tensor.OpAddRow: "mul_row", tensor.OpMulRow: "add_row"}[k]
			l, err = rowLaunch(other, out.dev, xb.dev, wb.dev, len(x), cols)
			e.launch(t, l, err, &mem)
			mustDiffer(t, other+" for "+k.String(), want, bytesF32(out.data), 0)
		})
	}
}

func TestEmuL2Norm(t *testing.T) {
	for _, c := range []struct {
		rows, cols, group int
		eps               float32
	}{
		{7, 256, 128, 1e-6},  // per head (Gated DeltaNet's q and k)
		{5, 120, 40, 1e-6},   // groups not a multiple of 32
		{3, 96, 96, 0.5},     // eps larger than some norms: max(norm, eps)
		{40, 128, 64, 1e-12}, // 80 groups over 10 blocks
	} {
		parityCase(t, fmt.Sprintf("%d rows of %d in groups of %d, eps %g", c.rows, c.cols, c.group, c.eps), func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(16, uint64(c.group)))
			a := randF32(r, c.rows*c.cols, 1)
			if c.eps >= 0.5 {
				for i := range a[:c.cols] {
					a[i] *= 1e-3 // the first row's norm is below eps
				}
			}
			clear(a[c.cols : c.cols+c.group]) // an all-zero group
			x, _, want := hybridRef(t, a, c.rows, c.cols, nil, 0, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
				return b.L2Norm(x, c.group, c.eps)
			})
			var mem emuMem
			out := mem.nanBuf(4 * len(want))
			xb := mem.buf(f32Bytes(x), false)
			l, err := l2NormLaunch(out.dev, xb.dev, c.rows, c.cols, c.group, c.eps)
			e.launch(t, l, err, &mem)
			near(t, "l2_norm", want, bytesF32(out.data), 1e-6)
			for _, v := range bytesF32(out.data) {
				if math.IsNaN(float64(v)) {
					t.Fatal("l2_norm wrote a NaN (the all-zero group divides by eps)")
				}
			}
			// Broken: groups of half the width.
			l, err = l2NormLaunch(out.dev, xb.dev, c.rows, c.cols, c.group/2, c.eps)
			e.launch(t, l, err, &mem)
			mustDiffer(t, "l2_norm over half groups", want, bytesF32(out.data), 1e-6)
		})
	}
}

// stateCase is one configuration of the stateful ops' parity test.
type stateCase struct {
	kernel                 int // short_conv taps
	keyHeads, keyDim       int
	valueHeads, valueDim   int
	bucketRows, stateSlots int
	dtype                  string // the state's storage: "f32" or "bf16" (staged)
}

func TestEmuStateful(t *testing.T) {
	for _, c := range []stateCase{
		{kernel: 4, keyHeads: 2, keyDim: 32, valueHeads: 4, valueDim: 48, stateSlots: 8, dtype: "f32"},  // a partial warp of columns
		{kernel: 2, keyHeads: 1, keyDim: 16, valueHeads: 2, valueDim: 160, stateSlots: 8, dtype: "f32"}, // two blocks of columns per head
		{kernel: 4, keyHeads: 2, keyDim: 32, valueHeads: 4, valueDim: 48, stateSlots: 8, dtype: "bf16"},
		{kernel: 3, keyHeads: 1, keyDim: 16, valueHeads: 2, valueDim: 160, stateSlots: 8, dtype: "bf16"},
	} {
		name := fmt.Sprintf("kernel %d, %d/%d heads of %d/%d, %s state", c.kernel, c.keyHeads, c.valueHeads, c.keyDim, c.valueDim, c.dtype)
		parityCase(t, name, func(t *testing.T, e *emulator) { emuStateful(t, e, c) })
	}
}

// emuStateful runs short_conv and delta_rule (one state layer, as a
// Gated DeltaNet layer has) through the CPU backend and the kernels over
// steps that exercise the state contract: a prefill, a step mixing a
// decode with a second sequence's prefill, a 3-row verify that writes one
// snapshot slot per row, and a decode from the snapshot of the accepted
// prefix, each packed at a bucket with pad rows (stepPacker), the state
// areas starting as NaN so a read of a slot no row wrote shows. The
// verify step is also run broken (every row reading its own write slot,
// the snapshots' chain ignored) on a copy of the state, which must fail.
// A bf16 state (c.dtype) is stored as bf16 and staged around each op
// (state_widen, the op on the staging entries, state_narrow), against the
// CPU's bf16 layout; the same steps on an f32 state, the rounding left
// out, must fail against it.
func emuStateful(t *testing.T, e *emulator, c stateCase) {
	const vocab = 48
	r := rand.New(rand.NewPCG(17, uint64(c.valueDim*10+c.kernel)))
	kd, vd := c.keyHeads*c.keyDim, c.valueHeads*c.valueDim
	channels := 2*kd + vd
	a := tensor.StateArgs{Layer: 0, Kernel: c.kernel, KeyHeads: c.keyHeads, KeyDim: c.keyDim, ValueHeads: c.valueHeads,
		ValueDim: c.valueDim, Scale: float32(1 / math.Sqrt(float64(c.keyDim)))}
	gate := randF32(r, vocab*c.valueHeads, 1)
	beta := make([]float32, vocab*c.valueHeads)
	for i := range gate {
		gate[i] = -float32(math.Abs(float64(gate[i]))) // log decay <= 0
		beta[i] = r.Float32()
	}
	conv := randF32(r, channels*c.kernel, 0.5)
	f := memFile(t, randTensor(r, "x", tensor.F32, vocab, channels), randTensor(r, "q", tensor.F32, vocab, kd),
		randTensor(r, "k", tensor.F32, vocab, kd), randTensor(r, "v", tensor.F32, vocab, vd),
		f32Weight("g", vocab, c.valueHeads, gate), f32Weight("beta", vocab, c.valueHeads, beta),
		f32Weight("conv", channels, c.kernel, conv))
	tables := [][]int32{{0, 1}, {2, 3}}
	slots := func(s ...int32) []int32 { return s }
	steps := []*exec.Batch{
		{Tokens: randIDs(r, vocab, 7), Positions: count(0, 7), RowSeq: fill(0, 7), StateSlots: slots(0, 3)},
		{Tokens: randIDs(r, vocab, 4), Positions: []int32{7, 0, 1, 2}, RowSeq: []int32{0, 1, 1, 1}, StateSlots: slots(0, 3)},
		{Tokens: randIDs(r, vocab, 4), Positions: []int32{8, 9, 10, 3}, RowSeq: []int32{0, 0, 0, 1}, StateSlots: slots(0, 3),
			StateSnapshots: [][]int32{{4, 5, 6}, nil}},
		{Tokens: randIDs(r, vocab, 2), Positions: []int32{10, 4}, RowSeq: []int32{0, 1}, StateSlots: slots(5, 3)}, // one draft accepted
	}
	for _, s := range steps {
		s.Tables, s.LogitRows = tables, []int32{0}
	}
	layout := exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 4,
		State: exec.StateLayout{Slots: c.stateSlots, Conv: []int{a.ConvStateFloats(channels)}, Delta: []int{a.DeltaStateFloats()}, DType: c.dtype}}
	outs := cpuRun(t, f, layout, func(b *tensor.Builder, rows, logitRows int) {
		tok := b.Input("tokens", rows)
		b.Input("positions", rows)
		b.Input("logit_rows", logitRows)
		in := map[string]tensor.Tensor{}
		for _, n := range []string{"x", "q", "k", "v", "g", "beta"} {
			in[n] = b.GetRows(b.Weight(n), tok)
			b.Output(n, in[n])
		}
		b.Output("conv", b.ShortConv(in["x"], b.Weight("conv"), a))
		b.Output("delta", b.DeltaRule(in["q"], in["k"], in["v"], in["g"], in["beta"], a))
	}, steps...)
	g := statefulGPU{e: e, a: a, c: c, channels: channels, conv: conv, vocab: vocab, layout: layout, steps: steps, outs: outs}
	g.run(t, c.dtype == "bf16", true)
	if c.dtype == "bf16" {
		g.run(t, false, false)
	}
}

// statefulGPU runs emuStateful's steps through the kernels.
type statefulGPU struct {
	e        *emulator
	a        tensor.StateArgs
	c        stateCase
	channels int
	conv     []float32
	vocab    int
	layout   exec.KVLayout
	steps    []*exec.Batch
	outs     []map[string][]float32 // the CPU's
}

// run runs the steps on a state stored as bf16 and staged (staged) or as
// f32, and compares the outputs with the CPU's: they must agree (match)
// or, the rounding of a bf16 state left out, differ from a step on.
func (g *statefulGPU) run(t *testing.T, staged, match bool) {
	const verify = 2
	a, c, channels, e := g.a, g.c, g.channels, g.e
	kd, vd := c.keyHeads*c.keyDim, c.valueHeads*c.valueDim
	var mem emuMem
	perSlot := []int{a.ConvStateFloats(channels), a.DeltaStateFloats()}
	width := int64(4)
	if staged {
		width = 2
	}
	convState := mem.nanBuf(int(width) * (c.stateSlots + 1) * perSlot[0])
	deltaState := mem.nanBuf(int(width) * (c.stateSlots + 1) * perSlot[1])
	wb := mem.buf(f32Bytes(g.conv), false)
	var packer stepPacker
	diverged := false
	for i, s := range g.steps {
		rows := len(s.Tokens)
		bucket := padBucket(rows)
		sl := newStepLayout(bucket, len(s.LogitRows), g.layout.Blocks)
		sl.StateSlots, sl.Stateful = c.stateSlots, true
		if staged {
			sl.addStage(stageSlots(bucket, c.stateSlots))
		}
		words := make([]int32, sl.Words)
		if err := packer.pack(words, sl, s, g.layout.BlockTokens, g.vocab); err != nil {
			t.Fatal(err)
		}
		step := mem.buf(i32Bytes(words), false)
		sr := stateRows{read: step.at(4 * sl.StateRead), write: step.at(4 * sl.StateWrite), pos: step.at(4 * sl.Positions)}
		act := map[string]*emuBuf{}
		for n, cols := range map[string]int{"x": channels, "q": kd, "k": kd, "v": vd, "g": c.valueHeads, "beta": c.valueHeads} {
			act[n] = mem.buf(f32Bytes(append(slices.Clone(g.outs[i][n]), make([]float32, (bucket-rows)*cols)...)), false)
		}
		// stateful launches op on store: directly, or on a staging area
		// between state_widen and state_narrow.
		stateful := func(store *emuBuf, per int, op func(state devPtr) (launchSpec, error)) {
			if !staged {
				l, err := op(store.dev)
				e.launch(t, l, err, &mem)
				return
			}
			st := stateStage{area: mem.nanBuf(4 * sl.Stage * per).dev, slot: step.at(4 * sl.StageSlot),
				written: step.at(4 * sl.StageWritten), count: step.at(4 * sl.StageCount), capacity: sl.Stage}
			l, err := stateWidenLaunch(st, store.dev, per)
			e.launch(t, l, err, &mem)
			l, err = op(st.area)
			e.launch(t, l, err, &mem)
			l, err = stateNarrowLaunch(st, store.dev, per)
			e.launch(t, l, err, &mem)
		}
		var brokenConv, brokenDelta *emuBuf
		if i == verify && match {
			brokenConv, brokenDelta = mem.buf(convState.data, true), mem.buf(deltaState.data, true)
		}
		convOut, deltaOut := mem.nanBuf(4*bucket*channels), mem.nanBuf(4*bucket*vd)
		stateful(convState, perSlot[0], func(state devPtr) (launchSpec, error) {
			return shortConvLaunch(convOut.dev, act["x"].dev, wb.dev, state, sr, bucket, channels, c.kernel)
		})
		stateful(deltaState, perSlot[1], func(state devPtr) (launchSpec, error) {
			return deltaRuleLaunch(deltaOut.dev, act["q"].dev, act["k"].dev, act["v"].dev, act["g"].dev, act["beta"].dev, state, sr, bucket, a)
		})
		what := fmt.Sprintf("step %d (%d rows in a bucket of %d)", i, rows, bucket)
		gotConv, gotDelta := bytesF32(convOut.data)[:rows*channels], bytesF32(deltaOut.data)[:rows*vd]
		if !match {
			diverged = diverged || nearDiff(g.outs[i]["conv"], gotConv, 1e-6) != "" || nearDiff(g.outs[i]["delta"], gotDelta, 2e-6) != ""
			mem.bufs = mem.bufs[:3]
			continue
		}
		near(t, what+" short_conv", g.outs[i]["conv"], gotConv, 1e-6)
		near(t, what+" delta_rule", g.outs[i]["delta"], gotDelta, 2e-6)
		if i == verify {
			broken := stateRows{read: sr.write, write: sr.write, pos: sr.pos}
			stateful(brokenConv, perSlot[0], func(state devPtr) (launchSpec, error) {
				return shortConvLaunch(convOut.dev, act["x"].dev, wb.dev, state, broken, bucket, channels, c.kernel)
			})
			mustDiffer(t, what+" short_conv, snapshots not chained", g.outs[i]["conv"], bytesF32(convOut.data)[:rows*channels], 1e-6)
			stateful(brokenDelta, perSlot[1], func(state devPtr) (launchSpec, error) {
				return deltaRuleLaunch(deltaOut.dev, act["q"].dev, act["k"].dev, act["v"].dev, act["g"].dev, act["beta"].dev, state, broken, bucket, a)
			})
			mustDiffer(t, what+" delta_rule, snapshots not chained", g.outs[i]["delta"], bytesF32(deltaOut.data)[:rows*vd], 2e-6)
		}
		mem.bufs = mem.bufs[:3] // keep the state areas and the taps
	}
	if !match && !diverged {
		t.Error("the steps on an f32 state match the CPU's bf16 state: the test cannot see the rounding")
	}
}

func TestEmuMoE(t *testing.T) {
	for _, c := range []struct {
		dt, downDT      tensor.DType // gate and up, down
		normalize       bool
		cols, ffn, topK int
	}{
		{tensor.F32, tensor.F32, true, 64, 48, 2},
		{tensor.F32, tensor.F32, false, 64, 16, 3},
		{tensor.F16, tensor.F16, true, 64, 32, 2},
		{tensor.BF16, tensor.BF16, true, 64, 40, 1},
		{tensor.Q8_0, tensor.Q8_0, true, 64, 64, 2},
		{tensor.Q4_1, tensor.Q5_0, false, 96, 32, 3},
		{tensor.Q4_K, tensor.Q6_K, true, 256, 256, 2},  // as Q4_K_M files
		{tensor.IQ4_XS, tensor.Q8_0, true, 256, 64, 2}, // h as Q8_K blocks, the swiglu as Q8_0
		{tensor.Q4_0, tensor.Q5_1, true, 64, 64, 2},
		{tensor.IQ4_NL, tensor.IQ4_NL, false, 64, 32, 1},
		{tensor.Q2_K, tensor.Q3_K, true, 256, 256, 2},
		{tensor.Q5_K, tensor.Q5_K, true, 256, 256, 1},
	} {
		name := fmt.Sprintf("%v/%v experts, top %d of 8, %d wide, ffn %d, normalize %v", c.dt, c.downDT, c.topK, c.cols, c.ffn, c.normalize)
		parityCase(t, name, func(t *testing.T, e *emulator) {
			const rows, experts = 11, 8
			cols := c.cols
			r := rand.New(rand.NewPCG(18, uint64(c.ffn)))
			a := tensor.MoEArgs{Experts: experts, TopK: c.topK, FFN: c.ffn, Normalize: c.normalize}
			h, router := randF32(r, rows*cols, 1), randF32(r, rows*experts, 2)
			ws := []*weights.Tensor{f32Weight("router", rows, experts, router),
				randTensor(r, "gate", c.dt, experts*c.ffn, cols), randTensor(r, "up", c.dt, experts*c.ffn, cols),
				randTensor(r, "down", c.downDT, experts*cols, c.ffn)}
			x, _, want := hybridRef(t, h, rows, cols, nil, 0, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
				tok := b.Input("tokens", -1)
				return b.MoE(x, b.GetRows(b.Weight("router"), tok), b.Weight("gate"), b.Weight("up"), b.Weight("down"), a)
			}, ws...)
			var mem emuMem
			out := mem.nanBuf(4 * rows * cols)
			hb, rb := mem.buf(f32Bytes(x), false), mem.buf(f32Bytes(router), false)
			w := moeExperts{gate: mem.buf(ws[1].Data, false).dev, up: mem.buf(ws[2].Data, false).dev, down: mem.buf(ws[3].Data, false).dev,
				gateDT: c.dt, upDT: c.dt, downDT: c.downDT}
			scratch := mem.buf(make([]byte, newMoEScratch(rows, cols, a, [3]tensor.DType{c.dt, c.dt, c.downDT}).size), true) // kept between the launches
			run := func(a tensor.MoEArgs) []float32 {
				ls, err := moeLaunches(out.dev, hb.dev, rb.dev, scratch.dev, w, rows, cols, a)
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range ls {
					e.launch(t, l, nil, &mem)
				}
				return bytesF32(out.data)
			}
			near(t, "moe", want, run(a), 2e-5)
			// Broken: the routing weights renormalised the other way.
			broken := a
			broken.Normalize = !a.Normalize
			mustDiffer(t, "moe with normalize flipped", want, run(broken), 2e-5)
		})
	}
}

// TestEmuDeltaRuleChunked runs delta_rule_chunked, the launch of steps of
// deltaChunkMin rows or more, against the CPU backend over prompts whose
// prefill rows take the chunked form: a 150-row prompt from position 0
// beside a 20-row one (two chunks and a tail; a run just over the
// minimum), then a decode row of the first beside a 40-row continuation of
// the second from its carried state, then a 17-row continuation and a
// 3-row verify writing snapshots (a run too short to chunk). Each step is
// packed at its bucket with pad rows, the state area starting as NaN. The
// chunked form reassociates the recurrence, so outputs agree within 2e-5
// of the largest magnitude (runtime/cpu's own chunked-vs-recurrent bound);
// rows outside chunked runs must equal delta_rule's bits, and some chunked
// row must not (the chunked form ran). Broken: every row's decay taken
// from the next row (g shifted by one row), which must fail.
func TestEmuDeltaRuleChunked(t *testing.T) {
	for _, a := range []tensor.StateArgs{
		{KeyHeads: 2, KeyDim: 32, ValueHeads: 4, ValueDim: 48},  // a partial warp of columns
		{KeyHeads: 1, KeyDim: 16, ValueHeads: 2, ValueDim: 160}, // two blocks of columns per head
	} {
		a.Scale = float32(1 / math.Sqrt(float64(a.KeyDim)))
		parityCase(t, fmt.Sprintf("%d/%d heads of %d/%d", a.KeyHeads, a.ValueHeads, a.KeyDim, a.ValueDim), func(t *testing.T, e *emulator) {
			emuDeltaChunked(t, e, a)
		})
	}
}

func emuDeltaChunked(t *testing.T, e *emulator, a tensor.StateArgs) {
	const vocab, stateSlots = 256, 8
	r := rand.New(rand.NewPCG(19, uint64(a.ValueDim)))
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	q, k := randF32(r, vocab*kd, 1), randF32(r, vocab*kd, 1)
	for _, x := range [][]float32{q, k} { // unit keys and queries per head, as the model's l2_norm gives
		for s := 0; s < len(x); s += a.KeyDim {
			var n float64
			for _, v := range x[s : s+a.KeyDim] {
				n += float64(v * v)
			}
			for i := range x[s : s+a.KeyDim] {
				x[s+i] /= float32(math.Sqrt(n))
			}
		}
	}
	g, beta := randF32(r, vocab*a.ValueHeads, 1), make([]float32, vocab*a.ValueHeads)
	for i := range g {
		g[i] = -float32(math.Log1p(math.Exp(float64(g[i])))) * float32(0.05+0.5*r.Float64()) // -softplus, as the model's gate
		beta[i] = 1 / (1 + float32(math.Exp(-r.NormFloat64())))
	}
	f := memFile(t, f32Weight("q", vocab, kd, q), f32Weight("k", vocab, kd, k), randTensor(r, "v", tensor.F32, vocab, vd),
		f32Weight("g", vocab, a.ValueHeads, g), f32Weight("beta", vocab, a.ValueHeads, beta))
	slots := func(s ...int32) []int32 { return s }
	steps := []*exec.Batch{
		{Tokens: randIDs(r, vocab, 170), Positions: append(count(0, 150), count(0, 20)...),
			RowSeq: append(fill(0, 150), fill(1, 20)...), StateSlots: slots(0, 3)},
		{Tokens: randIDs(r, vocab, 41), Positions: append([]int32{150}, count(20, 40)...),
			RowSeq: append([]int32{0}, fill(1, 40)...), StateSlots: slots(0, 3)},
		{Tokens: randIDs(r, vocab, 20), Positions: append(count(151, 17), count(60, 3)...),
			RowSeq: append(fill(0, 17), fill(1, 3)...), StateSlots: slots(0, 3), StateSnapshots: [][]int32{nil, {4, 5, 6}}},
	}
	// chunked[i] are the rows of step i in runs the chunked form takes.
	chunked := [][2]int{{0, 170}, {1, 41}, {0, 17}}
	for _, s := range steps {
		s.Tables, s.LogitRows = [][]int32{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {13, 14, 15, 16}}, []int32{0}
	}
	layout := exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 17,
		State: exec.StateLayout{Slots: stateSlots, Delta: []int{a.DeltaStateFloats()}}}
	outs := cpuRun(t, f, layout, func(b *tensor.Builder, rows, logitRows int) {
		tok := b.Input("tokens", rows)
		b.Input("positions", rows)
		b.Input("logit_rows", logitRows)
		in := map[string]tensor.Tensor{}
		for _, n := range []string{"q", "k", "v", "g", "beta"} {
			in[n] = b.GetRows(b.Weight(n), tok)
			b.Output(n, in[n])
		}
		b.Output("delta", b.DeltaRule(in["q"], in["k"], in["v"], in["g"], in["beta"], a))
	}, steps...)

	var mem emuMem
	state := mem.nanBuf(4 * (stateSlots + 1) * a.DeltaStateFloats())
	var packer stepPacker
	for i, s := range steps {
		rows := len(s.Tokens)
		bucket := padBucket(rows)
		sl := newStepLayout(bucket, len(s.LogitRows), layout.Blocks)
		sl.StateSlots, sl.Stateful = stateSlots, true
		words := make([]int32, sl.Words)
		if err := packer.pack(words, sl, s, layout.BlockTokens, vocab); err != nil {
			t.Fatal(err)
		}
		step := mem.buf(i32Bytes(words), false)
		sr := stateRows{read: step.at(4 * sl.StateRead), write: step.at(4 * sl.StateWrite), pos: step.at(4 * sl.Positions)}
		act := map[string]*emuBuf{}
		for n, cols := range map[string]int{"q": kd, "k": kd, "v": vd, "g": a.ValueHeads, "beta": a.ValueHeads} {
			act[n] = mem.buf(f32Bytes(append(slices.Clone(outs[i][n]), make([]float32, (bucket-rows+1)*cols)...)), false)
		}
		before := mem.buf(state.data, true) // the state the step starts from, for the recurrent and broken runs
		what := fmt.Sprintf("step %d (%d rows in a bucket of %d)", i, rows, bucket)
		// run launches the step on state with decays g, as kernel.
		run := func(state, g devPtr, kernel string) []float32 {
			out := mem.nanBuf(4 * bucket * vd)
			l, err := deltaRuleLaunch(out.dev, act["q"].dev, act["k"].dev, act["v"].dev, g, act["beta"].dev, state, sr, bucket, a)
			if err == nil && l.kernel != "delta_rule_chunked" {
				t.Fatalf("%s: launched %q, want delta_rule_chunked", what, l.kernel)
			}
			l.kernel = kernel // delta_rule takes the same arguments and grid
			e.launch(t, l, err, &mem)
			return bytesF32(out.data)[:rows*vd]
		}
		got := run(state.dev, act["g"].dev, "delta_rule_chunked")
		near(t, what+" delta_rule_chunked", outs[i]["delta"], got, 2e-5)

		// The same step on delta_rule, from the state the step started with.
		rec := run(mem.buf(before.data, true).dev, act["g"].dev, "delta_rule")
		lo, hi := chunked[i][0]*vd, chunked[i][1]*vd
		if !slices.Equal(got[:lo], rec[:lo]) || !slices.Equal(got[hi:], rec[hi:]) {
			t.Errorf("%s: rows outside chunked runs differ from delta_rule's bits", what)
		}
		if slices.Equal(got[lo:hi], rec[lo:hi]) {
			t.Errorf("%s: the chunked rows equal delta_rule's bits; did the chunked form run?", what)
		}

		// Broken: each row's decay is the next row's.
		late := run(before.dev, act["g"].at(4*a.ValueHeads), "delta_rule_chunked")
		mustDiffer(t, what+" delta_rule_chunked, decays a row late", outs[i]["delta"], late, 2e-5)
		mem.bufs = mem.bufs[:1] // keep the state area
	}
}
