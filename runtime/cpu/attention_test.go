package cpu

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func sharedModel(t testing.TB, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	return p
}

// startEngine runs graph on model with a fresh CPU backend of 2 threads and
// 64 KV tokens; edit, if not nil, may change the backend after Reserve.
func startEngine(t *testing.T, model, graph string, edit func(*Backend)) *engine.Engine {
	t.Helper()
	p, err := instance.LoadPlan(graph, node.Default, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := weights.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	be := New(exec.Options{Threads: 2})
	e, err := engine.New(engine.Config{Plan: p, Model: f, Backend: be, KVTokens: 64, MaxRunning: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if edit != nil {
		edit(be)
	}
	return e
}

type generation struct {
	IDs []int32
	Top [][]engine.TokenLogit
}

// generate decodes 24 greedy tokens after a 20-token prompt, so that
// attention reads two KV blocks, and keeps each position's top 4 logits.
func generate(t *testing.T, e *engine.Engine) generation {
	t.Helper()
	prompt := make([]int32, 20)
	for i := range prompt {
		prompt[i] = int32(1 + (i*37)%200)
	}
	ch, err := e.Submit(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 24, TopLogits: 4})
	if err != nil {
		t.Fatal(err)
	}
	var g generation
	for ev := range ch {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if !ev.Done {
			g.IDs = append(g.IDs, ev.Token)
			g.Top = append(g.Top, ev.Top)
		}
	}
	return g
}

// TestCodedAttentionMatchesF32 runs the encoded-page attention path with
// the f32 codec and checks that it reproduces the direct f32 path bit for
// bit: block-by-block decoding and per-KV-head grouping change nothing.
func TestCodedAttentionMatchesF32(t *testing.T) {
	for _, m := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf"} {
		t.Run(m, func(t *testing.T) {
			model := sharedModel(t, m)
			want := generate(t, startEngine(t, model, "plain", nil))
			coded := startEngine(t, model, "plain", func(b *Backend) {
				c, err := page.NewCodec("f32", b.kv.KVDim)
				if err != nil {
					t.Fatal(err)
				}
				pages := kvPages{kq: make([][]byte, b.kv.Layers), vq: make([][]byte, b.kv.Layers), codec: c, rowBytes: c.RowBytes()}
				for i := range pages.kq {
					pages.kq[i] = make([]byte, b.kv.Slots()*c.RowBytes())
					pages.vq[i] = make([]byte, b.kv.Slots()*c.RowBytes())
				}
				b.cache = pages
			})
			if diff := cmp.Diff(want, generate(t, coded)); diff != "" {
				t.Errorf("coded f32 pages (-direct +coded):\n%s", diff)
			}
		})
	}
}

// TestReserveFormats checks that every format reserves exactly its
// accounted size and decodes, and that unknown formats fail at Reserve.
func TestReserveFormats(t *testing.T) {
	model := sharedModel(t, "stories260K.gguf")
	for _, f := range page.Formats() {
		t.Run(f.Name, func(t *testing.T) {
			graph := "kv-" + f.Name
			if f == page.F32 {
				graph = "plain"
			}
			var be *Backend
			e := startEngine(t, model, graph, func(b *Backend) { be = b })
			if got, want := be.KVBytes(), page.BytesPerToken(f, 5, 32)*64; got != want {
				t.Errorf("KVBytes() = %d, want %d", got, want)
			}
			if g := generate(t, e); len(g.IDs) != 24 {
				t.Errorf("generated %d tokens, want 24", len(g.IDs))
			}
		})
	}
	be := New(exec.Options{Threads: 1})
	defer be.Close()
	if err := be.Reserve(exec.KVLayout{Layers: 1, KVDim: 8, BlockTokens: 16, Blocks: 1, DType: "int4"}); err == nil {
		t.Error("Reserve with dtype int4 succeeded")
	}
}
