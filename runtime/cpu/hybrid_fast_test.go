package cpu

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

// The AVX-512 kernels of hybrid_amd64.s equal their Go references bit for
// bit on random inputs.
func TestHybridKernelsMatchTheirGoReferences(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, dk := range []int{1, 3, 64, 128} {
		for _, dv := range []int{16, 48, 64, 128, 144, 320} {
			s0, k, q, d := randVec(rng, dk*dv), randVec(rng, dk), randVec(rng, dk), randVec(rng, dv)
			decay, scale := float32(rng.Float64()), float32(rng.Float64())
			s1, s2 := slices.Clone(s0), slices.Clone(s0)
			p1, p2 := randVec(rng, dv), randVec(rng, dv) // overwritten
			deltaDecayPredGo(s1, k, p1, dk, dv, decay)
			deltaDecayPred(&s2[0], &k[0], &p2[0], dk, dv, decay)
			bitsEqual(t, fmt.Sprintf("deltaDecayPred %dx%d state", dk, dv), s1, s2)
			bitsEqual(t, fmt.Sprintf("deltaDecayPred %dx%d pred", dk, dv), p1, p2)
			o1, o2 := randVec(rng, dv), randVec(rng, dv)
			deltaUpdateOutGo(s1, k, q, d, o1, dk, dv, scale)
			deltaUpdateOut(&s2[0], &k[0], &q[0], &d[0], &o2[0], dk, dv, scale)
			bitsEqual(t, fmt.Sprintf("deltaUpdateOut %dx%d state", dk, dv), s1, s2)
			bitsEqual(t, fmt.Sprintf("deltaUpdateOut %dx%d out", dk, dv), o1, o2)
		}
	}
}

// levelKernels names the kernels this CPU runs of an AVX-512 kernel and
// its AVX2 version; the test is skipped when it runs neither.
func levelKernels[F any](t *testing.T, avx512, avx2 F) map[string]F {
	kernels := map[string]F{}
	if useSIMD {
		kernels["avx512"] = avx512
	}
	if hasAVX2() {
		kernels["avx2"] = avx2
	}
	if len(kernels) == 0 {
		t.Skip("no AVX2")
	}
	return kernels
}

// convRow and convRowAVX2 equal convRowGo bit for bit, for kernels of 1,
// 2 and 4 taps (signed zeros included: products of zeros).
func TestConvRowKernelsMatchTheirGoReference(t *testing.T) {
	kernels := levelKernels(t, convRow, convRowAVX2)
	rng := rand.New(rand.NewPCG(19, 20))
	for name, kernel := range kernels {
		for _, k := range []int{1, 2, 4} {
			for _, n := range []int{16, 48, 256} {
				c := n + 32
				win, x, taps := randVec(rng, max(k-1, 1)*c), randVec(rng, n), randVec(rng, k*c)
				x[0], taps[0], taps[(k-1)*c] = 0, float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
				want, got := randVec(rng, n), randVec(rng, n)
				convRowGo(want, win, x, taps, c, k)
				kernel(&got[0], &win[0], &x[0], &taps[0], n, c, k)
				bitsEqual(t, fmt.Sprintf("%s k=%d n=%d", name, k, n), want, got)
				if math.Signbit(float64(want[0])) != math.Signbit(float64(got[0])) {
					t.Errorf("%s k=%d n=%d: the sign of zero differs", name, k, n)
				}
			}
		}
	}
}

