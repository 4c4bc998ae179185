package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// A hybrid model (tiny-qwen35: Gated DeltaNet layers with recurrent state
// beside gated attention; tiny-qwen35moe: the same with MoE FFNs) gives the same greedy ids whatever the prefill
// chunk, one or eight sequences at a time, lossless KV formats, and after
// preemption (a cache too small for all eight, so sequences lose their
// state slot and KV and recompute from position 0); every state slot and
// KV block is free afterwards.
func TestHybridGreedyInvariance(t *testing.T) {
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) { hybridInvariance(t, modelPath(t, model)) })
	}
}

func hybridInvariance(t *testing.T, m string) {
	const n = 32
	ref := open(t, instance.Options{Model: m, MaxRunning: 1, Threads: 2})
	prompts := goldenPrompts(t, ref)
	want, _ := generateAll(t, ref, prompts, n, 1)
	if s := ref.Engine.Snapshot(); s.StateSlotsTotal != 1 || !s.PrefixCache || ref.Engine.PrefixCacheOff() != "" {
		t.Errorf("hybrid snapshot %+v, prefix cache off: %q", s, ref.Engine.PrefixCacheOff())
	}
	for _, tc := range []struct {
		name string
		opts instance.Options
		conc int
	}{
		{"chunk 1", instance.Options{Set: node.Params{"chunk": int64(1)}}, 1},
		{"chunk 3, 8 at a time", instance.Options{Set: node.Params{"chunk": int64(3)}}, 8},
		{"chunk 7", instance.Options{Set: node.Params{"chunk": int64(7)}}, 8},
		{"chunk 64", instance.Options{Set: node.Params{"chunk": int64(64)}}, 8},
		{"f16 kv", instance.Options{Graph: "../../graphs/kv-f16.yaml"}, 8},
		{"int8 kv", instance.Options{Graph: "../../graphs/kv-int8-g64.yaml"}, 8},
		{"preemption", instance.Options{KVTokens: 352}, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Model, o.MaxRunning, o.Threads = m, 8, 2
			in := open(t, o)
			got, stats := generateAll(t, in, prompts, n, tc.conc)
			if tc.name == "preemption" {
				got, stats = submitAll(t, in, prompts, n) // all at once, so they compete for the cache
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ids differ (-one at a time +%s):\n%s", tc.name, diff)
			}
			preempted := 0
			for _, st := range stats {
				preempted += st.Preempted
			}
			if tc.name == "preemption" && preempted == 0 {
				t.Errorf("no sequence was preempted")
			}
			if s := in.Engine.Snapshot(); s.KVBlocksUsed != 0 || s.StateSlotsUsed != 0 || s.StateSlotsTotal != 8 {
				t.Errorf("after every request: %+v", s)
			}
		})
	}
}

// Speculation on a hybrid model is lossless: the verify step writes the
// state after each row into a snapshot slot and commit keeps the last
// accepted row's, so greedy ids equal plain decoding's under prompt lookup,
// a draft model (tiny-qwen3-q8_0 shares the vocabulary) and the oracle
// that rejects at every draft position in turn, one and eight at a time,
// at every prefill chunk size and after preemption.
// Self-drafting, which would run the target's layers over its state, is
// refused at load.
func TestHybridSpeculationIsLossless(t *testing.T) {
	graphs := specGraphs(t)
	const n = 24
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2})
			prompts := goldenPrompts(t, plain)
			want, _ := generateAll(t, plain, prompts, n, 8)
			setOracleRefs(prompts, want)
			for _, g := range []string{"ngram", "draft", "oracle"} {
				for i, k := range []int{1, 2, 3, 4, 5} {
					chunk := []int{1, 3, 7, 64, 512}[(i+len(g))%5] // every chunk size under each graph
					in := open(t, instance.Options{Model: m, Models: map[string]string{"draft": modelPath(t, "tiny-qwen3-q8_0.gguf")},
						Graph: graphs[g], MaxRunning: 8, Threads: 2, Set: node.Params{"k": int64(k), "chunk": int64(chunk)}})
					for _, conc := range []int{1, 8} {
						got, stats := generateAll(t, in, prompts, n, conc)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("%s k=%d concurrency %d: ids differ from plain (-plain +%s):\n%s", g, k, conc, g, diff)
						}
						var sum engine.SpecStats
						for _, st := range stats {
							sum = sum.Add(st.Speculative)
						}
						if sum.Rounds == 0 || (g == "oracle" && sum.Accepted == sum.Drafted) {
							t.Errorf("%s k=%d: implausible counts %+v", g, k, sum)
						}
						if s := in.Engine.Snapshot(); s.KVBlocksUsed != 0 || s.StateSlotsUsed != 0 || s.StateSlotsTotal != 8*(1+k+1) {
							t.Errorf("%s k=%d: after every request %+v", g, k, s)
						}
					}
					in.Close()
				}
			}
			// After preemption: a cache too small for all eight, submitted at once.
			in := open(t, instance.Options{Model: m, Graph: graphs["ngram"], MaxRunning: 8, Threads: 2, KVTokens: 352,
				Set: node.Params{"k": int64(3)}})
			got, stats := submitAll(t, in, prompts, n)
			preempted := 0
			for _, st := range stats {
				preempted += st.Preempted
			}
			if diff := cmp.Diff(want, got); diff != "" || preempted == 0 {
				t.Errorf("ngram under preemption (%d preemptions): ids differ from plain (-plain +ngram):\n%s", preempted, diff)
			}
			_, err := instance.Open(instance.Options{Model: m, Graph: graphs["self"], Threads: 1})
			if err == nil || !strings.Contains(err.Error(), "recurrent state") {
				t.Errorf("self-drafting on a hybrid model: %v", err)
			}
		})
	}
}

