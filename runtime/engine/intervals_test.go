package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// stepLog records observed steps; the engine's goroutine writes it while
// the test may read it (the observer runs after a step's final events).
type stepLog struct {
	mu    sync.Mutex
	steps []engine.StepInfo
}

func (l *stepLog) ObserveStep(s engine.StepInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steps = append(l.steps, s)
}

func (l *stepLog) all() []engine.StepInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]engine.StepInfo(nil), l.steps...)
}

// TestIntervalsAndStats checks the per-second intervals and the per-request
// phase stats against what two requests must have cost.
func TestIntervalsAndStats(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	start := time.Now()
	var log stepLog
	in := open(t, instance.Options{Model: m, Threads: 1, MaxRunning: 2, Set: node.Params{"chunk": int64(4)}, Observer: &log})
	prompt := in.Tokenizer.Encode("Once upon a time there was", true, true) // 7 tokens: chunks of 4 and 3
	res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 5, Tag: "req-a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats
	if diff := cmp.Diff([][2]int{{0, 4}, {4, 3}}, chunkSpans(st.Chunks)); diff != "" {
		t.Errorf("chunks (-want +got):\n%s", diff)
	}
	if st.Rounds != 5 || !st.Submitted.Before(st.Started) && !st.Submitted.Equal(st.Started) ||
		st.FirstToken.Before(st.Started) || st.Done.Before(st.FirstToken) {
		t.Errorf("stats rounds %d, times %v %v %v %v", st.Rounds, st.Submitted, st.Started, st.FirstToken, st.Done)
	}
	var prefill, decode, rounds int
	for _, iv := range in.Engine.Intervals(start.UnixMilli()) {
		prefill += iv.PrefillTokens
		decode += iv.DecodeTokens
		rounds += iv.DecodeRounds
		if iv.RunningMax != 1 || iv.DecodeRounds > 0 && (iv.RowsPerRoundMin != 1 || iv.RowsPerRoundMax != 1) {
			t.Errorf("interval %+v: want one running sequence, one row per round", iv)
		}
	}
	// 7 prompt tokens; 5 tokens of which the first comes from prefill, the
	// last is never fed back.
	if prefill != 7 || decode != 4 || rounds != 4 {
		t.Errorf("intervals: prefill %d decode %d rounds %d, want 7, 4, 4", prefill, decode, rounds)
	}
	var rows []int
	for _, s := range log.all() {
		rows = append(rows, s.Rows)
		if diff := cmp.Diff([]any{"req-a"}, s.Tags); diff != "" {
			t.Errorf("step tags (-want +got):\n%s", diff)
		}
	}
	if diff := cmp.Diff([]int{4, 3, 1, 1, 1, 1}, rows); diff != "" {
		t.Errorf("observed step rows (-want +got):\n%s", diff)
	}
	if got := in.Engine.Intervals(time.Now().Add(time.Hour).UnixMilli()); len(got) != 0 {
		t.Errorf("intervals in the future: %v", got)
	}
}

func chunkSpans(cs []engine.Chunk) [][2]int {
	var out [][2]int
	for _, c := range cs {
		out = append(out, [2]int{c.Start, c.Tokens})
	}
	return out
}

func TestSteady(t *testing.T) {
	ok := engine.Interval{Complete: true, RunningMin: 2, RunningMax: 2, DecodeReadyMin: 2, DecodeReadyMax: 2,
		DecodeRounds: 9, RowsPerRoundMin: 2, RowsPerRoundMax: 2, DecodeTokens: 18}
	if !ok.Steady(2) || ok.Steady(1) {
		t.Errorf("Steady(2)=%v Steady(1)=%v", ok.Steady(2), ok.Steady(1))
	}
	for _, mut := range []func(*engine.Interval){
		func(i *engine.Interval) { i.Complete = false },
		func(i *engine.Interval) { i.PrefillTokens = 1 },
		func(i *engine.Interval) { i.PrefillingMax = 1 },
		func(i *engine.Interval) { i.RowsPerRoundMin = 1 },
		func(i *engine.Interval) { i.DecodeRounds = 0 },
		func(i *engine.Interval) { i.DecodeReadyMin = 1 },
	} {
		iv := ok
		mut(&iv)
		if iv.Steady(2) {
			t.Errorf("%+v is steady", iv)
		}
	}
}
