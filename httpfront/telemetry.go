package httpfront

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
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

// Metrics are the server's Prometheus metrics. Names follow vLLM's (with
// the ninfer: namespace) where vLLM has one, so its dashboards map over.
type Metrics struct {
	reg              *prometheus.Registry
	promptTokens     prometheus.Counter
	generationTokens prometheus.Counter
	success          *prometheus.CounterVec
	ttft             prometheus.Histogram
	tpot             prometheus.Histogram
	e2e              prometheus.Histogram
	queue            prometheus.Histogram
	drafts           prometheus.Counter
	draftTokens      prometheus.Counter
	acceptedTokens   prometheus.Counter
	acceptedPerPos   *prometheus.CounterVec
	handler          fasthttp.RequestHandler
	// recording is held shared while a request's figures are recorded
	// and exclusively while /metrics gathers, so that a scrape sees each
	// request's figures all or not at all.
	recording sync.RWMutex
}

var latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// newMetrics registers the metrics; the gauges read the model s serves.
func newMetrics(s *Server) *Metrics {
	reg := prometheus.NewRegistry()
	f := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	h := func(name, help string) prometheus.Histogram {
		x := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets})
		reg.MustRegister(x)
		return x
	}
	gauge := func(name, help string, v func(engine.Snapshot) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			m := s.model.Load()
			if m == nil {
				return 0
			}
			return v(m.Engine.Snapshot())
		}))
	}
	gauge("ninfer:num_requests_running", "Sequences holding KV blocks in the engine.", func(s engine.Snapshot) float64 { return float64(s.Running) })
	gauge("ninfer:num_requests_waiting", "Sequences queued for admission.", func(s engine.Snapshot) float64 { return float64(s.Waiting) })
	gauge("ninfer:kv_cache_usage_perc", "Fraction of the cache memory (KV blocks and recurrent state slots) held by sequences (0..1).",
		func(s engine.Snapshot) float64 { return s.CacheUsage() })
	m := &Metrics{reg: reg,
		promptTokens:     f("ninfer:prompt_tokens_total", "Prompt tokens of finished requests."),
		generationTokens: f("ninfer:generation_tokens_total", "Generated tokens of finished requests."),
		ttft:             h("ninfer:time_to_first_token_seconds", "Arrival to first token."),
		tpot:             h("ninfer:time_per_output_token_seconds", "Decode time per output token after the first."),
		e2e:              h("ninfer:e2e_request_latency_seconds", "Arrival to last token."),
		queue:            h("ninfer:request_queue_time_seconds", "Time a sequence waited for its first engine step."),
		drafts:           f("ninfer:spec_decode_num_drafts_total", "Speculative verify rounds."),
		draftTokens:      f("ninfer:spec_decode_num_draft_tokens_total", "Speculative tokens proposed."),
		acceptedTokens:   f("ninfer:spec_decode_num_accepted_tokens_total", "Speculative tokens accepted."),
	}
	reg.MustRegister(vllmCollector{s})
	m.success = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ninfer:request_success_total",
		Help: "Finished sequences by finish reason."}, []string{"finished_reason"})
	m.acceptedPerPos = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ninfer:spec_decode_num_accepted_tokens_per_pos",
		Help: "Speculative tokens accepted at each draft position."}, []string{"position"})
	reg.MustRegister(m.success, m.acceptedPerPos)
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(prometheus.GathererFunc(m.gather), promhttp.HandlerOpts{}))
	return m
}

// gather collects every metric, each request's figures all or not at all.
func (m *Metrics) gather() ([]*dto.MetricFamily, error) {
	m.recording.Lock()
	defer m.recording.Unlock()
	return m.reg.Gather()
}

// vllmCollector exports the engine's load under vLLM's metric names, with
// its model_name label, for the routers that scrape them (the Gateway API
// Inference Extension's endpoint picker, the vLLM production-stack
// router): requests running and waiting, KV cache usage (0..1, also under
// the older gpu_cache_usage_perc name), prefix cache queries and hits
// (prompt tokens looked up at admission, and found cached), and the cache's
// shape as vllm:cache_config_info (value 1; labels block_size, tokens per
// KV block, and num_gpu_blocks, the KV blocks in all), which the
// Inference Extension's prefix scorer reads.
type vllmCollector struct{ s *Server }