// A hybrid model's snapshot counts state slots, and the cache usage it
// reports weighs KV blocks and state slots by their bytes.
func TestHybridSnapshotCountsStateSlots(t *testing.T) {
	in := open(t, instance.Options{Model: modelPath(t, "tiny-qwen35-f32.gguf"), MaxRunning: 2, Threads: 1})
	s := in.Engine.Snapshot()
	// 6 Gated DeltaNet layers: conv window 3 x 128 and 4 heads of 16 x 16, f32.
	if s.StateSlotsTotal != 2 || s.StateSlotBytes != 6*4*(3*128+4*16*16) || s.KVBlockBytes == 0 || s.CacheUsage() != 0 {
		t.Errorf("idle snapshot %+v, usage %g", s, s.CacheUsage())
	}
	busy := s
	busy.StateSlotsUsed, busy.KVBlocksUsed = 1, 0
	want := float64(s.StateSlotBytes) / (float64(s.KVBlocksTotal)*float64(s.KVBlockBytes) + 2*float64(s.StateSlotBytes))
	if got := busy.CacheUsage(); got != want {
		t.Errorf("one slot held: usage %g, want %g", got, want)
	}
}

// The state-bf16 graph stores a hybrid model's state slots in half the
// memory and runs plain and batched decoding (the same ids either way);
// its ids follow f32 state at first and may part later (bf16 keeps 8 bits
// of mantissa: `ninfer kv-eval --kv state-bf16` measures the cost). A
// speculative plan with bf16 state is refused: the state is rounded once
// per step, so verify would not reproduce plain decoding.
func TestHybridBF16State(t *testing.T) {
	m := modelPath(t, "tiny-qwen35-f32.gguf")
	f32 := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2})
	half := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2, Graph: "../../graphs/state-bf16.yaml"})
	if a, b := f32.Engine.Snapshot().StateSlotBytes, half.Engine.Snapshot().StateSlotBytes; b*2 != a {
		t.Errorf("state slot bytes: f32 %d, bf16 %d", a, b)
	}
	prompts := goldenPrompts(t, f32)
	want, _ := generateAll(t, f32, prompts, 16, 4)
	got, _ := generateAll(t, half, prompts, 16, 4)
	same := 0
	for i := range want {
		if want[i][0] == got[i][0] {
			same++
		}
	}
	if same < len(want)*3/4 {
		t.Errorf("first tokens: %d of %d agree with f32 state:\nf32  %v\nbf16 %v", same, len(want), want, got)
	}
	alone, _ := generateAll(t, half, prompts, 16, 1)
	if diff := cmp.Diff(got, alone); diff != "" {
		t.Errorf("bf16 state: batched and one at a time differ (-batched +alone):\n%s", diff)
	}
	if s := half.Engine.Snapshot(); s.StateSlotsUsed != 0 || s.KVBlocksUsed != 0 {
		t.Errorf("after every request: %+v", s)
	}
	spec := filepath.Join(t.TempDir(), "ngram-half-state.yaml")
	src, err := os.ReadFile("../../graphs/ngram.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "op: kv.cache") {
		src = []byte(strings.Replace(string(src), "nodes:\n", "nodes:\n  - {id: cache, op: kv.cache, with: {state: bf16}}\n", 1))
	}
	if err := os.WriteFile(spec, src, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := instance.Open(instance.Options{Model: m, Graph: spec, Threads: 1}); err == nil || !strings.Contains(err.Error(), "rounded once per step") {
		t.Errorf("a speculative graph with bf16 state: %v", err)
	}
}
