package speculative

import (
	"errors"
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.eagle3",
		Placement: node.Host,
		In: []node.Port{historyPort,
			{Name: "features", Type: node.Hidden,
				Doc: "the target's hidden states at the drafter's target_layers, side by side, of the tokens the previous steps accepted: a value carried from model.forward's taps ($prev.NAME)"},
			priorPort},
		Out: []node.Port{draftOut},
		Params: []node.Param{
			{Name: "k", Kind: node.Int, Default: int64(3), Min: bound(1), Max: bound(16), Doc: "most tokens drafted per sequence and step"},
			{Name: "model", Kind: node.String, Default: "draft", Doc: "alias of the EAGLE-3 drafter GGUF (`--model ALIAS=FILE`, architecture eagle3)"},
		},
		Summary: "Draft tokens with an EAGLE-3 drafter, which fuses hidden states tapped from the target's layers.",
		Doc: "The drafter (a GGUF of architecture `eagle3`: `fc`, one decoder layer, `output_norm`, `output`, and " +
			"`eagle3.target_layers`, llama.cpp's layer-input ids) runs on a device of its own with a paged KV cache " +
			"of its own. Its entry at position p reads the token at p+1 and g_p = fc(features_p), the target's tapped " +
			"hidden states at p: `[attn_norm(embed(t_{p+1})) ; attn_norm_2(g_p)]` -> q, k, v -> attention (RoPE " +
			"at p) -> `+ g_p` -> FFN -> the pre-norm state, then `output_norm` -> `output`. Each step it enters the " +
			"positions the carried features cover; the last entry (the last accepted position, paired with the " +
			"token the target just chose) drafts the first token, and each further pass feeds the previous draft " +
			"with the decoder's own pre-norm state as g. The token embeddings are the target's unless the drafter " +
			"has its own. This is " +
			"llama.cpp's `--spec-type draft-eagle3` with p_min 0. The graph's model.forward must tap the drafter's " +
			"target_layers (`taps`); the engine checks it at load.",
		New: func(p node.Params) (any, error) {
			e := &Eagle3{K: p.Int("k"), Alias: p.String("model")}
			if err := checkAlias(e.Alias); err != nil {
				return nil, err
			}
			return e, nil
		},
	})
}

// Eagle3 is the speculative.eagle3 node. The engine binds it (BindModel,
// then Attach) before RunHost; RunHost and ReleaseSeq run on the engine's
// goroutine.
type Eagle3 struct {
	K     int
	Alias string

	heads
	cfg      eagle3Config
	borrowed []string // the target's tensors the drafter reads
}

// eagle3Config is an EAGLE-3 drafter's shape, from its GGUF metadata.
type eagle3Config struct {
	Embed, Heads, KVHeads, HeadDim, RopeDims int
	RopeBase, NormEps                        float32
	TargetLayers                             []int
	TargetEmbed                              int
	NormBeforeResidual, NormBeforeFC         bool
}

// TargetLayers reports the target layer inputs the drafter reads, which
// the graph's model.forward must tap.
func (e *Eagle3) TargetLayers() []int { return e.cfg.TargetLayers }

// TargetWeights implements exec.WeightBorrower: a drafter without token
// embeddings of its own uses the target's.
func (e *Eagle3) TargetWeights() []string { return e.borrowed }

// DraftTokens implements exec.Proposer.
func (e *Eagle3) DraftTokens() int { return e.K }

// ModelAlias implements exec.ModelBinder.
func (e *Eagle3) ModelAlias() string { return e.Alias }

// BindModel implements exec.ModelBinder: f must be an eagle3 GGUF whose
// target hidden size is the target's and whose output has the target's
// vocabulary.
func (e *Eagle3) BindModel(f, target *weights.File) (layers, kvDim int, err error) {
	c, err := readEagle3Config(f)
	if err != nil {
		return 0, 0, err
	}
	embd, err := target.Tensor("token_embd.weight")
	if err != nil {
		return 0, 0, fmt.Errorf("speculative.eagle3: target %s: %w", target.Path, err)
	}
	if embd.RowLen() != c.Embed || c.TargetEmbed != embd.RowLen() {
		return 0, 0, fmt.Errorf("speculative.eagle3: drafter %s: embedding width %d and target hidden size %d, the target %s has %d",
			f.Path, c.Embed, c.TargetEmbed, target.Path, embd.RowLen())
	}
	out, err := f.Tensor("output.weight")
	if err != nil {
		return 0, 0, fmt.Errorf("speculative.eagle3: drafter %s: %w (a d2t vocabulary map is not supported)", f.Path, err)
	}
	if out.Rows() != embd.Rows() {
		return 0, 0, fmt.Errorf("speculative.eagle3: drafter %s scores %d tokens, the target %s has %d", f.Path, out.Rows(), target.Path, embd.Rows())
	}
	e.cfg, e.borrowed = c, nil
	if _, err := f.Tensor("token_embd.weight"); err != nil {
		e.borrowed = []string{"token_embd.weight"} // the drafter embeds with the target's
	}
	return 1, c.KVHeads * c.HeadDim, nil
}

