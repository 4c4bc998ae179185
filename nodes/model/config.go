// Package model implements model.forward: the llama-family transformer
// forward pass (llama, qwen2, qwen3), written once against tensor.Builder so every
// backend runs the same recorded ops.
package model

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Config is the architecture read from GGUF metadata.
type Config struct {
	Arch     string
	Layers   int
	Embed    int // n_embd: residual width
	Heads    int
	KVHeads  int
	HeadDim  int
	FFN      int
	Vocab    int
	Context  int
	RopeBase float32
	RopeDims int
	RopeMode tensor.RoPEMode
	NormEps  float32
	QKNorm   bool // per-head RMSNorm of q and k (qwen3)
	// QKVBias: each layer adds attn_q.bias, attn_k.bias and attn_v.bias to
	// its q, k and v projections (qwen2 always; llama when the file has them).
	QKVBias bool
	// RopeFreqs names the rope frequency factors (RopeDims/2 f32 values
	// dividing each pair's angle: llama-3 rope scaling), "" for none.
	RopeFreqs string
	// RopeSections are the rotated pairs per M-RoPE position component
	// (t, h, w, e) of a model that reads images (rope.dimension_sections
	// of qwen35); all zero for a model with one position per token.
	RopeSections [4]int
	OutputName   string // "output.weight", or "token_embd.weight" when tied
	// Hybrid is the Gated DeltaNet shape of a hybrid model (qwen35); nil
	// for a transformer whose every layer attends.
	Hybrid *Hybrid
	// MoE is the mixture-of-experts FFN of qwen3moe and qwen35moe; nil for
	// a dense FFN.
	MoE *MoE
}

// MoE describes a mixture-of-experts FFN: Experts SwiGLU experts of width
// FFN, Used of them per token (softmax router, top-Used probabilities
// renormalised), plus, when SharedFFN > 0, a shared expert of that width
// scaled by sigmoid(ffn_gate_inp_shexp . x).
type MoE struct {
	Experts, Used, FFN, SharedFFN int
}

// Hybrid describes a Qwen3.5-style hybrid model: layer l is a Gated
// DeltaNet (recurrent) layer unless (l+1) % FullAttentionInterval == 0,
// when it is gated full attention.
type Hybrid struct {
	FullAttentionInterval int
	ConvKernel            int // short conv taps
	KeyHeads              int // ssm.group_count
	ValueHeads            int // ssm.time_step_rank
	HeadDim               int // ssm.state_size: key and value head width
	// NextN is the number of MTP (next-n prediction) blocks after the
	// trunk's layers (nextn_predict_layers); the trunk does not run them.
	NextN int
}

// Recurrent reports whether layer l is a Gated DeltaNet layer.
func (c *Config) Recurrent(l int) bool {
	return c.Hybrid != nil && (l+1)%c.Hybrid.FullAttentionInterval != 0
}

// AttentionLayers is the number of layers that attend (and own KV); a
// layer's KV layer is the number of attending layers before it.
func (c *Config) AttentionLayers() int {
	n := 0
	for l := range c.Layers {
		if !c.Recurrent(l) {
			n++
		}
	}
	return n
}

// convChannels is the width of a Gated DeltaNet layer's qkv projection
// (q and k: KeyHeads heads, v: ValueHeads heads, all of HeadDim).
func (h *Hybrid) convChannels() int { return (2*h.KeyHeads + h.ValueHeads) * h.HeadDim }

// stateArgs is the shape of a Gated DeltaNet layer's stateful ops at state
// layer sl.
func (h *Hybrid) stateArgs(sl int) tensor.StateArgs {
	return tensor.StateArgs{Layer: sl, Kernel: h.ConvKernel, KeyHeads: h.KeyHeads, KeyDim: h.HeadDim,
		ValueHeads: h.ValueHeads, ValueDim: h.HeadDim, Scale: float32(1 / math.Sqrt(float64(h.HeadDim)))}
}

// RopeFreqsName is the tensor of rope frequency factors llama.cpp's
// converter writes for llama-3 rope scaling.
const RopeFreqsName = "rope_freqs.weight"

// KVDim is the width of one layer's K (or V) row: KVHeads*HeadDim.
func (c *Config) KVDim() int { return c.KVHeads * c.HeadDim }

// archSpec is what an architecture decides before the keys every
// architecture shares are read; the per-layer tensors it binds follow from
// it (checkTensors, ffnTensors, hybridTensors).
type archSpec struct {
	rope    tensor.RoPEMode
	qkNorm  bool                     // per-head RMSNorm of q and k
	qkvBias func(*weights.File) bool // whether the layers add q/k/v biases; nil: never
	hybrid  bool                     // Gated DeltaNet layers beside gated attention (Hybrid)
	moe     bool                     // mixture-of-experts FFNs (MoE)
}

