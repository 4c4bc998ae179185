package weights

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

func sampleSafeTensors() []*SafeTensor {
	return []*SafeTensor{
		{Name: "a", DType: "F32", Shape: []int{2, 3}, Data: f32Bytes(1, 2, 3, 4, 5, 6)},
		{Name: "b", DType: "BF16", Shape: []int{3}, Data: []byte{1, 2, 3, 4, 5, 6}},
		{Name: "scalar", DType: "I64", Shape: []int{}, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "empty", DType: "F16", Shape: []int{0, 4}, Data: []byte{}},
	}
}

func encodeSafetensors(t testing.TB, ts []*SafeTensor, meta map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, ts, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSafetensorsRoundTrip(t *testing.T) {
	ts := sampleSafeTensors()
	data := encodeSafetensors(t, ts, map[string]string{"format": "pt"})
	s, err := ParseSafetensors(data, "x.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	if s.DataOffset%32 != 0 {
		t.Errorf("data starts at %d, want a multiple of 32", s.DataOffset)
	}
	if diff := cmp.Diff(map[string]string{"format": "pt"}, s.Metadata); diff != "" {
		t.Errorf("metadata (-want +got):\n%s", diff)
	}
	// Ordered by offset: the order written; the empty tensor sits at the
	// end, at the same offset as nothing else.
	if diff := cmp.Diff(ts, s.Tensors, cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })); diff != "" {
		t.Errorf("tensors (-want +got):\n%s", diff)
	}
	if s.Tensor("b") != s.Tensors[1] || s.Tensor("nope") != nil {
		t.Error("Tensor lookup by name")
	}
}

// rawSafetensors is a file with the given JSON header and data bytes.
func rawSafetensors(header string, data int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, make([]byte, data)...)
}

func TestParseSafetensorsErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		data     []byte
		key, msg string
	}{
		{"a file shorter than the header length", []byte{1, 2, 3}, "header", "truncated"},
		{"a header longer than the file", rawSafetensors(`{}`, 0)[:9], "header", "truncated: header of 2 bytes but only 1"},
		{"a header that is not JSON", rawSafetensors(`{"a":`, 0), "header", "not a JSON object"},
		{"a header that is a list", rawSafetensors(`[]`, 0), "header", "not a JSON object"},
		{"text after the header", rawSafetensors(`{} {}`, 0), "header", "text after the JSON object"},
		{"an unknown dtype", rawSafetensors(`{"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}}`, 1), "w", `unknown dtype "Q4"`},
		{"an entry that is not a tensor", rawSafetensors(`{"w":3}`, 0), "w", "not a tensor entry"},
		{"one offset", rawSafetensors(`{"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}}`, 4), "w", "data_offsets has 1 values"},
		{"offsets past the data", rawSafetensors(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4), "w", "extend past the 4 bytes"},
		{"reversed offsets", rawSafetensors(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4), "w", "reversed"},
		{"a shape that does not fit the offsets", rawSafetensors(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8), "w", "needs 12 bytes"},
		{"a shape that overflows", rawSafetensors(`{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, 8), "w", "overflows"},
		{"a tensor inside another", rawSafetensors(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 16), "b", `data_offsets [4, 8] overlap tensor "a"'s [0, 16]`},
		{"two tensors on the same bytes", rawSafetensors(`{"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}}`, 8), "b", `overlap tensor "a"`},
		{"a tensor that runs into the next", rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12), "b", `data_offsets [4, 12] overlap tensor "a"'s [0, 8]`},
		{"bad metadata", rawSafetensors(`{"__metadata__":{"a":1}}`, 0), "__metadata__", "not an object of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSafetensors(tc.data, "m.safetensors")
			var he *HFError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want an *HFError", err)
			}
			if he.File != "m.safetensors" || he.Key != tc.key || !strings.Contains(he.Msg, tc.msg) {
				t.Errorf("err = %v, want file m.safetensors, key %q, message with %q", err, tc.key, tc.msg)
			}
		})
	}
}

