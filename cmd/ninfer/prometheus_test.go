//go:build prometheus

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// vllmSeries are the vllm: series a vLLM dashboard reads (histograms by
// their _count series), each of which must carry model_name.
var vllmSeries = []string{
	"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total", "vllm:num_preemptions_total",
	"vllm:time_to_first_token_seconds_count", "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_count",
	"vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count", "vllm:request_decode_time_seconds_count",
	"vllm:request_prompt_tokens_count", "vllm:request_generation_tokens_count", "vllm:request_params_n_count",
	"vllm:request_params_max_tokens_count", "vllm:iteration_tokens_total_count", "vllm:num_requests_running",
	"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
	"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
	"vllm:spec_decode_num_accepted_tokens_per_pos_total",
}

// TestPrometheus scrapes a real `ninfer serve` (the test binary as the
// CLI, startCLIServer; the ngram graph so that the spec-decode counters
// move) with a real Prometheus
// (PROMETHEUS_BIN, default /usr/bin/prometheus) every 250 ms while eight
// streaming clients run for LOAD_SECONDS (default 5), all on 127.0.0.1.
// Through Prometheus's HTTP API it checks histogram_quantile over TTFT and
// ITL during the load, that every vllm: series is there with model_name,
// that the generation token rate was seen while the load ran, and that the
// counters' totals equal what the clients were told. `just prometheus-test`
// runs it.
func TestPrometheus(t *testing.T) {
	promBin := os.Getenv("PROMETHEUS_BIN")
	if promBin == "" {
		promBin = "/usr/bin/prometheus"
	}
	if _, err := os.Stat(promBin); err != nil {
		t.Fatalf("prometheus is not installed (Debian: apt-get install prometheus): %v", err)
	}
	load := 5 * time.Second
	if v := os.Getenv("LOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("LOAD_SECONDS: %v", err)
		}
		load = time.Duration(n) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), load+time.Minute)
	defer cancel()

	srv := startCLIServer(t, "--model", sharedPath(t, "models", "stories260K.gguf"), "--graph", "ngram",
		"--max-concurrency", "8", "--threads", "2", "--no-request-log")
	base := srv.url

	dir := t.TempDir()
	target := strings.TrimPrefix(base, "http://")
	cfg := fmt.Sprintf("global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\nscrape_configs:\n  - job_name: ninfer\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	prom := exec.CommandContext(ctx, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	prom.Stderr = os.Stderr
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { prom.Process.Kill(); prom.Wait() }()
	pq := promQuery{base: "http://" + promAddr}
	waitFor(t, "prometheus ready and scraping ninfer", func() bool {
		v, ok := pq.scalar(t, `up{job="ninfer"}`)
		return ok && v == 1
	})

	// The load: eight streaming clients, each request with its own
	// max_tokens, summing the usage the server reported.
	var mu sync.Mutex
	var requests, promptTokens, completionTokens int
	stop := time.Now().Add(load)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				body := fmt.Sprintf(`{"model":"stories260K","prompt":"Once upon a time %d %d","max_tokens":%d,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`,
					c, i, 8+(c*7+i*3)%40)
				p, g, err := streamUsage(base+"/v1/completions", body)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				requests, promptTokens, completionTokens = requests+1, promptTokens+p, completionTokens+g
				mu.Unlock()
			}
		}()
	}
	// histogram_quantile over TTFT and ITL while the load runs.
	time.Sleep(min(load/2, 3*time.Second))
	for _, name := range []string{"vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"} {
		q := fmt.Sprintf(`histogram_quantile(0.9, sum by (le, model_name) (rate(%s_bucket{model_name="stories260K"}[2s])))`, name)
		var v float64
		waitFor(t, q, func() bool {
			var ok bool
			v, ok = pq.scalar(t, q)
			return ok && v > 0 && !math.IsNaN(v) && !math.IsInf(v, 0)
		})
		t.Logf("%s = %.4fs during the load", q, v)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d requests, %d prompt and %d completion tokens in %v", requests, promptTokens, completionTokens, load)

	// Once a scrape has seen every request finish, the totals are exact.
	waitFor(t, "every request counted", func() bool {
		v, ok := pq.scalar(t, `sum(vllm:request_success_total{model_name="stories260K"})`)
		return ok && int(v) == requests
	})
	time.Sleep(500 * time.Millisecond) // a further scrape, past the last request's figures
	got := map[string]int{}
	for _, name := range []string{"vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total",
		"vllm:request_generation_tokens_sum", "vllm:request_prompt_tokens_sum", "vllm:e2e_request_latency_seconds_count",
		"ninfer:generation_tokens_total"} {
		v, _ := pq.scalar(t, fmt.Sprintf(`sum(%s{model_name="stories260K"})`, name))
		got[name] = int(v)
	}
	want := map[string]int{
		"vllm:request_success_total":             requests,
		"vllm:prompt_tokens_total":               promptTokens,
		"vllm:generation_tokens_total":           completionTokens,
		"vllm:request_generation_tokens_sum":     completionTokens,
		"vllm:request_prompt_tokens_sum":         promptTokens,
		"vllm:e2e_request_latency_seconds_count": requests,
		"ninfer:generation_tokens_total":         completionTokens,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus totals vs the clients' usage (-want +got):\n%s", diff)
	}
	// The generation rate was seen while the load ran, not only at the
	// end: its peak over the run is within the run's average rate's order.
	peak, _ := pq.scalar(t, fmt.Sprintf(`max_over_time(sum(rate(vllm:generation_tokens_total{model_name="stories260K"}[1s]))[%ds:250ms])`, int(load.Seconds())+5))
	if avg := float64(completionTokens) / load.Seconds(); !(peak >= avg/2) {
		t.Errorf("peak generation rate %.1f tok/s, want at least half the run's average %.1f tok/s", peak, avg)
	}
	var missing []string
	for _, name := range vllmSeries {
		if v, ok := pq.scalar(t, fmt.Sprintf(`count(%s{model_name="stories260K"})`, name)); !ok || v < 1 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		t.Errorf("series missing or without model_name: %v", missing)
	}
	if v, _ := pq.scalar(t, `sum(vllm:spec_decode_num_draft_tokens_total{model_name="stories260K"})`); v <= 0 {
		t.Errorf("vllm:spec_decode_num_draft_tokens_total = %g under the ngram graph, want > 0", v)
	}
}

// streamUsage posts a streaming completion and returns the usage of its
// last chunk.
func streamUsage(url, body string) (prompt, completion int, err error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("POST %s: status %d", url, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	seen := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			return 0, 0, err
		}
		if chunk.Usage != nil {
			prompt, completion, seen = chunk.Usage.PromptTokens, chunk.Usage.CompletionTokens, true
		}
	}
	if !seen {
		return 0, 0, fmt.Errorf("stream without usage")
	}
	return prompt, completion, sc.Err()
}

// promQuery asks a Prometheus server's HTTP API.
type promQuery struct{ base string }

// scalar is the value of an instant query's single sample (ok false when
// the query fails or has no or several samples).
func (p promQuery) scalar(t *testing.T, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return 0, false
	}
	if r.Status != "success" {
		t.Errorf("query %s: %s", q, r.Error)
		return 0, false
	}
	if len(r.Data.Result) != 1 {
		return 0, false
	}
	s, _ := r.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
