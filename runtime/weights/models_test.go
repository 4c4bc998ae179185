package weights

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

var modelFiles = []string{
	"stories260K.gguf",
	"tiny-qwen3-f32.gguf",
	"tiny-qwen3-f16.gguf",
	"tiny-qwen3-q8_0.gguf",
	"tiny-llama-f32.gguf",
	"llama-2-tiny-random.gguf",
}

// TestModelsLoad opens every shared model, dequantizes every tensor, checks
// the values are finite, and checks that Write reproduces the file byte for
// byte (the files come from llama.cpp's and our generator's writers, which
// pack tensors the same way).
func TestModelsLoad(t *testing.T) {
	for _, name := range modelFiles {
		t.Run(name, func(t *testing.T) {
			f := openModel(t, name)
			if f.Version != 3 || f.Alignment != 32 {
				t.Errorf("version %d alignment %d", f.Version, f.Alignment)
			}
			for _, tt := range f.Tensors {
				xs, err := tt.Float32s()
				if err != nil {
					t.Fatal(err)
				}
				for i, x := range xs {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("tensor %s element %d is %g", tt.Name, i, x)
					}
				}
			}
			var buf bytes.Buffer
			if err := Write(&buf, f.Version, f.KV, f.Tensors); err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(f.Path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), orig) {
				t.Errorf("re-encoded file differs: %d bytes, original %d", buf.Len(), len(orig))
			}
		})
	}
}

func TestStories260K(t *testing.T) {
	f := openModel(t, "stories260K.gguf")
	type facts struct {
		Arch                          string
		Blocks, Embd, Ctx, Heads, KV  uint64
		Eps                           float64
		NTokens, NScores, NTypes      int
		FirstTokens                   []string
		PadID                         int64
		Model                         string
		EmbdShape                     []int
		EmbdDType                     tensor.DType
		NTensors                      int
		QShape, DownShape, NormShape  []int
		HasFreqBase, OutputIsEmbdCopy bool
	}
	must := func(v uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		t.Fatal(err)
	}
	scores, err := f.Float32s("tokenizer.ggml.scores")
	if err != nil {
		t.Fatal(err)
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		t.Fatal(err)
	}
	eps, err := f.Float("llama.attention.layer_norm_rms_epsilon")
	if err != nil {
		t.Fatal(err)
	}
	pad, err := f.Int("tokenizer.ggml.padding_token_id")
	if err != nil {
		t.Fatal(err)
	}
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		t.Fatal(err)
	}
	shapeOf := func(name string) ([]int, tensor.DType) {
		tt, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		return tt.Shape, tt.DType
	}
	embdShape, embdDType := shapeOf("token_embd.weight")
	qShape, _ := shapeOf("blk.0.attn_q.weight")
	downShape, _ := shapeOf("blk.4.ffn_down.weight")
	normShape, _ := shapeOf("output_norm.weight")
	embd, _ := f.Tensor("token_embd.weight")
	out, _ := f.Tensor("output.weight")

	got := facts{
		Arch:             f.Arch(),
		Blocks:           must(f.Uint("llama.block_count")),
		Embd:             must(f.Uint("llama.embedding_length")),
		Ctx:              must(f.Uint("llama.context_length")),
		Heads:            must(f.Uint("llama.attention.head_count")),
		KV:               must(f.Uint("llama.attention.head_count_kv")),
		Eps:              float64(float32(eps)),
		NTokens:          len(tokens),
		NScores:          len(scores),
		NTypes:           len(types),
		FirstTokens:      tokens[:4],
		PadID:            pad,
		Model:            model,
		EmbdShape:        embdShape,
		EmbdDType:        embdDType,
		NTensors:         len(f.Tensors),
		QShape:           qShape,
		DownShape:        downShape,
		NormShape:        normShape,
		HasFreqBase:      f.Has("llama.rope.freq_base"),
		OutputIsEmbdCopy: bytes.Equal(embd.Data, out.Data),
	}
	want := facts{
		Arch: "llama", Blocks: 5, Embd: 64, Ctx: 512, Heads: 8, KV: 4,
		Eps:     float64(float32(1e-5)),
		NTokens: 512, NScores: 512, NTypes: 512,
		FirstTokens: []string{"<unk>", "<s>", "</s>", "<0x00>"},
		PadID:       0xFFFFFFFF,
		Model:       "llama",
		EmbdShape:   []int{64, 512}, EmbdDType: tensor.F32,
		NTensors:  3 + 5*9,
		QShape:    []int{64, 64},
		DownShape: []int{172, 64},
		NormShape: []int{64},
		// README: no freq_base key; output.weight is a copy of the embedding.
		HasFreqBase: false, OutputIsEmbdCopy: true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stories260K facts mismatch (-want +got):\n%s", diff)
	}
	if embd.Rows() != 512 || embd.RowLen() != 64 || len(embd.Row(511)) != 256 {
		t.Errorf("token_embd rows %d len %d", embd.Rows(), embd.RowLen())
	}
	if _, err := f.Uint("llama.rope.freq_base"); err == nil {
		t.Error("missing key gave no error")
	}
}

