package httpfront_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
)

// idList renders ids as a JSON array body fragment.
func idList(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(s, ",") + "]"
}

// A known sequence of requests: usage.prompt_tokens_details.cached_tokens
// and timings.cache_n report the hits, and /metrics exports vLLM's names
// with the model_name label and exact values; on a hybrid model the hits
// resume from recurrent state checkpoints, counted by
// ninfer:state_checkpoints, with the same figures.
func TestPrefixCacheUsageAndVLLMMetrics(t *testing.T) {
	for _, model := range []string{"stories260K", "tiny-qwen35-f32"} {
		t.Run(model, func(t *testing.T) { prefixCacheUsage(t, model) })
	}
}

func prefixCacheUsage(t *testing.T, model string) {
	s := start(t, model+".gguf", httpfront.Config{}, 2) // 16-token blocks
	a := make([]int, 40)
	for i := range a {
		a[i] = 10 + i
	}
	extended := append(append([]int(nil), a...), make([]int, 20)...)
	for i := 40; i < 60; i++ {
		extended[i] = 300 + i
	}
	for _, tc := range []struct {
		prompt []int
		cached int
	}{
		{a, 0},         // nothing cached yet
		{a, 32},        // two full blocks; the third (8 tokens) is partial
		{extended, 32}, // the third block differs from a's
	} {
		doc := s.completion(t, "/v1/completions", fmt.Sprintf(`{"model":"%s","prompt":%s,"max_tokens":4,"temperature":0}`, model, idList(tc.prompt)))
		u := doc["usage"].(map[string]any)
		tm := doc["timings"].(map[string]any)
		got := u["prompt_tokens_details"].(map[string]any)["cached_tokens"]
		if got != float64(tc.cached) || tm["cache_n"] != float64(tc.cached) || tm["prompt_n"] != float64(len(tc.prompt)-tc.cached) {
			t.Errorf("prompt of %d tokens: usage %v timings cache_n %v prompt_n %v; want %d cached", len(tc.prompt), u, tm["cache_n"], tm["prompt_n"], tc.cached)
		}
	}
	s.waitIdle(t)
	fams := scrape(t, s.url)
	want := map[string]float64{
		"vllm:prefix_cache_queries_total": 40 + 40 + 60,
		"vllm:prefix_cache_hits_total":    32 + 32,
		"vllm:num_requests_running":       0,
		"vllm:num_requests_waiting":       0,
		"vllm:kv_cache_usage_perc":        0,
		"vllm:gpu_cache_usage_perc":       0,
	}
	if model == "tiny-qwen35-f32" {
		// The prompts' last block boundaries: 32 (a) and 48 (extended).
		want["ninfer:state_checkpoints"] = 2
	}
	for name, want := range want {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 {
			t.Errorf("%s: missing or not one series: %v", name, f)
			continue
		}
		m := f.GetMetric()[0]
		if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "model_name" || l[0].GetValue() != model {
			t.Errorf("%s: labels %v, want model_name=%s", name, l, model)
		}
		if got := sumMetric(f); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
}

// /ready is 503 while the queue is full and while draining.
func TestReadyWhenBusyAndDraining(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{MaxQueue: 1}, 1)
	if status, doc := s.call(t, "GET", "/ready", ""); status != 200 {
		t.Fatalf("/ready idle: %d %v", status, doc)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions",
		strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":4000,"n":2,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if status, doc := s.call(t, "GET", "/ready", ""); status != 503 || doc["status"] != "busy" {
		t.Errorf("/ready with the queue full: %d %v, want 503 busy", status, doc)
	}
	if status, _ := s.call(t, "POST", "/ready", "{}"); status != 405 {
		t.Errorf("POST /ready: %d, want 405", status)
	}
	cancel()
	resp.Body.Close()
	s.waitIdle(t)
	go s.srv.Shutdown(context.Background())
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := http.Get(s.url + "/ready")
		if err != nil {
			break // the listener closed: drained
		}
		var doc map[string]any
		json.NewDecoder(r.Body).Decode(&doc)
		r.Body.Close()
		if r.StatusCode == 503 && doc["status"] == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready while draining: %d %v", r.StatusCode, doc)
		}
	}
}

// A hybrid model checkpoints its state where each chat message ends
// (rounded down to a block): sixteen concurrent chats that share a long
// system message but not their user messages all resume after the system
// message's whole blocks once one of them has computed it, and give the
// ids they give with the prefix cache off.
func TestHybridSharedSystemMessageHits(t *testing.T) {
	words := make([]string, 120)
	for i := range words {
		words[i] = fmt.Sprintf("rule%d", i)
	}
	system := "You are a careful assistant. Follow these rules: " + strings.Join(words, " ") + "."
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"tiny-qwen35-f32","messages":[{"role":"system","content":%q},{"role":"user","content":"question number %d"}],"max_tokens":6,"temperature":0}`, system, i)
	}
	off := start(t, "tiny-qwen35-f32.gguf", httpfront.Config{}, 16)
	on := start(t, "tiny-qwen35-f32.gguf", httpfront.Config{}, 16)
	on.completion(t, "/v1/chat/completions", body(100)) // computes the system message
	type answer struct {
		text   string
		cached float64
		prompt float64
	}
	run := func(s *server) []answer {
		out := make([]answer, 16)
		done := make(chan struct{})
		for i := range out {
			go func() {
				defer func() { done <- struct{}{} }()
				doc := s.completion(t, "/v1/chat/completions", body(i))
				u := doc["usage"].(map[string]any)
				out[i] = answer{text: doc["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string),
					cached: u["prompt_tokens_details"].(map[string]any)["cached_tokens"].(float64), prompt: u["prompt_tokens"].(float64)}
			}()
		}
		for range out {
			<-done
		}
		return out
	}
	got, want := run(on), run(off)
	for i := range got {
		if got[i].text != want[i].text {
			t.Errorf("chat %d: %q with the cache, %q without", i, got[i].text, want[i].text)
		}
		// The system message is most of the prompt: all but the user turn's
		// few tokens and the block they share with the system message's end.
		if got[i].cached < got[i].prompt-32 || got[i].cached == 0 {
			t.Errorf("chat %d: %g of %g prompt tokens cached", i, got[i].cached, got[i].prompt)
		}
	}
}
