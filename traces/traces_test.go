package traces

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

func carrier() propagation.MapCarrier {
	return propagation.MapCarrier{"traceparent": "00-" + callerTrace + "-00f067aa0ba902b7-01"}
}

func phases(t0 time.Time) Phases {
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	return Phases{Received: t0, Submitted: ms(1), Started: ms(3), FirstToken: ms(10), Done: ms(30),
		Chunks:       []Chunk{{At: ms(6), Start: 0, Tokens: 4}, {At: ms(10), Start: 4, Tokens: 3}},
		PromptTokens: 7, CompletionTokens: 5, Rounds: 5, FinishReason: "length"}
}

func TestRequestSpanTree(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p := NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t0 := time.Unix(1_800_000_000, 0)
	ctx, root := p.StartRequest(context.Background(), carrier(), t0, RequestAttrs{ID: "req-1", MaxTokens: 5, Temperature: 0.5, TopP: 1})
	p.ObserveStep(engine.StepInfo{Start: t0.Add(3 * time.Millisecond), End: t0.Add(6 * time.Millisecond), Rows: 4,
		PrefillTokens: 4, Tags: []any{root.SpanContext(), nil}})
	p.EndRequest(ctx, phases(t0))

	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	var names []string
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{SpanDecode, SpanEngineStep, SpanRequest, SpanPrefill, SpanPrepare, SpanQueue}, names); diff != "" {
		t.Fatalf("span names (-want +got):\n%s", diff)
	}
	r := byName[SpanRequest]
	if got := r.SpanContext().TraceID().String(); got != callerTrace {
		t.Errorf("root trace id %s, want the caller's %s", got, callerTrace)
	}
	for _, n := range []string{SpanQueue, SpanPrepare, SpanPrefill, SpanDecode} {
		if byName[n].Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("%s is not a child of %s", n, SpanRequest)
		}
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range r.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	for k, want := range map[string]any{
		AttrRequestID: "req-1", AttrMaxTokens: int64(5), AttrPromptTokens: int64(7), AttrCompletionTokens: int64(5),
		AttrTTFT: 0.01, AttrTimeInQueue: 0.002, AttrTimeInPrefill: 0.007, AttrTimeInDecode: 0.02, AttrE2E: 0.03,
	} {
		if got := attrs[attribute.Key(k)].AsInterface(); !cmp.Equal(got, want, cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })) {
			t.Errorf("root %s = %v, want %v", k, got, want)
		}
	}
	step := byName[SpanEngineStep]
	if len(step.Links()) != 1 || step.Links()[0].SpanContext.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("engine.step links %v, want the request's root span", step.Links())
	}
	if got := len(byName[SpanPrefill].Events()); got != 2 {
		t.Errorf("prefill has %d chunk events, want 2", got)
	}
	if got := byName[SpanDecode].EndTime().Sub(byName[SpanDecode].StartTime()); got != 20*time.Millisecond {
		t.Errorf("decode span lasts %v, want 20ms", got)
	}
}

func TestOffRecordsNothing(t *testing.T) {
	p := Off()
	ctx, root := p.StartRequest(context.Background(), carrier(), time.Now(), RequestAttrs{})
	if root.IsRecording() {
		t.Fatal("root span records with tracing off")
	}
	p.EndRequest(ctx, phases(time.Now()))
	p.ObserveStep(engine.StepInfo{Tags: []any{root.SpanContext()}})
}

// TestOTLPExport sends spans to an in-process OTLP/HTTP receiver.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					got = append(got, s.Name)
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	}))
	defer srv.Close()
	p, err := Start(context.Background(), Config{Endpoint: srv.URL, ServiceName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := p.StartRequest(context.Background(), nil, time.Now(), RequestAttrs{ID: "x"})
	p.EndRequest(ctx, phases(time.Now()))
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	if diff := cmp.Diff([]string{SpanDecode, SpanRequest, SpanPrefill, SpanPrepare, SpanQueue}, got); diff != "" {
		t.Errorf("exported spans (-want +got):\n%s", diff)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	for _, c := range []Config{{Endpoint: "127.0.0.1:4318"}, {Endpoint: "ftp://x"}, {Endpoint: "http://x:1", SampleRatio: 2}} {
		if _, err := Start(context.Background(), c); err == nil {
			t.Errorf("Start(%+v) succeeded", c)
		}
	}
}

// TestVisionSpanSitsBetweenPrepareAndQueue: a request with images gets a
// vision span from the start of their encoding to its end, and prepare
// ends where it starts.
func TestVisionSpanSitsBetweenPrepareAndQueue(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	p := NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t0 := time.Unix(1_800_000_000, 0)
	ctx, _ := p.StartRequest(context.Background(), nil, t0, RequestAttrs{ID: "req-v"})
	ph := phases(t0)
	ph.VisionStart, ph.VisionEnd = t0.Add(200*time.Microsecond), t0.Add(900*time.Microsecond)
	p.EndRequest(ctx, ph)
	got := map[string][2]time.Duration{}
	for _, s := range rec.Ended() {
		got[s.Name()] = [2]time.Duration{s.StartTime().Sub(t0), s.EndTime().Sub(t0)}
	}
	want := map[string][2]time.Duration{
		SpanPrepare: {0, 200 * time.Microsecond},
		SpanVision:  {200 * time.Microsecond, 900 * time.Microsecond},
		SpanQueue:   {time.Millisecond, 3 * time.Millisecond},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s span: %v, want %v", name, got[name], w)
		}
	}
}