// gemmF32 and gemmF32AVX2 equal gemmF32Go bit for bit over row counts
// around the 4-row tiles, column counts around the 64-column tiles, empty
// and long inner dimensions, strides wider than the rows, and C scaled by
// 1 and by other factors first.
func TestGemmKernelsMatchTheirGoReference(t *testing.T) {
	kernels := levelKernels(t, gemmF32, gemmF32AVX2)
	rng := rand.New(rand.NewPCG(15, 16))
	for name, kernel := range kernels {
		for _, m := range []int{1, 3, 4, 5, 9, 64} {
			for _, k := range []int{0, 1, 7, 128} {
				for _, n := range []int{16, 48, 64, 80, 128, 144} {
					lda, ldb, ldc := k+3, n+16, n+5
					a, b := randVec(rng, m*lda), randVec(rng, max(k, 1)*ldb)
					c0 := randVec(rng, m*ldc)
					want, got := slices.Clone(c0), slices.Clone(c0)
					beta := []float32{1, 0.75, -3}[(m+k+n)%3]
					gemmF32Go(want, a, b, m, k, n, lda, ldb, ldc, beta)
					kernel(&got[0], &a[0], &b[0], m, k, n, lda, ldb, ldc, beta)
					bitsEqual(t, fmt.Sprintf("%s m=%d k=%d n=%d", name, m, k, n), want, got)
				}
			}
		}
	}
}

func bitsEqual(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Errorf("%s: [%d] = %v, the reference %v", what, i, got[i], want[i])
			return
		}
	}
}

// deltaCase is a delta_rule op over a batch, with its inputs: q and k
// L2-normalised per head and g, beta as Qwen3.5 makes them (g =
// -softplus * a, beta = sigmoid), as the model feeds the op.
type deltaCase struct {
	a                tensor.StateArgs
	q, k, v, g, beta []float32
	batch            *exec.Batch
	slots            int
}

func newDeltaCase(rng *rand.Rand, a tensor.StateArgs, batch *exec.Batch, slots int) deltaCase {
	T := len(batch.RowSeq)
	c := deltaCase{a: a, batch: batch, slots: slots}
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	c.q, c.k, c.v = randVec(rng, T*kd), randVec(rng, T*kd), randVec(rng, T*vd)
	for _, x := range [][]float32{c.q, c.k} {
		for s := 0; s < len(x); s += a.KeyDim {
			l2Norm(x[s:s+a.KeyDim], x[s:s+a.KeyDim], 1e-6)
		}
	}
	c.g, c.beta = randVec(rng, T*a.ValueHeads), randVec(rng, T*a.ValueHeads)
	for i := range c.g {
		c.g[i] = -softplus(c.g[i]) * float32(0.05+0.5*rng.Float64())
		c.beta[i] = sigmoid(c.beta[i])
	}
	return c
}

// run runs the case on a fresh program of b (whose state it uses):
// reference loop, or the fast path with or without the chunked form.
func (c deltaCase) run(b *Backend, mode string) []float32 {
	p := &program{b: b}
	p.f32 = [][]float32{c.q, c.k, c.v, c.g, c.beta}
	T, a := len(c.batch.RowSeq), c.a
	op := tensor.Op{Kind: tensor.OpDeltaRule, State: a, Out: tensor.Tensor{ID: 5, Shape: [2]int{T, a.ValueHeads * a.ValueDim}}}
	for i := range 5 {
		op.Args = append(op.Args, tensor.Tensor{ID: i})
	}
	p.stateRead, p.stateWrite = c.batch.StateRows()
	out := make([]float32, T*a.ValueHeads*a.ValueDim)
	switch mode {
	case "ref":
		p.deltaRuleRef(out, op, c.batch)
	case "recurrent":
		p.hy.recurrent = true
		p.deltaRule(out, op, c.batch)
	case "chunked":
		p.deltaRule(out, op, c.batch)
	}
	return out
}

func deltaBackend(t testing.TB, a tensor.StateArgs, slots int, init []float32) *Backend {
	t.Helper()
	b := &Backend{pool: newPool(2)}
	t.Cleanup(b.pool.close)
	var err error
	if b.state, err = newStateMemory(exec.StateLayout{Slots: slots, Delta: []int{0, a.DeltaStateFloats()}}); err != nil {
		t.Fatal(err)
	}
	copy(b.state.delta[1], init)
	return b
}

