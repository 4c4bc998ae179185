package cpu

import (
	"cmp"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// statefulRun runs one stateful op over rows of one or two sequences: rows
// is the (sequence, position) of each row, in order.
func statefulRun(t *testing.T, b *Backend, kind tensor.OpKind, a tensor.StateArgs, args [][]float32, cols []int, outCols int, rows [][2]int32) []float32 {
	t.Helper()
	p := &program{b: b}
	op := tensor.Op{Kind: kind, State: a}
	for i, x := range args {
		p.f32 = append(p.f32, x)
		op.Args = append(op.Args, tensor.Tensor{ID: i, Shape: [2]int{len(x) / cols[i], cols[i]}})
	}
	out := make([]float32, len(rows)*outCols)
	op.Out = tensor.Tensor{ID: len(args), Shape: [2]int{len(rows), outCols}}
	batch := &exec.Batch{StateSlots: []int32{1, 0}}
	for _, r := range rows {
		batch.RowSeq = append(batch.RowSeq, r[0])
		batch.Positions = append(batch.Positions, r[1])
	}
	p.stateRead, p.stateWrite = batch.StateRows()
	if kind == tensor.OpShortConv {
		p.shortConv(out, op, batch)
	} else {
		p.deltaRule(out, op, batch)
	}
	return out
}

// short_conv equals the direct causal convolution with zeros before each
// sequence, for two interleaved-by-step sequences fed in chunks.
func TestShortConvMatchesTheDirectConvolution(t *testing.T) {
	const C, K, T = 6, 4, 7
	rng := rand.New(rand.NewPCG(1, 2))
	w := randVec(rng, C*K)
	xs := [2][]float32{randVec(rng, T*C), randVec(rng, T*C)}
	a := tensor.StateArgs{Layer: 0, Kernel: K}
	b := &Backend{pool: newPool(2)}
	defer b.pool.close()
	var err error
	if b.state, err = newStateMemory(exec.StateLayout{Slots: 2, Conv: []int{a.ConvStateFloats(C)}}); err != nil {
		t.Fatal(err)
	}
	got := [2][]float32{}
	// Chunks: sequence 0 rows 0..2, then both (1: 0..3, 0: 3..6), then 1: 4..6.
	for _, chunk := range [][][2]int32{{{0, 0}, {0, 1}, {0, 2}}, {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {0, 3}, {0, 4}, {0, 5}, {0, 6}}, {{1, 4}, {1, 5}, {1, 6}}} {
		var x []float32
		for _, r := range chunk {
			x = append(x, xs[r[0]][int(r[1])*C:int(r[1]+1)*C]...)
		}
		out := statefulRun(t, b, tensor.OpShortConv, a, [][]float32{x, w}, []int{C, K}, C, chunk)
		for i, r := range chunk {
			got[r[0]] = append(got[r[0]], out[i*C:(i+1)*C]...)
		}
	}
	for s := range 2 {
		want := make([]float32, T*C)
		for tt := range T {
			for ch := range C {
				var sum float64
				for j := range K {
					if src := tt - K + 1 + j; src >= 0 {
						sum += float64(xs[s][src*C+ch]) * float64(w[ch*K+j])
					}
				}
				want[tt*C+ch] = float32(sum)
			}
		}
		if diff := gocmp.Diff(want, got[s], gocmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 })); diff != "" {
			t.Errorf("sequence %d (-direct +short_conv):\n%s", s, diff)
		}
	}
}