func readEagle3Config(f *weights.File) (eagle3Config, error) {
	var c eagle3Config
	if a := f.Arch(); a != "eagle3" {
		return c, fmt.Errorf("speculative.eagle3: drafter %s is %q, not an eagle3 GGUF", f.Path, a)
	}
	m := &meta{f: f, arch: "eagle3"}
	c.Embed, c.Heads, c.KVHeads = m.uint("embedding_length", -1), m.uint("attention.head_count", -1), m.uint("attention.head_count_kv", -1)
	c.HeadDim, c.TargetEmbed = m.uint("attention.key_length", -1), m.uint("target_hidden_size", -1)
	c.RopeDims = m.uint("rope.dimension_count", c.HeadDim)
	c.RopeBase, c.NormEps = m.float("rope.freq_base", 10000), m.float("attention.layer_norm_rms_epsilon", 1e-6)
	c.NormBeforeResidual, c.NormBeforeFC = m.bool("norm_before_residual"), m.bool("norm_before_fc")
	c.TargetLayers = m.ints("target_layers")
	if n := m.uint("block_count", -1); n != 1 {
		m.errorf("eagle3.block_count = %d: EAGLE-3 has one decoder layer", n)
	}
	if len(c.TargetLayers) != 3 {
		m.errorf("eagle3.target_layers = %v: EAGLE-3 reads 3 target layers", c.TargetLayers)
	}
	if c.Heads < 1 || c.KVHeads < 1 || c.Heads%c.KVHeads != 0 || c.HeadDim < 1 || c.Embed < 1 {
		m.errorf("eagle3: %d heads, %d kv heads of %d, width %d", c.Heads, c.KVHeads, c.HeadDim, c.Embed)
	}
	if len(m.errs) > 0 {
		return c, fmt.Errorf("speculative.eagle3: drafter %s: %w", f.Path, errors.Join(m.errs...))
	}
	return c, nil
}

// recorder is the drafter's pass over tokens [T] at positions [T]: with
// encode, the fused features "e3_features" [T, 3E'] go through fc to give
// g, otherwise g is "e3_g" [T, E]; the tokens are embedded with
// token_embd (the drafter's, or the target's it borrows). Outputs: "logits" [R, vocab] and the pre-norm state "hidden"
// [R, E] of the "logit_rows" rows.
func (e *Eagle3) recorder(encode bool) exec.PassRecorder {
	return func(b *tensor.Builder, tokens, positions tensor.Tensor) (map[string]tensor.Tensor, error) {
		c := e.cfg
		T := tokens.Rows()
		w := func(s string) tensor.Tensor { return b.Weight("blk.0." + s + ".weight") }
		var g tensor.Tensor
		if encode {
			f := b.InputF32("e3_features", T, len(c.TargetLayers)*c.TargetEmbed)
			if c.NormBeforeFC {
				f = b.RMSNorm(f, b.Weight("enc.output_norm.weight"), f.Cols(), c.NormEps)
			}
			g = b.MatMul(f, b.Weight("fc.weight")) // [T, E]
		} else {
			g = b.InputF32("e3_g", T, c.Embed)
		}
		en := b.RMSNorm(b.GetRows(b.Weight("token_embd.weight"), tokens), w("attn_norm"), c.Embed, c.NormEps)
		gn := b.RMSNorm(g, w("attn_norm_2"), c.Embed, c.NormEps)
		cur := b.Concat(en, gn) // [T, 2E]
		rope := tensor.RoPEArgs{HeadDim: c.HeadDim, Dims: c.RopeDims, Base: c.RopeBase, Mode: tensor.RoPENorm}
		q := b.RoPE(b.MatMul(cur, w("attn_q")), positions, rope)
		k := b.RoPE(b.MatMul(cur, w("attn_k")), positions, rope)
		v := b.MatMul(cur, w("attn_v"))
		a := b.Attention(q, k, v, tensor.AttentionArgs{Layer: 0, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
			Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))})
		residual := g
		if c.NormBeforeResidual {
			residual = gn
		}
		x := b.Add(b.MatMul(a, w("attn_output")), residual)
		h := b.RMSNorm(x, w("ffn_norm"), c.Embed, c.NormEps)
		x = b.Add(x, b.MatMul(b.SwiGLU(b.MatMul(h, w("ffn_gate")), b.MatMul(h, w("ffn_up"))), w("ffn_down")))
		pre := b.SelectRows(x, b.Input("logit_rows", -1)) // [R, E]
		logits := b.MatMul(b.RMSNorm(pre, b.Weight("output_norm.weight"), c.Embed, c.NormEps), b.Weight("output.weight"))
		return map[string]tensor.Tensor{"logits": logits, "hidden": pre}, b.Err()
	}
}

