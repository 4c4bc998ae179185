package engine_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// hybridTurns extends prompts with longer ones that share their prefixes
// as agent turns do: the three first prompts concatenated, and each of
// the first four prompts followed by its greedy reply (from ref) and the
// next prompt, as a chat's next turn resends the history.
func hybridTurns(t *testing.T, ref *instance.Instance, prompts [][]int32, n int) [][]int32 {
	t.Helper()
	replies, _ := generateAll(t, ref, prompts[:4], n, 4)
	out := append(slices.Clone(prompts), slices.Concat(prompts[0], prompts[1], prompts[2]))
	for i, r := range replies {
		out = append(out, slices.Concat(prompts[i], r, prompts[i+1]))
	}
	return out
}

// On a hybrid model the prefix cache resumes from recurrent state
// checkpoints: greedy ids with the cache on equal the cache off on every
// hybrid golden model, at prefill chunks that do and do not align with
// blocks, one and eight sequences at a time; the later passes report
// hits (prompts and next turns through the previous reply), and the
// checkpoints never exceed their budget.
func TestHybridPrefixCacheOnEqualsOff(t *testing.T) {
	const n = 24
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35-f16.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := hybridTurns(t, off, goldenPrompts(t, off), n)
			want, _ := generateAll(t, off, prompts, n, 8)
			if s := off.Engine.Snapshot(); s.PrefixCache || s.CheckpointsMax != 0 {
				t.Fatalf("cache off: %+v", s)
			}
			for _, chunk := range []int{1, 7, 64, 512} {
				on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, CheckpointEvery: 2,
					Set: node.Params{"chunk": int64(chunk)}})
				for pass, conc := range []int{1, 8} {
					got, stats := generateAll(t, on, prompts, n, conc)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("chunk %d pass %d: ids differ with the cache on (-off +on):\n%s", chunk, pass, diff)
					}
					if cached := cachedTokens(stats[len(stats)-4:]); cached == 0 {
						t.Errorf("chunk %d pass %d: no next turn hit the cache", chunk, pass)
					}
				}
				s := on.Engine.Snapshot()
				if !s.PrefixCache || s.PrefixHits == 0 || s.Checkpoints == 0 || s.Checkpoints > s.CheckpointsMax ||
					s.StateSlotsUsed != 0 || s.KVBlocksUsed != 0 || s.StateSlotsTotal != 8 {
					t.Errorf("chunk %d: snapshot after the passes %+v", chunk, s)
				}
				on.Close()
			}
		})
	}
}

func cachedTokens(stats []engine.Stats) int {
	n := 0
	for _, st := range stats {
		n += st.CachedTokens
	}
	return n
}
