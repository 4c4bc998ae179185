package traces

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// RequestAttrs are the request parameters recorded on the root span.
type RequestAttrs struct {
	ID          string
	Model       string
	MaxTokens   int
	Temperature float64
	TopP        float64
	N           int
}

// Chunk is one prefill chunk of a request.
type Chunk struct {
	At     time.Time // when the step that computed it ended
	Start  int       // first position
	Tokens int
}

// Phases are a finished request's phase boundaries and counts. Zero times
// mean the phase did not happen (e.g. no first token after an early abort).
type Phases struct {
	Received time.Time // request arrived
	// VisionStart and VisionEnd bound the encoding of the request's
	// images (zero without images): the vision span, which ends the
	// prepare span.
	VisionStart, VisionEnd time.Time
	Submitted              time.Time // tokenized and queued in the engine
	Started                time.Time // first engine step that included it
	FirstToken             time.Time
	Done                   time.Time
	Chunks                 []Chunk

	PromptTokens     int
	CompletionTokens int
	Rounds           int // engine steps that produced tokens for it, the prefill's included
	FinishReason     string
	Err              error

	Drafted        int
	Accepted       int
	AcceptedPerPos []int
}

// StartRequest starts the root llm_request span (kind server) at `at`,
// continuing the caller's trace when carrier holds a W3C traceparent.
func (p *Provider) StartRequest(ctx context.Context, carrier propagation.TextMapCarrier, at time.Time, a RequestAttrs) (context.Context, trace.Span) {
	if carrier != nil {
		ctx = p.Propagator.Extract(ctx, carrier)
	}
	if !p.Enabled {
		return ctx, trace.SpanFromContext(ctx)
	}
	return p.Tracer.Start(ctx, SpanRequest, trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(at),
		trace.WithAttributes(
			attribute.String(AttrRequestID, a.ID),
			attribute.String(AttrRequestModel, a.Model),
			attribute.Int(AttrMaxTokens, a.MaxTokens),
			attribute.Float64(AttrTemperature, a.Temperature),
			attribute.Float64(AttrTopP, a.TopP),
			attribute.Int(AttrN, max(a.N, 1)),
		))
}

// EndRequest records the phase spans of a finished request as children of
// the root span in ctx, with their real start and end times, sets the usage
// and latency attributes on the root, and ends it at ph.Done.
func (p *Provider) EndRequest(ctx context.Context, ph Phases) {
	root := trace.SpanFromContext(ctx)
	if !p.Enabled || !root.IsRecording() {
		return
	}
	child := func(name string, from, to time.Time, attrs ...attribute.KeyValue) trace.Span {
		_, s := p.Tracer.Start(ctx, name, trace.WithTimestamp(from), trace.WithAttributes(attrs...))
		s.End(trace.WithTimestamp(to))
		return s
	}
	secs := func(d time.Duration) float64 { return d.Seconds() }
	if !ph.Submitted.IsZero() {
		prepared := ph.Submitted
		if !ph.VisionStart.IsZero() {
			prepared = ph.VisionStart
			child(SpanVision, ph.VisionStart, ph.VisionEnd)
		}
		child(SpanPrepare, ph.Received, prepared)
	}
	if !ph.Started.IsZero() {
		child(SpanQueue, ph.Submitted, ph.Started)
		root.SetAttributes(attribute.Float64(AttrTimeInQueue, secs(ph.Started.Sub(ph.Submitted))))
		prefillEnd := ph.FirstToken
		if prefillEnd.IsZero() {
			prefillEnd = ph.Done
		}
		_, pre := p.Tracer.Start(ctx, SpanPrefill, trace.WithTimestamp(ph.Started),
			trace.WithAttributes(attribute.Int(AttrPromptTokens, ph.PromptTokens), attribute.Int(AttrPrefillChunks, len(ph.Chunks))))
		for _, c := range ph.Chunks {
			pre.AddEvent(EventPrefillChunk, trace.WithTimestamp(c.At),
				trace.WithAttributes(attribute.Int(AttrChunkStart, c.Start), attribute.Int(AttrChunkTokens, c.Tokens)))
		}
		pre.End(trace.WithTimestamp(prefillEnd))
		root.SetAttributes(attribute.Float64(AttrTimeInPrefill, secs(prefillEnd.Sub(ph.Started))))
	}
	if !ph.FirstToken.IsZero() {
		root.SetAttributes(attribute.Float64(AttrTTFT, secs(ph.FirstToken.Sub(ph.Received))))
		// The first token comes from the last prefill step, not from decode.
		attrs := []attribute.KeyValue{attribute.Int(AttrDecodeRounds, max(ph.Rounds-1, 0)),
			attribute.Int(AttrDecodeTokens, max(ph.CompletionTokens-1, 0))}
		if ph.Drafted > 0 {
			attrs = append(attrs, attribute.Int(AttrDrafted, ph.Drafted), attribute.Int(AttrAccepted, ph.Accepted),
				attribute.IntSlice(AttrAcceptedPerPos, ph.AcceptedPerPos))
		}
		child(SpanDecode, ph.FirstToken, ph.Done, attrs...)
		root.SetAttributes(attribute.Float64(AttrTimeInDecode, secs(ph.Done.Sub(ph.FirstToken))))
	}
	root.SetAttributes(
		attribute.Int(AttrPromptTokens, ph.PromptTokens),
		attribute.Int(AttrCompletionTokens, ph.CompletionTokens),
		attribute.StringSlice(AttrFinishReason, []string{ph.FinishReason}),
		attribute.Float64(AttrE2E, secs(ph.Done.Sub(ph.Received))),
	)
	if ph.Err != nil {
		root.RecordError(ph.Err)
		root.SetStatus(codes.Error, ph.Err.Error())
	}
	root.End(trace.WithTimestamp(ph.Done))
}

// ObserveStep records one engine step as an engine.step span, linked to the
// root span of every request it advanced (their engine.Request.Tag is the
// root's trace.SpanContext), with the step's real start and end times.
// It implements engine.StepObserver; with tracing off it does nothing.
func (p *Provider) ObserveStep(s engine.StepInfo) {
	if !p.Enabled {
		return
	}
	ls := make([]trace.Link, 0, len(s.Tags))
	for _, t := range s.Tags {
		if sc, ok := t.(trace.SpanContext); ok && sc.IsValid() {
			ls = append(ls, trace.Link{SpanContext: sc})
		}
	}
	_, span := p.Tracer.Start(context.Background(), SpanEngineStep, trace.WithTimestamp(s.Start), trace.WithLinks(ls...),
		trace.WithAttributes(
			attribute.Int(AttrStepBucket, s.Rows),
			attribute.Int(AttrStepPrefillToken, s.PrefillTokens),
			attribute.Int(AttrStepDecodeRows, s.DecodeRows),
			attribute.Int(AttrStepSequences, len(s.Tags)),
		))
	span.End(trace.WithTimestamp(s.End))
}
