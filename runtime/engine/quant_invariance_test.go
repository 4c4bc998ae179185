package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// The models whose matmuls compute each output in one order for every token
// of a batch: F32 and F16 (16 fused lanes per output whatever the tile,
// runtime/cpu's runFloat), and the quantized ones, which sum exact
// per-block integer dots in one float order (Q4_K and Q2_K in one of the
// orders ggml's repacked kernels use: docs/cpu-numerics.md). Attention
// takes one value order for steps of any row count (attnValues), so a
// prompt cut into chunks of one token gives the ids of the default chunk.
var batchInvariantModels = []string{
	"tiny-qwen3-f32.gguf", "tiny-qwen3-f16.gguf", "tiny-qwen3-q8_0.gguf", "kq-qwen3-iq4_xs.gguf", "kq-qwen3-iq4_nl.gguf", "kq-qwen3-q4_1.gguf",
	"kq-qwen3-q5_0.gguf", "kq-qwen3-q5_1.gguf", "kq-qwen3-q6_k.gguf", "kq-llama-q6_k.gguf",
	"kq-qwen3-q2_k.gguf", "kq-qwen3-q5_k_m.gguf", "kq-qwen3-q4_k_m.gguf", "kq-llama-q4_k_m.gguf",
	"kq-qwen3-q3_k_m.gguf",
}

// A model's greedy ids are batch-invariant: each golden prompt
// decoded alone (C=1) gives the ids it gives with every prompt submitted
// at once (C=8, steps of 8 rows) and under the speculative graphs (whose
// verify steps forward k+1 rows per sequence), and with prompts prefilled
// 1 or 7 tokens a step (the graph's chunk).
func TestQuantizedBatchInvariance(t *testing.T) {
	graphs := specGraphs(t)
	const n = 24
	for _, model := range batchInvariantModels {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			alone := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := goldenPrompts(t, alone)
			want, _ := generateAll(t, alone, prompts, n, 1)
			got, _ := submitAll(t, alone, prompts, n)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("C=8 ids differ from C=1 (-alone +batched):\n%s", diff)
			}
			for _, chunk := range []int64{1, 7} {
				in := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true, Set: node.Params{"chunk": chunk}})
				got, _ := generateAll(t, in, prompts, n, 1)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("prefill chunks of %d: ids differ from the default chunk (-default +chunked):\n%s", chunk, diff)
				}
			}
			setOracleRefs(prompts, want)
			for _, g := range []string{"ngram", "self", "oracle"} {
				in := open(t, instance.Options{Model: m, Graph: graphs[g], MaxRunning: 8, Threads: 2, Set: node.Params{"k": int64(4)}})
				got, _ := submitAll(t, in, prompts, n)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: ids differ from C=1 plain (-alone +%s):\n%s", filepath.Base(graphs[g]), g, diff)
				}
			}
		})
	}
}
