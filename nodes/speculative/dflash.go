package speculative

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.dflash",
		Placement: node.Host,
		In: []node.Port{historyPort,
			{Name: "features", Type: node.Hidden,
				Doc: "the target's hidden states at the drafter's target_layers, side by side, of the tokens the previous steps accepted: a value carried from model.forward's taps ($prev.NAME)"},
			priorPort},
		Out: []node.Port{draftOut},
		Params: []node.Param{
			{Name: "k", Kind: node.Int, Default: int64(3), Min: bound(1), Max: bound(16),
				Doc: "tokens drafted per sequence and step: the block is the last token and k mask tokens (at most the drafter's block_size - 1)"},
			{Name: "model", Kind: node.String, Default: "draft", Doc: "alias of the DFlash drafter GGUF (`--model ALIAS=FILE`, architecture dflash)"},
		},
		Summary: "Draft a block of tokens in one non-causal pass of a DFlash drafter, conditioned on the target's tapped hidden states.",
		Doc: "The drafter (a GGUF of architecture `dflash`: `fc`, `enc.output_norm`, qwen3-style layers and " +
			"`output_norm`; the target's token embeddings and output head) runs on a device of its own with a paged " +
			"KV cache of its own. Each step it first writes, for every position the carried features cover, each " +
			"layer's K and V from g = enc_norm(fc(features)) (K normalised and rotated at the position), then runs " +
			"the block [last token, mask x k] at the next k+1 positions through its layers, the block's rows " +
			"attending to the written positions and to each other in both directions; the argmax at the k mask rows " +
			"is the draft, cut to the sequence's lookahead. This is llama.cpp's `--spec-type draft-dflash` with " +
			"p_min 0. The graph's model.forward must tap the drafter's target_layers (`taps`).",
		New: func(p node.Params) (any, error) {
			d := &DFlash{K: p.Int("k"), Alias: p.String("model")}
			if err := exec.CheckAlias(d.Alias); err != nil {
				return nil, err
			}
			return d, nil
		},
	})
}

