package weights

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestHFQwen35RoundTrip writes the Qwen3.5 hybrids as Hugging Face folders
// (inverting the converter: 1 + w norms, -exp(A_log), the squeezed conv1d,
// value heads tiled back to grouped) and opens them: every tensor comes
// back with its name, shape, dtype and bytes, and every qwen35.* key with
// its value, the MTP block (tiny-qwen35-f32's layer 8) included.
func TestHFQwen35RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		model string
		o     HFWriteOptions
	}{
		{"tiny-qwen35-f32.gguf", HFWriteOptions{}},
		{"tiny-qwen35-f16.gguf", HFWriteOptions{}},
		{"tiny-qwen35-vl-f32.gguf", HFWriteOptions{ShardBytes: 200 << 10}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			f, dir := convertedModel(t, tc.model, tc.o)
			h := openHF(t, dir, HFOptions{})
			if len(h.Tensors) != len(f.Tensors) {
				t.Errorf("%d tensors, want %d", len(h.Tensors), len(f.Tensors))
			}
			for _, want := range f.Tensors {
				got, err := h.Tensor(want.Name)
				if err != nil {
					t.Error(err)
					continue
				}
				if strings.HasSuffix(want.Name, ".ssm_a") && cmp.Equal(got.Shape, want.Shape) && got.DType == want.DType {
					// -exp(x) over float32 x does not reach every float32:
					// the folder's A_log gives the nearest, within an ulp.
					if d := maxULPs(floats(got.Data), floats(want.Data)); d > 1 {
						t.Errorf("tensor %s: %d ulps from the GGUF's", want.Name, d)
					}
					continue
				}
				if !cmp.Equal(got.Shape, want.Shape) || got.DType != want.DType || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("tensor %s: %v %v, want %v %v (bytes equal: %v)", want.Name, got.Shape, got.DType, want.Shape, want.DType, bytes.Equal(got.Data, want.Data))
				}
			}
			seen := 0
			for _, kv := range f.KV {
				if !strings.HasPrefix(kv.Key, "qwen35.") {
					continue
				}
				seen++
				got, ok := h.Lookup(kv.Key)
				if !ok {
					t.Errorf("%s missing", kv.Key)
				} else if diff := cmp.Diff(kv.Value.Any(), got.Any()); diff != "" {
					t.Errorf("%s (-GGUF +folder):\n%s", kv.Key, diff)
				}
			}
			// The folder's layer_types becomes the converter's recurrent
			// layer flags, which the GGUFs were written without.
			for _, kv := range h.KV {
				if strings.HasPrefix(kv.Key, "qwen35.") && !f.Has(kv.Key) && kv.Key != "qwen35.attention.recurrent_layers" {
					t.Errorf("folder has %s, the GGUF does not", kv.Key)
				}
			}
			if seen < 19 {
				t.Errorf("%d qwen35 keys compared, want the model's 19 or more", seen)
			}
			rec, ok := h.Lookup("qwen35.attention.recurrent_layers")
			blocks, _ := f.Uint("qwen35.block_count")
			if !ok || rec.Len() != int(blocks) {
				t.Errorf("recurrent_layers %v, want %d flags", rec.Any(), blocks)
			}
		})
	}
}

