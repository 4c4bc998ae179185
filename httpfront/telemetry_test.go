package httpfront_test

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/traces"
)

// startTraced serves stories260K with tracing into a span recorder.
func startTraced(t *testing.T) (*server, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := traces.NewWithSDK(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	opts := instance.Options{Model: modelPath(t, "stories260K.gguf"), Threads: threads(t), MaxRunning: 4, Observer: tp}
	return startWith(t, opts, httpfront.Config{Traces: tp}), rec
}

const caller = "4bf92f3577b34da6a3ce929d0e0e4736"

func TestTraceSpanTree(t *testing.T) {
	s, rec := startTraced(t)
	req, _ := http.NewRequest("POST", s.url+"/v1/completions",
		strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":6,"temperature":0}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+caller+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(httpfront.TraceIDHeader) != caller {
		t.Fatalf("status %d, %s %q, want 200 and the caller's trace id", resp.StatusCode, httpfront.TraceIDHeader, resp.Header.Get(httpfront.TraceIDHeader))
	}
	var root sdktrace.ReadOnlySpan
	deadline := time.Now().Add(5 * time.Second)
	for root == nil && time.Now().Before(deadline) {
		for _, sp := range rec.Ended() {
			if sp.Name() == traces.SpanRequest {
				root = sp
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if root == nil {
		t.Fatal("no llm_request span")
	}
	if root.SpanContext().TraceID().String() != caller || root.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("root trace %s parent %s, want the caller's", root.SpanContext().TraceID(), root.Parent().SpanID())
	}
	children := map[string]int{}
	steps := 0
	for _, sp := range rec.Ended() {
		if sp.Parent().SpanID() == root.SpanContext().SpanID() {
			children[sp.Name()]++
		}
		if sp.Name() == traces.SpanEngineStep {
			for _, l := range sp.Links() {
				if l.SpanContext.SpanID() == root.SpanContext().SpanID() {
					steps++
				}
			}
		}
	}
	if diff := cmp.Diff(map[string]int{traces.SpanQueue: 1, traces.SpanPrepare: 1, traces.SpanPrefill: 1, traces.SpanDecode: 1}, children); diff != "" {
		t.Errorf("children of llm_request (-want +got):\n%s", diff)
	}
	if steps != 6 { // one prefill step and five decode steps produce six tokens
		t.Errorf("%d engine.step spans link the request, want 6", steps)
	}
	attrs := map[string]any{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	for _, k := range []string{traces.AttrRequestID, traces.AttrMaxTokens, traces.AttrTemperature, traces.AttrTopP,
		traces.AttrPromptTokens, traces.AttrCompletionTokens, traces.AttrTTFT, traces.AttrTimeInQueue,
		traces.AttrTimeInPrefill, traces.AttrTimeInDecode, traces.AttrE2E} {
		if _, ok := attrs[k]; !ok {
			t.Errorf("llm_request lacks %s", k)
		}
	}
	if attrs[traces.AttrCompletionTokens] != int64(6) || attrs[traces.AttrPromptTokens] != int64(5) {
		t.Errorf("usage attributes %v / %v, want 5 prompt and 6 completion tokens", attrs[traces.AttrPromptTokens], attrs[traces.AttrCompletionTokens])
	}
}

func TestMetricsAndIntervals(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	since := time.Now().UnixMilli()
	for i := range 3 {
		code, body := s.call(t, "POST", "/v1/completions", `{"model":"stories260K","prompt":"Lily","max_tokens":`+[]string{"4", "5", "6"}[i]+`}`)
		if code != 200 {
			t.Fatalf("completion: %d %v", code, body)
		}
	}
	// A request's metrics are recorded when its last choice ends, just
	// after the response is written: wait until all three are counted.
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fams = scrape(t, s.url)
		if f := fams["ninfer:request_success_total"]; f != nil && sumMetric(f) == 3 || time.Now().After(deadline) {
			break
		}
	}
	value := func(name string) float64 {
		f, ok := fams[name]
		if !ok || len(f.Metric) == 0 {
			t.Errorf("metric %s missing", name)
			return -1
		}
		return sumMetric(f)
	}
	prompt := float64(len(s.inst.Tokenizer.Encode("Lily", true, true)))
	for name, want := range map[string]float64{
		"ninfer:prompt_tokens_total":           3 * prompt,
		"ninfer:generation_tokens_total":       15,
		"ninfer:request_success_total":         3,
		"ninfer:time_to_first_token_seconds":   3,
		"ninfer:e2e_request_latency_seconds":   3,
		"ninfer:time_per_output_token_seconds": 3,
		"ninfer:num_requests_running":          0,
		"ninfer:num_requests_waiting":          0,
		"ninfer:kv_cache_usage_perc":           0,
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}

	code, body := s.call(t, "GET", "/v1/stats/intervals?since_unix_ms="+strconv.FormatInt(since, 10), "")
	if code != 200 {
		t.Fatalf("intervals: %d %v", code, body)
	}
	var ivs struct {
		Intervals []engine.Interval `json:"intervals"`
	}
	b, _ := json.Marshal(body)
	json.Unmarshal(b, &ivs)
	var decode int
	for _, iv := range ivs.Intervals {
		decode += iv.DecodeTokens
	}
	if decode != 15-3 { // each request's first token comes from its prefill
		t.Errorf("intervals count %d decode tokens, want 12: %+v", decode, ivs.Intervals)
	}
	if code, _ := s.call(t, "GET", "/v1/stats/intervals?since_unix_ms=x", ""); code != 400 {
		t.Errorf("bad since_unix_ms: status %d, want 400", code)
	}
}

// TestVLLMMetrics: the vllm: series a vLLM dashboard reads add up to what
// the clients were told, each labelled with the model's name.
func TestVLLMMetrics(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	completion := 0
	for _, max := range []int{4, 5, 6} {
		u := s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"Lily","max_tokens":`+strconv.Itoa(max)+`,"temperature":0,"ignore_eos":true}`)["usage"].(map[string]any)
		completion += int(u["completion_tokens"].(float64))
	}
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fams = scrape(t, s.url)
		if f := fams["vllm:request_success_total"]; f != nil && sumMetric(f) == 3 || time.Now().After(deadline) {
			break
		}
	}
	prompt := len(s.inst.Tokenizer.Encode("Lily", true, true))
	got := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "vllm:") {
			continue
		}
		got[name] = sumMetric(f)
		for _, m := range f.GetMetric() {
			if labelValue(m, "model_name") != "stories260K" {
				t.Errorf("%s has no model_name=\"stories260K\" label: %v", name, m.GetLabel())
			}
		}
	}
	want := map[string]float64{
		"vllm:prompt_tokens_total":                   float64(3 * prompt),
		"vllm:generation_tokens_total":               float64(completion),
		"vllm:request_success_total":                 3,
		"vllm:num_preemptions_total":                 0,
		"vllm:time_to_first_token_seconds":           3,
		"vllm:inter_token_latency_seconds":           float64(completion - 3), // one per token after each first
		"vllm:e2e_request_latency_seconds":           3,
		"vllm:request_queue_time_seconds":            3,
		"vllm:request_prefill_time_seconds":          3,
		"vllm:request_decode_time_seconds":           3,
		"vllm:request_prompt_tokens":                 3,
		"vllm:request_generation_tokens":             3,
		"vllm:request_params_n":                      3,
		"vllm:request_params_max_tokens":             3,
		"vllm:iteration_tokens_total":                got["vllm:iteration_tokens_total"], // steps: checked by their sum below
		"vllm:num_requests_running":                  0,
		"vllm:num_requests_waiting":                  0,
		"vllm:kv_cache_usage_perc":                   0,
		"vllm:gpu_cache_usage_perc":                  0,
		"vllm:cache_config_info":                     1,
		"vllm:prefix_cache_queries_total":            got["vllm:prefix_cache_queries_total"],
		"vllm:prefix_cache_hits_total":               0,
		"vllm:spec_decode_num_drafts_total":          0,
		"vllm:spec_decode_num_draft_tokens_total":    0,
		"vllm:spec_decode_num_accepted_tokens_total": 0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("vllm: metrics (-want +got):\n%s", diff)
	}
	hsum := func(name string) float64 { return fams[name].GetMetric()[0].GetHistogram().GetSampleSum() }
	sums := map[string]float64{
		"vllm:request_params_max_tokens": hsum("vllm:request_params_max_tokens"),
		"vllm:request_generation_tokens": hsum("vllm:request_generation_tokens"),
		"vllm:request_prompt_tokens":     hsum("vllm:request_prompt_tokens"),
		"vllm:iteration_tokens_total":    hsum("vllm:iteration_tokens_total"),
	}
	wantSums := map[string]float64{
		"vllm:request_params_max_tokens": 4 + 5 + 6,
		"vllm:request_generation_tokens": float64(completion),
		"vllm:request_prompt_tokens":     float64(3 * prompt),
		// Each request computes its prompt, then one row per token
		// after the first (the last token is never fed back).
		"vllm:iteration_tokens_total": float64(3*prompt + completion - 3),
	}
	if diff := cmp.Diff(wantSums, sums); diff != "" {
		t.Errorf("histogram sums (-want +got):\n%s", diff)
	}
	buckets := func(name string) []float64 {
		var b []float64
		for _, x := range fams[name].GetMetric()[0].GetHistogram().GetBucket() {
			if !math.IsInf(x.GetUpperBound(), 1) {
				b = append(b, x.GetUpperBound())
			}
		}
		return b
	}
	if diff := cmp.Diff([]float64{1, 2, 5, 10, 20, 50, 100, 200, 500}, buckets("vllm:request_prompt_tokens")); diff != "" {
		t.Errorf("token buckets are not vLLM's 1-2-5 series up to the context (512) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{1, 2, 5, 10, 20}, buckets("vllm:request_params_n")); diff != "" {
		t.Errorf("n buckets (-want +got):\n%s", diff)
	}
}

// labelValue is m's value of label name ("" without it).
func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestJSONNotHTMLEscaped: special-token text reaches clients as written.
func TestJSONNotHTMLEscaped(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	resp, err := http.Post(s.url+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"hi","max_tokens":8,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "<fill") || strings.Contains(string(b), `\u003c`) {
		t.Errorf("body has HTML-escaped or no <fillN> text: %s", b)
	}
}

// TestSpeculativeMetrics: the spec_decode counters add up the requests'
// draft counts that timings report.
func TestSpeculativeMetrics(t *testing.T) {
	s := startGraph(t, "stories260K.gguf", "ngram")
	body := `{"model":"stories260K","prompt":"the cat sat on the mat. the cat sat on the mat. the cat sat","max_tokens":24,"temperature":0}`
	tm := s.completion(t, "/v1/completions", body)["timings"].(map[string]any)
	var fams map[string]*dto.MetricFamily
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		fams = scrape(t, s.url)
		if f := fams["ninfer:request_success_total"]; f != nil && sumMetric(f) == 1 || time.Now().After(deadline) {
			break
		}
	}
	sum := func(name string) float64 { return sumMetric(fams[name]) }
	if got, want := sum("ninfer:spec_decode_num_draft_tokens_total"), tm["draft_n"].(float64); got != want || got == 0 {
		t.Errorf("draft tokens counter %g, timings draft_n %g", got, want)
	}
	if got, want := sum("ninfer:spec_decode_num_accepted_tokens_total"), tm["draft_n_accepted"].(float64); got != want {
		t.Errorf("accepted tokens counter %g, timings draft_n_accepted %g", got, want)
	}
	if got, want := sum("ninfer:spec_decode_num_accepted_tokens_per_pos"), tm["draft_n_accepted"].(float64); got != want {
		t.Errorf("accepted per position sums to %g, want %g", got, want)
	}
	for _, name := range []string{"spec_decode_num_drafts_total", "spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total"} {
		if got, want := sum("vllm:"+name), sum("ninfer:"+name); got != want {
			t.Errorf("vllm:%s = %g, ninfer:%s = %g", name, got, name, want)
		}
	}
	if got, want := sum("vllm:spec_decode_num_accepted_tokens_per_pos_total"), tm["draft_n_accepted"].(float64); got != want {
		t.Errorf("vllm: accepted per position sums to %g, want %g", got, want)
	}
}

// scrape fetches and parses /metrics.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return fams
}

// sumMetric adds a family's counters and gauges, and its histograms' counts.
func sumMetric(f *dto.MetricFamily) float64 {
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// vllm:cache_config_info gives the KV cache's shape in its labels (value
// 1): block_size tokens per block and num_gpu_blocks blocks, which hold
// the configured KV capacity, as /health reports them.
func TestCacheConfigInfo(t *testing.T) {
	const kvTokens = 1024
	s := startWith(t, instance.Options{Model: modelPath(t, "stories260K.gguf"), Threads: threads(t), MaxRunning: 2, KVTokens: kvTokens}, httpfront.Config{})
	h := s.health(t)
	f := scrape(t, s.url)["vllm:cache_config_info"]
	if f == nil || len(f.GetMetric()) != 1 {
		t.Fatalf("vllm:cache_config_info: missing or not one series: %v", f)
	}
	m := f.GetMetric()[0]
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	want := map[string]string{"model_name": "stories260K", "block_size": strconv.Itoa(h.KVBlockTokens), "num_gpu_blocks": strconv.Itoa(h.KVBlocksTotal)}
	if d := cmp.Diff(want, labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	if h.KVBlockTokens*h.KVBlocksTotal != kvTokens {
		t.Errorf("%d blocks of %d tokens, want %d tokens", h.KVBlocksTotal, h.KVBlockTokens, kvTokens)
	}
	if f.GetType() != dto.MetricType_GAUGE || m.GetGauge().GetValue() != 1 {
		t.Errorf("vllm:cache_config_info is %v %v, want a gauge of 1", f.GetType(), m.GetGauge())
	}
}
