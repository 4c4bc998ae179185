package cpu_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
)

// BenchmarkDecodeKV reports decode tokens/s with each KV format after a
// 384-token prompt, so that attention reads a long cache. Compare formats
// as ratios to f32 from the same run.
func BenchmarkDecodeKV(b *testing.B) {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models")
	for _, m := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf"} {
		path := filepath.Join(dir, m)
		if _, err := os.Stat(path); err != nil {
			b.Skipf("model not found: %s", path)
		}
		for _, f := range page.FormatNames() {
			b.Run(m+"/"+f, func(b *testing.B) {
				graph := "kv-" + f
				if f == page.F32.Name {
					graph = "plain"
				}
				in, err := instance.Open(instance.Options{Model: path, Graph: graph, MaxRunning: 1, KVTokens: 512})
				if err != nil {
					b.Fatal(err)
				}
				defer in.Close()
				prompt := make([]int32, 384)
				for i := range prompt {
					prompt[i] = int32(3 + i%200)
				}
				var tokens int
				var secs float64
				for range b.N {
					res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 65}, nil)
					if err != nil {
						b.Fatal(err)
					}
					tokens += len(res.IDs) - 1
					secs += res.Stats.Decode.Seconds()
				}
				b.ReportMetric(float64(tokens)/secs, "tok/s")
			})
		}
	}
}
