package cpu_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// benchModels are the bundled models plus any GGUF named by
// NINFER_BENCH_MODELS (colon-separated), e.g. a generated 0.6B-shape model.
func benchModels(b *testing.B) []string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models")
	var out []string
	for _, m := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf", "tiny-qwen3-f16.gguf", "tiny-qwen3-q8_0.gguf"} {
		if _, err := os.Stat(filepath.Join(dir, m)); err == nil {
			out = append(out, filepath.Join(dir, m))
		}
	}
	if extra := os.Getenv("NINFER_BENCH_MODELS"); extra != "" {
		out = append(out, filepath.SplitList(extra)...)
	}
	if len(out) == 0 {
		b.Skip("no models")
	}
	return out
}

// weightBytes is the size of all tensors, read once per decoded token.
func weightBytes(in *instance.Instance) int64 {
	var n int64
	for _, t := range in.File.Tensors {
		n += int64(len(t.Data))
	}
	return n
}

// BenchmarkDecode reports decode tokens/s (tg: one token per step after a
// 1-token prompt) and the weight bandwidth that implies.
func BenchmarkDecode(b *testing.B) {
	for _, m := range benchModels(b) {
		b.Run(filepath.Base(m), func(b *testing.B) {
			in, err := instance.Open(instance.Options{Model: m, MaxRunning: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer in.Close()
			n := min(128, in.Engine.ContextLength()-1)
			var tokens int
			var secs float64
			b.ResetTimer()
			for range b.N {
				res, err := in.Generate(context.Background(), engine.Request{Prompt: []int32{1}, MaxTokens: n}, nil)
				if err != nil {
					b.Fatal(err)
				}
				// The first token comes from the prefill step; the rest are decode steps.
				tokens += len(res.IDs) - 1
				secs += res.Stats.Decode.Seconds()
			}
			tps := float64(tokens) / secs
			b.ReportMetric(tps, "tok/s")
			b.ReportMetric(tps*float64(weightBytes(in))/1e9, "GB/s")
		})
	}
}

// BenchmarkPrefill reports prompt tokens/s for a 512-token prompt (or the
// context length, if shorter) in one chunk. Prefix caching is off: every
// iteration repeats the prompt, which would otherwise be served from the
// cache after the first.
func BenchmarkPrefill(b *testing.B) {
	for _, m := range benchModels(b) {
		b.Run(filepath.Base(m), func(b *testing.B) {
			in, err := instance.Open(instance.Options{Model: m, MaxRunning: 1, NoPrefixCache: true})
			if err != nil {
				b.Fatal(err)
			}
			defer in.Close()
			n := min(512, in.Engine.ContextLength()-1)
			prompt := make([]int32, n)
			for i := range prompt {
				prompt[i] = int32(3 + i%200)
			}
			var tokens int
			var secs float64
			b.ResetTimer()
			for range b.N {
				res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 1}, nil)
				if err != nil {
					b.Fatal(err)
				}
				tokens += len(prompt)
				secs += res.Stats.Prefill.Seconds()
			}
			b.ReportMetric(float64(tokens)/secs, "tok/s")
		})
	}
}
