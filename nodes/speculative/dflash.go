package speculative

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.dflash",
		Info:      node.Info{BlockDrafter: true, ModelAlias: node.ModelParam("model")},
		Placement: node.Device,
		In: []node.Port{
			{Name: "tokens", Type: node.Tokens, Doc: "token ids of the pass, one per row [T]: in the block pass each drafting sequence's last token and k mask tokens"},
			{Name: "positions", Type: node.Positions, Doc: "position of each row [T]: an entered row's hidden state's"},
			{Name: "hidden", Type: node.Hidden,
				Doc: "the target's hidden states at the drafter's target_layers side by side [T, L*E] ($loop.hidden of a value carried from model.forward's taps) in the pass that enters them; absent in the block pass"},
		},
		Out: []node.Port{
			{Name: "logits", Type: node.Logits, Doc: "next-token logits of the block pass's mask rows [R, vocab]"},
		},
		Params: []node.Param{
			{Name: "model", Kind: node.String, Default: "draft", Doc: "alias of the DFlash drafter GGUF (`--model ALIAS=FILE`, architecture dflash)"},
		},
		Summary: "Run a DFlash block drafter, conditioned on the target's tapped hidden states, over a block loop's pass.",
		Doc: "The drafter (a GGUF of architecture `dflash`: `fc`, `enc.output_norm`, qwen3-style layers and " +
			"`output_norm`; the target's token embeddings and output head) runs in a block loop (`block: k`) over " +
			"its model, on a device of its own with a paged KV cache of its own. The pass that enters the carried " +
			"features writes, for each entered position, every layer's K and V from g = enc_norm(fc(features)) (K " +
			"normalised and rotated at the position). The block pass runs [last token, mask x k] at the next k+1 " +
			"positions through the drafter's layers, the block's rows attending to the written positions and to each " +
			"other in both directions; its logits at the k mask rows give the draft, cut to the sequence's " +
			"lookahead. graphs/dflash.yaml is llama.cpp's `--spec-type draft-dflash` with p_min 0. The graph's " +
			"model.forward must tap the drafter's target_layers (`taps`); the engine checks it at load.",
		NewDevice: func(p node.Params) (node.DeviceNode, error) {
			d := &DFlash{Alias: p.String("model")}
			if err := exec.CheckAlias(d.Alias); err != nil {
				return nil, err
			}
			return d, nil
		},
	})
}

// DFlash is the speculative.dflash node, the block drafter of a block
// loop's body. The engine binds it (BindTarget with the drafter's file,
// then Bind) before Record.
type DFlash struct {
	Alias string

	cfg      dflashConfig
	borrowed []string // the target's tensors the drafter reads
}

// dflashConfig is a DFlash drafter's shape, from its GGUF metadata.
type dflashConfig struct {
	Embed, Layers, Heads, KVHeads, HeadDim, RopeDims, BlockSize int
	RopeBase, NormEps                                           float32
	TargetLayers                                                []int
	Mask                                                        int32
	Output                                                      string // the target's output head
}

// TargetLayers reports the target layer inputs the drafter reads, which
// the graph's model.forward must tap.
func (d *DFlash) TargetLayers() []int { return d.cfg.TargetLayers }

// TargetWeights implements exec.WeightBorrower: the drafter uses the
// target's token embeddings and output head.
func (d *DFlash) TargetWeights() []string { return d.borrowed }

// EntersAtHidden implements exec.HiddenEntry: the features of position p
// are entered at p.
func (d *DFlash) EntersAtHidden() bool { return true }

// MaskToken implements exec.BlockDrafter: the drafter's
// tokenizer.ggml.mask_token_id.
func (d *DFlash) MaskToken() int32 { return d.cfg.Mask }

// MaxBlock implements exec.BlockDrafter: a block is the last token and
// at most block_size - 1 mask tokens.
func (d *DFlash) MaxBlock() int { return d.cfg.BlockSize - 1 }

// KVShape implements exec.KVShaper: every decoder layer.
func (d *DFlash) KVShape() (layers, kvDim int) { return d.cfg.Layers, d.cfg.KVHeads * d.cfg.HeadDim }

