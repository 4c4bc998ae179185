package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// Greedy ids are the same with the prefix cache on and off, for every
// golden model, prefill chunk sizes that do and do not align with blocks,
// and the second pass over the prompts (which starts from cached blocks)
// reports the hits.
func TestPrefixCacheOnEqualsOff(t *testing.T) {
	const n = 24
	for _, model := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf", "tiny-qwen3-f16.gguf", "tiny-qwen3-q8_0.gguf", "tiny-llama-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := goldenPrompts(t, off)
			// A prompt that extends another, as the next turn of a chat does.
			prompts = append(prompts, slices.Concat(prompts[0], prompts[1], prompts[2]))
			want, _ := generateAll(t, off, prompts, n, 8)
			if s := off.Engine.Snapshot(); s.PrefixCache || s.PrefixHits != 0 {
				t.Fatalf("cache off: %+v", s)
			}
			for _, chunk := range []int{3, 16, 512} {
				on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, Set: node.Params{"chunk": int64(chunk)}})
				for pass, conc := range []int{1, 8, 1} {
					got, stats := generateAll(t, on, prompts, n, conc)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("chunk %d pass %d: ids differ with the cache on (-off +on):\n%s", chunk, pass, diff)
					}
					cached := 0
					for _, st := range stats {
						cached += st.CachedTokens
					}
					if pass > 0 && cached == 0 {
						t.Errorf("chunk %d pass %d: no prompt hit the cache", chunk, pass)
					}
				}
				s := on.Engine.Snapshot()
				if s.PrefixHits == 0 || s.PrefixQueries < s.PrefixHits || s.KVBlocksUsed != 0 || s.KVBlocksCached == 0 {
					t.Errorf("chunk %d: snapshot after the passes %+v", chunk, s)
				}
				on.Close()
			}
		})
	}
}

// Sixteen concurrent requests that share a long system prompt give the
// ids they give with the cache off, while sharing its blocks.
func TestPrefixCacheSharedSystemPrompt(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	off := open(t, instance.Options{Model: m, MaxRunning: 16, Threads: 2, NoPrefixCache: true})
	system := off.Tokenizer.Encode("<|im_start|>system\nYou are a careful assistant who answers in one short sentence and never repeats the question back.<|im_end|>\n", true, true)
	var prompts [][]int32
	for i := range 16 {
		user := off.Tokenizer.Encode(fmt.Sprintf("<|im_start|>user\nquestion %d<|im_end|>\n<|im_start|>assistant\n", i), false, true)
		prompts = append(prompts, slices.Concat(system, user))
	}
	want, _ := submitAll(t, off, prompts, 16)
	on := open(t, instance.Options{Model: m, MaxRunning: 16, Threads: 2})
	// Warm the system prompt's blocks with one request, then all 16 at once.
	generateAll(t, on, prompts[:1], 4, 1)
	got, stats := submitAll(t, on, prompts, 16)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ids differ with the cache on (-off +on):\n%s", diff)
	}
	block := on.Engine.Snapshot().KVBlockTokens
	for i, st := range stats {
		if st.CachedTokens < len(system)/block*block {
			t.Errorf("request %d: %d cached tokens, the %d-token system prompt has %d full blocks", i, st.CachedTokens, len(system), len(system)/block)
		}
	}
}
