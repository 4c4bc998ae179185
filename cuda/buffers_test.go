package cuda

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// fakeWeights resolves weights from a table of dtype and [rows, cols].
func fakeWeights(w map[string]tensor.Tensor) tensor.WeightInfo {
	return func(name string) (tensor.DType, int, int, bool) {
		t, ok := w[name]
		return t.DType, t.Shape[0], t.Shape[1], ok
	}
}

// recordBlock records one transformer block and an LM head over rows
// tokens: the op mix the model nodes record.
func recordBlock(t *testing.T, rows, logitRows int, dt tensor.DType) *tensor.Graph {
	t.Helper()
	const d, ff, vocab = 64, 96, 50
	b := tensor.NewBuilder(fakeWeights(map[string]tensor.Tensor{
		"embd": {Shape: [2]int{vocab, d}, DType: dt},
		"norm": {Shape: [2]int{1, d}, DType: tensor.F32},
		"wq":   {Shape: [2]int{d, d}, DType: dt}, "wk": {Shape: [2]int{32, d}, DType: dt}, "wv": {Shape: [2]int{32, d}, DType: dt},
		"wo":   {Shape: [2]int{d, d}, DType: dt},
		"gate": {Shape: [2]int{ff, d}, DType: dt}, "up": {Shape: [2]int{ff, d}, DType: dt}, "down": {Shape: [2]int{d, ff}, DType: dt},
		"head": {Shape: [2]int{vocab, d}, DType: dt},
	}))
	tokens, pos := b.Input("tokens", rows), b.Input("positions", rows)
	lr := b.Input("logit_rows", logitRows)
	x := b.GetRows(b.Weight("embd"), tokens)
	h := b.RMSNorm(x, b.Weight("norm"), d, 1e-6)
	rope := tensor.RoPEArgs{HeadDim: 16, Dims: 16, Base: 10000, Mode: tensor.RoPENeox}
	q := b.RoPE(b.MatMul(h, b.Weight("wq")), pos, rope)
	k := b.RoPE(b.MatMul(h, b.Weight("wk")), pos, rope)
	v := b.MatMul(h, b.Weight("wv"))
	a := b.Attention(q, k, v, tensor.AttentionArgs{Layer: 0, Heads: 4, KVHeads: 2, HeadDim: 16, Scale: 0.25})
	x = b.Add(x, b.MatMul(a, b.Weight("wo")))
	h = b.RMSNorm(x, b.Weight("norm"), d, 1e-6)
	x = b.Add(x, b.MatMul(b.SwiGLU(b.MatMul(h, b.Weight("gate")), b.MatMul(h, b.Weight("up"))), b.Weight("down")))
	logits := b.MatMul(b.SelectRows(b.RMSNorm(x, b.Weight("norm"), d, 1e-6), lr), b.Weight("head"))
	b.Output("logits", logits)
	b.Output("hidden", x)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// checkPlan verifies that buffers live at the same time never overlap and
// that every computed value and every quantized matmul input has one.
func checkPlan(t *testing.T, g *tensor.Graph, p bufferPlan) {
	t.Helper()
	n := len(g.Ops)
	type buf struct {
		name      string
		from, to  int
		off, size int64
	}
	lastUse := make([]int, n)
	for i, op := range g.Ops {
		lastUse[i] = i
		for _, a := range op.Args {
			lastUse[a.ID] = i
		}
	}
	for _, o := range g.Outputs {
		lastUse[o.ID] = n
	}
	var bufs []buf
	for i, op := range g.Ops {
		computed := op.Kind != tensor.OpInput && op.Kind != tensor.OpWeight
		if computed != (p.Offset[i] >= 0) {
			t.Errorf("op %d (%v): offset %d", i, op.Kind, p.Offset[i])
		}
		if computed {
			bufs = append(bufs, buf{op.Kind.String(), i, lastUse[i], p.Offset[i], 4 * int64(op.Out.Rows()*op.Out.Cols())})
		}
		for _, form := range []struct {
			name string
			off  int64
			k    bool // Q8_K blocks (kquant weights), else Q8_0
			size int64
		}{
			{"q8 of ", p.QuantOffset[i], false, q8Bytes(op.Out.Rows(), op.Out.Cols())},
			{"q8_K of ", p.QuantKOffset[i], true, q8KBytes(op.Out.Rows(), op.Out.Cols())},
		} {
			from, to := -1, -1
			for j, m := range g.Ops {
				if m.Kind == tensor.OpMatMul && m.Args[0].ID == i && quantized(m.Args[1].DType) && kquant(m.Args[1].DType) == form.k {
					if from < 0 {
						from = j
						if !p.QuantBefore[j] {
							t.Errorf("matmul %d reads %d first but does not quantize it", j, i)
						}
					} else if p.QuantBefore[j] {
						t.Errorf("matmul %d quantizes %d again", j, i)
					}
					to = j
				}
			}
			if (from >= 0) != (form.off >= 0) {
				t.Errorf("op %d: %sblocks at %d, first read by matmul %d", i, form.name, form.off, from)
			}
			if form.off >= 0 {
				bufs = append(bufs, buf{form.name + op.Kind.String(), from, to, form.off, form.size})
			}
		}
	}
	for i, a := range bufs {
		if a.off%arenaAlign != 0 || a.off+a.size > p.Size {
			t.Errorf("%s at %d+%d: misaligned or past the arena of %d", a.name, a.off, a.size, p.Size)
		}
		for _, b := range bufs[i+1:] {
			if a.from <= b.to && b.from <= a.to && a.off < b.off+b.size && b.off < a.off+a.size {
				t.Errorf("%s [%d,%d] at %d+%d overlaps %s [%d,%d] at %d+%d", a.name, a.from, a.to, a.off, a.size, b.name, b.from, b.to, b.off, b.size)
			}
		}
	}
}

func TestPlanBuffers(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
		for _, shape := range [][2]int{{1, 1}, {8, 8}, {24, 3}, {512, 1}} {
			g := recordBlock(t, shape[0], shape[1], dt)
			p, err := planBuffers(g, 0)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, g, p)
			if got := p.Rows[g.Outputs["logits"].ID]; got != rowsLogits {
				t.Errorf("%v: logits rows follow %d, want logit rows", dt, got)
			}
			if got := p.Rows[g.Outputs["hidden"].ID]; got != rowsTokens {
				t.Errorf("%v: hidden rows follow %d, want tokens", dt, got)
			}
			var sum int64
			for i, op := range g.Ops {
				if p.Offset[i] >= 0 {
					sum += 4 * int64(op.Out.Rows()*op.Out.Cols())
				}
			}
			if p.Size >= sum {
				t.Errorf("%v %v: arena %d bytes reuses nothing (buffers total %d)", dt, shape, p.Size, sum)
			}
		}
	}
}