// DFlash is the speculative.dflash node. The engine binds it (BindModel,
// then Attach) before RunHost; RunHost and ReleaseSeq run on the engine's
// goroutine.
type DFlash struct {
	K     int
	Alias string

	heads
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

// DraftTokens implements exec.Proposer.
func (d *DFlash) DraftTokens() int { return d.K }

// ModelAlias implements exec.ModelBinder.
func (d *DFlash) ModelAlias() string { return d.Alias }

// BindModel implements exec.ModelBinder: f must be a dflash GGUF of the
// target's width and vocabulary. k is cut to the block size - 1.
func (d *DFlash) BindModel(f, target *weights.File) (layers, kvDim int, err error) {
	c, err := readDFlashConfig(f)
	if err != nil {
		return 0, 0, err
	}
	embd, err := target.Tensor("token_embd.weight")
	if err != nil {
		return 0, 0, fmt.Errorf("speculative.dflash: target %s: %w", target.Path, err)
	}
	if embd.RowLen() != c.Embed {
		return 0, 0, fmt.Errorf("speculative.dflash: drafter %s is %d wide, the target %s %d", f.Path, c.Embed, target.Path, embd.RowLen())
	}
	if c.Mask < 0 || int(c.Mask) >= embd.Rows() {
		return 0, 0, fmt.Errorf("speculative.dflash: drafter %s: mask token %d outside the target's %d tokens", f.Path, c.Mask, embd.Rows())
	}
	c.Output = "output.weight"
	if _, err := target.Tensor(c.Output); err != nil {
		c.Output = "token_embd.weight" // tied embeddings
	}
	for _, name := range []string{"fc.weight", "enc.output_norm.weight", "output_norm.weight"} {
		if _, err := f.Tensor(name); err != nil {
			return 0, 0, fmt.Errorf("speculative.dflash: drafter %s: %w", f.Path, err)
		}
	}
	for _, name := range []string{"token_embd.weight", "output.weight"} {
		if _, err := f.Tensor(name); err == nil {
			return 0, 0, fmt.Errorf("speculative.dflash: drafter %s has its own %s: only drafters that use the target's are supported", f.Path, name)
		}
	}
	d.K = min(d.K, c.BlockSize-1)
	d.cfg = c
	d.borrowed = slices.Compact([]string{"token_embd.weight", c.Output})
	return c.Layers, c.KVHeads * c.HeadDim, nil
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

// recordInject writes, for rows of features "df_features" [T, L*E] at
// positions [T], every layer's K and V from g = enc_norm(fc(features)).
// Output: g [T, E].
func (d *DFlash) recordInject(b *tensor.Builder, tokens, positions tensor.Tensor) (map[string]tensor.Tensor, error) {
	c := d.cfg
	f := b.InputF32("df_features", tokens.Rows(), len(c.TargetLayers)*c.Embed)
	g := b.RMSNorm(b.MatMul(f, b.Weight("fc.weight")), b.Weight("enc.output_norm.weight"), c.Embed, c.NormEps)
	out := map[string]tensor.Tensor{"g": g}
	for l := range c.Layers {
		w := func(s string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.weight", l, s)) }
		k := b.RoPE(b.RMSNorm(b.MatMul(g, w("attn_k")), w("attn_k_norm"), c.HeadDim, c.NormEps), positions, d.rope())
		v := b.MatMul(g, w("attn_v"))
		// The attention op writes k and v at the rows' positions; its
		// output (against g's own queries) is not used.
		out[fmt.Sprintf("kv%d", l)] = b.Attention(b.MatMul(g, w("attn_q")), k, v, d.attnArgs(l))
	}
	return out, b.Err()
}

// recordBlock runs blocks of tokens [T] at positions [T] through the
// drafter, each row attending to its sequence's written positions and to
// its whole block: "logits" [R, vocab] of the "logit_rows" rows.
func (d *DFlash) recordBlock(b *tensor.Builder, tokens, positions tensor.Tensor) (map[string]tensor.Tensor, error) {
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
	rows := b.RMSNorm(b.SelectRows(x, b.Input("logit_rows", -1)), b.Weight("output_norm.weight"), c.Embed, c.NormEps)
	return map[string]tensor.Tensor{"logits": b.MatMul(rows, b.Weight(d.cfg.Output))}, b.Err()
}

// RunHost implements exec.HostNode: history, features (and prior) ->
// draft. Every sequence first writes the positions its carried features
// cover, also when it does not draft; a drafting sequence whose written
// positions reach its last token then runs its block.
func (d *DFlash) RunHost(hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.dflash", hc, in)
	if err != nil {
		return nil, err
	}
	feats, ok := in["features"].([]exec.Carried)
	if !ok || len(feats) != len(hc.Rows) {
		return nil, fmt.Errorf("speculative.dflash: features input is %T for %d sequences", in["features"], len(hc.Rows))
	}
	if d.dev == nil {
		return nil, errors.New("speculative.dflash: needs a bound model and its device")
	}
	out := make(exec.Drafts, len(hc.Rows))
	need := keepPrior(hc, prior, out)
	width := len(d.cfg.TargetLayers) * d.cfg.Embed
	inject := &exec.Batch{Floats: map[string][]float32{}}
	block := &exec.Batch{}
	var drafting []int // rows of hc.Rows with a block, in block order
	var fs []float32
	for i, row := range hc.Rows {
		c, h := feats[i], history[i]
		s := d.seq(row.ID)
		if c.Rows() > 0 {
			if c.Width != width {
				return nil, fmt.Errorf("speculative.dflash: sequence %d: features of %d floats, the drafter reads %d (%d target layers of %d): tap its target_layers",
					row.ID, c.Width, width, len(d.cfg.TargetLayers), d.cfg.Embed)
			}
			if c.Pos == 0 {
				s.lost = false
			}
			if c.Pos > s.next {
				s.lost = true // positions the drafter never saw
			}
		}
		written := s.next // positions [0, written) hold features once this step's are in
		if c.Rows() > 0 {
			written = c.Pos + c.Rows()
		}
		drafts := need[i] && !s.lost && written == len(h)-1 // the block starts at the last token
		n := c.Pos + c.Rows()
		if drafts {
			n = len(h) + d.K
		}
		if s.lost || (c.Rows() == 0 && !drafts) {
			continue
		}
		if !d.grow(hc, s, n) {
			continue
		}
		if c.Rows() > 0 {
			inject.Tables = append(inject.Tables, s.kv.Blocks)
			for j := range c.Rows() {
				inject.Tokens = append(inject.Tokens, h[c.Pos+j])
				inject.Positions = append(inject.Positions, int32(c.Pos+j))
				inject.RowSeq = append(inject.RowSeq, int32(len(inject.Tables)-1))
			}
			inject.LogitRows = append(inject.LogitRows, int32(len(inject.Tokens)-1))
			fs = append(fs, c.Data...)
			s.next = c.Pos + c.Rows()
		}
		if drafts {
			block.Tables = append(block.Tables, s.kv.Blocks)
			for j := range d.K + 1 {
				t := d.cfg.Mask
				if j == 0 {
					t = h[len(h)-1]
				} else {
					block.LogitRows = append(block.LogitRows, int32(len(block.Tokens)))
				}
				block.Tokens = append(block.Tokens, t)
				block.Positions = append(block.Positions, int32(len(h)-1+j))
				block.RowSeq = append(block.RowSeq, int32(len(block.Tables)-1))
			}
			drafting = append(drafting, i)
		}
	}
	if len(inject.Tokens) > 0 {
		inject.Floats["df_features"] = fs
		if _, err := d.dev.Pass(hc.Ctx, "speculative.dflash/inject", d.recordInject, inject, "g"); err != nil {
			return nil, fmt.Errorf("speculative.dflash: %w", err)
		}
	}
	if len(drafting) == 0 {
		return map[string]any{"draft": out}, nil
	}
	res, err := d.dev.Pass(hc.Ctx, "speculative.dflash/block", d.recordBlock, block, "logits")
	if err != nil {
		return nil, fmt.Errorf("speculative.dflash: %w", err)
	}
	logits := res["logits"]
	for j, i := range drafting {
		want := min(d.K, hc.Rows[i].Lookahead) // the block is always k long; llama.cpp cuts the draft after
		for m := range want {
			out[i] = append(out[i], sample.Argmax(logits.Row(j*d.K+m)))
		}
	}
	return map[string]any{"draft": out}, nil
}
