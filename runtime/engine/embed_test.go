package engine_test

import (
	"math"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// An Embed request returns the final norm's hidden state at the last
// prompt token, unit length, and generates nothing: projected on the
// output matrix it ranks the greedy first token first (the logits are that
// hidden state times the output matrix).
func TestEmbedIsTheLastTokensHiddenState(t *testing.T) {
	for _, model := range []string{"tiny-qwen3-f32.gguf", "tiny-qwen35-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			in := open(t, instance.Options{Model: modelPath(t, model), MaxRunning: 4, Threads: 2})
			out, err := in.File.Tensor("output.weight")
			if err != nil {
				t.Fatal(err)
			}
			w, err := out.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range goldenPrompts(t, in)[:4] {
				ch, err := in.Engine.Submit(t.Context(), engine.Request{Prompt: p, MaxTokens: 1, Embed: true})
				if err != nil {
					t.Fatal(err)
				}
				var emb []float32
				for ev := range ch {
					if !ev.Done {
						t.Fatalf("an embedding request generated token %d", ev.Token)
					}
					emb = ev.Embedding
					if ev.Finish != engine.FinishStop || ev.Stats.GeneratedTokens != 0 {
						t.Errorf("final event %+v", ev)
					}
				}
				var norm float64
				for _, v := range emb {
					norm += float64(v) * float64(v)
				}
				if len(emb) != out.RowLen() || math.Abs(norm-1) > 1e-4 {
					t.Fatalf("embedding of %d values with norm^2 %g", len(emb), norm)
				}
				best, bestScore := -1, math.Inf(-1)
				for id := range out.Rows() {
					var s float64
					for j, v := range emb {
						s += float64(v) * float64(w[id*out.RowLen()+j])
					}
					if s > bestScore {
						best, bestScore = id, s
					}
				}
				greedy := generate(t, in, engine.Request{Prompt: p, MaxTokens: 1})
				if int32(best) != greedy[0] {
					t.Errorf("prompt %v: the embedding ranks %d first, greedy decoding picks %d", p, best, greedy[0])
				}
			}
			if s := in.Engine.Snapshot(); s.KVBlocksUsed != 0 || s.StateSlotsUsed != 0 {
				t.Errorf("after embedding: %+v", s)
			}
		})
	}
}