func TestPlanBuffersChain(t *testing.T) {
	// x -> a -> b -> c: a dies when b is computed, so c reuses a's bytes.
	b := tensor.NewBuilder(fakeWeights(map[string]tensor.Tensor{"e": {Shape: [2]int{10, 64}, DType: tensor.F32}}))
	x := b.GetRows(b.Weight("e"), b.Input("tokens", 2)) // 512 bytes
	a := b.Add(x, x)
	c := b.Add(a, a)
	d := b.Add(c, c)
	b.Output("d", d)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planBuffers(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{-1, -1, 0, 512, 0, 512}, p.Offset); diff != "" {
		t.Errorf("offsets (-want +got):\n%s", diff)
	}
	if p.Size != 1024 {
		t.Errorf("size %d, want 1024", p.Size)
	}
}

func TestPlanBuffersRejects(t *testing.T) {
	b := tensor.NewBuilder(fakeWeights(map[string]tensor.Tensor{
		"e": {Shape: [2]int{10, 48}, DType: tensor.F32}, "w": {Shape: [2]int{4, 48}, DType: tensor.Q8_0}}))
	b.Output("y", b.MatMul(b.GetRows(b.Weight("e"), b.Input("tokens", 1)), b.Weight("w")))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := planBuffers(g, 0); err == nil || !strings.Contains(err.Error(), "multiple of 32") {
		t.Errorf("planBuffers: %v", err)
	}
	g.Ops[2].Args[1].ID = 5
	if _, err := planBuffers(g, 0); err == nil || !strings.Contains(err.Error(), "before it is computed") {
		t.Errorf("planBuffers: %v", err)
	}
}