// TestHFQwen35FolderLayout checks the folder holds the Hugging Face forms,
// element by element against the converter's formulas: value heads grouped
// by key head (the GGUF's tiled head j*K+k is the folder's k*R+j), A_log
// with -exp(A_log) the GGUF's ssm_a, norms as w with 1+w the GGUF's, the
// conv1d as [channels, 1, kernel], the MTP block under mtp.*.
func TestHFQwen35FolderLayout(t *testing.T) {
	f, dir := convertedModel(t, "tiny-qwen35-f32.gguf", HFWriteOptions{})
	data, err := os.ReadFile(filepath.Join(dir, HFSafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSafetensors(data, "m")
	if err != nil {
		t.Fatal(err)
	}
	const kHeads, vHeads, kDim, vDim, embed = 2, 4, 16, 16, 64 // tiny-qwen35's
	r := vHeads / kHeads
	get := func(hf, gguf string) ([]float32, []float32, *SafeTensor) {
		t.Helper()
		st := s.Tensor(hf)
		g, err := f.Tensor(gguf)
		if st == nil || err != nil {
			t.Fatalf("%s: %v / %s: %v", hf, st, gguf, err)
		}
		return floats(st.Data), floats(g.Data), st
	}
	hf, g, _ := get("model.language_model.layers.0.linear_attn.in_proj_qkv.weight", "blk.0.attn_qkv.weight")
	for k := range kHeads {
		for j := range r {
			for d := range vDim {
				hr := 2*kHeads*kDim + (k*r+j)*vDim + d
				gr := 2*kHeads*kDim + (j*kHeads+k)*vDim + d
				if !slices32Equal(hf[hr*embed:(hr+1)*embed], g[gr*embed:(gr+1)*embed]) {
					t.Fatalf("qkv value row (key head %d, value %d, %d): folder row %d is not GGUF row %d", k, j, d, hr, gr)
				}
			}
		}
	}
	hf, g, _ = get("model.language_model.layers.0.linear_attn.A_log", "blk.0.ssm_a")
	for k := range kHeads {
		for j := range r {
			if got, want := -float32(math.Exp(float64(hf[k*r+j]))), g[j*kHeads+k]; maxULPs([]float32{got}, []float32{want}) > 1 {
				t.Errorf("A_log head (%d, %d): -exp = %v, want %v", k, j, got, want)
			}
		}
	}
	hf, g, _ = get("model.language_model.layers.0.input_layernorm.weight", "blk.0.attn_norm.weight")
	for i := range hf {
		if hf[i]+1 != g[i] {
			t.Fatalf("input_layernorm[%d] %v + 1 != %v", i, hf[i], g[i])
		}
	}
	hf, g, _ = get("model.language_model.layers.0.linear_attn.norm.weight", "blk.0.ssm_norm.weight")
	if !slices32Equal(hf, g) {
		t.Error("the Gated DeltaNet output norm is changed (the converter keeps it)")
	}
	if _, _, st := get("model.language_model.layers.0.linear_attn.conv1d.weight", "blk.0.ssm_conv1d.weight"); !cmp.Equal(st.Shape, []int{2*kHeads*kDim + vHeads*vDim, 1, 4}) {
		t.Errorf("conv1d shape %v, want [channels 1 kernel]", st.Shape)
	}
	hf, g, _ = get("mtp.pre_fc_norm_embedding.weight", "blk.8.nextn.enorm.weight")
	for i := range hf {
		if hf[i]+1 != g[i] {
			t.Fatalf("mtp enorm[%d] %v + 1 != %v", i, hf[i], g[i])
		}
	}
	get("mtp.layers.0.self_attn.q_proj.weight", "blk.8.attn_q.weight")
	get("mtp.fc.weight", "blk.8.nextn.eh_proj.weight")
}

// floats decodes little-endian float32s.
func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// maxULPs is the largest distance in float32 steps between a[i] and b[i]
// (same sign).
func maxULPs(a, b []float32) int64 {
	var most int64
	for i := range a {
		d := int64(math.Float32bits(a[i])) - int64(math.Float32bits(b[i]))
		most = max(most, d, -d)
	}
	return most
}

func slices32Equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestHFQwen35ErrorsNameFileAndKey: malformed Qwen3.5 folders fail naming
// the file and the key or tensor.
func TestHFQwen35ErrorsNameFileAndKey(t *testing.T) {
	_, base := convertedModel(t, "tiny-qwen35-f32.gguf", HFWriteOptions{})
	text := func(edit func(map[string]any)) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { edit(m["text_config"].(map[string]any)) })
		}
	}
	for _, tc := range []struct {
		name      string
		edit      func(t *testing.T, dir string)
		file, key string
		msg       string
	}{
		{"no text_config object", func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["text_config"] = 3 })
		}, HFConfigFile, "text_config", "not an object"},
		{"another class", func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["architectures"] = []string{"Qwen3NextForCausalLM"} })
		}, HFConfigFile, "architectures", `"Qwen3NextForCausalLM" not supported`},
		{"no linear_num_value_heads", text(func(m map[string]any) { delete(m, "linear_num_value_heads") }),
			HFConfigFile, "text_config.linear_num_value_heads", "missing"},
		{"value heads not a multiple of key heads", text(func(m map[string]any) { m["linear_num_value_heads"] = 3 }),
			HFConfigFile, "text_config.linear_num_value_heads", "not a multiple of linear_num_key_heads 2"},
		{"layer_types against the interval", text(func(m map[string]any) {
			m["layer_types"] = []string{"full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention", "linear_attention", "linear_attention", "full_attention"}
		}), HFConfigFile, "text_config.layer_types", `layer 0 is "full_attention"`},
		{"a rope type", text(func(m map[string]any) { m["rope_parameters"].(map[string]any)["rope_type"] = "yarn" }),
			HFConfigFile, "text_config.rope_parameters.rope_type", `"yarn" not supported`},
		{"a bad mrope_section", text(func(m map[string]any) { m["rope_parameters"].(map[string]any)["mrope_section"] = "2,1,1" }),
			HFConfigFile, "text_config.rope_parameters.mrope_section", "not a list of non-negative integers"},
		{"a partial rotary factor of nothing", text(func(m map[string]any) { m["rope_parameters"].(map[string]any)["partial_rotary_factor"] = 0.01 }),
			HFConfigFile, "text_config.rope_parameters.partial_rotary_factor", "gives 0 rotary dimensions"},
		{"more MTP layers than the files hold", text(func(m map[string]any) { m["mtp_num_hidden_layers"] = 2 }),
			HFSafetensorsFile, "mtp.layers.1.input_layernorm.weight", "missing: the model needs it (text_config.mtp_num_hidden_layers is 2)"},
		{"a negative MTP layer count", text(func(m map[string]any) { m["mtp_num_hidden_layers"] = -1 }),
			HFConfigFile, "text_config.mtp_num_hidden_layers", "not an integer in [0, 65536]"},
		{"a Gated DeltaNet tensor in an attention layer", text(func(m map[string]any) { m["full_attention_interval"] = 1; delete(m, "layer_types") }),
			HFSafetensorsFile, "model.language_model.layers.0.linear_attn.in_proj_qkv.weight", "layer 0 is a gated-attention layer (text_config.full_attention_interval 1)"},
		{"more layers than the files hold", text(func(m map[string]any) { m["num_hidden_layers"] = 1 << 20; delete(m, "layer_types") }),
			HFSafetensorsFile, "model.language_model.layers.8.input_layernorm.weight", "text_config.num_hidden_layers is 1048576, the files hold layers 0 to 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				data, _ := os.ReadFile(filepath.Join(base, e.Name()))
				os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644)
			}
			tc.edit(t, dir)
			_, err := OpenHF(dir, HFOptions{})
			var he *HFError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want an *HFError", err)
			}
			if he.File != filepath.Join(dir, tc.file) || he.Key != tc.key || !strings.Contains(he.Msg, tc.msg) {
				t.Errorf("err = %v\nwant file %s, key %q, message with %q", err, tc.file, tc.key, tc.msg)
			}
		})
	}
}

