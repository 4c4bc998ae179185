package instance_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// greedy opens model and returns the prompt ids of text and 32 greedy ids.
func greedy(t *testing.T, model, text string, mmap bool) (prompt, ids []int32, chat string) {
	t.Helper()
	in, err := instance.Open(instance.Options{Model: model, Threads: 2, Mmap: mmap})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	prompt = in.Tokenizer.Encode(text, true, true)
	res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 32}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if in.Chat != nil {
		chat = in.Chat.Source()
	}
	return prompt, res.IDs, chat
}

// writeGGUF writes kvs and ts as a GGUF file in a temporary directory.
func writeGGUF(t *testing.T, kvs []weights.KV, ts []*weights.Tensor) string {
	t.Helper()
	var buf bytes.Buffer
	if err := weights.Write(&buf, 3, kvs, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// qwen2Model edits tiny-qwen3 into a qwen2 GGUF: no q/k norms, and QKV
// biases large enough to change what the model writes.
func qwen2Model(t *testing.T) string {
	t.Helper()
	f, err := weights.Open(sharedModel(t, "tiny-qwen3-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kvs []weights.KV
	for _, kv := range f.KV {
		if kv.Key == "general.architecture" {
			kv.Value = weights.Str("qwen2")
		}
		if rest, ok := strings.CutPrefix(kv.Key, "qwen3."); ok {
			kv.Key = "qwen2." + rest
		}
		kvs = append(kvs, kv)
	}
	var ts []*weights.Tensor
	for _, tt := range f.Tensors {
		if !strings.HasSuffix(tt.Name, "attn_q_norm.weight") && !strings.HasSuffix(tt.Name, "attn_k_norm.weight") {
			ts = append(ts, &weights.Tensor{Name: tt.Name, Shape: tt.Shape, DType: tt.DType, Data: slices.Clone(tt.Data)})
		}
	}
	for l := range 2 {
		for _, b := range []struct {
			name string
			n    int
		}{{"attn_q", 128}, {"attn_k", 64}, {"attn_v", 64}} {
			data := make([]byte, 4*b.n)
			for i := range b.n {
				binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32((i*7+l*3)%11-5)/4))
			}
			ts = append(ts, &weights.Tensor{Name: "blk." + string(rune('0'+l)) + "." + b.name + ".bias", Shape: []int{b.n}, DType: tensor.F32, Data: data})
		}
	}
	return writeGGUF(t, kvs, ts)
}

// TestHFFolderGreedyMatchesGGUF converts GGUF models to Hugging Face folders
// and checks that the folder tokenizes the same prompt to the same ids,
// carries the same chat template, and decodes the same 32 greedy tokens.
func TestHFFolderGreedyMatchesGGUF(t *testing.T) {
	const text = "<|im_start|>user\nOnce upon a time, in a quiet village by the sea,<|im_end|>"
	for _, tc := range []struct {
		name  string
		model func(t *testing.T) string
		o     weights.HFWriteOptions
		mmap  bool
	}{
		{"tiny-qwen3-f32", func(t *testing.T) string { return sharedModel(t, "tiny-qwen3-f32.gguf") }, weights.HFWriteOptions{}, false},
		{"tiny-llama-f32", func(t *testing.T) string { return sharedModel(t, "tiny-llama-f32.gguf") }, weights.HFWriteOptions{}, false},
		{"tiny-llama-f32 sharded and mapped", func(t *testing.T) string { return sharedModel(t, "tiny-llama-f32.gguf") },
			weights.HFWriteOptions{ShardBytes: 256 << 10}, true},
		{"tiny-qwen3-f16", func(t *testing.T) string { return sharedModel(t, "tiny-qwen3-f16.gguf") }, weights.HFWriteOptions{}, false},
		{"qwen2 with QKV biases", qwen2Model, weights.HFWriteOptions{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.model(t)
			f, err := weights.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "hf")
			err = weights.WriteHF(f, dir, tc.o)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			wantPrompt, want, wantChat := greedy(t, path, text, false)
			gotPrompt, got, gotChat := greedy(t, dir, text, tc.mmap)
			if len(want) != 32 {
				t.Fatalf("GGUF generated %d tokens", len(want))
			}
			if diff := cmp.Diff(wantPrompt, gotPrompt); diff != "" {
				t.Errorf("prompt ids (-gguf +hf):\n%s", diff)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("greedy ids (-gguf +hf):\n%s", diff)
			}
			if wantChat == "" || gotChat != wantChat {
				t.Errorf("chat template %q, want %q", gotChat, wantChat)
			}
		})
	}
}

// TestQwen2BiasesChangeTheOutput guards the qwen2 case above against
// biases that have no effect: without them the model writes other tokens.
func TestQwen2BiasesChangeTheOutput(t *testing.T) {
	path := qwen2Model(t)
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []*weights.Tensor
	for _, tt := range f.Tensors {
		c := *tt
		if strings.HasSuffix(tt.Name, ".bias") {
			c.Data = make([]byte, len(tt.Data))
		}
		ts = append(ts, &c)
	}
	zero := writeGGUF(t, f.KV, ts)
	f.Close()
	_, with, _ := greedy(t, path, "Once upon a time", false)
	_, without, _ := greedy(t, zero, "Once upon a time", false)
	if slices.Equal(with, without) {
		t.Errorf("zero biases give the same tokens %v", with)
	}
}

// TestHFFolderWithoutTowerOpensTextOnly opens a Qwen3_5ForConditionalGeneration
// folder whose config.json has a vision_config but which holds no
// model.visual.* tensors (with and without preprocessor_config.json): the
// text model loads without a tower.
func TestHFFolderWithoutTowerOpensTextOnly(t *testing.T) {
	for _, withPre := range []bool{false, true} {
		t.Run(fmt.Sprintf("preprocessor=%v", withPre), func(t *testing.T) {
			f, err := weights.Open(sharedModel(t, "tiny-qwen35-vl-f32.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(t.TempDir(), "hf")
			err = weights.WriteHF(f, dir, weights.HFWriteOptions{})
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, weights.HFConfigFile)
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var config map[string]any
			if err := json.Unmarshal(data, &config); err != nil {
				t.Fatal(err)
			}
			config["vision_config"] = map[string]any{"hidden_size": 4, "depth": 1, "num_heads": 1, "patch_size": 2}
			if data, err = json.Marshal(config); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if withPre {
				if err := os.WriteFile(filepath.Join(dir, weights.HFPreprocessorFile), []byte(`{"image_mean":[0.5,0.5,0.5],"image_std":[0.5,0.5,0.5]}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			in, err := instance.Open(instance.Options{Model: dir, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if in.Vision != nil {
				t.Error("opened a vision tower the folder does not hold")
			}
		})
	}
}
