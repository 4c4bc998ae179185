package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// argmaxBackend is the CPU backend behind exec.ArgmaxOutputter, as the
// CUDA backend reduces greedy rows on the device: it counts the logits
// outputs the engine copies whole.
type argmaxBackend struct{ *cpu.Backend }

var logitsCopies, argmaxCopies atomic.Int64

func init() {
	exec.Register("cpu-argmax", func(o exec.Options) exec.Backend { return &argmaxBackend{cpu.New(o)} })
}

func (b *argmaxBackend) Prepare(g *tensor.Graph) (exec.Executable, error) {
	x, err := b.Backend.Prepare(g)
	return &argmaxExec{x}, err
}

type argmaxExec struct{ exec.Executable }

func (x *argmaxExec) HasArgmax(name string) bool { return strings.HasSuffix(name, ".logits") }

func (x *argmaxExec) OutputArgmax(name string) ([]int32, error) {
	argmaxCopies.Add(1)
	data, rows, cols, err := x.Executable.Output(name)
	if err != nil {
		return nil, err
	}
	ids := make([]int32, rows)
	for r := range rows {
		row := data[r*cols : (r+1)*cols]
		for j, v := range row {
			if v > row[ids[r]] {
				ids[r] = int32(j)
			}
		}
	}
	return ids, nil
}

func (x *argmaxExec) Output(name string) ([]float32, int, int, error) {
	if x.HasArgmax(name) {
		logitsCopies.Add(1)
	}
	return x.Executable.Output(name)
}

// On a backend that reduces logits on the device, greedy steps copy back
// token ids, not logits, and give the same ids; a request that asks for
// logprobs, or samples, gets the logits copied as before.
func TestGreedyStepsCopyBackIDs(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	plain := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2})
	prompts := goldenPrompts(t, plain)
	want, _ := generateAll(t, plain, prompts, 16, 4)
	in := open(t, instance.Options{Model: m, MaxRunning: 4, Threads: 2, Backend: "cpu-argmax"})
	logitsCopies.Store(0)
	argmaxCopies.Store(0)
	got, _ := generateAll(t, in, prompts, 16, 4)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("ids differ with device argmax (-logits +argmax):\n%s", diff)
	}
	if logitsCopies.Load() != 0 || argmaxCopies.Load() == 0 {
		t.Errorf("greedy steps: %d logits copies, %d argmax copies", logitsCopies.Load(), argmaxCopies.Load())
	}
	res, err := in.Generate(t.Context(), engine.Request{Prompt: prompts[0], MaxTokens: 4, Logprobs: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if logitsCopies.Load() == 0 || !cmp.Equal(res.IDs, want[0][:4]) {
		t.Errorf("a logprobs request: %d logits copies, ids %v want %v", logitsCopies.Load(), res.IDs, want[0][:4])
	}
}

// A request that asks for logit rows gets each position's whole row, the
// one its token was chosen from (greedy: the row's first largest; the
// same row kv-eval compares), even on a backend that reduces greedy steps
// to ids on the device; a forced request gets the rows of the forced
// tokens' positions, the same as a free run that chose them.
func TestLogitRows(t *testing.T) {
	in := open(t, instance.Options{Model: modelPath(t, "tiny-qwen3-f32.gguf"), Threads: 2, Backend: "cpu-argmax", NoPrefixCache: true})
	prompt := []int32{1, 2, 3}
	rows := func(r engine.Request) (ids []int32, rows [][]float32) {
		ch, err := in.Engine.Submit(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		for ev := range ch {
			if !ev.Done {
				ids, rows = append(ids, ev.Token), append(rows, ev.Logits)
			}
		}
		return ids, rows
	}
	logitsCopies.Store(0)
	ids, free := rows(engine.Request{Prompt: prompt, MaxTokens: 6, Logits: true})
	if logitsCopies.Load() == 0 {
		t.Error("a logits request's greedy steps copied no logits back")
	}
	for i, row := range free {
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if len(row) != in.Engine.Vocab() || int32(best) != ids[i] {
			t.Fatalf("position %d: %d logits with argmax %d, token %d; want %d logits", i, len(row), best, ids[i], in.Engine.Vocab())
		}
	}
	forcedIDs, forced := rows(engine.Request{Prompt: prompt, MaxTokens: len(ids), Force: ids, Logits: true})
	if diff := cmp.Diff(free, forced); diff != "" || !cmp.Equal(ids, forcedIDs) {
		t.Errorf("forced ids %v, want %v; rows (-free +forced):\n%s", forcedIDs, ids, diff)
	}
	if _, none := rows(engine.Request{Prompt: prompt, MaxTokens: 2}); none[0] != nil || none[1] != nil {
		t.Error("a request that asks for no logits got rows")
	}
}
