package weights

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// writeHFQwen35 is WriteHF for a qwen35 GGUF: the text model of a
// Qwen3_5ForConditionalGeneration folder (config.json's text_config, the
// model.language_model.* tensors, the MTP block as mtp.*), inverting what
// openHFQwen35 and the converter do. Values the converter changes
// (1 + w norms, -exp(A_log)) are written as the float32 that the change
// maps back to the GGUF's value where one exists (else the nearest).
func writeHFQwen35(f *File, dir string, o HFWriteOptions) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("weights: write hf %s: %s", f.Path, fmt.Sprintf(format, args...))
	}
	const a = "qwen35"
	need := func(key string) (int, error) {
		v, err := f.Uint(a + "." + key)
		if err != nil {
			return 0, err
		}
		if v == 0 || v > 1<<24 {
			return 0, fail("%s.%s = %d out of range", a, key, v)
		}
		return int(v), nil
	}
	m := &hfQwen35{}
	var blocks, ropeDim, inner int
	for _, k := range []struct {
		key string
		dst *int
	}{{"block_count", &blocks}, {"embedding_length", &m.embed}, {"feed_forward_length", &m.ffn},
		{"attention.head_count", &m.heads}, {"attention.head_count_kv", &m.kvHeads}, {"attention.key_length", &m.headDim},
		{"rope.dimension_count", &ropeDim}, {"ssm.conv_kernel", &m.convK}, {"ssm.state_size", &m.kDim},
		{"ssm.group_count", &m.kHeads}, {"ssm.time_step_rank", &m.vHeads}, {"ssm.inner_size", &inner},
		{"full_attention_interval", &m.interval}} {
		v, err := need(k.key)
		if err != nil {
			return err
		}
		*k.dst = v
	}
	if f.Has(a + ".nextn_predict_layers") {
		v, err := f.Uint(a + ".nextn_predict_layers")
		if err != nil || v >= uint64(blocks) {
			return fail("%s.nextn_predict_layers %d: not fewer than the %d blocks", a, v, blocks)
		}
		m.mtp = int(v)
	}
	m.layers = blocks - m.mtp
	if inner%m.vHeads != 0 || m.vHeads%m.kHeads != 0 {
		return fail("%s.ssm.inner_size %d, time_step_rank %d, group_count %d: inconsistent", a, inner, m.vHeads, m.kHeads)
	}
	m.vDim = inner / m.vHeads
	sections, err := f.Int32s(a + ".rope.dimension_sections")
	if err != nil {
		return err
	}
	info, err := f.Info()
	if err != nil {
		return fail("%v", err)
	}
	if info.Vocab == 0 {
		return fail("no token_embd.weight")
	}
	layerTypes := make([]string, m.layers)
	for l := range layerTypes {
		layerTypes[l] = "full_attention"
		if m.linear(l) {
			layerTypes[l] = "linear_attention"
		}
	}
	_, err = f.Tensor("output.weight")
	tied := err != nil
	rope := map[string]any{"rope_type": "default", "mrope_interleaved": true, "mrope_section": sections,
		"partial_rotary_factor": json.Number(strconv.FormatFloat(float64(ropeDim)/float64(m.headDim), 'g', -1, 64))}
	text := map[string]any{
		"model_type": "qwen3_5_text", "hidden_act": "silu", "hidden_size": m.embed, "num_hidden_layers": m.layers,
		"intermediate_size": m.ffn, "num_attention_heads": m.heads, "num_key_value_heads": m.kvHeads, "head_dim": m.headDim,
		"linear_conv_kernel_dim": m.convK, "linear_key_head_dim": m.kDim, "linear_num_key_heads": m.kHeads,
		"linear_num_value_heads": m.vHeads, "linear_value_head_dim": m.vDim, "full_attention_interval": m.interval,
		"layer_types": layerTypes, "mtp_num_hidden_layers": m.mtp, "vocab_size": info.Vocab, "rope_parameters": rope,
		"tie_word_embeddings": tied,
	}
	if info.ContextLength > 0 {
		text["max_position_embeddings"] = info.ContextLength
	}
	for _, k := range []struct {
		key, hf string
		dst     map[string]any
	}{{"rope.freq_base", "rope_theta", rope}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps", text}} {
		if f.Has(a + "." + k.key) {
			v, err := f.Float(a + "." + k.key)
			if err != nil {
				return err
			}
			k.dst[k.hf] = json.Number(strconv.FormatFloat(v, 'g', -1, 32))
		}
	}
	cfg := map[string]any{"architectures": []string{hfQwen35Classes[0]}, "model_type": "qwen3_5",
		"text_config": text, "tie_word_embeddings": tied}

	hfNames := map[string]string{}
	for hf, n := range hfQwen35LayerNames {
		hfNames[n.gguf] = hf
	}
	for hf, g := range hfQwen35MTPNames {
		hfNames[g] = "mtp." + hf
	}
	var out []*SafeTensor
	for _, t := range f.Tensors {
		name, err := m.hfName(t.Name, hfNames)
		if err != nil {
			return fail("tensor %q: %v", t.Name, err)
		}
		st, err := m.hfTensor(t, name, o.DType)
		if err != nil {
			return fail("tensor %q: %v", t.Name, err)
		}
		out = append(out, st)
	}
	return writeHFFiles(f, dir, cfg, out, o.ShardBytes)
}

