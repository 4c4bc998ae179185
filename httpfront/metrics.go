package httpfront

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// Metrics are the server's Prometheus metrics, every series labelled with
// the served model's model_name. The vllm: series carry vLLM's names,
// meanings and histogram buckets, so its Grafana dashboards and routers
// read them unchanged; the ninfer: series are the server's own (the load
// gauges and vLLM's older request metrics, with ninfer's buckets).
type Metrics struct {
	reg *prometheus.Registry
	// series are the served model's counters and histograms; nil until
	// SetModel.
	series  atomic.Pointer[modelSeries]
	handler fasthttp.RequestHandler
	// recording is held shared while a request's figures are recorded
	// and exclusively while /metrics gathers, so that a scrape sees each
	// finished request's figures all or not at all.
	recording sync.RWMutex
}

// Histogram buckets. The vllm: ones are vLLM's (vllm/v1/metrics/loggers.py).
var (
	latencyBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

	vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
		20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	vllmITLBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
		20.0, 40.0, 80.0}
	vllmRequestLatencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
		120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
	vllmIterationBuckets = []float64{1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}
	vllmNBuckets         = []float64{1, 2, 5, 10, 20}
)

// buckets125 are vLLM's token-count buckets: 1, 2, 5, 10, 20, 50, ... up
// to and including max.
func buckets125(max int) []float64 {
	var b []float64
	for exp := 1; ; exp *= 10 {
		for _, m := range []int{1, 2, 5} {
			if m*exp > max {
				return b
			}
			b = append(b, float64(m*exp))
		}
	}
}

// newMetrics registers the metrics; the gauges read the model s serves.
func newMetrics(s *Server) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(loadCollector{s}, seriesCollector{m})
	m.handler = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(prometheus.GathererFunc(m.gather), promhttp.HandlerOpts{}))
	return m
}

// gather collects every metric, each finished request's figures all or
// not at all.
func (m *Metrics) gather() ([]*dto.MetricFamily, error) {
	m.recording.Lock()
	defer m.recording.Unlock()
	return m.reg.Gather()
}

// modelSeries are one served model's counters and histograms, each with
// the constant label model_name.
type modelSeries struct {
	all []prometheus.Collector // every series below, for Collect

	// ninfer: request metrics, recorded when a sequence finishes.
	nPrompt, nGeneration             prometheus.Counter
	nSuccess                         *prometheus.CounterVec // by finished_reason
	nTTFT, nTPOT, nE2E, nQueue       prometheus.Histogram
	nDrafts, nDraftTokens, nAccepted prometheus.Counter
	nAcceptedPerPos                  *prometheus.CounterVec // by position
	nImages                          prometheus.Counter
	nVision                          prometheus.Histogram

	// vllm: metrics. prompt, generation and itl are recorded as tokens
	// arrive (tokenClock), iteration per engine step (ObserveStep), the
	// rest when a sequence or request finishes.
	prompt, generation, preemptions        prometheus.Counter
	success                                *prometheus.CounterVec // by finished_reason
	ttft, itl, e2e, queue, prefill, decode prometheus.Histogram
	reqPrompt, reqGeneration               prometheus.Histogram
	paramsN, paramsMaxTokens, iteration    prometheus.Histogram
	drafts, draftTokens, accepted          prometheus.Counter
	acceptedPerPos                         *prometheus.CounterVec // by position
}

