package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/request"
)

func modelPath(t testing.TB, name string) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	return p
}

func open(t *testing.T, o instance.Options) *instance.Instance {
	t.Helper()
	in, err := instance.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	return in
}

func generate(t *testing.T, in *instance.Instance, r engine.Request) []int32 {
	t.Helper()
	res, err := in.Generate(context.Background(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.IDs
}

// Requests batched together produce exactly the tokens each produces alone,
// greedy and seeded stochastic alike.
func TestBatchedEqualsAlone(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2})
	prompts := []string{"Once upon a time", "Lily and Tom", "The cat", "A big red ball was"}
	samplings := []request.Sampling{
		{},
		{Temperature: 0.8, TopP: 0.95, Seed: 1},
		{PresencePenalty: 0.5, FrequencyPenalty: 0.3, RepetitionPenalty: 1.2},
		{Temperature: 1.1, TopK: 40, MinP: 0.05, PresencePenalty: 1, RepetitionPenalty: 1.1, Seed: 3},
	}
	reqs := make([]engine.Request, len(prompts))
	alone := make([][]int32, len(prompts))
	for i, p := range prompts {
		reqs[i] = engine.Request{Prompt: in.Tokenizer.Encode(p, true, true), MaxTokens: 20 + 7*i, Sampling: samplings[i]}
		alone[i] = generate(t, in, reqs[i])
	}
	together := make([][]int32, len(prompts))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := in.Generate(context.Background(), reqs[i], nil)
			if err != nil {
				t.Error(err)
				return
			}
			together[i] = res.IDs
		}()
	}
	wg.Wait()
	if diff := cmp.Diff(alone, together); diff != "" {
		t.Errorf("batched generations differ from solo ones (-alone +batched):\n%s", diff)
	}
}

// A cancelled request ends with FinishAbort and its KV blocks are freed.
func TestCancelFreesKV(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Threads: 1})
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := in.Engine.Submit(ctx, engine.Request{Prompt: []int32{1, 403}, MaxTokens: 400})
	if err != nil {
		t.Fatal(err)
	}
	<-ch // first token: the request holds KV now
	if used, _ := in.Engine.KVBlocks(); used == 0 {
		t.Fatal("no kv blocks in use while generating")
	}
	cancel()
	var last engine.Event
	for ev := range ch {
		last = ev
	}
	if !last.Done || last.Finish != engine.FinishAbort {
		t.Errorf("final event = %+v, want Done with finish %q", last, engine.FinishAbort)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		used, _ := in.Engine.KVBlocks()
		if used == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d kv blocks still used after abort", used)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSubmitRejectsBadRequests(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Threads: 1})
	for _, tc := range []struct {
		name string
		req  engine.Request
		ctx  bool // wraps engine.ErrContext
	}{
		{"empty prompt", engine.Request{MaxTokens: 1}, false},
		{"zero max tokens", engine.Request{Prompt: []int32{1}, MaxTokens: 0}, false},
		{"token out of vocab", engine.Request{Prompt: []int32{1, 512}, MaxTokens: 1}, false},
		{"negative token", engine.Request{Prompt: []int32{-3}, MaxTokens: 1}, false},
		{"context overflow", engine.Request{Prompt: make([]int32, 500), MaxTokens: 13}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := in.Engine.Submit(context.Background(), tc.req)
			if err == nil {
				t.Fatal("Submit succeeded")
			}
			if got := errors.Is(err, engine.ErrContext); got != tc.ctx {
				t.Errorf("errors.Is(%v, ErrContext) = %v, want %v", err, got, tc.ctx)
			}
		})
	}
}

