package model

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "model.forward",
		Info:      node.Info{RecurrentState: true, ModelAlias: node.ModelParam("model")},
		Placement: node.Device,
		In: []node.Port{
			{Name: "tokens", Type: node.Tokens, Doc: "token ids of the step, one per row [T]"},
			{Name: "positions", Type: node.Positions, Doc: "position of each row in its sequence [T]"},
			{Name: "draft", Type: node.Draft, Optional: true,
				Doc: "drafts to verify: each sequence's drafts are fed after its last token, with logits for every draft row"},
			{Name: "images", Type: node.ImageEmbeddings, Optional: true,
				Doc: "the image rows' embeddings [T, E] (vision.encode's output): the rows of $in.images take them instead of their token embeddings, and every row turns by its M-RoPE position (a model with rope.dimension_sections)"},
		},
		Out: []node.Port{
			{Name: "logits", Type: node.Logits, Doc: "next-token logits of the rows that need a token [R, vocab]"},
			{Name: "hidden", Type: node.Hidden, Doc: "hidden states [R, E] of the sampled rows, or [T, E] of every row with hidden_rows: all (embeddings: the last prompt token's; an MTP head: every accepted token's)"},
			{Name: "taps", Type: node.Hidden, Doc: "the hidden states of the `taps` layer inputs, side by side, of every row [T, len(taps)*E] (what an EAGLE-3 drafter carried to the next step reads)"},
		},
		Params: []node.Param{
			{Name: "hidden_rows", Kind: node.Enum, Enum: []string{"sampled", "all"}, Default: "sampled",
				Doc: "rows of `hidden`: the rows that get logits, or every row of the step (what an MTP head carried to the next step reads)"},
			{Name: "hidden_norm", Kind: node.Enum, Enum: []string{"final", "none"}, Default: "final",
				Doc: "`hidden` after the final norm (Qwen3.5's MTP head reads it so) or before it (DeepSeek-style heads)"},
			{Name: "layers", Kind: node.String, Default: "all",
				Doc: "leading blocks to run: all, half (of the model's, at least 1) or a count N; fewer than all is an early exit (self-speculation's draft pass): those blocks, then the final norm and LM head, writing K/V into those layers only"},
			{Name: "model", Kind: node.String, Default: node.Target,
				Doc: "alias of the model to run (`--model ALIAS=FILE`): target, or, in a draft loop's body, a draft model of the target's vocabulary, which runs on a device of its own with a KV cache of its own"},
			{Name: "taps", Kind: node.String, Default: "",
				Doc: "comma-separated layer-input ids whose hidden states `taps` outputs, llama.cpp's convention: id l < layers is the input of block l (0: the token embeddings), id = layers the final norm's output; \"\" = none (an EAGLE-3 drafter's target_layers)"},
		},
		Summary: "Run the model (llama, qwen2, qwen3, qwen35) over the step's tokens, appending their K/V to the cache.",
		Doc: "Reads the architecture from the GGUF metadata and binds weights by name. " +
			"A hybrid model (qwen35) also keeps each sequence's recurrent state (its Gated DeltaNet layers' conv window " +
			"and delta-rule matrices) in a state slot beside the KV cache. " +
			"Only the rows the step samples from get the final norm and output projection. " +
			"With `draft` wired (a proposer's output), the engine feeds the step's tokens with each decoding " +
			"sequence's drafts inserted after its last token, so `logits` has 1 + drafts rows per sequence " +
			"(the input of `speculative.verify`).",
		NewDevice: func(p node.Params) (node.DeviceNode, error) {
			taps, err := ParseTaps(p.String("taps"))
			if err != nil {
				return nil, err
			}
			depth := p.String("layers")
			if _, err := resolveDepth(depth, 1<<20); err != nil {
				return nil, err
			}
			if depth != "all" && len(taps) > 0 {
				return nil, fmt.Errorf("taps %q need every layer: an early exit (layers: %s) has no taps", p.String("taps"), depth)
			}
			alias := p.String("model")
			if err := exec.CheckAlias(alias); err != nil {
				return nil, err
			}
			return &Forward{Alias: alias, AllRows: p.String("hidden_rows") == "all", PreNorm: p.String("hidden_norm") == "none", TapIDs: taps, Depth: depth}, nil
		},
	})
}