// seqBatch is a batch of sequences with the given row counts, rows of a
// sequence consecutive from position start[s], sequence s in slot s+1 (slot
// 0 unused), sequences listed in snap verifying drafts (their rows writing
// the slots after the others').
func seqBatch(rows, start []int, snap map[int]bool) (*exec.Batch, int) {
	b := &exec.Batch{StateSlots: make([]int32, len(rows)), StateSnapshots: make([][]int32, len(rows))}
	next := int32(len(rows) + 1)
	for s, n := range rows {
		b.StateSlots[s] = int32(s + 1)
		for j := range n {
			b.RowSeq = append(b.RowSeq, int32(s))
			b.Positions = append(b.Positions, int32(start[s]+j))
			if snap[s] {
				b.StateSnapshots[s] = append(b.StateSnapshots[s], next)
				next++
			}
		}
	}
	return b, int(next)
}

// interleaveRows reorders b's rows round-robin over its sequences, each
// sequence's rows staying in order (b has no snapshots).
func interleaveRows(b *exec.Batch) *exec.Batch {
	out := &exec.Batch{StateSlots: b.StateSlots, StateSnapshots: b.StateSnapshots}
	var bySeq [][]int
	for r, q := range b.RowSeq {
		for int(q) >= len(bySeq) {
			bySeq = append(bySeq, nil)
		}
		bySeq[q] = append(bySeq[q], r)
	}
	for len(out.RowSeq) < len(b.RowSeq) {
		for q := range bySeq {
			if len(bySeq[q]) > 0 {
				r := bySeq[q][0]
				bySeq[q] = bySeq[q][1:]
				out.RowSeq = append(out.RowSeq, b.RowSeq[r])
				out.Positions = append(out.Positions, b.Positions[r])
			}
		}
	}
	return out
}

var deltaShapes = []tensor.StateArgs{
	{Layer: 1, KeyHeads: 2, KeyDim: 128, ValueHeads: 4, ValueDim: 128, Scale: 1 / float32(math.Sqrt(128))},
	{Layer: 1, KeyHeads: 3, KeyDim: 32, ValueHeads: 3, ValueDim: 48, Scale: 0.2},
	{Layer: 1, KeyHeads: 1, KeyDim: 16, ValueHeads: 2, ValueDim: 20, Scale: 0.25}, // dv not a multiple of 16: Go loops
}

// The fast recurrent delta rule (split by sequence and head, AVX-512
// passes) gives the reference loop's outputs and states bit for bit,
// over sequences that start, continue from their state, and verify drafts
// into snapshot slots.
func TestDeltaRuleFastRecurrentEqualsTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, a := range deltaShapes {
		batch, slots := seqBatch([]int{1, 5, 3, 20}, []int{7, 0, 4, 9}, map[int]bool{2: true})
		c := newDeltaCase(rng, a, batch, slots)
		init := randVec(rng, slots*a.DeltaStateFloats())
		for i := range init {
			init[i] *= 0.1
		}
		br, bf := deltaBackend(t, a, slots, init), deltaBackend(t, a, slots, init)
		want, got := c.run(br, "ref"), c.run(bf, "recurrent")
		bitsEqual(t, fmt.Sprintf("%+v outputs", a), want, got)
		bitsEqual(t, fmt.Sprintf("%+v states", a), br.state.delta[1], bf.state.delta[1])
	}
}