// newModelSeries makes the series of the model named id whose requests
// hold at most context tokens (the token-count histograms' last bucket).
func newModelSeries(id string, context int) *modelSeries {
	ms := &modelSeries{}
	labels := prometheus.Labels{"model_name": id}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
		ms.all = append(ms.all, c)
		return c
	}
	counterVec := func(name, help, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, []string{label})
		ms.all = append(ms.all, c)
		return c
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		ms.all = append(ms.all, h)
		return h
	}
	tokens := buckets125(max(context, 1))

	ms.nPrompt = counter("ninfer:prompt_tokens_total", "Prompt tokens of finished requests.")
	ms.nGeneration = counter("ninfer:generation_tokens_total", "Generated tokens of finished requests.")
	ms.nSuccess = counterVec("ninfer:request_success_total", "Finished sequences by finish reason.", "finished_reason")
	ms.nTTFT = histogram("ninfer:time_to_first_token_seconds", "Arrival to first token.", latencyBuckets)
	ms.nTPOT = histogram("ninfer:time_per_output_token_seconds", "Decode time per output token after the first.", latencyBuckets)
	ms.nE2E = histogram("ninfer:e2e_request_latency_seconds", "Arrival to last token.", latencyBuckets)
	ms.nQueue = histogram("ninfer:request_queue_time_seconds", "Time a sequence waited for its first engine step.", latencyBuckets)
	ms.nDrafts = counter("ninfer:spec_decode_num_drafts_total", "Speculative verify rounds.")
	ms.nDraftTokens = counter("ninfer:spec_decode_num_draft_tokens_total", "Speculative tokens proposed.")
	ms.nAccepted = counter("ninfer:spec_decode_num_accepted_tokens_total", "Speculative tokens accepted.")
	ms.nAcceptedPerPos = counterVec("ninfer:spec_decode_num_accepted_tokens_per_pos", "Speculative tokens accepted at each draft position.", "position")
	ms.nImages = counter("ninfer:images_total", "Images of finished requests, encoded by the vision tower.")
	ms.nVision = histogram("ninfer:vision_seconds", "Time a request's images took to decode and encode, for requests with images.", latencyBuckets)

	ms.prompt = counter("vllm:prompt_tokens_total", "Prompt tokens, counted when a sequence's prefill yields its first token.")
	ms.generation = counter("vllm:generation_tokens_total", "Generated tokens, counted as each engine step yields them.")
	ms.preemptions = counter("vllm:num_preemptions_total", "Sequences preempted (their KV freed, to be recomputed).")
	ms.success = counterVec("vllm:request_success_total", "Finished sequences by finish reason (stop, length, abort, error).", "finished_reason")
	ms.ttft = histogram("vllm:time_to_first_token_seconds", "Arrival to first token, in seconds.", vllmTTFTBuckets)
	ms.itl = histogram("vllm:inter_token_latency_seconds", "Time between consecutive tokens of a sequence, one observation per token after the first, in seconds.", vllmITLBuckets)
	ms.e2e = histogram("vllm:e2e_request_latency_seconds", "Arrival to last token, in seconds.", vllmRequestLatencyBuckets)
	ms.queue = histogram("vllm:request_queue_time_seconds", "Submission to the sequence's first engine step, in seconds.", vllmRequestLatencyBuckets)
	ms.prefill = histogram("vllm:request_prefill_time_seconds", "First engine step to first token, in seconds.", vllmRequestLatencyBuckets)
	ms.decode = histogram("vllm:request_decode_time_seconds", "First token to last token, in seconds.", vllmRequestLatencyBuckets)
	ms.reqPrompt = histogram("vllm:request_prompt_tokens", "Prompt tokens per sequence.", tokens)
	ms.reqGeneration = histogram("vllm:request_generation_tokens", "Generated tokens per sequence.", tokens)
	ms.paramsN = histogram("vllm:request_params_n", "The n parameter of each request.", vllmNBuckets)
	ms.paramsMaxTokens = histogram("vllm:request_params_max_tokens", "The max_tokens of each request (the default filled in when absent).", tokens)
	ms.iteration = histogram("vllm:iteration_tokens_total", "Tokens computed per engine step (prefill and decode rows).", vllmIterationBuckets)
	ms.drafts = counter("vllm:spec_decode_num_drafts_total", "Speculative verify rounds.")
	ms.draftTokens = counter("vllm:spec_decode_num_draft_tokens_total", "Draft tokens proposed and verified.")
	ms.accepted = counter("vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.")
	ms.acceptedPerPos = counterVec("vllm:spec_decode_num_accepted_tokens_per_pos_total", "Draft tokens accepted at each draft position.", "position")
	return ms
}

// setModel starts the series of the model m serves (counting from zero).
func (m *Metrics) setModel(md *Model) {
	m.series.Store(newModelSeries(md.ID, md.Engine.ContextLength()))
}

// seriesCollector exports the current model's series. It describes
// nothing (an unchecked collector), since the series appear with the
// model.
type seriesCollector struct{ m *Metrics }

// Describe implements prometheus.Collector.
func (seriesCollector) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (c seriesCollector) Collect(ch chan<- prometheus.Metric) {
	ms := c.m.series.Load()
	if ms == nil {
		return
	}
	for _, x := range ms.all {
		x.Collect(ch)
	}
}