// Forward is the model.forward node. Bind must be called before Record,
// with the file of the model Alias names.
type Forward struct {
	Config *Config
	// Alias is the model the node runs (node.Target, or a draft model's
	// alias in a draft loop's body).
	Alias string
	// AllRows makes the hidden output every row's, [T, E], not only the
	// sampled rows' [R, E].
	AllRows bool
	// PreNorm makes the hidden output the last block's, before the final
	// norm.
	PreNorm bool
	// TapIDs are the layer-input ids of the taps output (ParseTaps).
	TapIDs []int
	// Depth is the layers param ("all", "half" or a count); Bind resolves
	// it into layers, the blocks Record runs.
	Depth  string
	layers int
}

// resolveDepth resolves a layers param for a model of n blocks: all, half
// (n/2, at least 1) or a count from 1 to n.
func resolveDepth(depth string, n int) (int, error) {
	switch depth {
	case "", "all":
		return n, nil
	case "half":
		return max(1, n/2), nil
	}
	k, err := strconv.Atoi(depth)
	if err != nil || k < 1 {
		return 0, fmt.Errorf("layers %q: want all, half or a block count of at least 1", depth)
	}
	if k > n {
		return 0, fmt.Errorf("layers %d: the model has %d blocks", k, n)
	}
	return k, nil
}

// Layers is the number of blocks Record runs (after Bind).
func (fw *Forward) Layers() int { return fw.layers }

// ParseTaps parses a taps param: comma-separated non-negative layer-input
// ids ("0,1,1"), "" for none.
func ParseTaps(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ids []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("taps %q: want comma-separated layer-input ids such as \"0,1,1\"", s)
		}
		ids = append(ids, n)
	}
	return ids, nil
}

// Taps reports the layer-input ids the taps output holds.
func (fw *Forward) Taps() []int { return fw.TapIDs }

// RowWidth implements exec.RowWidther (after Bind): hidden rows are E
// floats, taps rows E per tap.
func (fw *Forward) RowWidth(port string) int {
	switch port {
	case "hidden":
		return fw.Config.Embed
	case "taps":
		return len(fw.TapIDs) * fw.Config.Embed
	}
	return 0
}

// HiddenAllRows reports whether the hidden output has a row per fed
// token (hidden_rows: all) rather than per logit row.
func (fw *Forward) HiddenAllRows() bool { return fw.AllRows }

// Bind implements exec.Binder.
func (fw *Forward) Bind(f *weights.File) error {
	c, err := ReadConfig(f)
	if err != nil {
		return err
	}
	if fw.layers, err = resolveDepth(fw.Depth, c.Layers); err != nil {
		return fmt.Errorf("model.forward: %w", err)
	}
	fw.Config = c
	return nil
}

// KVShape implements exec.KVShaper: the layers that attend.
func (fw *Forward) KVShape() (layers, kvDim int) {
	return fw.Config.AttentionLayers(), fw.Config.KVDim()
}

// StateShape implements exec.StateShaper: a hybrid model's Gated DeltaNet
// layers each keep a conv window and delta-rule matrices per sequence;
// zero for a model without recurrent layers.
func (fw *Forward) StateShape() exec.StateLayout {
	c := fw.Config
	var l exec.StateLayout
	for layer := range c.Layers {
		if c.Recurrent(layer) {
			a := c.Hybrid.stateArgs(len(l.Conv))
			l.Conv = append(l.Conv, a.ConvStateFloats(c.Hybrid.convChannels()))
			l.Delta = append(l.Delta, a.DeltaStateFloats())
		}
	}
	return l
}