// hfName returns the Hugging Face name of the qwen35 GGUF tensor g
// (hfNames: GGUF names after "blk.N." to Hugging Face names after the
// layer's prefix).
func (m *hfQwen35) hfName(g string, hfNames map[string]string) (string, error) {
	switch g {
	case "token_embd.weight":
		return "model.language_model.embed_tokens.weight", nil
	case "output_norm.weight":
		return "model.language_model.norm.weight", nil
	case "output.weight":
		return "lm_head.weight", nil
	}
	var l int
	var suffix string
	if n, _ := fmt.Sscanf(g, "blk.%d.%s", &l, &suffix); n == 2 && l >= 0 && l < m.layers+m.mtp {
		if hf, ok := hfNames[suffix]; ok {
			switch {
			case strings.HasPrefix(hf, "mtp."):
				if l == m.layers {
					return hf, nil
				}
			case l >= m.layers:
				return fmt.Sprintf("mtp.layers.%d.%s", l-m.layers, hf), nil
			default:
				return fmt.Sprintf("model.language_model.layers.%d.%s", l, hf), nil
			}
		}
	}
	return "", fmt.Errorf("no Hugging Face name for qwen35")
}

// hfTensor is the qwen35 GGUF tensor t as the safetensors tensor name:
// m.tensor's transforms undone.
func (m *hfQwen35) hfTensor(t *Tensor, name string, dt tensor.DType) (*SafeTensor, error) {
	_, suffix, _ := strings.Cut(strings.TrimPrefix(t.Name, "blk."), ".")
	u := *t
	if r := m.vHeads / m.kHeads; r > 1 { // tiled K x R back to grouped: tiling R x K
		if t.DType.BlockSize() > 1 { // tileVHeads moves whole elements; a quantized block spans heads
			v, err := t.Float32s()
			if err != nil {
				return nil, err
			}
			u.DType, u.Data = tensor.F32, f32Data(v)
		}
		u.Data = m.tileVHeads(&u, suffix, r, m.kHeads)
	}
	plusOne := hfQwen35PlusOne(t.Name)
	if plusOne || suffix == "ssm_a" {
		v, err := u.Float32s()
		if err != nil {
			return nil, err
		}
		for i, g := range v {
			if plusOne {
				v[i] = invertF32(g, g-1, func(x float32) float32 { return x + 1 })
			} else {
				v[i] = invertF32(g, float32(math.Log(-float64(g))), func(x float32) float32 { return -float32(math.Exp(float64(x))) })
			}
		}
		u.DType, u.Data = tensor.F32, f32Data(v)
	}
	st, err := hfTensor(&u, name, dt)
	if err != nil {
		return nil, err
	}
	if suffix == "ssm_conv1d.weight" { // [C, K] unsqueezed to [C, 1, K]
		st.Shape = []int{st.Shape[0], 1, st.Shape[1]}
	}
	return st, nil
}

// invertF32 returns the float32 x near guess for which forward(x) == want,
// or the nearest one found within 16 ulps of guess.
func invertF32(want, guess float32, forward func(float32) float32) float32 {
	best, bestErr := guess, math.Inf(1)
	for _, dir := range []float32{float32(math.Inf(1)), float32(math.Inf(-1))} {
		x := guess
		for range 16 {
			if d := math.Abs(float64(forward(x)) - float64(want)); d < bestErr {
				best, bestErr = x, d
			}
			if bestErr == 0 {
				return best
			}
			x = math.Nextafter32(x, dir)
		}
	}
	return best
}