var (
	vllmRunning  = prometheus.NewDesc("vllm:num_requests_running", "Sequences holding KV blocks in the engine.", []string{"model_name"}, nil)
	vllmWaiting  = prometheus.NewDesc("vllm:num_requests_waiting", "Sequences queued for admission.", []string{"model_name"}, nil)
	vllmKVUsage  = prometheus.NewDesc("vllm:kv_cache_usage_perc", "Fraction of the cache memory (KV blocks and recurrent state slots) held by sequences (0..1).", []string{"model_name"}, nil)
	vllmGPUUsage = prometheus.NewDesc("vllm:gpu_cache_usage_perc", "Fraction of KV cache blocks held by sequences (0..1); the older name of vllm:kv_cache_usage_perc.", []string{"model_name"}, nil)
	vllmQueries  = prometheus.NewDesc("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache at admission.", []string{"model_name"}, nil)
	vllmHits     = prometheus.NewDesc("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache at admission.", []string{"model_name"}, nil)
	vllmCache    = prometheus.NewDesc("vllm:cache_config_info", "The KV cache's configuration in its labels: block_size (tokens per block) and num_gpu_blocks (blocks in all); the value is 1.",
		[]string{"model_name", "block_size", "num_gpu_blocks"}, nil)
)

// Describe implements prometheus.Collector.
func (c vllmCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{vllmRunning, vllmWaiting, vllmKVUsage, vllmGPUUsage, vllmQueries, vllmHits, vllmCache} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: nothing until a model is set.
func (c vllmCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.model.Load()
	if m == nil {
		return
	}
	snap := m.Engine.Snapshot()
	usage := snap.CacheUsage()
	ch <- prometheus.MustNewConstMetric(vllmRunning, prometheus.GaugeValue, float64(snap.Running), m.ID)
	ch <- prometheus.MustNewConstMetric(vllmWaiting, prometheus.GaugeValue, float64(snap.Waiting), m.ID)
	ch <- prometheus.MustNewConstMetric(vllmKVUsage, prometheus.GaugeValue, usage, m.ID)
	ch <- prometheus.MustNewConstMetric(vllmGPUUsage, prometheus.GaugeValue, usage, m.ID)
	ch <- prometheus.MustNewConstMetric(vllmQueries, prometheus.CounterValue, float64(snap.PrefixQueries), m.ID)
	ch <- prometheus.MustNewConstMetric(vllmHits, prometheus.CounterValue, float64(snap.PrefixHits), m.ID)
	ch <- prometheus.MustNewConstMetric(vllmCache, prometheus.GaugeValue, 1, m.ID, strconv.Itoa(snap.KVBlockTokens), strconv.Itoa(snap.KVBlocksTotal))
}

// observe records one finished sequence.
func (m *Metrics) observe(received time.Time, st engine.Stats, finish string) {
	m.recording.RLock()
	defer m.recording.RUnlock()
	m.promptTokens.Add(float64(st.PromptTokens))
	m.generationTokens.Add(float64(st.GeneratedTokens))
	m.success.WithLabelValues(finish).Inc()
	if !st.Started.IsZero() {
		m.queue.Observe(st.Queue.Seconds())
	}
	if !st.FirstToken.IsZero() {
		m.ttft.Observe(st.FirstToken.Sub(received).Seconds())
		if st.GeneratedTokens > 1 {
			m.tpot.Observe(st.Decode.Seconds() / float64(st.GeneratedTokens-1))
		}
	}
	if !st.Done.IsZero() {
		m.e2e.Observe(st.Done.Sub(received).Seconds())
	}
	if sp := st.Speculative; sp.Rounds > 0 {
		m.drafts.Add(float64(sp.Rounds))
		m.draftTokens.Add(float64(sp.Drafted))
		m.acceptedTokens.Add(float64(sp.Accepted))
		for i, n := range sp.AcceptedPerPosition {
			m.acceptedPerPos.WithLabelValues(strconv.Itoa(i)).Add(float64(n))
		}
	}
}

// requestTrace is the tracing state of one API request.
type requestTrace struct {
	ctx      context.Context // holds the root llm_request span
	received time.Time
}

// startTrace opens the request's root span, continuing a W3C traceparent
// sent by the caller, and returns its trace id ("" when none).
func (s *Server) startTrace(ctx *fasthttp.RequestCtx, received time.Time, id, model string, p Params) (requestTrace, string) {
	a := traces.RequestAttrs{ID: id, Model: model, MaxTokens: p.MaxTokens, Temperature: p.Temperature, TopP: p.TopP, N: p.N}
	tctx, _ := s.cfg.Traces.StartRequest(context.Background(), headerCarrier{&ctx.Request.Header}, received, a)
	rt := requestTrace{ctx: tctx, received: received}
	if sc := trace.SpanContextFromContext(tctx); sc.IsValid() {
		return rt, sc.TraceID().String()
	}
	return rt, ""
}

// finishTrace ends the root span with the phases of the request's choices
// (earliest start, latest end; chunks and rounds of the first choice) and
// records the metrics of each choice.
func (s *Server) finishTrace(rt requestTrace, prompts [][]int32, stats []engine.Stats, finishes []string, err error) {
	for i, st := range stats {
		s.metrics.observe(rt.received, st, finishes[i])
		s.recent.add(rt.received, st, finishes[i])
	}
	if !s.cfg.Traces.Enabled || len(stats) == 0 {
		return
	}
	ph := traces.Phases{Received: rt.received, Err: err, FinishReason: finishes[0],
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