// Record implements node.DeviceNode: tokens [T], positions [T] -> logits [R, vocab],
// where R is the length of the step's "logit_rows" input. The draft input,
// if wired, shapes the step's feed (the engine's work) and is not recorded.
func (fw *Forward) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	if fw.Config == nil {
		return nil, errors.New("model.forward: no model bound")
	}
	c := fw.Config
	for _, id := range fw.TapIDs {
		if id > c.Layers {
			return nil, fmt.Errorf("model.forward: tap %d: the model has %d layers (ids 0..%d)", id, c.Layers, c.Layers)
		}
	}
	var img *imageRows
	if emb, ok := in["images"]; ok {
		var err error
		if img, err = imageInputs(b, c, emb); err != nil {
			return nil, fmt.Errorf("model.forward: %w", err)
		}
	}
	inputs := make([]tensor.Tensor, c.Layers) // [T, E] each: the input of each block
	x, err := recordTrunk(b, c, in["tokens"], in["positions"], img, fw.layers, func(l int, x tensor.Tensor) { inputs[l] = x })
	if err != nil {
		return nil, fmt.Errorf("model.forward: %w", err)
	}
	logitRows := b.Input(node.BindLogitRows, -1)
	norm := func(t tensor.Tensor) tensor.Tensor {
		return b.RMSNorm(t, b.Weight("output_norm.weight"), c.Embed, c.NormEps)
	}
	var hidden, sampled tensor.Tensor // hidden: the output; sampled: [R, E] after the final norm
	switch {
	case fw.AllRows && !fw.PreNorm:
		hidden = norm(x)
		sampled = b.SelectRows(hidden, logitRows) // norm is per row: the same values as norm(select)
	case fw.AllRows:
		hidden, sampled = x, norm(b.SelectRows(x, logitRows))
	case fw.PreNorm:
		hidden = b.SelectRows(x, logitRows)
		sampled = norm(hidden)
	default:
		sampled = norm(b.SelectRows(x, logitRows))
		hidden = sampled
	}
	logits := b.MatMul(sampled, b.Weight(c.OutputName)) // [R, vocab]
	out := map[string]tensor.Tensor{"logits": logits, "hidden": hidden}
	normed, haveNormed := hidden, fw.AllRows && !fw.PreNorm // norm(x) [T, E], recorded once when a tap needs it
	var taps tensor.Tensor
	for i, id := range fw.TapIDs {
		var t tensor.Tensor
		switch {
		case id < c.Layers:
			t = inputs[id]
		case haveNormed:
			t = normed
		default:
			normed, haveNormed = norm(x), true
			t = normed
		}
		if i == 0 {
			taps = t
		} else {
			taps = b.Concat(taps, t)
		}
	}
	if len(fw.TapIDs) > 0 {
		out["taps"] = taps // [T, len(taps)*E]
	}
	return out, b.Err()
}

// RecordLayers records the forward pass of c's first layers blocks (all of
// them for layers == c.Layers; fewer is the early exit of self-speculation)
// over tokens [T] at positions [T], then the final norm and output
// projection of the step's "logit_rows" input rows: logits [R, vocab]. The
// blocks write their K/V into KV layers 0..layers-1.
func RecordLayers(b *tensor.Builder, c *Config, tokens, positions tensor.Tensor, layers int) (tensor.Tensor, error) {
	hidden, err := RecordHidden(b, c, tokens, positions, layers)
	if err != nil {
		return tensor.Tensor{}, err
	}
	return b.MatMul(hidden, b.Weight(c.OutputName)), b.Err() // [R, vocab]
}

// RecordHidden is RecordLayers without the output projection: the final
// norm's hidden state of the step's "logit_rows" rows, [R, E].
func RecordHidden(b *tensor.Builder, c *Config, tokens, positions tensor.Tensor, layers int) (tensor.Tensor, error) {
	x, err := recordTrunk(b, c, tokens, positions, nil, layers, nil)
	if err != nil {
		return tensor.Tensor{}, err
	}
	rows := b.SelectRows(x, b.Input(node.BindLogitRows, -1)) // [R, E]
	rows = b.RMSNorm(rows, b.Weight("output_norm.weight"), c.Embed, c.NormEps)
	return rows, b.Err()
}

// imageRows are the inputs of a forward over rows some of which are image
// tokens: their embeddings (vision.encode's output), node.BindImages and
// the M-RoPE positions beside it.
type imageRows struct {
	mask       tensor.Tensor    // [T] i32: 1 on image rows
	embeddings tensor.Tensor    // [T, E] f32: the image rows' input embeddings
	mrope      [3]tensor.Tensor // [T] i32 each: t, h, w
}

