package httpfront_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// startGraph serves model with the named graph, like start.
func startGraph(t *testing.T, model, graph string) *server {
	t.Helper()
	return startWith(t, instance.Options{Model: modelPath(t, model), Graph: graph, Threads: 1, MaxRunning: 2}, httpfront.Config{})
}

// A speculative graph answers with plain decoding's text and reports its
// draft counts in timings (llama.cpp's draft_n, draft_n_accepted); a plain
// graph's timings have neither.
func TestSpeculativeTimings(t *testing.T) {
	body := `{"model":"stories260K","prompt":"the cat sat on the mat. the cat sat on the mat. the cat sat","max_tokens":32,"temperature":0}`
	plain := start(t, "stories260K.gguf", httpfront.Config{}, 2).completion(t, "/v1/completions", body)
	spec := startGraph(t, "stories260K.gguf", "ngram").completion(t, "/v1/completions", body)
	if got, want := choices(spec)[0]["text"], choices(plain)[0]["text"]; got != want {
		t.Errorf("ngram text %q, plain %q", got, want)
	}
	if tm := plain["timings"].(map[string]any); tm["draft_n"] != nil || tm["draft_n_accepted"] != nil {
		t.Errorf("plain timings %v have draft counts", tm)
	}
	tm := spec["timings"].(map[string]any)
	n, okN := tm["draft_n"].(float64)
	a, okA := tm["draft_n_accepted"].(float64)
	if !okN || !okA || n < 1 || a < 1 || a > n {
		t.Errorf("ngram timings %v: want 1 <= draft_n_accepted <= draft_n", tm)
	}
}

// The live figures' speculative counts are /metrics' ninfer: counters
// after a speculative request: rounds, drafted, accepted and accepted by
// draft position.
func TestLiveStatsCountSpeculation(t *testing.T) {
	s := startGraph(t, "stories260K.gguf", "ngram")
	s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"the cat sat on the mat. the cat sat on the mat. the cat sat","max_tokens":32,"temperature":0}`)
	s.waitIdle(t)
	status, _, body := s.get(t, "GET", httpfront.LivePath, "")
	var live httpfront.LiveStats
	if err := json.Unmarshal([]byte(body), &live); status != 200 || err != nil {
		t.Fatalf("GET %s: %d %s (%v)", httpfront.LivePath, status, body, err)
	}
	fams := scrape(t, s.url)
	count := func(name string) int64 { return int64(sumMetric(fams[name])) }
	want := httpfront.SpecCounts{Rounds: count("ninfer:spec_decode_num_drafts_total"), Drafted: count("ninfer:spec_decode_num_draft_tokens_total"),
		Accepted: count("ninfer:spec_decode_num_accepted_tokens_total"), AcceptedPerPosition: []int64{}}
	for _, m := range fams["ninfer:spec_decode_num_accepted_tokens_per_pos"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "position" {
				i, _ := strconv.Atoi(l.GetValue())
				for len(want.AcceptedPerPosition) <= i {
					want.AcceptedPerPosition = append(want.AcceptedPerPosition, 0)
				}
				want.AcceptedPerPosition[i] = int64(m.GetCounter().GetValue())
			}
		}
	}
	if want.Rounds == 0 || want.Accepted == 0 || len(want.AcceptedPerPosition) == 0 {
		t.Fatalf("/metrics counted no speculation: %+v", want)
	}
	if diff := cmp.Diff(want, live.Speculative); diff != "" {
		t.Errorf("live speculative counts (-/metrics +live):\n%s", diff)
	}
	if got, want := live.GenerationTokens, count("ninfer:generation_tokens_total"); got != want || got != 32 {
		t.Errorf("live generation tokens %d, /metrics %d, want 32", got, want)
	}
}