// The chunked form (prefill runs of at least deltaChunkMin rows, chunks of
// deltaChunkLen) agrees with the recurrence: over 150-row prompts from
// position 0 and from a carried state, and a 16-row continuation, every
// output and state element is within 2e-5 of the recurrent form's, relative
// to the largest magnitude of its head's output (state) in the case (the
// values are O(0.1..1); the two forms only reassociate float32 sums).
func TestDeltaRuleChunkedAgreesWithTheRecurrentForm(t *testing.T) {
	if level == levelRef {
		t.Skip("the chunked form runs with the AVX2 and AVX-512 kernels")
	}
	const tol = 2e-5
	rng := rand.New(rand.NewPCG(11, 12))
	for i, a := range append(deltaShapes, deltaShapes[0]) {
		batch, slots := seqBatch([]int{150, 3, 150, 16}, []int{0, 5, 30, 200}, nil)
		if i == len(deltaShapes) { // the sequences' rows interleaved: keys and queries gathered
			batch = interleaveRows(batch)
		}
		c := newDeltaCase(rng, a, batch, slots)
		init := randVec(rng, slots*a.DeltaStateFloats())
		for i := range init {
			init[i] *= 0.1
		}
		br, bc := deltaBackend(t, a, slots, init), deltaBackend(t, a, slots, init)
		want, got := c.run(br, "recurrent"), c.run(bc, "chunked")
		worst := func(want, got []float32) float64 {
			var m, d float64
			for i := range want {
				m = max(m, math.Abs(float64(want[i])))
				d = max(d, math.Abs(float64(want[i]-got[i])))
			}
			return d / m
		}
		if e := worst(want, got); e > tol || math.IsNaN(e) {
			t.Errorf("%+v: outputs differ by %.3g of their largest magnitude, want <= %g", a, e, tol)
		} else {
			t.Logf("%+v: outputs within %.3g", a, e)
		}
		if e := worst(br.state.delta[1], bc.state.delta[1]); e > tol || math.IsNaN(e) {
			t.Errorf("%+v: states differ by %.3g of their largest magnitude, want <= %g", a, e, tol)
		} else {
			t.Logf("%+v: states within %.3g", a, e)
		}
		// The chunked form did run: its outputs are not the recurrence's bits.
		if slices.Equal(want, got) && a.ValueDim%16 == 0 {
			t.Errorf("%+v: the chunked run equals the recurrent one bit for bit; was it used?", a)
		}
	}
}

// A step that takes checkpoints inside it (exec.InnerStateTaker: its rows
// write a pool slot up to each take, StateSnapshots repeating the slot)
// gives, bit for bit, the outputs and states of the steps cut at the
// takes: each run of one slot is chunked from its own first row, and a run
// shorter than deltaChunkMin goes row by row, as such a step would.
func TestDeltaRuleInnerTakesEqualCutSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const rows, start = 150, 30
	for _, a := range deltaShapes {
		for _, takes := range [][]int{{70}, {10, 70}, {64, 128, 144}} {
			// One step: slot 1 is the sequence's, slots 2.. the takes'.
			one := &exec.Batch{StateSlots: []int32{1}, StateSnapshots: [][]int32{make([]int32, rows)}}
			for j := range rows {
				one.RowSeq = append(one.RowSeq, 0)
				one.Positions = append(one.Positions, int32(start+j))
				one.StateSnapshots[0][j] = 1
				for k := len(takes) - 1; k >= 0; k-- {
					if j < takes[k] {
						one.StateSnapshots[0][j] = int32(2 + k)
					}
				}
			}
			slots := 2 + len(takes)
			c := newDeltaCase(rng, a, one, slots)
			init := randVec(rng, slots*a.DeltaStateFloats())
			for i := range init {
				init[i] *= 0.1
			}
			bOne, bCut := deltaBackend(t, a, slots, init), deltaBackend(t, a, slots, init)
			want := c.run(bOne, "chunked")
			// The steps cut at the takes: step k writes slot 2+k (the last
			// slot 1), reading what the previous one wrote.
			kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
			var got []float32
			bounds := append(append([]int{0}, takes...), rows)
			for k := range len(bounds) - 1 {
				r0, r1 := bounds[k], bounds[k+1]
				write, read := int32(2+k), int32(1)
				if k == len(takes) {
					write = 1
				}
				if k > 0 {
					read = int32(1 + k)
				}
				step := &exec.Batch{StateSlots: []int32{write}, StateFrom: []int32{read}}
				for j := r0; j < r1; j++ {
					step.RowSeq = append(step.RowSeq, 0)
					step.Positions = append(step.Positions, int32(start+j))
				}
				sc := deltaCase{a: a, batch: step, slots: slots,
					q: c.q[r0*kd : r1*kd], k: c.k[r0*kd : r1*kd], v: c.v[r0*vd : r1*vd],
					g: c.g[r0*a.ValueHeads : r1*a.ValueHeads], beta: c.beta[r0*a.ValueHeads : r1*a.ValueHeads]}
				got = append(got, sc.run(bCut, "chunked")...)
			}
			what := fmt.Sprintf("%+v takes %v", a, takes)
			bitsEqual(t, what+" outputs", want, got)
			bitsEqual(t, what+" states", bCut.state.delta[1], bOne.state.delta[1])
		}
	}
}