// deltaRef is the gated delta rule in float64 with explicit matrices.
func deltaRef(a tensor.StateArgs, q, k, v, g, beta []float32, T int) []float32 {
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	out := make([]float32, T*vd)
	S := make([][][]float64, a.ValueHeads)
	for h := range S {
		S[h] = make([][]float64, a.KeyDim)
		for i := range S[h] {
			S[h][i] = make([]float64, a.ValueDim)
		}
	}
	for t := range T {
		for h := range a.ValueHeads {
			kh := h % a.KeyHeads
			decay := math.Exp(float64(g[t*a.ValueHeads+h]))
			for i := range a.KeyDim {
				for j := range a.ValueDim {
					S[h][i][j] *= decay
				}
			}
			for j := range a.ValueDim {
				var pred float64
				for i := range a.KeyDim {
					pred += S[h][i][j] * float64(k[t*kd+kh*a.KeyDim+i])
				}
				d := float64(beta[t*a.ValueHeads+h]) * (float64(v[t*vd+h*a.ValueDim+j]) - pred)
				var o float64
				for i := range a.KeyDim {
					S[h][i][j] += float64(k[t*kd+kh*a.KeyDim+i]) * d
					o += S[h][i][j] * float64(q[t*kd+kh*a.KeyDim+i]) * float64(a.Scale)
				}
				out[t*vd+h*a.ValueDim+j] = float32(o)
			}
		}
	}
	return out
}

// delta_rule equals the float64 reference, fed whole or token by token,
// and a row at position 0 starts from a zero state.
func TestDeltaRuleMatchesTheReference(t *testing.T) {
	a := tensor.StateArgs{Layer: 1, KeyHeads: 2, KeyDim: 4, ValueHeads: 4, ValueDim: 3, Scale: 0.5}
	const T = 9
	rng := rand.New(rand.NewPCG(3, 4))
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	q, k, v := randVec(rng, T*kd), randVec(rng, T*kd), randVec(rng, T*vd)
	g, beta := randVec(rng, T*a.ValueHeads), randVec(rng, T*a.ValueHeads)
	for i := range g {
		g[i] = -float32(math.Log1p(math.Exp(float64(g[i])))) // decays in (0, 1)
		beta[i] = 1 / (1 + float32(math.Exp(float64(-beta[i]))))
	}
	want := deltaRef(a, q, k, v, g, beta, T)
	b := &Backend{pool: newPool(2)}
	defer b.pool.close()
	var err error
	if b.state, err = newStateMemory(exec.StateLayout{Slots: 2, Delta: []int{0, a.DeltaStateFloats()}}); err != nil {
		t.Fatal(err)
	}
	approx := gocmp.Comparer(func(x, y float32) bool { return math.Abs(float64(x-y)) < 1e-4 })
	for _, chunk := range []int{T, 1, 4} {
		var got []float32
		for lo := 0; lo < T; lo += chunk {
			hi := min(lo+chunk, T)
			var rows [][2]int32
			for p := lo; p < hi; p++ {
				rows = append(rows, [2]int32{0, int32(p)})
			}
			out := statefulRun(t, b, tensor.OpDeltaRule, a,
				[][]float32{q[lo*kd : hi*kd], k[lo*kd : hi*kd], v[lo*vd : hi*vd], g[lo*a.ValueHeads : hi*a.ValueHeads], beta[lo*a.ValueHeads : hi*a.ValueHeads]},
				[]int{kd, kd, vd, a.ValueHeads, a.ValueHeads}, vd, rows)
			got = append(got, out...)
		}
		if diff := gocmp.Diff(want, got, approx); diff != "" {
			t.Errorf("chunk %d (-reference +delta_rule):\n%s", chunk, diff)
		}
	}
}