// BindTarget implements exec.TargetChecker: f must be a dflash GGUF of
// the target's width, with a mask token in the target's vocabulary, that
// uses the target's token embeddings and output head (TargetWeights).
func (d *DFlash) BindTarget(f, target *weights.File) error {
	c, err := readDFlashConfig(f)
	if err != nil {
		return err
	}
	embd, err := target.Tensor("token_embd.weight")
	if err != nil {
		return fmt.Errorf("speculative.dflash: target %s: %w", target.Path, err)
	}
	if embd.RowLen() != c.Embed {
		return fmt.Errorf("speculative.dflash: drafter %s is %d wide, the target %s %d", f.Path, c.Embed, target.Path, embd.RowLen())
	}
	if c.Mask < 0 || int(c.Mask) >= embd.Rows() {
		return fmt.Errorf("speculative.dflash: drafter %s: mask token %d outside the target's %d tokens", f.Path, c.Mask, embd.Rows())
	}
	c.Output = "output.weight"
	if _, err := target.Tensor(c.Output); err != nil {
		c.Output = "token_embd.weight" // tied embeddings
	}
	for _, name := range []string{"fc.weight", "enc.output_norm.weight", "output_norm.weight"} {
		if _, err := f.Tensor(name); err != nil {
			return fmt.Errorf("speculative.dflash: drafter %s: %w", f.Path, err)
		}
	}
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		if _, err := f.Tensor(name); err == nil {
			return fmt.Errorf("speculative.dflash: drafter %s has its own %s: only drafters that use the target's are supported", f.Path, name)
		}
	}
	d.cfg = c
	d.borrowed = slices.Compact([]string{"token_embd.weight", c.Output})
	return nil
}

// Bind implements exec.Binder: f is the drafter's file (with the
// borrowed target tensors), read by BindTarget.
func (d *DFlash) Bind(f *weights.File) error {
	if d.cfg.Embed == 0 {
		return fmt.Errorf("speculative.dflash: %s is not a checked dflash drafter (BindTarget first)", f.Path)
	}
	return nil
}

func readDFlashConfig(f *weights.File) (dflashConfig, error) {
	var c dflashConfig
	if a := f.Arch(); a != "dflash" {
		return c, fmt.Errorf("speculative.dflash: drafter %s is %q, not a dflash GGUF", f.Path, a)
	}
	m := &meta{f: f, arch: "dflash"}
	c.Embed, c.Layers = m.uint("embedding_length", -1), m.uint("block_count", -1)
	c.Heads, c.KVHeads, c.HeadDim = m.uint("attention.head_count", -1), m.uint("attention.head_count_kv", -1), m.uint("attention.key_length", -1)
	c.RopeDims, c.BlockSize = m.uint("rope.dimension_count", c.HeadDim), m.uint("block_size", 16)
	c.RopeBase, c.NormEps = m.float("rope.freq_base", 10000), m.float("attention.layer_norm_rms_epsilon", 1e-6)
	c.TargetLayers = m.ints("target_layers")
	mask, err := f.Uint("tokenizer.ggml.mask_token_id")
	if err != nil {
		m.errs = append(m.errs, err)
	}
	c.Mask = int32(mask)
	for _, key := range []string{"selector_top_k", "hyper_connection_count", "conv_kernel_size"} {
		if f.Has("dflash." + key) {
			m.errorf("dflash.%s: DFlash2/DSpark/DSV4 drafters are not supported", key)
		}
	}
	if c.Heads < 1 || c.KVHeads < 1 || c.Heads%c.KVHeads != 0 || c.HeadDim < 1 || c.Embed < 1 || c.Layers < 1 || c.BlockSize < 2 {
		m.errorf("dflash: %d layers, %d heads, %d kv heads of %d, width %d, block %d",
			c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.Embed, c.BlockSize)
	}
	if len(m.errs) > 0 {
		return c, fmt.Errorf("speculative.dflash: drafter %s: %w", f.Path, errors.Join(m.errs...))
	}
	return c, nil
}

func (d *DFlash) attnArgs(l int) tensor.AttentionArgs {
	c := d.cfg
	return tensor.AttentionArgs{Layer: l, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}
}

