package cpu_test

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// The backend's workspace grows with the step it ran: a long prompt's
// prefill uses more than decoding one token; used never exceeds peak, and
// peak never exceeds what the open programs hold.
func TestWorkspaceAccounting(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	model := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", "tiny-qwen3-q8_0.gguf")
	in, err := instance.Open(instance.Options{Model: model, Threads: 2, NoPrefixCache: true})
	if err != nil {
		t.Skip(err)
	}
	defer in.Close()
	run := func(n int) {
		prompt := make([]int32, n)
		for i := range prompt {
			prompt[i] = int32(100 + i%50)
		}
		if _, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 2}, nil); err != nil {
			t.Fatal(err)
		}
	}
	run(4)
	short, ok := in.Workspace()
	if !ok {
		t.Fatal("the cpu backend does not report its workspace")
	}
	run(300)
	long, _ := in.Workspace()
	t.Logf("after a 4-token prompt %+v, after a 300-token one %+v", short, long)
	for _, w := range []struct {
		name string
		v    int64
	}{{"used", short.UsedBytes}, {"peak", short.PeakUsedBytes}, {"capacity", short.CapacityBytes}} {
		if w.v <= 0 {
			t.Errorf("%s = %d after a generation", w.name, w.v)
		}
	}
	if long.PeakUsedBytes <= short.PeakUsedBytes {
		t.Errorf("peak %d after a 300-token prefill, %d after 4 tokens: want more", long.PeakUsedBytes, short.PeakUsedBytes)
	}
	for _, w := range []struct{ used, peak, capacity int64 }{{short.UsedBytes, short.PeakUsedBytes, short.CapacityBytes}, {long.UsedBytes, long.PeakUsedBytes, long.CapacityBytes}} {
		if w.used > w.peak || w.peak > w.capacity {
			t.Errorf("used %d, peak %d, capacity %d: want used <= peak <= capacity", w.used, w.peak, w.capacity)
		}
	}
}
