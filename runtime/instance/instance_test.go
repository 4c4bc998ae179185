package instance_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func sharedModel(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model %s not available: %v", name, err)
	}
	return p
}

// TestMmapAndLoadAgree checks that the CPU backend decodes the same tokens
// from mapped model files (Options.Mmap) as from loaded ones (the default),
// for the target alone and with a draft model of its own.
func TestMmapAndLoadAgree(t *testing.T) {
	target, draft := sharedModel(t, "tiny-qwen3-f32.gguf"), sharedModel(t, "tiny-qwen3-q8_0.gguf")
	for _, tc := range []struct {
		name   string
		graph  string
		models map[string]string
	}{
		{"plain", "plain", nil},
		{"draft", "draft", map[string]string{"draft": draft}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got [2][]int32
			for i, mmap := range []bool{false, true} {
				in, err := instance.Open(instance.Options{Model: target, Models: tc.models, Graph: tc.graph, Threads: 2, Mmap: mmap})
				if err != nil {
					t.Fatal(err)
				}
				res, err := in.Generate(context.Background(), engine.Request{Prompt: []int32{1, 2, 3, 4, 5}, MaxTokens: 24}, nil)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = res.IDs
				if err := in.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if len(got[0]) != 24 {
				t.Fatalf("generated %d tokens, want 24", len(got[0]))
			}
			if diff := cmp.Diff(got[1], got[0]); diff != "" {
				t.Errorf("loaded tokens differ from mapped (-mapped +loaded):\n%s", diff)
			}
		})
	}
}

// TestRepackedUnlessMapped checks the CPU backend's layouts (see
// docs/cpu-memory.md): a loaded file's Q8_0, Q4_0 and IQ4_NL matrices are
// repacked in place into 16-row groups, and at the AVX-512 level its Q5_0, Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K and IQ4_XS ones (Q3_K, Q5_K and Q6_K vocabulary matrices excepted), at the AVX2 level its Q2_K and Q4_K ones; a mapped one
// (Options.Mmap) keeps the file's layout.
func TestRepackedUnlessMapped(t *testing.T) {
	for _, c := range []struct {
		model  string
		dtype  tensor.DType
		layout weights.Layout
		levels []string // the kernel levels that repack; nil for any
		vocab  bool     // whether the vocabulary matrices are repacked too
	}{
		{"tiny-qwen3-q8_0.gguf", tensor.Q8_0, weights.LayoutQ8x16, nil, true},
		{"kq-qwen3-iq4_nl.gguf", tensor.IQ4_NL, weights.LayoutQ4x16, nil, true},
		{"kq-qwen3-q4_k_m.gguf", tensor.Q4_K, weights.LayoutQ4Kx16, []string{"avx512", "avx2"}, true},
		{"kq-qwen3-q4_k_m.gguf", tensor.Q6_K, weights.LayoutQ6Kx16, []string{"avx512"}, false},
		{"kq-qwen3-q5_k_m.gguf", tensor.Q5_K, weights.LayoutQ5Kx16, []string{"avx512"}, false},
		{"kq-qwen3-q2_k.gguf", tensor.Q2_K, weights.LayoutQ2Kx16, []string{"avx512", "avx2"}, true},
		{"kq-qwen3-iq4_xs.gguf", tensor.IQ4_XS, weights.LayoutIQ4XSx16, []string{"avx512"}, true},
		{"kq-qwen3-q3_k_m.gguf", tensor.Q3_K, weights.LayoutQ3Kx16, []string{"avx512"}, false},
		{"kq-qwen3-q5_0.gguf", tensor.Q5_0, weights.LayoutQ4x16, []string{"avx512"}, true},
		{"kq-qwen3-q4_1.gguf", tensor.Q4_1, weights.LayoutQ4x16, []string{"avx512"}, true},
		{"kq-qwen3-q5_1.gguf", tensor.Q5_1, weights.LayoutQ4x16, []string{"avx512"}, true},
	} {
		model := sharedModel(t, c.model)
		for _, mmap := range []bool{false, true} {
			in, err := instance.Open(instance.Options{Model: model, Threads: 2, Mmap: mmap})
			if err != nil {
				t.Fatal(err)
			}
			var typed, grouped int
			for _, w := range in.File.Tensors {
				vocab := w.Name == "token_embd.weight" || w.Name == "output.weight"
				if w.DType == c.dtype && len(w.Shape) >= 2 && w.Shape[1]%16 == 0 && (c.vocab || !vocab) {
					typed++
				}
				if w.Layout == c.layout {
					grouped++
				}
			}
			want := typed
			if mmap || c.levels != nil && !slices.Contains(c.levels, cpu.KernelLevel()) {
				want = 0
			}
			if typed == 0 || grouped != want {
				t.Errorf("%s mmap=%v: %d of %d %v tensors repacked, want %d", c.model, mmap, grouped, typed, c.dtype, want)
			}
			if err := in.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