// TestPermuteRoPERows checks the permutation on one head of 4 rows and two
// of 2: llama.cpp's row 2j+s is Hugging Face row s*D/2+j.
func TestPermuteRoPERows(t *testing.T) {
	rows := []byte{0, 1, 2, 3, 10, 11, 12, 13}
	if got, want := PermuteRoPERows(rows[:4], 1, 4, false), []byte{0, 2, 1, 3}; !bytes.Equal(got, want) {
		t.Errorf("one head of 4: %v, want %v", got, want)
	}
	if got, want := PermuteRoPERows(rows, 2, 4, false), []byte{0, 2, 1, 3, 10, 12, 11, 13}; !bytes.Equal(got, want) {
		t.Errorf("two heads of 4: %v, want %v", got, want)
	}
	two := []byte{1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8} // 8 rows of 2 bytes, heads of 8
	if got, want := PermuteRoPERows(two, 1, 8, false), []byte{1, 1, 5, 5, 2, 2, 6, 6, 3, 3, 7, 7, 4, 4, 8, 8}; !bytes.Equal(got, want) {
		t.Errorf("rows of 2 bytes: %v, want %v", got, want)
	}
	if back := PermuteRoPERows(PermuteRoPERows(two, 1, 8, false), 1, 8, true); !bytes.Equal(back, two) {
		t.Errorf("inverse: %v, want %v", back, two)
	}
}

// convertedModel writes the shared GGUF name as a Hugging Face folder.
func convertedModel(t *testing.T, name string, o HFWriteOptions) (*File, string) {
	t.Helper()
	f := openModel(t, name)
	dir := t.TempDir()
	if err := WriteHF(f, dir, o); err != nil {
		t.Fatal(err)
	}
	return f, dir
}

