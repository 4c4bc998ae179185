package httpfront

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/traces"
)

// TraceIDHeader is the response header that carries the request's trace id
// (look it up with `ninfer trace ID`).
const TraceIDHeader = "X-Trace-Id"

// headerCarrier adapts fasthttp request headers to OpenTelemetry's
// TextMapCarrier, so a W3C traceparent continues the caller's trace.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(key, value string) { c.h.Set(key, value) }
func (c headerCarrier) Keys() []string {
	var keys []string
	for k := range c.h.All() {
		keys = append(keys, string(k))
	}
	return keys
}

// requestTrace is the tracing state of one API request.
type requestTrace struct {
	ctx      context.Context // holds the root llm_request span
	received time.Time
	vision   VisionTiming
}

// startTrace opens the request's root span, continuing a W3C traceparent
// sent by the caller, and returns its trace id ("" when none).
func (s *Server) startTrace(ctx *fasthttp.RequestCtx, received time.Time, id, model string, p Params) (requestTrace, string) {
	a := traces.RequestAttrs{ID: id, Model: model, MaxTokens: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, N: p.N}
	tctx, _ := s.cfg.Traces.StartRequest(context.Background(), headerCarrier{&ctx.Request.Header}, received, a)
	rt := requestTrace{ctx: tctx, received: received, vision: p.Vision}
	if sc := trace.SpanContextFromContext(tctx); sc.IsValid() {
		return rt, sc.TraceID().String()
	}
	return rt, ""
}

// finishTrace ends the root span with the phases of the request's choices
// (earliest start, latest end; chunks and rounds of the first choice) and
// keeps each choice's phases for LivePath.
func (s *Server) finishTrace(rt requestTrace, prompts [][]int32, stats []engine.Stats, finishes []string, err error) {
	for i, st := range stats {
		s.recent.add(rt.received, st, finishes[i])
	}
	if !s.cfg.Traces.Enabled || len(stats) == 0 {
		return
	}
	ph := traces.Phases{Received: rt.received, VisionStart: rt.vision.Start, VisionEnd: rt.vision.End, Err: err, FinishReason: finishes[0],
		Chunks: make([]traces.Chunk, 0, len(stats[0].Chunks)), Rounds: stats[0].Rounds}
	for _, c := range stats[0].Chunks {
		ph.Chunks = append(ph.Chunks, traces.Chunk{At: c.At, Start: c.Start, Tokens: c.Tokens})
	}
	for _, p := range prompts {
		ph.PromptTokens += len(p)
	}
	earliest := func(a, b time.Time) time.Time {
		if a.IsZero() || (!b.IsZero() && b.Before(a)) {
			return b
		}
		return a
	}
	for _, st := range stats {
		if sp := st.Speculative; sp.Rounds > 0 {
			ph.Drafted += sp.Drafted
			ph.Accepted += sp.Accepted
			for i, n := range sp.AcceptedPerPosition {
				if i >= len(ph.AcceptedPerPos) {
					ph.AcceptedPerPos = append(ph.AcceptedPerPos, 0)
				}
				ph.AcceptedPerPos[i] += n
			}
		}
		ph.CompletionTokens += st.GeneratedTokens
		ph.Submitted = earliest(ph.Submitted, st.Submitted)
		ph.Started = earliest(ph.Started, st.Started)
		ph.FirstToken = earliest(ph.FirstToken, st.FirstToken)
		if st.Done.After(ph.Done) {
			ph.Done = st.Done
		}
	}
	if ph.Done.IsZero() {
		ph.Done = time.Now()
	}
	s.cfg.Traces.EndRequest(rt.ctx, ph)
}
