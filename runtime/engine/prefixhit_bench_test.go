package engine_test

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// BenchmarkHybridPrefixHit times the request that `ninfer multiturn`'s
// turn 4 sends a hybrid model (2 threads): a prompt of 1,968 + 465 tokens
// whose first 1,968 are cached ("hit": adopted with their checkpoint, the
// 465 prefilled over them in one chunk) against a prompt of the same
// length prefilled with the cache off ("cold"), each iteration a fresh
// suffix (hit) or prompt (cold), one token generated. It reports time to
// first token (ttft-ms) and prompt tokens computed per second; hit/cold is
// the multi-turn bar's ratio without the HTTP and template work. The model
// is NINFER_BENCH_HYBRID (e.g. the 0.8B-width Q8_0 of docs/prefix-cache.md)
// or tiny-qwen35-f32, whose context clips the lengths.
func BenchmarkHybridPrefixHit(b *testing.B) {
	m := os.Getenv("NINFER_BENCH_HYBRID")
	if m == "" {
		m = modelPath(b, "tiny-qwen35-f32.gguf")
	}
	for _, hit := range []bool{false, true} {
		name := "cold"
		if hit {
			name = "hit"
		}
		b.Run(name, func(b *testing.B) {
			in, err := instance.Open(instance.Options{Model: m, MaxRunning: 1, Threads: 2, NoPrefixCache: !hit})
			if err != nil {
				b.Fatal(err)
			}
			defer in.Close()
			prefix, suffix := 1968, 465
			if room := in.Engine.ContextLength() - 2; prefix+suffix > room {
				prefix, suffix = room*prefix/(prefix+suffix)&^15, room*suffix/(prefix+suffix)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			tokens := func(n int) []int32 {
				out := make([]int32, n)
				for i := range out {
					out[i] = int32(rng.IntN(in.Engine.Vocab()/2) + in.Engine.Vocab()/4)
				}
				return out
			}
			run := func(prompt []int32, ends []int) (time.Duration, int) {
				res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1, MessageEnds: ends}, nil)
				if err != nil {
					b.Fatal(err)
				}
				return res.Stats.FirstToken.Sub(res.Stats.Submitted), res.Stats.CachedTokens
			}
			shared := tokens(prefix)
			if hit {
				// The previous turn: its prompt ends at a message boundary
				// on the prefix's last block.
				run(slices.Concat(shared, tokens(4)), []int{prefix})
			}
			var ttft time.Duration
			computed := 0
			b.ResetTimer()
			for range b.N {
				prompt := tokens(prefix + suffix)
				if hit {
					prompt = slices.Concat(shared, tokens(suffix))
				}
				d, cached := run(prompt, []int{prefix, prefix + suffix})
				if hit && cached != prefix {
					b.Fatalf("cached %d tokens, want %d", cached, prefix)
				}
				ttft += d
				computed += len(prompt) - cached
			}
			b.ReportMetric(float64(ttft.Microseconds())/1000/float64(b.N), "ttft-ms")
			b.ReportMetric(float64(computed)/ttft.Seconds(), "prompt-tok/s")
		})
	}
}