// The fast short_conv (split by channel) gives the reference's outputs and
// windows bit for bit, snapshots included.
func TestShortConvFastEqualsTheReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, C := range []int{6, 200, 6144} {
		const K = 4
		batch, slots := seqBatch([]int{1, 5, 3, 9}, []int{7, 0, 4, 9}, map[int]bool{2: true})
		T := len(batch.RowSeq)
		x, w := randVec(rng, T*C), randVec(rng, C*K)
		a := tensor.StateArgs{Layer: 0, Kernel: K}
		init := randVec(rng, slots*a.ConvStateFloats(C))
		var outs [2][]float32
		var states [2][]float32
		for i := range 2 {
			b := &Backend{pool: newPool(2)}
			defer b.pool.close()
			var err error
			if b.state, err = newStateMemory(exec.StateLayout{Slots: slots, Conv: []int{a.ConvStateFloats(C)}}); err != nil {
				t.Fatal(err)
			}
			copy(b.state.conv[0], init)
			p := &program{b: b, f32: [][]float32{x, w}}
			p.stateRead, p.stateWrite = batch.StateRows()
			op := tensor.Op{Kind: tensor.OpShortConv, State: a, Args: []tensor.Tensor{{ID: 0}, {ID: 1}}, Out: tensor.Tensor{ID: 2, Shape: [2]int{T, C}}}
			outs[i] = make([]float32, T*C)
			if i == 0 {
				p.shortConvRef(outs[i], op, batch)
			} else {
				p.shortConv(outs[i], op, batch)
			}
			states[i] = b.state.conv[0]
		}
		bitsEqual(t, fmt.Sprintf("C=%d outputs", C), outs[0], outs[1])
		bitsEqual(t, fmt.Sprintf("C=%d windows", C), states[0], states[1])
	}
}