func (d *DFlash) rope() tensor.RoPEArgs {
	c := d.cfg
	return tensor.RoPEArgs{HeadDim: c.HeadDim, Dims: c.RopeDims, Base: c.RopeBase, Mode: tensor.RoPENeox}
}

// Record implements node.DeviceNode. With hidden, the features [T, L*E]
// of the rows at positions [T], it writes every layer's K and V of the
// rows from g = enc_norm(fc(features)) and outputs nothing. Without it, it
// runs blocks of tokens [T] at positions [T] through the drafter, each row
// attending to its sequence's written positions and to its whole block:
// "logits" [R, vocab] of the pass's "logit_rows" rows.
func (d *DFlash) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	c := d.cfg
	if c.Embed == 0 {
		return nil, errors.New("speculative.dflash: no drafter bound")
	}
	if f, ok := in["hidden"]; ok {
		if want := len(c.TargetLayers) * c.Embed; f.Cols() != want {
			return nil, fmt.Errorf("speculative.dflash: hidden rows of %d floats: the drafter reads %d (%d target layers of %d): tap its target_layers",
				f.Cols(), want, len(c.TargetLayers), c.Embed)
		}
		d.recordInject(b, f, in["positions"])
		return map[string]tensor.Tensor{}, b.Err()
	}
	return map[string]tensor.Tensor{"logits": d.recordBlock(b, in["tokens"], in["positions"])}, b.Err()
}

// recordInject writes, for rows of features f [T, L*E] at positions [T],
// every layer's K and V from g = enc_norm(fc(f)).
func (d *DFlash) recordInject(b *tensor.Builder, f, positions tensor.Tensor) {
	c := d.cfg
	g := b.RMSNorm(b.MatMul(f, b.Weight("fc.weight")), b.Weight("enc.output_norm.weight"), c.Embed, c.NormEps)
	for l := range c.Layers {
		w := func(s string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.weight", l, s)) }
		k := b.RoPE(b.RMSNorm(b.MatMul(g, w("attn_k")), w("attn_k_norm"), c.HeadDim, c.NormEps), positions, d.rope())
		v := b.MatMul(g, w("attn_v"))
		// The attention op writes k and v at the rows' positions; its
		// output (against g's own queries) is not used.
		b.Attention(b.MatMul(g, w("attn_q")), k, v, d.attnArgs(l))
	}
}

// recordBlock runs blocks of tokens [T] at positions [T] through the
// drafter: logits [R, vocab] of the "logit_rows" rows.
func (d *DFlash) recordBlock(b *tensor.Builder, tokens, positions tensor.Tensor) tensor.Tensor {
	c := d.cfg
	x := b.GetRows(b.Weight("token_embd.weight"), tokens) // the target's
	for l := range c.Layers {
		w := func(s string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.weight", l, s)) }
		h := b.RMSNorm(x, w("attn_norm"), c.Embed, c.NormEps)
		q := b.RoPE(b.RMSNorm(b.MatMul(h, w("attn_q")), w("attn_q_norm"), c.HeadDim, c.NormEps), positions, d.rope())
		k := b.RoPE(b.RMSNorm(b.MatMul(h, w("attn_k")), w("attn_k_norm"), c.HeadDim, c.NormEps), positions, d.rope())
		v := b.MatMul(h, w("attn_v"))
		a := d.attnArgs(l)
		a.NonCausal = true
		x = b.Add(x, b.MatMul(b.Attention(q, k, v, a), w("attn_output")))
		h = b.RMSNorm(x, w("ffn_norm"), c.Embed, c.NormEps)
		x = b.Add(x, b.MatMul(b.SwiGLU(b.MatMul(h, w("ffn_gate")), b.MatMul(h, w("ffn_up"))), w("ffn_down")))
	}
	rows := b.RMSNorm(b.SelectRows(x, b.Input(node.BindLogitRows, -1)), b.Weight("output_norm.weight"), c.Embed, c.NormEps)
	return b.MatMul(rows, b.Weight(c.Output))
}

var (
	_ node.DeviceNode    = (*DFlash)(nil)
	_ exec.TargetChecker = (*DFlash)(nil)
	_ exec.HiddenEntry   = (*DFlash)(nil)
	_ exec.BlockDrafter  = (*DFlash)(nil)
	_ exec.KVShaper      = (*DFlash)(nil)
)
