package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// With the target itself as the draft model (given as a file, or as the
// alias target), greedy drafts are the target's own choices: every draft
// is accepted, and the output is plain decoding's.
func TestDraftModelIsTargetAcceptsEverything(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	g := specGraphs(t)["draft"]
	plain := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2})
	prompts := goldenPrompts(t, plain)
	want, _ := generateAll(t, plain, prompts, 20, 4)
	for name, o := range map[string]instance.Options{
		"draft=same file": {Graph: g, Models: map[string]string{"draft": m}, Set: node.Params{"k": int64(5)}},
		"model: target":   {Graph: g, Set: node.Params{"k": int64(5), "model": "target"}},
	} {
		t.Run(name, func(t *testing.T) {
			o.Model, o.MaxRunning, o.Threads = m, 4, 2
			in := open(t, o)
			got, stats := generateAll(t, in, prompts, 20, 4)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("ids differ from plain (-plain +draft):\n%s", diff)
			}
			var sum engine.SpecStats
			for _, st := range stats {
				sum = sum.Add(st.Speculative)
			}
			if rate, ok := sum.AcceptanceRate(); !ok || rate != 1 || sum.Fallback != 0 {
				t.Errorf("the target drafting for itself: %+v, acceptance %v", sum, rate)
			}
		})
	}
}

// A draft model whose vocabulary is not the target's is a load error, as
// is a graph that runs a model alias no model was given for.
func TestDraftModelLoadErrors(t *testing.T) {
	g := specGraphs(t)["draft"]
	stories, qwen := modelPath(t, "stories260K.gguf"), modelPath(t, "tiny-qwen3-f32.gguf")
	_, err := instance.Open(instance.Options{Model: stories, Models: map[string]string{"draft": qwen}, Graph: g, Threads: 1})
	if err == nil || !strings.Contains(err.Error(), "vocabulary mismatch") || !strings.Contains(err.Error(), "2048 token embeddings in the draft, 512 in the target") {
		t.Errorf("stories260K target, tiny-qwen3 draft: err = %v, want a vocabulary mismatch", err)
	}
	_, err = instance.Open(instance.Options{Model: qwen, Graph: g, Threads: 1})
	if !errors.Is(err, engine.ErrNoModel) || !strings.Contains(err.Error(), `"draft"`) {
		t.Errorf("no draft model: err = %v, want ErrNoModel naming the alias", err)
	}
	_, err = instance.Open(instance.Options{Model: qwen, Models: map[string]string{"target": qwen}, Graph: g, Threads: 1})
	if err == nil {
		t.Error("the alias target given as a further model: no error")
	}
}

// With a KV cache too small for every request at once, sequences are
// preempted and requeued while their draft caches are evicted and
// rebuilt; the output is still plain decoding's and both caches end empty.
func TestDraftModelUnderPreemption(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2})
	var prompts [][]int32 // short, so that several sequences share a small cache
	for _, p := range goldenPrompts(t, plain) {
		prompts = append(prompts, p[:min(len(p), 8)])
	}
	want, _ := generateAll(t, plain, prompts, 40, 8)
	const capacity = 96 // tokens: two sequences' worth
	in := open(t, instance.Options{Model: m, Models: map[string]string{"draft": modelPath(t, "tiny-qwen3-q8_0.gguf")},
		Graph: specGraphs(t)["draft"], MaxRunning: 8, Threads: 2, KVTokens: capacity, Set: node.Params{"k": int64(4), "chunk": int64(5)}})
	got, stats := submitAll(t, in, prompts, 40)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ids differ from plain (-plain +draft):\n%s", diff)
	}
	preempted := 0
	for _, st := range stats {
		preempted += st.Preempted
	}
	if preempted == 0 {
		t.Errorf("no request was preempted with a cache of %d tokens: the test does not test preemption", capacity)
	}
	if used, _ := in.Engine.KVBlocks(); used != 0 {
		t.Errorf("%d target kv blocks used after every request finished", used)
	}
	if u := in.Engine.ModelKVBlocks()["draft"]; u.Used != 0 {
		t.Errorf("draft model kv blocks %+v after every request finished", u)
	}
}

// Aborting requests that draft with a draft model frees the target's and
// the draft model's KV blocks.
func TestDraftModelAbortFreesKV(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	in := open(t, instance.Options{Model: m, Models: map[string]string{"draft": modelPath(t, "tiny-qwen3-q8_0.gguf")},
		Graph: specGraphs(t)["draft"], MaxRunning: 4, Threads: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var chans []<-chan engine.Event
	for _, p := range [][]int32{{71, 72, 73}, {2046, 774, 198, 71, 72, 2047}, {5, 6}} {
		ch, err := in.Engine.Submit(ctx, engine.Request{Prompt: p, MaxTokens: 400})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for _, ch := range chans { // every request decodes a few tokens: it has drafted
		for range 3 {
			<-ch
		}
	}
	if u := in.Engine.ModelKVBlocks()["draft"]; u.Used == 0 {
		t.Errorf("draft model kv blocks %+v while requests decode", u)
	}
	cancel()
	for _, ch := range chans {
		for range ch {
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := in.Engine.KVBlocks()
		d := in.Engine.ModelKVBlocks()["draft"]
		if used == 0 && d.Used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kv blocks still used after abort: target %d, draft %+v", used, d)
		}
		time.Sleep(time.Millisecond)
	}
}