// TestQuantizedVariants checks the tiny-qwen3 f16 and q8_0 files against
// the f32 one: they were generated from the same weights, with the matrices
// converted by round-to-nearest-even f16 and ggml's reference Q8_0
// quantizer, which tensor.QuantizeRow reproduces byte for byte.
func TestQuantizedVariants(t *testing.T) {
	f32 := openModel(t, "tiny-qwen3-f32.gguf")
	for _, tc := range []struct {
		name  string
		dtype tensor.DType
	}{
		{"tiny-qwen3-f16.gguf", tensor.F16},
		{"tiny-qwen3-q8_0.gguf", tensor.Q8_0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := openModel(t, tc.name)
			if len(g.Tensors) != len(f32.Tensors) {
				t.Fatalf("%d tensors, f32 file has %d", len(g.Tensors), len(f32.Tensors))
			}
			n := 0
			for i, q := range g.Tensors {
				ref := f32.Tensors[i]
				if q.Name != ref.Name || !cmp.Equal(q.Shape, ref.Shape) {
					t.Fatalf("tensor %d is %s %v, f32 file has %s %v", i, q.Name, q.Shape, ref.Name, ref.Shape)
				}
				if q.DType == tensor.F32 {
					continue
				}
				if q.DType != tc.dtype {
					t.Fatalf("tensor %s is %v, want %v or f32", q.Name, q.DType, tc.dtype)
				}
				n++
				xs, err := ref.Float32s()
				if err != nil {
					t.Fatal(err)
				}
				want := make([]byte, len(q.Data))
				if err := tensor.QuantizeRow(tc.dtype, xs, want); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(want, q.Data) {
					t.Errorf("tensor %s: quantizing the f32 weights does not give the file's bytes", q.Name)
				}
				// Dequantized values stay within one quantization step.
				ys, err := q.Float32s()
				if err != nil {
					t.Fatal(err)
				}
				for b := 0; b < len(xs); b += 32 {
					var amax float64
					for _, x := range xs[b : b+32] {
						amax = max(amax, math.Abs(float64(x)))
					}
					for j := b; j < b+32; j++ {
						tol := max(math.Abs(float64(xs[j]))*0x1p-11, 0x1p-25) // half an ulp; subnormals: 2^-25
						if tc.dtype == tensor.Q8_0 {
							tol = amax / 127 * 0.6
						}
						if e := math.Abs(float64(xs[j] - ys[j])); e > tol {
							t.Fatalf("tensor %s element %d: %g vs f32 %g", q.Name, j, ys[j], xs[j])
						}
					}
				}
			}
			if n == 0 {
				t.Errorf("no %v tensors", tc.dtype)
			}
		})
	}
}

func TestLlama2TinyRandom(t *testing.T) {
	f := openModel(t, "llama-2-tiny-random.gguf")
	embd, err := f.Tensor("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{8, 32000}, embd.Shape); diff != "" || embd.DType != tensor.F16 {
		t.Errorf("token_embd.weight %v %v", embd.Shape, embd.DType)
	}
	n16 := 0
	for _, tt := range f.Tensors {
		if tt.DType == tensor.F16 {
			n16++
		}
	}
	if n16 != 9 { // token_embd, 7 block matrices, output
		t.Errorf("%d F16 tensors, want 9", n16)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil || len(tokens) != 32000 {
		t.Fatalf("tokens: %d, %v", len(tokens), err)
	}
	if bos, err := f.Uint("tokenizer.ggml.bos_token_id"); err != nil || bos != 1 {
		t.Errorf("bos = %d, %v", bos, err)
	}
	if ctx, err := f.Int("llama.context_length"); err != nil || ctx != 4096 {
		t.Errorf("context_length = %d, %v", ctx, err)
	}
}

// TestModelTruncations parses prefixes of a real file: every prefix of the
// first 2 KiB, every 13th up to the data section, then every 997th; all
// must fail.
func TestModelTruncations(t *testing.T) {
	data, err := os.ReadFile(modelPath(t, "stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data, "stories260K.gguf")
	if err != nil {
		t.Fatal(err)
	}
	step := func(n int) int {
		switch {
		case n < 2048:
			return 1
		case n < int(f.DataOffset)+64:
			return 13
		}
		return 997
	}
	for n := 0; n < len(data); n += step(n) {
		if _, err := Parse(data[:n], "prefix"); err == nil {
			t.Fatalf("prefix of %d bytes parsed", n)
		}
	}
}

// TestKQuantModels opens every kq-* model (K-quants, IQ4 and legacy
// quants, several types per file) and dequantizes each tensor: the types
// are read, sized and converted, and every value is finite.
func TestKQuantModels(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(modelsDir(), "kq-*.gguf"))
	if len(names) == 0 {
		t.Skip("no kq-*.gguf models")
	}
	seen := map[tensor.DType]bool{}
	for _, p := range names {
		f := openModel(t, filepath.Base(p))
		for _, w := range f.Tensors {
			seen[w.DType] = true
			xs, err := w.Float32s()
			if err != nil {
				t.Fatalf("%s: %v", filepath.Base(p), err)
			}
			for i, v := range xs {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s: tensor %s element %d is %g", filepath.Base(p), w.Name, i, v)
				}
			}
		}
	}
	for _, d := range []tensor.DType{tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q2_K, tensor.Q3_K,
		tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_NL, tensor.IQ4_XS} {
		if !seen[d] {
			t.Errorf("no kq model has a %v tensor", d)
		}
	}
}