// The fast MoE (per-expert views on the fast matmul kernels, scratch kept
// in the program) agrees with the reference MoE over steps of 1, 5 and 37
// rows: q8_0 bit for bit, in the file's layout and repacked into 16-row
// groups (the quantized kernels give the reference's bits; the two layouts,
// in their two orders, within 1e-4 of the largest output); f32 within 1e-5 and f16 within 2e-3 of the largest output
// magnitude (the float kernels use 16 fused lanes, and for f16 a last-bit
// difference in the gate/up outputs can move the f16 rounding of the down
// projection's input by one f16 step, 2^-11 relative). It allocates
// nothing once its scratch has grown.
func TestMoEFastAgreesWithTheReference(t *testing.T) {
	if !useSIMD {
		t.Skip("the fast MoE runs with the AVX-512 kernels")
	}
	const E, X, F, K = 64, 8, 96, 3
	rng := rand.New(rand.NewPCG(15, 16))
	gw, uw, dw := randVec(rng, X*F*E), randVec(rng, X*F*E), randVec(rng, X*E*F)
	q8Rows := map[int][]float32{} // per T: the Q8_0 output in the file's layout
	for _, c := range []struct {
		dt     tensor.DType
		groups bool // repacked into weights.LayoutQ8x16
	}{{tensor.F32, false}, {tensor.F16, false}, {tensor.Q8_0, false}, {tensor.Q8_0, true}} {
		dt := c.dt
		b := &Backend{pool: newPool(2)}
		defer b.pool.close()
		mk := func(name string, v []float32, rowLen int) *weights.Tensor {
			rows := len(v) / rowLen
			rb, err := dt.RowBytes(rowLen)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, rows*rb)
			for r := range rows {
				if err := tensor.QuantizeRow(dt, v[r*rowLen:(r+1)*rowLen], data[r*rb:(r+1)*rb]); err != nil {
					t.Fatal(err)
				}
			}
			w := &weights.Tensor{Name: name, DType: dt, Shape: []int{rowLen, rows}, Data: data}
			if c.groups {
				w = repacked(t, w)
			}
			return w
		}
		ws := []*weights.Tensor{nil, nil, mk("gate", gw, E), mk("up", uw, E), mk("down", dw, F)}
		rng := rand.New(rand.NewPCG(17, 18)) // the same activations for every dtype
		for _, T := range []int{1, 5, 37} {
			h, router := randVec(rng, T*E), randVec(rng, T*X)
			p, op := moeProgram(b, ws, h, router, T, E, X, F, K)
			want, got := make([]float32, T*E), make([]float32, T*E)
			p.moeRef(want, op)
			p.moeFast(got, op)
			if dt == tensor.Q8_0 {
				bitsEqual(t, fmt.Sprintf("%v groups=%v T=%d", dt, c.groups, T), want, got)
				if !c.groups {
					q8Rows[T] = slices.Clone(got)
				} else {
					var m float64
					for _, v := range want {
						m = max(m, math.Abs(float64(v)))
					}
					for i, v := range q8Rows[T] {
						if d := math.Abs(float64(got[i] - v)); d > 1e-4*m || math.IsNaN(d) {
							t.Fatalf("groups T=%d: [%d] = %v, the file's layout %v (largest %v)", T, i, got[i], v, m)
						}
					}
				}
			} else {
				tol := map[tensor.DType]float64{tensor.F32: 1e-5, tensor.F16: 2e-3}[dt]
				var m float64
				for _, v := range want {
					m = max(m, math.Abs(float64(v)))
				}
				for i := range want {
					if d := math.Abs(float64(want[i] - got[i])); d > tol*m || math.IsNaN(d) {
						t.Fatalf("%v T=%d: [%d] = %v, the reference %v (largest %v)", dt, T, i, got[i], want[i], m)
					}
				}
			}
			if n := testing.AllocsPerRun(3, func() { p.moeFast(got, op) }); n > 0 {
				t.Errorf("%v T=%d: moeFast allocates %v times per call", dt, T, n)
			}
		}
	}
}

// The hybrid path's SiLU (by rows, as ggml_vec_silu_f32: siluV on each
// row's whole 16s, siluTail after them) gives the reference loop's bits at
// every level, where the fast levels run it as the SwiGLU kernels times 1.
func TestHybridSiLUEqualsTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const rows, d = 7, 40 // two 16s and a tail of 8 per row
	x := make([]float32, rows*d)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 6)
	}
	copy(x, []float32{0, float32(math.Copysign(0, -1)), 100, -100, 88.7, -88.7, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-30, -1e-30})
	want := make([]float32, len(x))
	for i, v := range x {
		if i%d < d-d%16 {
			want[i] = siluV(v)
		} else {
			want[i] = siluTail(v)
		}
	}
	b := &Backend{pool: newPool(2)}
	defer b.pool.close()
	op := tensor.Op{Kind: tensor.OpUnary, Fn: tensor.SiLU, Args: []tensor.Tensor{{ID: 0, Shape: [2]int{rows, d}}}, Out: tensor.Tensor{ID: 1, Shape: [2]int{rows, d}}}
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		p := &program{b: b, f32: [][]float32{x}}
		got := make([]float32, len(x))
		p.elementwiseHybrid(got, op)
		restore()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: silu(%g) = %g (%#x), reference %g (%#x)", lv, x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
			}
		}
	}
}

