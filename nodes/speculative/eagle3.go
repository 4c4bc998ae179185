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
		Placement: node.Device,
		Info:      node.Info{ModelAlias: node.ModelParam("model")},
		In: []node.Port{
			{Name: "tokens", Type: node.Tokens, Doc: "token ids of the pass, one per row [T]"},
			{Name: "positions", Type: node.Positions, Doc: "position of each row [T]: its hidden state's (entry p reads token p+1)"},
			{Name: "hidden", Type: node.Hidden,
				Doc: "per row, the target's hidden states at the drafter's target_layers side by side [T, 3E'] (a loop's $loop.hidden of a value carried from model.forward's taps, in the pass that enters them), or the drafter's own pre-norm state of the pass before [T, E]"},
		},
		Out: []node.Port{
			{Name: "logits", Type: node.Logits, Doc: "next-token logits of the rows that need a token [R, vocab]"},
			{Name: "hidden", Type: node.Hidden, Doc: "the decoder's pre-norm state of those rows [R, E]: the g of the next pass"},
		},
		Params: []node.Param{
			{Name: "model", Kind: node.String, Default: "draft", Doc: "alias of the EAGLE-3 drafter GGUF (`--model ALIAS=FILE`, architecture eagle3)"},
		},
		Summary: "Run an EAGLE-3 drafter, which fuses hidden states tapped from the target's layers, over a pass's rows.",
		Doc: "The drafter (a GGUF of architecture `eagle3`: `fc`, one decoder layer, `output_norm`, `output`, and " +
			"`eagle3.target_layers`, llama.cpp's layer-input ids) runs in a draft loop over its model, on a device " +
			"of its own with a paged KV cache of its own. Its entry at position p reads the token at p+1 and g_p: " +
			"fc(features_p) of the target's tapped hidden states when the pass enters them, else the pre-norm " +
			"state of the pass before: `[attn_norm(embed(t_{p+1})) ; attn_norm_2(g_p)]` -> q, k, v -> attention " +
			"(RoPE at p) -> `+ g_p` -> FFN -> the pre-norm state, then `output_norm` -> `output`. The token " +
			"embeddings are the target's unless the drafter has its own. graphs/eagle3.yaml is llama.cpp's " +
			"`--spec-type draft-eagle3` with p_min 0. The graph's model.forward must tap the drafter's " +
			"target_layers (`taps`); the engine checks it at load.",
		NewDevice: func(p node.Params) (node.DeviceNode, error) {
			e := &Eagle3{Alias: p.String("model")}
			if err := exec.CheckAlias(e.Alias); err != nil {
				return nil, err
			}
			return e, nil
		},
	})
}

// Eagle3 is the speculative.eagle3 node, a draft loop body's forward of an
// EAGLE-3 drafter. The engine binds it (Bind, with the drafter's file,
// after BindTarget) before Record.
type Eagle3 struct {
	Alias string

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

// EntersAtHidden implements exec.HiddenEntry: entry p pairs the hidden
// state of p with the token at p+1, at position p.
func (e *Eagle3) EntersAtHidden() bool { return true }

// BindTarget implements exec.TargetChecker: the drafter's target hidden
// size and vocabulary must be target's; a drafter without token
// embeddings of its own borrows target's (TargetWeights).
func (e *Eagle3) BindTarget(f, target *weights.File) error {
	c, err := readEagle3Config(f)
	if err != nil {
		return err
	}
	embd, err := target.Tensor("token_embd.weight")
	if err != nil {
		return fmt.Errorf("speculative.eagle3: target %s: %w", target.Path, err)
	}
	if embd.RowLen() != c.Embed || c.TargetEmbed != embd.RowLen() {
		return fmt.Errorf("speculative.eagle3: drafter %s: embedding width %d and target hidden size %d, the target %s has %d",
			f.Path, c.Embed, c.TargetEmbed, target.Path, embd.RowLen())
	}
	out, err := f.Tensor("output.weight")
	if err != nil {
		return fmt.Errorf("speculative.eagle3: drafter %s: %w (a d2t vocabulary map is not supported)", f.Path, err)
	}
	if out.Rows() != embd.Rows() {
		return fmt.Errorf("speculative.eagle3: drafter %s scores %d tokens, the target %s has %d", f.Path, out.Rows(), target.Path, embd.Rows())
	}
	e.cfg, e.borrowed = c, nil
	if _, err := f.Tensor("token_embd.weight"); err != nil {
		e.borrowed = []string{"token_embd.weight"} // the drafter embeds with the target's
	}
	return nil
}

// Bind implements exec.Binder: f is the drafter's file (with any borrowed
// target tensors), read by BindTarget.
func (e *Eagle3) Bind(f *weights.File) error {
	if e.cfg.Embed == 0 {
		return fmt.Errorf("speculative.eagle3: %s is not a checked eagle3 drafter (BindTarget first)", f.Path)
	}
	return nil
}

// KVShape implements exec.KVShaper: one decoder layer.
func (e *Eagle3) KVShape() (layers, kvDim int) { return 1, e.cfg.KVHeads * e.cfg.HeadDim }

// RowWidth implements exec.RowWidther: hidden rows are the pre-norm state.
func (e *Eagle3) RowWidth(port string) int {
	if port == "hidden" {
		return e.cfg.Embed
	}
	return 0
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

// Record implements node.DeviceNode: tokens [T], positions [T] and
// hidden, the fused features [T, 3E'] (which go through fc to give g) or
// g [T, E] itself, -> logits [R, vocab] and the pre-norm state hidden
// [R, E] of the step's "logit_rows" rows.
func (e *Eagle3) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	c := e.cfg
	if c.Embed == 0 {
		return nil, errors.New("speculative.eagle3: no drafter bound")
	}
	tokens, positions, g := in["tokens"], in["positions"], in["hidden"]
	w := func(s string) tensor.Tensor { return b.Weight("blk.0." + s + ".weight") }
	switch g.Cols() {
	case c.Embed:
	case len(c.TargetLayers) * c.TargetEmbed:
		if c.NormBeforeFC {
			g = b.RMSNorm(g, b.Weight("enc.output_norm.weight"), g.Cols(), c.NormEps)
		}
		g = b.MatMul(g, b.Weight("fc.weight")) // [T, E]
	default:
		return nil, fmt.Errorf("speculative.eagle3: hidden rows of %d floats: the drafter reads %d (%d target layers of %d) or its own %d: tap its target_layers",
			g.Cols(), len(c.TargetLayers)*c.TargetEmbed, len(c.TargetLayers), c.TargetEmbed, c.Embed)
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
	pre := b.SelectRows(x, b.Input(node.BindLogitRows, -1)) // [R, E]
	logits := b.MatMul(b.RMSNorm(pre, b.Weight("output_norm.weight"), c.Embed, c.NormEps), b.Weight("output.weight"))
	return map[string]tensor.Tensor{"logits": logits, "hidden": pre}, b.Err()
}

var (
	_ node.DeviceNode    = (*Eagle3)(nil)
	_ exec.TargetChecker = (*Eagle3)(nil)
	_ exec.HiddenEntry   = (*Eagle3)(nil)
)