// imageInputs declares the inputs beside the image rows' embeddings emb
// [T, E] for c, which must turn by M-RoPE sections: the step's image row
// mask (node.BindImages) and each row's M-RoPE components.
func imageInputs(b *tensor.Builder, c *Config, emb tensor.Tensor) (*imageRows, error) {
	if c.RopeSections == [4]int{} {
		return nil, fmt.Errorf("images: the %s model has no M-RoPE sections (%s.rope.dimension_sections), so it cannot place image tokens", c.Arch, c.Arch)
	}
	if c.Hybrid == nil {
		return nil, fmt.Errorf("images: only qwen35 models read images (this is %s)", c.Arch)
	}
	if emb.Cols() != c.Embed {
		return nil, fmt.Errorf("images: the image rows are %d wide, the %s model's embeddings %d", emb.Cols(), c.Arch, c.Embed)
	}
	img := &imageRows{mask: b.Input(node.BindImages, emb.Rows()), embeddings: emb}
	for i, name := range node.BindMRoPE {
		img.mrope[i] = b.Input(name, emb.Rows())
	}
	return img, b.Err()
}

// recordTrunk records c's first layers blocks over tokens [T] at
// positions [T]: the last block's output [T, E], before the final norm.
// With img, image rows take their embeddings from it and every row turns
// by its M-RoPE position. tap, when not nil, is told each block's input x
// [T, E].
func recordTrunk(b *tensor.Builder, c *Config, tokens, positions tensor.Tensor, img *imageRows, layers int, tap func(l int, x tensor.Tensor)) (tensor.Tensor, error) {
	if tap == nil {
		tap = func(int, tensor.Tensor) {}
	}
	if layers < 1 || layers > c.Layers {
		return tensor.Tensor{}, fmt.Errorf("layers %d out of range [1, %d]", layers, c.Layers)
	}
	rope := tensor.RoPEArgs{HeadDim: c.HeadDim, Dims: c.RopeDims, Base: c.RopeBase, Mode: c.RopeMode}
	attn := tensor.AttentionArgs{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))}

	x := b.GetRows(b.Weight("token_embd.weight"), tokens) // [T, E]
	if c.Hybrid != nil {
		turn := func(t tensor.Tensor) tensor.Tensor { return b.RoPE(t, positions, rope) }
		if img != nil {
			x = b.MixRows(x, img.embeddings, img.mask)
			mrope := rope
			mrope.Sections = c.RopeSections
			turn = func(t tensor.Tensor) tensor.Tensor {
				return b.MRoPE(t, img.mrope[0], img.mrope[1], img.mrope[2], mrope)
			}
		}
		x = recordHybridLayers(b, c, x, turn, layers, tap)
	}
	for l := 0; l < layers && c.Hybrid == nil; l++ {
		tap(l, x)
		w := func(name string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.weight", l, name)) }
		h := b.RMSNorm(x, w("attn_norm"), c.Embed, c.NormEps) // [T, E]
		q := b.MatMul(h, w("attn_q"))                         // [T, H*D]
		k := b.MatMul(h, w("attn_k"))                         // [T, KV*D]
		v := b.MatMul(h, w("attn_v"))                         // [T, KV*D]
		if c.QKVBias {
			bias := func(name string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.bias", l, name)) }
			q = b.AddRow(q, bias("attn_q"))
			k = b.AddRow(k, bias("attn_k"))
			v = b.AddRow(v, bias("attn_v"))
		}
		if c.QKNorm {
			q = b.RMSNorm(q, w("attn_q_norm"), c.HeadDim, c.NormEps)
			k = b.RMSNorm(k, w("attn_k_norm"), c.HeadDim, c.NormEps)
		}
		if c.RopeFreqs != "" {
			q = b.RoPEFactors(q, positions, b.Weight(c.RopeFreqs), rope)
			k = b.RoPEFactors(k, positions, b.Weight(c.RopeFreqs), rope)
		} else {
			q = b.RoPE(q, positions, rope)
			k = b.RoPE(k, positions, rope)
		}
		attn.Layer = l
		a := b.Attention(q, k, v, attn)             // [T, H*D]
		x = b.Add(x, b.MatMul(a, w("attn_output"))) // [T, E]
		h = b.RMSNorm(x, w("ffn_norm"), c.Embed, c.NormEps)
		x = b.Add(x, recordFFN(b, c, h, l)) // [T, E]
	}
	return x, b.Err()
}
