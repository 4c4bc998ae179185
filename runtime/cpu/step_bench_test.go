package cpu_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// stepLog keeps the engine's steps (engine.StepObserver).
type stepLog struct {
	mu    sync.Mutex
	steps []engine.StepInfo
}

func (l *stepLog) ObserveStep(s engine.StepInfo) {
	l.mu.Lock()
	l.steps = append(l.steps, s)
	l.mu.Unlock()
}

// BenchmarkStep reports the cost of one engine step by batch: "decode" is
// a step of R decode rows (R sequences decoding together), "mixed" the same
// with one 64-token prefill chunk in the step (chunked prefill sharing the
// step with decode rows). ms/step and ms/row are means over the steps of
// that exact shape, so a regression in batched decode shows per size;
// gap-ms is the engine's host time between two such steps (sampling,
// scheduling, event delivery), which the step time does not include.
func BenchmarkStep(b *testing.B) {
	for _, m := range benchModels(b) {
		for _, mixed := range []bool{false, true} {
			for _, rows := range []int{1, 2, 4, 8, 16} {
				name := fmt.Sprintf("%s/decode/rows=%d", filepath.Base(m), rows)
				if mixed {
					name = fmt.Sprintf("%s/mixed/rows=%d", filepath.Base(m), rows)
				}
				b.Run(name, func(b *testing.B) { benchStep(b, m, rows, mixed) })
			}
		}
	}
}

func benchStep(b *testing.B, model string, rows int, mixed bool) {
	const chunk = 64 // prefill chunk tokens of a mixed step
	log := &stepLog{}
	in, err := instance.Open(instance.Options{Model: model, MaxRunning: rows + 1, Observer: log,
		Set: map[string]any{"chunk": int64(chunk)}, NoPrefixCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	const n = 32
	var total, gap time.Duration
	var count, gaps int
	b.ResetTimer()
	for range b.N {
		log.mu.Lock()
		log.steps = nil
		log.mu.Unlock()
		// Submitted in order from one goroutine: the decoders are admitted
		// first, and the long prompt's chunks then share steps with them.
		var wg sync.WaitGroup
		submit := func(prompt []int32, max int) {
			ch, err := in.Engine.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: max})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ch {
				}
			}()
		}
		for i := range rows {
			submit([]int32{int32(3 + i), int32(4 + i)}, n)
		}
		if mixed {
			// n/2 chunks, or as many as the model's context holds.
			long := make([]int32, min(chunk*(n/2), (in.Engine.ContextLength()-1)/chunk*chunk))
			for i := range long {
				long[i] = int32(3 + i%200)
			}
			submit(long, 1)
		}
		wg.Wait()
		log.mu.Lock()
		match := func(s engine.StepInfo) bool {
			return s.DecodeRows == rows && (s.PrefillTokens > 0) == mixed && (!mixed || s.PrefillTokens == chunk)
		}
		for i, s := range log.steps {
			if match(s) {
				total += s.End.Sub(s.Start)
				count++
				if i+1 < len(log.steps) && match(log.steps[i+1]) {
					gap += log.steps[i+1].Start.Sub(s.End)
					gaps++
				}
			}
		}
		log.mu.Unlock()
	}
	if count == 0 {
		b.Skipf("no step had %d decode rows (mixed %v)", rows, mixed)
	}
	per := total.Seconds() * 1000 / float64(count)
	b.ReportMetric(per, "ms/step")
	b.ReportMetric(per/float64(rows), "ms/row")
	b.ReportMetric(float64(count)/float64(b.N), "steps/op")
	if gaps > 0 {
		b.ReportMetric(gap.Seconds()*1000/float64(gaps), "gap-ms")
	}
}

// BenchmarkPrefillShare reports the cost per prompt token when several
// prompts prefill in the same steps (P prompts of L tokens, submitted
// together) against one prompt of P*L tokens: batching prompts should cost
// no more per token than one long prompt. ms/token is the steps' time over
// the prompt tokens they computed; steps/op shows how they were grouped.
func BenchmarkPrefillShare(b *testing.B) {
	for _, m := range benchModels(b) {
		for _, shape := range [][2]int{{1, 256}, {2, 128}, {4, 64}, {8, 32}} {
			b.Run(fmt.Sprintf("%s/prompts=%d/len=%d", filepath.Base(m), shape[0], shape[1]), func(b *testing.B) {
				benchPrefillShare(b, m, shape[0], shape[1])
			})
		}
	}
}

func benchPrefillShare(b *testing.B, model string, prompts, length int) {
	log := &stepLog{}
	in, err := instance.Open(instance.Options{Model: model, MaxRunning: prompts, Observer: log, NoPrefixCache: true})
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	var total time.Duration
	var tokens, steps int
	b.ResetTimer()
	for it := range b.N {
		log.mu.Lock()
		log.steps = nil
		log.mu.Unlock()
		var wg sync.WaitGroup
		for p := range prompts {
			prompt := make([]int32, length)
			for i := range prompt {
				prompt[i] = int32(3 + (i*7+p*31+it)%200)
			}
			ch, err := in.Engine.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1})
			if err != nil {
				b.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ch {
				}
			}()
		}
		wg.Wait()
		log.mu.Lock()
		for _, s := range log.steps {
			if s.PrefillTokens > 0 {
				total += s.End.Sub(s.Start)
				tokens += s.PrefillTokens
				steps++
			}
		}
		log.mu.Unlock()
	}
	b.ReportMetric(total.Seconds()*1000/float64(tokens), "ms/token")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}