// TestPlanFloatInput: a float input lives in the step buffer (no arena
// buffer of its own) but a Q8_0 matmul of it gets its quantized blocks in
// the arena; an MoE gets a scratch buffer.
func TestPlanFloatInput(t *testing.T) {
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		switch name {
		case "w":
			return tensor.Q8_0, 8, 64, true
		case "router":
			return tensor.F32, 4, 64, true
		case "experts":
			return tensor.F32, 4 * 16, 64, true
		case "down":
			return tensor.F32, 4 * 64, 16, true
		}
		return 0, 0, 0, false
	})
	b.Input("tokens", 3)
	h := b.InputF32("hidden", 3, 64)
	b.Output("y", b.MatMul(h, b.Weight("w")))
	b.Output("m", b.MoE(h, b.MatMul(h, b.Weight("router")), b.Weight("experts"), b.Weight("experts"), b.Weight("down"),
		tensor.MoEArgs{Experts: 4, TopK: 2, FFN: 16}))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planBuffers(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Offset[h.ID] != -1 || p.QuantOffset[h.ID] < 0 {
		t.Errorf("float input: offset %d, quantized blocks at %d; want -1 and an arena offset", p.Offset[h.ID], p.QuantOffset[h.ID])
	}
	moe := g.Outputs["m"].ID
	if p.Scratch[moe] < 0 || p.Scratch[moe]+newMoEScratch(3, 64, g.Ops[moe].MoE, moeDTypes(g.Ops[moe])).size > p.Size {
		t.Errorf("moe scratch at %d (arena %d)", p.Scratch[moe], p.Size)
	}
}

// TestPlanMixedQuantForms: an activation read by a Q4_K (Q8_K blocks), a
// Q8_0 and a Q6_K matmul gets both block forms, each quantized once by its
// first reader, neither overlapping the other while both are live.
func TestPlanMixedQuantForms(t *testing.T) {
	b := tensor.NewBuilder(fakeWeights(map[string]tensor.Tensor{
		"e":  {Shape: [2]int{10, 256}, DType: tensor.F32},
		"wk": {Shape: [2]int{8, 256}, DType: tensor.Q4_K}, "w8": {Shape: [2]int{8, 256}, DType: tensor.Q8_0},
		"w6": {Shape: [2]int{8, 256}, DType: tensor.Q6_K}}))
	x := b.GetRows(b.Weight("e"), b.Input("tokens", 3))
	b.Output("k", b.MatMul(x, b.Weight("wk")))
	b.Output("q", b.MatMul(x, b.Weight("w8")))
	b.Output("s", b.MatMul(x, b.Weight("w6")))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planBuffers(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, g, p)
	if p.QuantOffset[x.ID] < 0 || p.QuantKOffset[x.ID] < 0 {
		t.Errorf("Q8_0 blocks at %d, Q8_K blocks at %d; want both", p.QuantOffset[x.ID], p.QuantKOffset[x.ID])
	}
	var quantizes []string
	for i, op := range g.Ops {
		if p.QuantBefore[i] {
			quantizes = append(quantizes, op.Args[1].DType.String())
		}
	}
	if diff := cmp.Diff([]string{"q4_K", "q8_0"}, quantizes); diff != "" {
		t.Errorf("matmuls that quantize their input (-want +got):\n%s", diff)
	}
}

// With a bf16 state, each stateful op gets a scratch for the f32 staging of
// stage slots of its state, live only while it runs (the two ops' scratches
// may share memory); with an f32 state, none.
func TestPlanStagesABF16State(t *testing.T) {
	a := tensor.StateArgs{Layer: 0, Kernel: 4, KeyHeads: 1, KeyDim: 16, ValueHeads: 2, ValueDim: 32, Scale: 0.25}
	b := tensor.NewBuilder(fakeWeights(map[string]tensor.Tensor{
		"x":    {Shape: [2]int{10, 96}, DType: tensor.F32},
		"conv": {Shape: [2]int{96, 4}, DType: tensor.F32},
		"g":    {Shape: [2]int{10, 2}, DType: tensor.F32},
	}))
	tok := b.Input("tokens", 3)
	b.Input("positions", 3)
	x := b.GetRows(b.Weight("x"), tok)
	c := b.ShortConv(x, b.Weight("conv"), a)
	q, g := b.Columns(c, 96, 0, 16), b.GetRows(b.Weight("g"), tok)
	d := b.DeltaRule(q, q, b.Columns(c, 96, 32, 64), g, g, a)
	b.Output("y", d)
	gr, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for _, stage := range []int{0, 7} {
		p, err := planBuffers(gr, stage)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []tensor.Tensor{c, d} {
			need := int64(4 * stage * stateFloats(gr.Ops[op.ID]))
			switch {
			case stage == 0 && p.Scratch[op.ID] != -1:
				t.Errorf("f32 state: %v has a scratch at %d", gr.Ops[op.ID].Kind, p.Scratch[op.ID])
			case stage > 0 && (p.Scratch[op.ID] < 0 || p.Scratch[op.ID]+need > p.Size):
				t.Errorf("bf16 state: %v scratch at %d of %d bytes (arena %d)", gr.Ops[op.ID].Kind, p.Scratch[op.ID], need, p.Size)
			}
		}
	}
}