// BenchmarkDeltaRule runs the delta rule of one Qwen3.5 0.8B-width layer
// (16 key and value heads of 128x128) over a 512-row prompt from position
// 0 (the chunked form; "recurrent" for comparison) and one decode row,
// reporting the multiply-adds of the chunked form per second.
func BenchmarkDeltaRule(b *testing.B) {
	a := tensor.StateArgs{Layer: 1, KeyHeads: 16, KeyDim: 128, ValueHeads: 16, ValueDim: 128, Scale: 1 / float32(math.Sqrt(128))}
	for _, bc := range []struct {
		name string
		rows int
		mode string
	}{{"prompt=512", 512, "chunked"}, {"prompt=512/recurrent", 512, "recurrent"}, {"decode", 1, "chunked"}} {
		b.Run(bc.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			batch, slots := seqBatch([]int{bc.rows}, []int{0}, nil)
			c := newDeltaCase(rng, a, batch, slots)
			be := deltaBackend(b, a, slots, nil)
			b.ResetTimer()
			for range b.N {
				c.run(be, bc.mode)
			}
			// Per head and chunk of n rows: [K;Q']S0, [K;Q']K^T, the
			// triangular U and O, and K^T U.
			n, d := float64(deltaChunkLen), float64(a.KeyDim)
			macs := float64(a.ValueHeads) * float64(bc.rows) / n * (2*n*d*d + 2*n*n*d + n*n*d + n*d*d)
			b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// deltaDecays gives exp(G[c]-G[i]) within 2 float32 ulps below the
// diagonal and 0 above it, on the anchored products and on the direct form
// a range too wide for them takes.
func TestDeltaDecaysAreTheDecayMask(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, step := range []float64{0.01, 1, 30} { // ranges of ~0.6, ~60 and ~1900 over 64 rows
		G := make([]float64, deltaChunkLen)
		var acc float64
		for i := range G {
			acc -= step * rng.Float64() * 2
			G[i] = acc
		}
		const ld = deltaChunkLen + 16
		dec := randVec(rng, deltaChunkLen*ld)
		deltaDecays(dec, G, ld)
		for c := range G {
			for i := range ld {
				got := dec[c*ld+i]
				if i > c {
					if got != 0 {
						t.Fatalf("step %g: dec[%d,%d] = %v past the diagonal, want 0", step, c, i, got)
					}
					continue
				}
				want := float32(math.Exp(G[c] - G[i]))
				if d := math.Abs(float64(got - want)); d > 2*ulp32(want) {
					t.Fatalf("step %g: dec[%d,%d] = %v, want %v", step, c, i, got, want)
				}
			}
		}
	}
}

// ulp32 is the spacing of float32s at x (the smallest subnormal at 0).
func ulp32(x float32) float64 {
	return float64(math.Nextafter32(float32(math.Abs(float64(x))), float32(math.Inf(1))) - float32(math.Abs(float64(x))))
}

// moeProgram returns a program and its MoE op of T rows h [T, E] (router
// logits [T, X], the experts' gate, up and down weights ws[2:5], FFN width
// F, top K).
func moeProgram(b *Backend, ws []*weights.Tensor, h, router []float32, T, E, X, F, K int) (*program, tensor.Op) {
	op := tensor.Op{Kind: tensor.OpMoE, MoE: tensor.MoEArgs{Experts: X, TopK: K, FFN: F, Normalize: true}, Out: tensor.Tensor{ID: 5, Shape: [2]int{T, E}},
		Args: []tensor.Tensor{{ID: 0, Shape: [2]int{T, E}}, {ID: 1, Shape: [2]int{T, X}}, {ID: 2}, {ID: 3}, {ID: 4}}}
	return &program{b: b, f32: [][]float32{h, router, nil, nil, nil}, w: ws}, op
}