func always(*weights.File) bool { return true }

// architectures is the registry of supported general.architecture values.
var architectures = map[string]archSpec{
	"llama":    {rope: tensor.RoPENorm, qkvBias: func(f *weights.File) bool { return hasTensor(f, "blk.0.attn_q.bias") }},
	"qwen2":    {rope: tensor.RoPENeox, qkvBias: always},
	"qwen3":    {rope: tensor.RoPENeox, qkNorm: true},
	"qwen3moe": {rope: tensor.RoPENeox, qkNorm: true, moe: true},
	// IMROPE with one position for every section (text): NEOX pairs.
	"qwen35":    {rope: tensor.RoPENeox, qkNorm: true, hybrid: true},
	"qwen35moe": {rope: tensor.RoPENeox, qkNorm: true, hybrid: true, moe: true},
}

// ReadConfig reads and validates the model architecture of f.
func ReadConfig(f *weights.File) (*Config, error) {
	arch := f.Arch()
	c := &Config{Arch: arch}
	spec, ok := architectures[arch]
	switch {
	case arch == "":
		return nil, errors.New("model: general.architecture missing")
	case !ok:
		return nil, fmt.Errorf("model: architecture %q not supported (have %s)", arch, strings.Join(slices.Sorted(maps.Keys(architectures)), ", "))
	}
	c.RopeMode, c.QKNorm = spec.rope, spec.qkNorm
	if spec.qkvBias != nil {
		c.QKVBias = spec.qkvBias(f)
	}
	if spec.hybrid {
		c.Hybrid = &Hybrid{}
	}
	if spec.moe {
		c.MoE = &MoE{}
	}
	var errs []error
	req := func(key string) int {
		v, err := f.Uint(arch + "." + key)
		if err != nil {
			errs = append(errs, err)
			return 0
		}
		if v == 0 || v > 1<<24 {
			errs = append(errs, fmt.Errorf("%s.%s = %d out of range", arch, key, v))
			return 0
		}
		return int(v)
	}
	opt := func(key string, def int) int {
		if !f.Has(arch + "." + key) {
			return def
		}
		return req(key)
	}
	optF := func(key string, def float64) float32 {
		if !f.Has(arch + "." + key) {
			return float32(def)
		}
		v, err := f.Float(arch + "." + key)
		if err != nil {
			errs = append(errs, err)
		}
		if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("%s.%s = %g out of range", arch, key, v))
		}
		return float32(v)
	}
	c.Layers = req("block_count")
	c.Embed = req("embedding_length")
	c.Heads = req("attention.head_count")
	c.KVHeads = opt("attention.head_count_kv", c.Heads)
	if c.MoE == nil {
		c.FFN = req("feed_forward_length")
	} else {
		c.MoE.Experts = req("expert_count")
		c.MoE.Used = req("expert_used_count")
		c.MoE.FFN = req("expert_feed_forward_length")
		c.MoE.SharedFFN = opt("expert_shared_feed_forward_length", 0)
		if len(errs) == 0 && c.MoE.Used > c.MoE.Experts {
			errs = append(errs, fmt.Errorf("%s.expert_used_count %d > expert_count %d", arch, c.MoE.Used, c.MoE.Experts))
		}
	}
	switch n, err := f.ContextLength(); {
	case errors.Is(err, weights.ErrNotFound):
		c.Context = 2048
	case err != nil:
		errs = append(errs, err)
	case n == 0 || n > weights.MaxContextLength:
		errs = append(errs, fmt.Errorf("%s.context_length = %d out of range", arch, n))
	default:
		c.Context = n
	}
	c.NormEps = optF("attention.layer_norm_rms_epsilon", 1e-5)
	c.RopeBase = optF("rope.freq_base", 10000)
	if h := c.Hybrid; h != nil {
		h.FullAttentionInterval = req("full_attention_interval")
		h.ConvKernel = req("ssm.conv_kernel")
		h.KeyHeads = req("ssm.group_count")
		h.ValueHeads = req("ssm.time_step_rank")
		h.HeadDim = req("ssm.state_size")
		if f.Has(arch + ".nextn_predict_layers") {
			v, err := f.Uint(arch + ".nextn_predict_layers")
			if err != nil || int(v) >= c.Layers {
				errs = append(errs, fmt.Errorf("%s.nextn_predict_layers = %d: not fewer than the %d blocks (%v)", arch, v, c.Layers, err))
			}
			h.NextN = int(v)
		}
		if inner := req("ssm.inner_size"); len(errs) == 0 && inner != h.ValueHeads*h.HeadDim {
			errs = append(errs, fmt.Errorf("%s.ssm.inner_size = %d, want time_step_rank %d x state_size %d", arch, inner, h.ValueHeads, h.HeadDim))
		}
		if len(errs) == 0 && h.ValueHeads%h.KeyHeads != 0 {
			errs = append(errs, fmt.Errorf("%s.ssm.time_step_rank %d is not a multiple of ssm.group_count %d", arch, h.ValueHeads, h.KeyHeads))
		}
		c.Layers -= h.NextN // the trunk; the MTP blocks are loaded, not run
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if c.Embed%c.Heads != 0 && !f.Has(arch+".attention.key_length") {
		return nil, fmt.Errorf("model: embedding_length %d not divisible by %d heads", c.Embed, c.Heads)
	}
	c.HeadDim = opt("attention.key_length", c.Embed/c.Heads)
	c.RopeDims = opt("rope.dimension_count", c.HeadDim)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if c.KVHeads > c.Heads || c.Heads%c.KVHeads != 0 {
		return nil, fmt.Errorf("model: %d heads not a multiple of %d kv heads", c.Heads, c.KVHeads)
	}
	if c.RopeDims > c.HeadDim || c.RopeDims%2 != 0 {
		return nil, fmt.Errorf("model: rope.dimension_count %d invalid for head dim %d", c.RopeDims, c.HeadDim)
	}
	if key := arch + ".rope.dimension_sections"; f.Has(key) {
		s, err := f.Int32s(key)
		if err != nil || len(s) != len(c.RopeSections) {
			return nil, fmt.Errorf("model: %s: want %d section sizes (%v)", key, len(c.RopeSections), err)
		}
		for i, v := range s {
			c.RopeSections[i] = int(v)
		}
	}
	if v, err := f.Uint(arch + ".attention.value_length"); err == nil && int(v) != c.HeadDim {
		return nil, fmt.Errorf("model: value_length %d != key_length %d not supported", v, c.HeadDim)
	}
	if key := arch + ".rope.scaling.type"; f.Has(key) {
		// llama-3 scaling comes as rope_freqs.weight; the types that scale
		// positions or extend the context (linear, yarn) are not computed.
		if typ, err := f.String(key); err != nil || (typ != "none" && typ != "") {
			return nil, fmt.Errorf("model: %s %q not supported (rope scaling is supported as %s)", key, typ, RopeFreqsName)
		}
	}
	if arch == "llama" && hasTensor(f, RopeFreqsName) {
		c.RopeFreqs = RopeFreqsName
	}
	emb, err := f.Tensor("token_embd.weight")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	c.Vocab = emb.Rows()
	c.OutputName = "output.weight"
	if _, err := f.Tensor("output.weight"); err != nil {
		c.OutputName = "token_embd.weight"
	}
	return c, c.checkTensors(f)
}