// TestHFQwen35QuantizedRoundTrip writes a Q8_0 qwen35 GGUF (every 2-D
// weight whose rows hold whole blocks quantized, as llama-quantize --pure
// does) as a Hugging Face folder: the value heads are reordered after
// dequantizing (a Q8_0 block spans heads), so every tensor comes back as
// the F32 values of the GGUF's.
func TestHFQwen35QuantizedRoundTrip(t *testing.T) {
	src := openModel(t, "tiny-qwen35-f32.gguf")
	var ts []*Tensor
	quantized := 0
	for _, s := range src.Tensors {
		q := *s
		if len(s.Shape) == 2 && s.Shape[0]%tensor.Q8_0.BlockSize() == 0 {
			v, err := s.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			n, err := tensor.Q8_0.RowBytes(len(v))
			if err != nil {
				t.Fatal(err)
			}
			q.DType, q.Data = tensor.Q8_0, make([]byte, n)
			if err := tensor.QuantizeRow(tensor.Q8_0, v, q.Data); err != nil {
				t.Fatal(err)
			}
			quantized++
		}
		ts = append(ts, &q)
	}
	path := filepath.Join(t.TempDir(), "tq8.gguf")
	var buf bytes.Buffer
	if err := Write(&buf, 3, src.KV, ts); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	if err := WriteHF(f, dir, HFWriteOptions{}); err != nil {
		t.Fatal(err)
	}
	h := openHF(t, dir, HFOptions{})
	if len(h.Tensors) != len(f.Tensors) || quantized < 10 {
		t.Errorf("%d tensors (%d quantized), want %d", len(h.Tensors), quantized, len(f.Tensors))
	}
	for _, want := range f.Tensors {
		got, err := h.Tensor(want.Name)
		if err != nil {
			t.Error(err)
			continue
		}
		wv, err := want.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		ulps := int64(0)
		if strings.HasSuffix(want.Name, ".ssm_a") {
			ulps = 1 // -exp(A_log) reaches the nearest float32, within an ulp
		}
		if !cmp.Equal(got.Shape, want.Shape) || got.DType != tensor.F32 || len(got.Data) != 4*len(wv) || maxULPs(floats(got.Data), wv) > ulps {
			t.Errorf("tensor %s (%v): %v %v, want %v F32 with the GGUF's values", want.Name, want.DType, got.Shape, got.DType, want.Shape)
		}
	}
}

// TestHFQwen35ConfigAsTheConverterReads checks config.json is read as the
// converter reads it: rope_parameters.rope_theta before a text_config
// rope_theta, and keys text_config lacks taken from the top level.
func TestHFQwen35ConfigAsTheConverterReads(t *testing.T) {
	f, dir := convertedModel(t, "tiny-qwen35-f32.gguf", HFWriteOptions{})
	want, err := f.Float("qwen35.rope.freq_base")
	if err != nil {
		t.Fatal(err)
	}
	heads, err := f.Uint("qwen35.ssm.time_step_rank")
	if err != nil {
		t.Fatal(err)
	}
	editConfig(t, dir, func(m map[string]any) {
		text := m["text_config"].(map[string]any)
		text["rope_theta"] = 1234.0
		m["linear_num_value_heads"] = text["linear_num_value_heads"]
		delete(text, "linear_num_value_heads")
	})
	h := openHF(t, dir, HFOptions{})
	if got, err := h.Float("qwen35.rope.freq_base"); err != nil || got != want {
		t.Errorf("rope.freq_base = %v, %v; want rope_parameters' %v", got, err, want)
	}
	if got, err := h.Uint("qwen35.ssm.time_step_rank"); err != nil || got != heads {
		t.Errorf("ssm.time_step_rank = %v, %v; want the top level's %v", got, err, heads)
	}
}