// EOS stops generation with FinishStop unless the caller ignores it.
func TestStopAndLength(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Threads: 1})
	ids := generate(t, in, engine.Request{Prompt: []int32{1}, MaxTokens: 300})
	stopAt := ids[5]
	res, err := in.Generate(context.Background(), engine.Request{Prompt: []int32{1}, MaxTokens: 300,
		Stop: func(id int32) bool { return id == stopAt }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish != engine.FinishStop || len(res.IDs) > 6 || res.IDs[len(res.IDs)-1] != stopAt {
		t.Errorf("stop: finish %q after %d tokens %v", res.Finish, len(res.IDs), res.IDs)
	}
	res, err = in.Generate(context.Background(), engine.Request{Prompt: []int32{1}, MaxTokens: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish != engine.FinishLength || len(res.IDs) != 3 {
		t.Errorf("length: finish %q after %d tokens", res.Finish, len(res.IDs))
	}
}

// Log-probabilities are those of the raw logits: at most 0, and for greedy
// decoding the chosen token's is the largest.
func TestLogprobs(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Threads: 1})
	ch, err := in.Engine.Submit(context.Background(), engine.Request{Prompt: []int32{1, 403}, MaxTokens: 5, Logprobs: true, TopLogits: 3})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range ch {
		if ev.Done {
			break
		}
		if ev.Logprob > 0 || ev.Logprob < -30 {
			t.Errorf("token %d: logprob %g out of range", ev.Token, ev.Logprob)
		}
		if len(ev.Top) != 3 || ev.Top[0].ID != ev.Token || ev.Top[0].Logit-ev.LogZ != ev.Logprob {
			t.Errorf("token %d logprob %g: top %+v with logZ %g", ev.Token, ev.Logprob, ev.Top, ev.LogZ)
		}
	}
}

// Snapshot counts waiting and running requests and the KV they hold
// (stories260K: a block is 5 layers x K and V x 32 f32 x 16 tokens).
func TestSnapshot(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Threads: 1, MaxRunning: 1})
	if diff := cmp.Diff(engine.Snapshot{KVBlocksTotal: 32, KVBlockTokens: 16, MaxRunning: 1, PrefixCache: true, KVBlockBytes: 5 * 2 * 32 * 4 * 16}, in.Engine.Snapshot()); diff != "" {
		t.Errorf("idle snapshot (-want +got):\n%s", diff)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := in.Engine.Submit(ctx, engine.Request{Prompt: []int32{1, 403}, MaxTokens: 400})
	if err != nil {
		t.Fatal(err)
	}
	<-first
	second, err := in.Engine.Submit(ctx, engine.Request{Prompt: []int32{1}, MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	s := in.Engine.Snapshot()
	if s.Running != 1 || s.Waiting != 1 || s.KVBlocksUsed == 0 {
		t.Errorf("busy snapshot = %+v, want 1 running, 1 waiting and some kv used", s)
	}
	cancel()
	for range first {
	}
	for range second {
	}
}

// stepRecorder keeps the engine's steps.
type stepRecorder struct {
	mu    sync.Mutex
	steps []engine.StepInfo
}

func (r *stepRecorder) ObserveStep(s engine.StepInfo) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

// With a step budget smaller than the prompt, every step stays within the
// budget, a sequence that decodes gets its row in every step while another
// prefills, and the tokens equal those generated alone; a budget below one
// row per running sequence is refused.
func TestStepTokens(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	if _, err := instance.Open(instance.Options{Model: m, MaxRunning: 4, StepTokens: 3, Threads: 1}); err == nil ||
		!strings.Contains(err.Error(), "step tokens 3 is less than 4") {
		t.Fatalf("StepTokens 3 with MaxRunning 4: err = %v, want the budget refused", err)
	}
	rec := &stepRecorder{}
	const budget = 6
	in := open(t, instance.Options{Model: m, MaxRunning: 2, StepTokens: budget, Threads: 1, Observer: rec, NoPrefixCache: true})
	short := engine.Request{Prompt: in.Tokenizer.Encode("The cat", true, true), MaxTokens: 40}
	long := engine.Request{Prompt: in.Tokenizer.Encode("Once upon a time there was a little girl named Lily who loved to play outside in the park with her friends every day", true, true), MaxTokens: 4}
	wantShort, wantLong := generate(t, in, short), generate(t, in, long)
	rec.mu.Lock()
	rec.steps = nil
	rec.mu.Unlock()
	// The long prompt arrives right behind the short one: it prefills in
	// budget-sized chunks while the short one decodes (40 steps).
	shortCh, err := in.Engine.Submit(context.Background(), short)
	if err != nil {
		t.Fatal(err)
	}
	longCh, err := in.Engine.Submit(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	collect := func(ch <-chan engine.Event) []int32 {
		var ids []int32
		for ev := range ch {
			if !ev.Done {
				ids = append(ids, ev.Token)
			}
		}
		return ids
	}
	gotShort, gotLong := collect(shortCh), collect(longCh)
	if diff := cmp.Diff(wantLong, gotLong); diff != "" {
		t.Errorf("long prompt beside a decoder (-alone +together):\n%s", diff)
	}
	if diff := cmp.Diff(wantShort, gotShort); diff != "" {
		t.Errorf("decoder beside a long prefill (-alone +together):\n%s", diff)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	prefillSteps := 0
	for i, s := range rec.steps {
		if s.Rows > budget {
			t.Errorf("step %d: %d rows > budget %d", i, s.Rows, budget)
		}
		if s.PrefillTokens > 0 && s.DecodeReady > 0 && s.DecodeRows == 0 {
			t.Errorf("step %d: %d prefill tokens and no decode row while %d sequences were ready to decode", i, s.PrefillTokens, s.DecodeReady)
		}
		if s.PrefillTokens > 0 && s.DecodeRows > 0 {
			prefillSteps++
		}
	}
	if min := (len(long.Prompt) + budget - 2) / (budget - 1); prefillSteps < min {
		t.Errorf("%d steps mixed prefill with decode, want at least %d (the long prompt in chunks of %d beside one decode row)", prefillSteps, min, budget-1)
	}
}