// checkTensors verifies every weight the forward pass binds exists with the
// expected shape, so a bad file fails at load, not mid-request.
func (c *Config) checkTensors(f *weights.File) error {
	qd := c.Heads * c.HeadDim
	want := map[string][2]int{ // name -> [rows, cols]
		"token_embd.weight":  {c.Vocab, c.Embed},
		"output_norm.weight": {1, c.Embed},
		c.OutputName:         {c.Vocab, c.Embed},
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if c.Hybrid != nil {
			c.hybridTensors(want, l)
			continue
		}
		want[p+"attn_norm.weight"] = [2]int{1, c.Embed}
		want[p+"attn_q.weight"] = [2]int{qd, c.Embed}
		want[p+"attn_k.weight"] = [2]int{c.KVDim(), c.Embed}
		want[p+"attn_v.weight"] = [2]int{c.KVDim(), c.Embed}
		want[p+"attn_output.weight"] = [2]int{c.Embed, qd}
		want[p+"ffn_norm.weight"] = [2]int{1, c.Embed}
		c.ffnTensors(want, l)
		if c.QKNorm {
			want[p+"attn_q_norm.weight"] = [2]int{1, c.HeadDim}
			want[p+"attn_k_norm.weight"] = [2]int{1, c.HeadDim}
		}
		if c.QKVBias {
			want[p+"attn_q.bias"] = [2]int{1, qd}
			want[p+"attn_k.bias"] = [2]int{1, c.KVDim()}
			want[p+"attn_v.bias"] = [2]int{1, c.KVDim()}
		}
	}
	if c.RopeFreqs != "" {
		want[c.RopeFreqs] = [2]int{1, c.RopeDims / 2}
	}
	var errs []error
	var missing []error
	for _, name := range slices.Sorted(maps.Keys(want)) {
		shape := want[name]
		t, err := f.Tensor(name)
		if err != nil {
			missing = append(missing, err)
			continue
		}
		if t.Rows() != shape[0] || t.RowLen() != shape[1] {
			errs = append(errs, fmt.Errorf("tensor %q: shape [%d,%d], want [%d,%d]", name, t.Rows(), t.RowLen(), shape[0], shape[1]))
		}
		if shape[0] == 1 && t.DType != tensor.F32 {
			errs = append(errs, fmt.Errorf("tensor %q: vector weights (norms, biases, rope factors) must be f32, got %v", name, t.DType))
		}
	}
	if len(missing) > maxMissingListed {
		// One line with a count, not one per tensor: a block_count far past
		// the blocks present would otherwise print thousands.
		errs = append([]error{fmt.Errorf("%d of the %d tensors the model needs are missing (%d layers declared by %s.block_count; the file has tensors for %d), e.g. %w",
			len(missing), len(want), c.Layers, c.Arch, blocksPresent(f), missing[0])}, errs...)
	} else {
		errs = append(missing, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// ffnTensors adds layer l's FFN tensors to want: dense, or the experts
// stacked [Experts*FFN, E] (down [Experts*E, FFN]), the router and the
// shared expert.
func (c *Config) ffnTensors(want map[string][2]int, l int) {
	p := fmt.Sprintf("blk.%d.", l)
	m := c.MoE
	if m == nil {
		want[p+"ffn_gate.weight"] = [2]int{c.FFN, c.Embed}
		want[p+"ffn_up.weight"] = [2]int{c.FFN, c.Embed}
		want[p+"ffn_down.weight"] = [2]int{c.Embed, c.FFN}
		return
	}
	want[p+"ffn_gate_inp.weight"] = [2]int{m.Experts, c.Embed}
	want[p+"ffn_gate_exps.weight"] = [2]int{m.Experts * m.FFN, c.Embed}
	want[p+"ffn_up_exps.weight"] = [2]int{m.Experts * m.FFN, c.Embed}
	want[p+"ffn_down_exps.weight"] = [2]int{m.Experts * c.Embed, m.FFN}
	if m.SharedFFN > 0 {
		want[p+"ffn_gate_inp_shexp.weight"] = [2]int{1, c.Embed}
		want[p+"ffn_gate_shexp.weight"] = [2]int{m.SharedFFN, c.Embed}
		want[p+"ffn_up_shexp.weight"] = [2]int{m.SharedFFN, c.Embed}
		want[p+"ffn_down_shexp.weight"] = [2]int{c.Embed, m.SharedFFN}
	}
}

// hybridTensors adds layer l's tensors of a qwen35 model to want.
func (c *Config) hybridTensors(want map[string][2]int, l int) {
	h, p := c.Hybrid, fmt.Sprintf("blk.%d.", l)
	want[p+"attn_norm.weight"] = [2]int{1, c.Embed}
	want[p+"post_attention_norm.weight"] = [2]int{1, c.Embed}
	c.ffnTensors(want, l)
	if c.Recurrent(l) {
		inner := h.ValueHeads * h.HeadDim
		want[p+"attn_qkv.weight"] = [2]int{h.convChannels(), c.Embed}
		want[p+"attn_gate.weight"] = [2]int{inner, c.Embed}
		want[p+"ssm_conv1d.weight"] = [2]int{h.convChannels(), h.ConvKernel}
		want[p+"ssm_dt.bias"] = [2]int{1, h.ValueHeads}
		want[p+"ssm_a"] = [2]int{1, h.ValueHeads}
		want[p+"ssm_beta.weight"] = [2]int{h.ValueHeads, c.Embed}
		want[p+"ssm_alpha.weight"] = [2]int{h.ValueHeads, c.Embed}
		want[p+"ssm_norm.weight"] = [2]int{1, h.HeadDim}
		want[p+"ssm_out.weight"] = [2]int{c.Embed, inner}
		return
	}
	qd := c.Heads * c.HeadDim
	want[p+"attn_q.weight"] = [2]int{2 * qd, c.Embed} // per head [q | gate]
	want[p+"attn_k.weight"] = [2]int{c.KVDim(), c.Embed}
	want[p+"attn_v.weight"] = [2]int{c.KVDim(), c.Embed}
	want[p+"attn_output.weight"] = [2]int{c.Embed, qd}
	want[p+"attn_q_norm.weight"] = [2]int{1, c.HeadDim}
	want[p+"attn_k_norm.weight"] = [2]int{1, c.HeadDim}
}

// maxMissingListed is the most missing tensors an error lists one by one.
const maxMissingListed = 12

// hasTensor reports whether f holds a tensor called name.
func hasTensor(f *weights.File, name string) bool {
	_, err := f.Tensor(name)
	return err == nil
}

// blocksPresent counts the layers blk.0, blk.1, ... that have at least one
// tensor in f, up to the first absent one.
func blocksPresent(f *weights.File) int {
	has := map[int]bool{}
	for _, t := range f.Tensors {
		var l int
		if _, err := fmt.Sscanf(t.Name, "blk.%d.", &l); err == nil {
			has[l] = true
		}
	}
	n := 0
	for has[n] {
		n++
	}
	return n
}