func openHF(t *testing.T, dir string, o HFOptions) *File {
	t.Helper()
	h, err := OpenHF(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// modelKeys are the metadata keys model.ReadConfig reads.
var modelKeys = []string{"block_count", "embedding_length", "attention.head_count", "attention.head_count_kv",
	"feed_forward_length", "context_length", "attention.layer_norm_rms_epsilon", "rope.freq_base"}

// TestHFRoundTrip converts shared models to Hugging Face folders and back:
// every tensor comes back with its name, shape, dtype and bytes, and the
// model metadata with its values.
func TestHFRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		model string
		o     HFWriteOptions
		load  bool
	}{
		{"tiny-qwen3-f32.gguf", HFWriteOptions{}, false},
		{"tiny-qwen3-f16.gguf", HFWriteOptions{}, true},
		{"tiny-llama-f32.gguf", HFWriteOptions{}, false},
		{"tiny-llama-f32.gguf", HFWriteOptions{ShardBytes: 300 << 10}, true},
		{"stories260K.gguf", HFWriteOptions{}, false},
	} {
		t.Run(tc.model, func(t *testing.T) {
			f := openModel(t, tc.model)
			dir := t.TempDir()
			err := WriteHF(f, dir, tc.o)
			if tc.model == "stories260K.gguf" {
				// A SentencePiece vocabulary has no tokenizer.json form here.
				if err == nil || !strings.Contains(err.Error(), `tokenizer.ggml.model "llama"`) {
					t.Fatalf("err = %v, want the SentencePiece vocabulary refused", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.o.ShardBytes > 0 {
				shards, _ := filepath.Glob(filepath.Join(dir, "model-*-of-*.safetensors"))
				if len(shards) < 2 {
					t.Errorf("%d shards, want several", len(shards))
				}
			}
			h := openHF(t, dir, HFOptions{Load: tc.load})
			if len(h.Tensors) != len(f.Tensors) {
				t.Errorf("%d tensors, want %d", len(h.Tensors), len(f.Tensors))
			}
			for _, want := range f.Tensors {
				got, err := h.Tensor(want.Name)
				if err != nil {
					t.Error(err)
					continue
				}
				if !cmp.Equal(got.Shape, want.Shape) || got.DType != want.DType || !bytes.Equal(got.Data, want.Data) {
					t.Errorf("tensor %s: %v %v, want %v %v (bytes equal: %v)", want.Name, got.Shape, got.DType, want.Shape, want.DType, bytes.Equal(got.Data, want.Data))
				}
			}
			arch := f.Arch()
			if h.Arch() != arch {
				t.Fatalf("architecture %q, want %q", h.Arch(), arch)
			}
			for _, k := range modelKeys {
				want, err1 := f.Float(arch + "." + k)
				got, err2 := h.Float(arch + "." + k)
				if err1 != nil || err2 != nil || got != want {
					t.Errorf("%s.%s = %v (%v), want %v (%v)", arch, k, got, err2, want, err1)
				}
			}
		})
	}
}

// TestHFWritesPermutedQK checks the folder holds llama's q and k in the
// Hugging Face order, not llama.cpp's.
func TestHFWritesPermutedQK(t *testing.T) {
	f, dir := convertedModel(t, "tiny-llama-f32.gguf", HFWriteOptions{})
	data, err := os.ReadFile(filepath.Join(dir, HFSafetensorsFile))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSafetensors(data, "m")
	if err != nil {
		t.Fatal(err)
	}
	q, _ := f.Tensor("blk.0.attn_q.weight") // 4 heads of 16 rows of 64 floats
	hf := s.Tensor("model.layers.0.self_attn.q_proj.weight")
	rb := 64 * 4
	// GGUF row 1 of head 2 (j 0, s 1) is Hugging Face row 2*16 + 8.
	if !bytes.Equal(q.Row(2*16+1), hf.Data[(2*16+8)*rb:(2*16+9)*rb]) {
		t.Error("q row 33 of the GGUF is not row 40 of the folder")
	}
	v, _ := f.Tensor("blk.0.attn_v.weight")
	if !bytes.Equal(v.Data, s.Tensor("model.layers.0.self_attn.v_proj.weight").Data) {
		t.Error("v is permuted")
	}
}

// editConfig rewrites config.json of dir with edit applied to its keys.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, HFConfigFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if data, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHFErrorsNameFileAndKey: malformed config.json, a missing shard, a
// tensor of the wrong shape and a truncated safetensors header.
func TestHFErrorsNameFileAndKey(t *testing.T) {
	_, base := convertedModel(t, "tiny-qwen3-f32.gguf", HFWriteOptions{})
	_, sharded := convertedModel(t, "tiny-qwen3-f32.gguf", HFWriteOptions{ShardBytes: 600 << 10})
	if shards, _ := filepath.Glob(filepath.Join(sharded, "model-*-of-00003.safetensors")); len(shards) != 3 {
		t.Fatalf("shards %v, want 3", shards)
	}
	copyDir := func(t *testing.T, from string) string {
		t.Helper()
		dir := t.TempDir()
		entries, err := os.ReadDir(from)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(from, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	// replaceTensor rewrites model.safetensors with tensor name swapped.
	replaceTensor := func(t *testing.T, dir string, name string, with *SafeTensor) {
		t.Helper()
		path := filepath.Join(dir, HFSafetensorsFile)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ParseSafetensors(data, path)
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range s.Tensors {
			if st.Name == name {
				s.Tensors[i] = with
			}
		}
		if err := os.WriteFile(path, encodeSafetensors(t, s.Tensors, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name      string
		from      string
		edit      func(t *testing.T, dir string)
		file, key string
		msg       string
	}{
		{"config.json that is not JSON", base, func(t *testing.T, dir string) {
			os.WriteFile(filepath.Join(dir, HFConfigFile), []byte(`{"hidden_size": 64,`), 0o644)
		}, HFConfigFile, "", "not a JSON object"},
		{"a key of the wrong type", base, func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["hidden_size"] = "64" })
		}, HFConfigFile, "hidden_size", "not an integer"},
		{"a missing key", base, func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { delete(m, "num_hidden_layers") })
		}, HFConfigFile, "num_hidden_layers", "missing"},
		{"an unsupported architecture", base, func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["model_type"] = "qwen3_moe" })
		}, HFConfigFile, "model_type", `"qwen3_moe" not supported`},
		{"an unsupported rope scaling", base, func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4} })
		}, HFConfigFile, "rope_scaling.rope_type", `"yarn" not supported`},
		{"a missing shard", sharded, func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors"))
		}, HFIndexFile, "", "shard model-00002-of-00003.safetensors: open"},
		{"a tensor the index places elsewhere", sharded, func(t *testing.T, dir string) {
			idx := filepath.Join(dir, HFIndexFile)
			data, _ := os.ReadFile(idx)
			data = bytes.Replace(data, []byte(`"model.embed_tokens.weight": "model-00001-of-00003.safetensors"`),
				[]byte(`"model.embed_tokens.weight": "model-00003-of-00003.safetensors"`), 1)
			os.WriteFile(idx, data, 0o644)
		}, "model-00001-of-00003.safetensors", "model.embed_tokens.weight", "places it in model-00003-of-00003.safetensors"},
		{"a tensor of the wrong shape", base, func(t *testing.T, dir string) {
			replaceTensor(t, dir, "model.layers.1.self_attn.k_proj.weight",
				&SafeTensor{Name: "model.layers.1.self_attn.k_proj.weight", DType: "F32", Shape: []int{32, 64}, Data: make([]byte, 32*64*4)})
		}, HFSafetensorsFile, "model.layers.1.self_attn.k_proj.weight", "shape [32 64], want [64 64] from config.json"},
		{"a tensor of an unsupported dtype", base, func(t *testing.T, dir string) {
			replaceTensor(t, dir, "model.norm.weight", &SafeTensor{Name: "model.norm.weight", DType: "F64", Shape: []int{64}, Data: make([]byte, 64*8)})
		}, HFSafetensorsFile, "model.norm.weight", "dtype F64 not supported"},
		{"a missing tensor", base, func(t *testing.T, dir string) {
			replaceTensor(t, dir, "model.layers.0.mlp.up_proj.weight", &SafeTensor{Name: "model.layers.0.self_attn.rotary_emb.inv_freq", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)})
		}, HFSafetensorsFile, "model.layers.0.mlp.up_proj.weight", "missing"},
		{"more layers than the files hold", base, func(t *testing.T, dir string) {
			editConfig(t, dir, func(m map[string]any) { m["num_hidden_layers"] = 1 << 24 })
		}, HFSafetensorsFile, "model.layers.2.input_layernorm.weight", "num_hidden_layers is 16777216, the files hold layers 0 to 1"},
		{"a truncated safetensors header", base, func(t *testing.T, dir string) {
			path := filepath.Join(dir, HFSafetensorsFile)
			data, _ := os.ReadFile(path)
			os.WriteFile(path, data[:100], 0o644)
		}, HFSafetensorsFile, "header", "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, tc.from)
			tc.edit(t, dir)
			_, err := OpenHF(dir, HFOptions{})
			t.Log(err)
			var he *HFError
			if !errors.As(err, &he) {
				t.Fatalf("err = %v, want an *HFError", err)
			}
			if he.File != filepath.Join(dir, tc.file) || (tc.key != "" && he.Key != tc.key) || !strings.Contains(he.Msg, tc.msg) {
				t.Errorf("err = %v\nwant file %s, key %q, message with %q", err, tc.file, tc.key, tc.msg)
			}
			if tc.key == "" && tc.file == HFIndexFile && he.Key == "" {
				t.Errorf("err = %v names no tensor of the missing shard", err)
			}
		})
	}
}