func TestElementwiseHybridOps(t *testing.T) {
	x := []float32{1, -2, 3, 4, -5, 6, 0.5, -0.25}
	y := []float32{2, 2, 2, 2, -1, -1, -1, -1}
	b := &Backend{pool: newPool(2)}
	defer b.pool.close()
	run := func(op tensor.Op, args ...[]float32) []float32 {
		p := &program{b: b}
		for i, a := range args {
			p.f32 = append(p.f32, a)
			op.Args = append(op.Args, tensor.Tensor{ID: i, Shape: [2]int{2, len(a) / 2}})
		}
		if op.Out.Shape == [2]int{} {
			op.Out.Shape = [2]int{2, 4}
		}
		out := make([]float32, op.Out.Rows()*op.Out.Cols())
		if !p.runHybrid(out, op, nil) {
			t.Fatalf("%v not run", op.Kind)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  []float32
		want []float32
	}{
		{"columns of each head of 2", run(tensor.Op{Kind: tensor.OpColumns, Group: 2, Offset: 1, Width: 1, Out: tensor.Tensor{Shape: [2]int{2, 2}}}, x),
			[]float32{-2, 4, 6, -0.25}},
		{"columns 1..3", run(tensor.Op{Kind: tensor.OpColumns, Group: 4, Offset: 1, Width: 2, Out: tensor.Tensor{Shape: [2]int{2, 2}}}, x),
			[]float32{-2, 3, 6, 0.5}},
		{"mul", run(tensor.Op{Kind: tensor.OpMul}, x, y), []float32{2, -4, 6, 8, 5, -6, -0.5, 0.25}},
		{"mul_row", run(tensor.Op{Kind: tensor.OpMulRow}, x, []float32{1, 0, -1, 2}), []float32{1, 0, -3, 8, -5, 0, -0.5, -0.5}},
		{"l2_norm in groups of 4", run(tensor.Op{Kind: tensor.OpL2Norm, Group: 4, Eps: 1e-6}, []float32{3, 4, 0, 0, 0, 0, 0, 0}),
			[]float32{0.6, 0.8, 0, 0, 0, 0, 0, 0}},
		{"sigmoid", run(tensor.Op{Kind: tensor.OpUnary, Fn: tensor.Sigmoid}, []float32{0, 0, 0, 0, 0, 0, 0, 0}), []float32{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5}},
		{"softplus passes large values", run(tensor.Op{Kind: tensor.OpUnary, Fn: tensor.Softplus}, []float32{25, 0, 25, 0, 25, 0, 25, 0}),
			[]float32{25, float32(math.Log(2)), 25, float32(math.Log(2)), 25, float32(math.Log(2)), 25, float32(math.Log(2))}},
		{"silu", run(tensor.Op{Kind: tensor.OpUnary, Fn: tensor.SiLU}, []float32{0, 0, 0, 0, 0, 0, 0, 0}), make([]float32, 8)},
	} {
		if diff := gocmp.Diff(tc.want, tc.got, gocmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// moe equals a per-row reference: softmax router, top-k, renormalised
// weights, each chosen expert's SwiGLU FFN computed from its rows of the
// stacked weights, summed in routing order.
func TestMoEMatchesAPerRowReference(t *testing.T) {
	const T, E, X, F, K = 5, 8, 4, 6, 2
	rng := rand.New(rand.NewPCG(5, 6))
	h, router := randVec(rng, T*E), randVec(rng, T*X)
	gw, uw, dw := randVec(rng, X*F*E), randVec(rng, X*F*E), randVec(rng, X*E*F)
	tensorOf := func(name string, v []float32, rowLen int) *weights.Tensor {
		b := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
		}
		return &weights.Tensor{Name: name, DType: tensor.F32, Shape: []int{rowLen, len(v) / rowLen}, Data: b}
	}
	p := &program{b: &Backend{pool: newPool(2)}, f32: [][]float32{h, router, nil, nil, nil},
		w: []*weights.Tensor{nil, nil, tensorOf("gate", gw, E), tensorOf("up", uw, E), tensorOf("down", dw, F)}}
	defer p.b.pool.close()
	op := tensor.Op{Kind: tensor.OpMoE, MoE: tensor.MoEArgs{Experts: X, TopK: K, FFN: F, Normalize: true}, Out: tensor.Tensor{Shape: [2]int{T, E}},
		Args: []tensor.Tensor{{ID: 0, Shape: [2]int{T, E}}, {ID: 1, Shape: [2]int{T, X}}, {ID: 2}, {ID: 3}, {ID: 4}}}
	got := make([]float32, T*E)
	p.moe(got, op)
	want := make([]float32, T*E)
	for r := range T {
		var prob [X]float64
		var sum float64
		for e := range X {
			prob[e] = math.Exp(float64(router[r*X+e]))
			sum += prob[e]
		}
		best := []int{0, 1, 2, 3}
		slices.SortStableFunc(best, func(a, b int) int { return cmp.Compare(prob[b], prob[a]) })
		norm := prob[best[0]] + prob[best[1]]
		for _, e := range best[:K] {
			act := make([]float64, F)
			for i := range F {
				var g, u float64
				for j := range E {
					g += float64(gw[(e*F+i)*E+j]) * float64(h[r*E+j])
					u += float64(uw[(e*F+i)*E+j]) * float64(h[r*E+j])
				}
				act[i] = g / (1 + math.Exp(-g)) * u
			}
			for j := range E {
				var y float64
				for i := range F {
					y += float64(dw[(e*E+j)*F+i]) * act[i]
				}
				want[r*E+j] += float32(prob[e] / norm * y)
			}
		}
	}
	if diff := gocmp.Diff(want, got, gocmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-4 })); diff != "" {
		t.Errorf("moe (-reference +got):\n%s", diff)
	}
}

// deltaRuleSteps are random delta_rule inputs of one sequence, T rows per
// step.
type deltaRuleSteps struct {
	a                tensor.StateArgs
	q, k, v, g, beta []float32
}

const deltaRuleStepRows = 3 // T

func newDeltaRuleSteps(seed uint64, steps int) deltaRuleSteps {
	const T = deltaRuleStepRows
	a := tensor.StateArgs{Layer: 0, KeyHeads: 1, KeyDim: 4, ValueHeads: 2, ValueDim: 3, Scale: 0.5}
	rng := rand.New(rand.NewPCG(seed, seed+1))
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	d := deltaRuleSteps{a: a, q: randVec(rng, steps*T*kd), k: randVec(rng, steps*T*kd), v: randVec(rng, steps*T*vd),
		g: make([]float32, steps*T*a.ValueHeads), beta: make([]float32, steps*T*a.ValueHeads)}
	for i := range d.g {
		d.g[i], d.beta[i] = -0.1*float32(i%3+1), 0.5
	}
	return d
}

// run computes step's rows, positions [step*T, (step+1)*T) of sequence 0
// of batch (its state slots set), with the reference delta rule on b's
// state memory, staged as the backend stages it; it returns the outputs
// [T, value heads x value dim].
func (d deltaRuleSteps) run(b *Backend, step int, batch *exec.Batch) []float32 {
	const T = deltaRuleStepRows
	a := d.a
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	lo, hi := step*T, (step+1)*T
	for p := lo; p < hi; p++ {
		batch.RowSeq = append(batch.RowSeq, 0)
		batch.Positions = append(batch.Positions, int32(p))
	}
	p := &program{b: b}
	op := tensor.Op{Kind: tensor.OpDeltaRule, State: a}
	args := [][]float32{d.q[lo*kd : hi*kd], d.k[lo*kd : hi*kd], d.v[lo*vd : hi*vd], d.g[lo*a.ValueHeads : hi*a.ValueHeads], d.beta[lo*a.ValueHeads : hi*a.ValueHeads]}
	for i, x := range args {
		p.f32 = append(p.f32, x)
		op.Args = append(op.Args, tensor.Tensor{ID: i, Shape: [2]int{T, len(x) / T}})
	}
	out := make([]float32, T*vd)
	op.Out = tensor.Tensor{ID: len(args), Shape: [2]int{T, vd}}
	p.stateRead, p.stateWrite = batch.StateRows()
	unstage := p.stage(op, batch)
	p.deltaRuleRef(out, op, batch)
	unstage()
	return out
}

// A bf16 state layout computes in f32 and rounds the state it writes back:
// from a zero state its first step equals the f32 layout's exactly, and a
// second step equals the f32 layout's run from the first state rounded to
// bf16 (so the staging renumbers, widens and narrows the right slots).
func TestBF16StateRoundsOnlyWhatItStores(t *testing.T) {
	d := newDeltaRuleSteps(7, 2)
	a := d.a
	run := func(b *Backend, step int) []float32 {
		return d.run(b, step, &exec.Batch{StateSlots: []int32{1, 0}})
	}
	layout := exec.StateLayout{Slots: 2, Delta: []int{a.DeltaStateFloats()}}
	f32, half := &Backend{}, &Backend{}
	var err error
	if f32.state, err = newStateMemory(layout); err != nil {
		t.Fatal(err)
	}
	layout.DType = "bf16"
	if half.state, err = newStateMemory(layout); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(run(f32, 0), run(half, 0)); diff != "" {
		t.Fatalf("first step (-f32 +bf16 state):\n%s", diff)
	}
	per := a.DeltaStateFloats()
	st := f32.state.delta[0][per : 2*per] // sequence 0's slot is 1
	for i, x := range st {
		if want := tensor.BF16ToF32(half.state.delta16[0][per+i]); tensor.BF16ToF32(tensor.F32ToBF16(x)) != want {
			t.Fatalf("stored state %d: %g, want %g rounded (%g)", i, want, x, tensor.BF16ToF32(tensor.F32ToBF16(x)))
		}
		st[i] = tensor.BF16ToF32(tensor.F32ToBF16(x))
	}
	if diff := gocmp.Diff(run(f32, 1), run(half, 1)); diff != "" {
		t.Errorf("second step from the rounded state (-f32 +bf16 state):\n%s", diff)
	}
	if half.state.delta[0] != nil || half.StateBytes() != 2*int64(per)*2 {
		t.Errorf("after the op: staging view %v, %d state bytes", half.state.delta[0] != nil, half.StateBytes())
	}
}

// bf16 checkpoints beside f32 state (exec.StateLayout.CheckpointDType):
// a step that writes the pool slot stores its state rounded, a row that
// reads it resumes from the rounded state in its own f32 slot, and a step
// with StateRound rounds the f32 slot it leaves; each step's outputs and
// state equal an all-f32 run's with the state rounded by hand there.
func TestBF16CheckpointsBesideF32State(t *testing.T) {
	d := newDeltaRuleSteps(9, 3)
	a, run := d.a, d.run
	per := a.DeltaStateFloats()
	layout := exec.StateLayout{Slots: 3, Delta: []int{per}}
	ref, mixed := &Backend{}, &Backend{}
	var err error
	if ref.state, err = newStateMemory(layout); err != nil {
		t.Fatal(err)
	}
	layout.Checkpoints, layout.CheckpointDType = 1, "bf16"
	if mixed.state, err = newStateMemory(layout); err != nil {
		t.Fatal(err)
	}
	if got, want := mixed.StateBytes(), int64(2*per*4+per*2); got != want {
		t.Errorf("state bytes %d, want %d (two f32 slots, one bf16 checkpoint)", got, want)
	}
	roundRef := func() {
		for i, x := range ref.state.delta[0][:per] {
			ref.state.delta[0][i] = tensor.BF16ToF32(tensor.F32ToBF16(x))
		}
	}
	steps3 := []struct {
		name    string
		on      *exec.Batch
		rounded bool // the state the step leaves is rounded
	}{
		{"take a checkpoint into pool slot 2", &exec.Batch{StateSlots: []int32{2}, StateFrom: []int32{0}}, true},
		{"resume from it into slot 0", &exec.Batch{StateSlots: []int32{0}, StateFrom: []int32{2}}, false},
		{"round slot 0 where a cached checkpoint ends", &exec.Batch{StateSlots: []int32{0}, StateRound: []bool{true}}, true},
	}
	for i, s := range steps3 {
		want, got := run(ref, i, &exec.Batch{StateSlots: []int32{0}}), run(mixed, i, s.on)
		if s.rounded {
			roundRef()
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("%s: outputs (-f32 rounded by hand +bf16 checkpoints):\n%s", s.name, diff)
		}
	}
	if diff := gocmp.Diff(ref.state.delta[0][:per], mixed.state.delta[0][:per]); diff != "" {
		t.Errorf("slot 0 after a rounding step (-f32 rounded by hand +StateRound):\n%s", diff)
	}
}