// loadCollector exports the engine's load, read from its snapshot at each
// scrape, under vLLM's names (for the routers that scrape them: the
// Gateway API Inference Extension's endpoint picker, the vLLM
// production-stack router) and ninfer's: requests running and waiting,
// cache usage (0..1, also under vLLM's older gpu_cache_usage_perc name)
// prefix cache queries and hits (prompt tokens looked up at admission,
// and found cached), and the cache's shape as vllm:cache_config_info
// (value 1; labels block_size, tokens per KV block, and num_gpu_blocks,
// the KV blocks in all), which the Inference Extension's prefix scorer
// reads.
type loadCollector struct{ s *Server }

var (
	loadRunning       = loadDesc("vllm:num_requests_running", "Sequences holding KV blocks in the engine.")
	loadWaiting       = loadDesc("vllm:num_requests_waiting", "Sequences queued for admission.")
	loadKVUsage       = loadDesc("vllm:kv_cache_usage_perc", "Fraction of the cache memory (KV blocks and recurrent state slots) held by sequences (0..1).")
	loadGPUUsage      = loadDesc("vllm:gpu_cache_usage_perc", "Fraction of KV cache blocks held by sequences (0..1); the older name of vllm:kv_cache_usage_perc.")
	loadQueries       = loadDesc("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache at admission.")
	loadHits          = loadDesc("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache at admission.")
	loadNinferRunning = loadDesc("ninfer:num_requests_running", "Sequences holding KV blocks in the engine.")
	loadNinferWaiting = loadDesc("ninfer:num_requests_waiting", "Sequences queued for admission.")
	loadNinferUsage   = loadDesc("ninfer:kv_cache_usage_perc", "Fraction of the cache memory (KV blocks and recurrent state slots) held by sequences (0..1).")
	loadCheckpoints   = loadDesc("ninfer:state_checkpoints", "Recurrent state checkpoints held (a hybrid model's prefix cache).")
	loadCheckpointMem = loadDesc("ninfer:state_checkpoint_bytes", "Memory of the recurrent state checkpoints held, in bytes.")
	loadCacheConfig   = prometheus.NewDesc("vllm:cache_config_info", "The KV cache's configuration in its labels: block_size (tokens per block) and num_gpu_blocks (blocks in all); the value is 1.",
		[]string{"model_name", "block_size", "num_gpu_blocks"}, nil)
)

func loadDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"model_name"}, nil)
}

// Describe implements prometheus.Collector.
func (c loadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{loadRunning, loadWaiting, loadKVUsage, loadGPUUsage, loadQueries, loadHits,
		loadNinferRunning, loadNinferWaiting, loadNinferUsage, loadCheckpoints, loadCheckpointMem, loadCacheConfig} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: nothing until a model is set.
func (c loadCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.s.model.Load()
	if m == nil {
		return
	}
	snap := m.Engine.Snapshot()
	usage := snap.CacheUsage()
	for _, g := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{loadRunning, prometheus.GaugeValue, float64(snap.Running)},
		{loadWaiting, prometheus.GaugeValue, float64(snap.Waiting)},
		{loadKVUsage, prometheus.GaugeValue, usage},
		{loadGPUUsage, prometheus.GaugeValue, usage},
		{loadQueries, prometheus.CounterValue, float64(snap.PrefixQueries)},
		{loadHits, prometheus.CounterValue, float64(snap.PrefixHits)},
		{loadNinferRunning, prometheus.GaugeValue, float64(snap.Running)},
		{loadNinferWaiting, prometheus.GaugeValue, float64(snap.Waiting)},
		{loadNinferUsage, prometheus.GaugeValue, usage},
	} {
		ch <- prometheus.MustNewConstMetric(g.d, g.t, g.v, m.ID)
	}
	if snap.CheckpointsMax > 0 {
		ch <- prometheus.MustNewConstMetric(loadCheckpoints, prometheus.GaugeValue, float64(snap.Checkpoints), m.ID)
		ch <- prometheus.MustNewConstMetric(loadCheckpointMem, prometheus.GaugeValue, float64(snap.CheckpointBytes()), m.ID)
	}
	ch <- prometheus.MustNewConstMetric(loadCacheConfig, prometheus.GaugeValue, 1, m.ID,
		strconv.Itoa(snap.KVBlockTokens), strconv.Itoa(snap.KVBlocksTotal))
}

