package traces

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// BenchmarkObserveStep is the per-engine-step cost of tracing: compare
// "off" with the step time of a decode (ns/op here vs 1e9/tok/s).
func BenchmarkObserveStep(b *testing.B) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		p    *Provider
	}{
		{"off", Off()},
		{"on", NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())))},
	} {
		b.Run(tc.name, func(b *testing.B) {
			_, root := tc.p.StartRequest(context.Background(), nil, now, RequestAttrs{})
			info := engine.StepInfo{Start: now, End: now, Rows: 8, DecodeRows: 8, Tags: make([]any, 8)}
			for i := range info.Tags {
				info.Tags[i] = root.SpanContext()
			}
			b.ReportAllocs()
			for range b.N {
				tc.p.ObserveStep(info)
			}
		})
	}
}