// RunHost implements exec.HostNode: history, features (and prior) ->
// draft. Every sequence first enters the positions its carried features
// cover (entry p pairs token p+1 with features p, so the last one waits
// for the token the target chooses next), also when it does not draft.
func (e *Eagle3) RunHost(hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.eagle3", hc, in)
	if err != nil {
		return nil, err
	}
	feats, ok := in["features"].([]exec.Carried)
	if !ok || len(feats) != len(hc.Rows) {
		return nil, fmt.Errorf("speculative.eagle3: features input is %T for %d sequences", in["features"], len(hc.Rows))
	}
	if e.dev == nil {
		return nil, errors.New("speculative.eagle3: needs a bound model and its device")
	}
	out := make(exec.Drafts, len(hc.Rows))
	need := keepPrior(hc, prior, out)
	width := len(e.cfg.TargetLayers) * e.cfg.TargetEmbed
	var rows []chainRow
	b := &exec.Batch{Floats: map[string][]float32{}}
	var fs []float32
	for i, row := range hc.Rows {
		c, h := feats[i], history[i]
		s := e.seq(row.ID)
		if c.Rows() == 0 {
			continue
		}
		if c.Width != width {
			return nil, fmt.Errorf("speculative.eagle3: sequence %d: features of %d floats, the drafter reads %d (%d target layers of %d): tap its target_layers",
				row.ID, c.Width, width, len(e.cfg.TargetLayers), e.cfg.TargetEmbed)
		}
		if c.Pos == 0 {
			s.lost = false
		}
		if c.Pos > s.next {
			s.lost = true // positions the drafter never saw
		}
		start, end := c.Pos, min(c.Pos+c.Rows(), len(h)-1) // entries [start, end): token p+1 with features p
		want := min(e.K, row.Lookahead)
		if !need[i] || end != len(h)-1 {
			want = 0 // the last entry, paired with the target's newest token, drafts
		}
		if start >= end || s.lost {
			continue
		}
		if !e.grow(hc, s, end+max(0, want-1)) {
			continue
		}
		b.Tables = append(b.Tables, s.kv.Blocks)
		for p := start; p < end; p++ {
			b.Tokens = append(b.Tokens, h[p+1])
			b.Positions = append(b.Positions, int32(p))
			b.RowSeq = append(b.RowSeq, int32(len(b.Tables)-1))
			fs = append(fs, c.Row(p-c.Pos)...)
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		s.next = end
		rows = append(rows, chainRow{row: i, want: want, pos: end, seq: s})
	}
	b.Floats["e3_features"] = fs
	err = chainDrafts(out, rows, b, func(b *exec.Batch, first bool) (exec.Logits, exec.Logits, error) {
		name := "speculative.eagle3/draft"
		if first {
			name = "speculative.eagle3/enter" // features through fc; later passes feed the pre-norm state
		}
		res, err := e.dev.Pass(hc.Ctx, name, e.recorder(first), b, "logits", "hidden")
		return res["logits"], res["hidden"], err
	}, func(next *exec.Batch, _ int32, pre []float32) error {
		next.Floats["e3_g"] = append(next.Floats["e3_g"], pre...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("speculative.eagle3: %w", err)
	}
	return map[string]any{"draft": out}, nil
}