// ObserveStep implements engine.StepObserver: vllm:iteration_tokens_total
// observes the tokens each step computed. Give the server to the engine
// with StepObservers.
func (s *Server) ObserveStep(info engine.StepInfo) {
	if ms := s.metrics.series.Load(); ms != nil && info.Rows > 0 {
		ms.iteration.Observe(float64(info.Rows))
	}
}

// StepObservers is one engine.StepObserver that tells each of obs (nil
// ones skipped) about every step, in order.
func StepObservers(obs ...engine.StepObserver) engine.StepObserver {
	var list stepObservers
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return list
}

type stepObservers []engine.StepObserver

func (l stepObservers) ObserveStep(info engine.StepInfo) {
	for _, o := range l {
		o.ObserveStep(info)
	}
}

// tokenClock records one sequence's tokens as they arrive from the
// engine: vllm:generation_tokens_total per token, vllm:prompt_tokens_total
// at the first, and the gap between consecutive tokens in
// vllm:inter_token_latency_seconds.
type tokenClock struct {
	ms     *modelSeries // nil: no model series (recording off)
	prompt int
	last   time.Time
}

// token records one generated token received at now.
func (c *tokenClock) token(now time.Time) {
	if c.ms == nil {
		return
	}
	c.ms.generation.Inc()
	if c.last.IsZero() {
		c.ms.prompt.Add(float64(c.prompt))
	} else {
		c.ms.itl.Observe(now.Sub(c.last).Seconds())
	}
	c.last = now
}

// observeRequest records one finished request: its parameters (n and the
// max_tokens its choices ran with) and each choice's figures.
func (m *Metrics) observeRequest(received time.Time, n, maxTokens int, vision VisionTiming, stats []engine.Stats, finishes []string) {
	ms := m.series.Load()
	if ms == nil || len(stats) == 0 {
		return
	}
	m.recording.RLock()
	defer m.recording.RUnlock()
	if vision.Images > 0 {
		ms.nImages.Add(float64(vision.Images))
		ms.nVision.Observe(vision.End.Sub(vision.Start).Seconds())
	}
	ms.paramsN.Observe(float64(n))
	ms.paramsMaxTokens.Observe(float64(maxTokens))
	for i, st := range stats {
		ms.observe(received, st, finishes[i])
	}
}

// observe records one finished sequence.
func (ms *modelSeries) observe(received time.Time, st engine.Stats, finish string) {
	ms.nPrompt.Add(float64(st.PromptTokens))
	ms.nGeneration.Add(float64(st.GeneratedTokens))
	ms.nSuccess.WithLabelValues(finish).Inc()
	ms.success.WithLabelValues(finish).Inc()
	ms.preemptions.Add(float64(st.Preempted))
	ms.reqPrompt.Observe(float64(st.PromptTokens))
	ms.reqGeneration.Observe(float64(st.GeneratedTokens))
	if !st.Started.IsZero() {
		ms.nQueue.Observe(st.Queue.Seconds())
		ms.queue.Observe(st.Queue.Seconds())
	}
	if !st.FirstToken.IsZero() {
		ttft := st.FirstToken.Sub(received).Seconds()
		ms.nTTFT.Observe(ttft)
		ms.ttft.Observe(ttft)
		ms.prefill.Observe(st.Prefill.Seconds())
		ms.decode.Observe(st.Decode.Seconds())
		if st.GeneratedTokens > 1 {
			ms.nTPOT.Observe(st.Decode.Seconds() / float64(st.GeneratedTokens-1))
		}
	}
	if !st.Done.IsZero() {
		e2e := st.Done.Sub(received).Seconds()
		ms.nE2E.Observe(e2e)
		ms.e2e.Observe(e2e)
	}
	if sp := st.Speculative; sp.Rounds > 0 {
		for _, c := range []struct {
			ninfer, vllm prometheus.Counter
			v            int
		}{{ms.nDrafts, ms.drafts, sp.Rounds}, {ms.nDraftTokens, ms.draftTokens, sp.Drafted}, {ms.nAccepted, ms.accepted, sp.Accepted}} {
			c.ninfer.Add(float64(c.v))
			c.vllm.Add(float64(c.v))
		}
		for i, n := range sp.AcceptedPerPosition {
			pos := strconv.Itoa(i)
			ms.nAcceptedPerPos.WithLabelValues(pos).Add(float64(n))
			ms.acceptedPerPos.WithLabelValues(pos).Add(float64(n))
		}
	}
}