// TestHFLlama3RopeScaling checks rope_scaling type llama3 becomes
// rope_freqs.weight with the converter's factors (Llama 3.2's settings on a
// head of 64; the values from the converter's formula in float64).
func TestHFLlama3RopeScaling(t *testing.T) {
	_, dir := convertedModel(t, "tiny-llama-f32.gguf", HFWriteOptions{})
	editConfig(t, dir, func(m map[string]any) {
		m["hidden_size"], m["num_attention_heads"], m["num_key_value_heads"] = 64, 1, 1
		delete(m, "head_dim")
		m["rope_theta"] = 500000.0
		m["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
			"original_max_position_embeddings": 8192}
	})
	m, err := readHFConfig(filepath.Join(dir, HFConfigFile), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1.651329, 3.292262, 9.666729,
		32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32}
	if diff := cmp.Diff(want, m.ropeFactors, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) <= 1e-5*float64(b) })); diff != "" {
		t.Errorf("factors (-want +got):\n%s", diff)
	}

	// The tiny model itself (head 16, theta 1e4) gets them as a tensor.
	_, dir = convertedModel(t, "tiny-llama-f32.gguf", HFWriteOptions{})
	editConfig(t, dir, func(m map[string]any) { m["rope_scaling"] = map[string]any{"type": "llama3", "factor": 8.0} })
	h := openHF(t, dir, HFOptions{})
	rf, err := h.Tensor(hfRopeFreqs)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := rf.Float32s()
	if len(got) != 8 || got[0] != 1 || got[7] != 8 || rf.DType != tensor.F32 {
		t.Errorf("rope_freqs.weight = %v %v", rf.DType, got)
	}
}

// A config.json that declares 2^24 layers over files that hold two costs
// what the files hold: opening it allocates well under 300 MB (it once
// allocated per declared layer before naming the first missing tensor).
func TestHFDeclaredLayersAllocateNothing(t *testing.T) {
	_, dir := convertedModel(t, "tiny-qwen3-f32.gguf", HFWriteOptions{})
	editConfig(t, dir, func(m map[string]any) { m["num_hidden_layers"] = 1 << 24 })
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := OpenHF(dir, HFOptions{})
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("OpenHF succeeded with 2^24 layers declared and 2 held")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("OpenHF allocated %d MB before failing: %v", grew>>20, err)
	}
}

// Opening a folder that holds no config.json as a model says what is
// missing and what the folder holds, from Open and from Load.
func TestOpenAFolderWithoutConfigSaysSo(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model.gguf.part"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func(string) (*File, error){"Open": Open, "Load": Load} {
		_, err := open(dir)
		for _, want := range []string{"a folder without config.json", "it holds model.gguf.part"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s(folder) = %v, want an error saying %q", name, err, want)
			}
		}
	}
}
