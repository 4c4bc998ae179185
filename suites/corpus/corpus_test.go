package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/httpfront/wire"
	"github.com/ninfer/ninfer-go/suites/bench"
)

func TestBuiltinManifest(t *testing.T) {
	m, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Code", "Story", "Translation", "Structured", "Reasoning"}, m.Categories()); diff != "" {
		t.Errorf("categories (-want +got):\n%s", diff)
	}
	per := map[string]int{}
	for _, f := range m.Fixtures {
		per[f.Category]++
	}
	for c, n := range per {
		if n != 3 {
			t.Errorf("%s has %d fixtures, want 3", c, n)
		}
	}
	if len(m.Seeds) != 5 || m.ShuffleSeed != 20260811 {
		t.Errorf("seeds %v, shuffle seed %d", m.Seeds, m.ShuffleSeed)
	}
}

func TestSendOrderIsFixedAndComplete(t *testing.T) {
	m, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.SendOrder(), m.SendOrder()
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("two expansions differ:\n%s", diff)
	}
	if len(a) != 75 {
		t.Fatalf("%d requests, want 75", len(a))
	}
	seen := map[string]bool{}
	for i, r := range a {
		key := fmt.Sprintf("%s:%d", r.Fixture, r.Seed)
		if seen[key] || r.Index != i {
			t.Errorf("request %d: %s (index %d) repeated or misnumbered", i, key, r.Index)
		}
		seen[key] = true
	}
	// Pinned so that a change to the shuffle (or the manifest) is seen:
	// historical runs are only comparable with the same order.
	var head []string
	for _, r := range a[:4] {
		head = append(head, fmt.Sprintf("%s:%d", r.Fixture, r.Seed))
	}
	if diff := cmp.Diff(pinnedHead, head); diff != "" {
		t.Errorf("send order head (-pinned +got):\n%s", diff)
	}
}

var pinnedHead = []string{"story_robot:33", "translate_de:55", "structured_list:11", "reason_trains:11"}

func TestManifestErrors(t *testing.T) {
	_, err := parseManifest([]byte(`{"seeds":[], "fixtures":[{"id":"a","category":"Code","prompt":"p","max_tokens":0},{"id":"a","category":"Code","prompt":"p","max_tokens":4}]}`), "m.json")
	for _, want := range []string{"m.json: no seeds", "m.json: fixture a: max_tokens 0 < 1", `m.json: fixture 1: missing or duplicate id "a"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// fakeServer speaks the OpenAI streaming protocol the way ninfer serve
// does: a role chunk, one chunk per token with logprobs, a finish chunk, a
// usage chunk with timings, [DONE]. It records the most requests in
// flight at once.
type fakeServer struct {
	inflight, peak atomic.Int32
	delay          time.Duration
	mu             sync.Mutex
	bodies         []map[string]any
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	// The most requests in flight at once, counted from arrival to the
	// last byte before [DONE].
	n := f.inflight.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	f.mu.Lock()
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	maxTokens := int(body["max_tokens"].(float64))
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(s string) { fmt.Fprintf(w, "data: %s\n\n", s); fl.Flush() }
	send(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`)
	for i := range maxTokens {
		time.Sleep(f.delay)
		send(fmt.Sprintf(`{"choices":[{"index":0,"delta":{"content":"w%d "},"logprobs":{"content":[{"token":"w","logprob":-0.5}]},"finish_reason":null}],"usage":null}`, i))
	}
	send(`{"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}],"usage":null}`)
	send(fmt.Sprintf(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":%d,"total_tokens":%d},"timings":{"prompt_n":10,"prompt_ms":5,"predicted_n":%d,"predicted_ms":%d}}`,
		maxTokens, maxTokens+10, maxTokens, 2*(maxTokens-1)))
	// Out of flight before the client can read the end (it may send its
	// next request while this handler returns).
	f.inflight.Add(-1)
	send("[DONE]")
}

func testRequests(n, maxTokens int) []Request {
	var rs []Request
	for i := range n {
		rs = append(rs, Request{Index: i, Fixture: fmt.Sprintf("f%d", i%3), Category: []string{"Code", "Story", "Code"}[i%3], Seed: uint64(i), Prompt: "hi", MaxTokens: maxTokens})
	}
	return rs
}

func TestRunKeepsExactlyCWorkersBusy(t *testing.T) {
	for _, conc := range []int{1, 3} {
		t.Run(fmt.Sprintf("C=%d", conc), func(t *testing.T) {
			f := &fakeServer{delay: 2 * time.Millisecond}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c := &Client{BaseURL: srv.URL, Model: "m", Chat: true, Sampling: SeedSampling()}
			reqs := testRequests(9, 4)
			results, makespan, _ := Run(context.Background(), c, reqs, conc)
			if got := int(f.peak.Load()); got != conc {
				t.Errorf("peak in flight %d, want %d", got, conc)
			}
			workers := map[int]bool{}
			for i, r := range results {
				Check(&r)
				if r.Index != i || r.Error != "" || len(r.Labels) != 0 || r.StreamedTokens != 4 || r.Chunks != 4 || len(r.ITL) != 3 {
					t.Errorf("result %d: %+v", i, r)
				}
				if r.End > makespan || r.TTFT <= 0 || r.E2E < r.TTFT {
					t.Errorf("result %d: ttft %v e2e %v end %v makespan %v", i, r.TTFT, r.E2E, r.End, makespan)
				}
				workers[r.Worker] = true
			}
			if len(workers) != conc {
				t.Errorf("%d workers answered, want %d", len(workers), conc)
			}
			// The seed's sampling and the request's seed are sent.
			b := f.bodies[0]
			if b["temperature"] != 0.6 || b["top_k"] != 20.0 || b["presence_penalty"] != 1.0 || b["stream"] != true || b["logprobs"] != true {
				t.Errorf("request body %v", b)
			}
		})
	}
}

func TestSendRecordsFailures(t *testing.T) {
	tests := []struct {
		name, body string
		status     int
		want       string
	}{
		{"an HTTP error", `{"error":{"message":"bad"}}`, 400, `HTTP 400: {"error":{"message":"bad"}}`},
		{"an error chunk mid-stream", "data: {\"error\":{\"message\":\"engine failed\"}}\n\n", 200, "stream error: engine failed"},
		{"a stream cut before [DONE]", "data: {\"choices\":[]}\n\n", 200, "stream ended without [DONE]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			c := &Client{BaseURL: srv.URL, Model: "m", Chat: true}
			r := c.Send(context.Background(), testRequests(1, 4)[0], time.Now())
			if r.Error != tc.want {
				t.Errorf("Error = %q, want %q", r.Error, tc.want)
			}
			Check(&r)
			if diff := cmp.Diff([]string{LabelFailed}, r.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChecks(t *testing.T) {
	ok := func() Result {
		return Result{Request: Request{MaxTokens: 8}, StreamedTokens: 8, Usage: &wire.Usage{PromptTokens: 5, CompletionTokens: 8},
			Timings: &wire.Timings{PromptN: 5, PredictedN: 8}, Finish: "length", Text: "a quiet day by the sea with friends"}
	}
	tests := []struct {
		name   string
		modify func(*Result)
		want   []string
	}{
		{"a clean result", func(*Result) {}, []string{}},
		{"a natural stop before the budget", func(r *Result) {
			r.Finish, r.Usage.CompletionTokens, r.StreamedTokens, r.Timings.PredictedN = "stop", 5, 5, 5
		}, []string{}},
		{"usage disagrees with the stream", func(r *Result) { r.StreamedTokens = 7 }, []string{LabelUsageMismatch}},
		{"timings disagree with usage", func(r *Result) { r.Timings.PromptN = 6 }, []string{LabelTimingsMismatch}},
		{"no usage chunk", func(r *Result) { r.Usage = nil }, []string{LabelNoUsage}},
		{"length before the budget", func(r *Result) { r.Usage.CompletionTokens, r.StreamedTokens, r.Timings.PredictedN = 6, 6, 6 }, []string{LabelLengthMismatch}},
		{"an unknown finish reason", func(r *Result) { r.Finish = "abort" }, []string{LabelFinishUnexpected}},
		{"a looping output", func(r *Result) { r.Text = "once there was the end the end the end" }, []string{LabelRepetition}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok()
			tc.modify(&r)
			Check(&r)
			if diff := cmp.Diff(tc.want, r.Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRepetitive(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"the cat sat on the mat and looked at the dog", false},
		{"go go go", false},
		{"and then go go go go", true},
		{"we sing la la la we sing la la la we sing la la la", true},
		{"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty", false},
		{strings.Repeat("a b c d e f g h i j k l m n o p q ", 3), false}, // period 17: only the trigram rule can see it
		{strings.Repeat("a b c d e f g h i j k l m n o p q ", 4), true},
	}
	for _, tc := range tests {
		if got, why := Repetitive(tc.text); got != tc.want {
			t.Errorf("Repetitive(%q) = %v (%s), want %v", tc.text, got, why, tc.want)
		}
	}
}

func TestPointStatistics(t *testing.T) {
	mk := func(prompt, completion int, end, ttft, e2e float64) Result {
		return Result{End: end, TTFT: ttft, E2E: e2e, Chunks: completion, Usage: &wire.Usage{PromptTokens: prompt, CompletionTokens: completion}, Labels: []string{}}
	}
	results := []Result{mk(100, 11, 1.5, 0.1, 1.1), mk(50, 21, 2.0, 0.2, 2.2), {Error: "HTTP 503", Labels: []string{LabelFailed}}}
	p := NewPoint(2, results, 2.0, nil, "no intervals")
	want := Point{Concurrency: 2, Requests: 3, Failures: 1, PromptTokens: 150, CompletionTokens: 32, DecodeTokens: 30,
		MakespanSeconds: 2, CorpusPrefillTPS: 75, CorpusDecodeTPS: 15, RequestsPerS: 1.5, IntervalsNote: "no intervals",
		TTFT: Latency{N: 2, Mean: 150, P50: 150, P90: 190, P99: 199}, TPOT: Latency{N: 2, Mean: 100, P50: 100, P90: 100, P99: 100},
		E2E: Latency{N: 2, Mean: 1650, P50: 1650, P90: 2090, P99: 2189}}
	opts := []cmp.Option{cmpopts.EquateApprox(0, 1e-9), cmpopts.IgnoreFields(Point{}, "Results", "Intervals")}
	if diff := cmp.Diff(want, p, opts...); diff != "" {
		t.Errorf("NewPoint (-want +got):\n%s", diff)
	}
}

func TestPointSteadyDecodeAndSpeedups(t *testing.T) {
	iv := func(prefill, tokens int) bench.Interval {
		return bench.Interval{Seconds: 1, Complete: true, PrefillTokens: prefill, DecodeTokens: tokens, RunningMin: 2, RunningMax: 2,
			DecodeReadyMin: 2, DecodeReadyMax: 2, DecodeRounds: tokens / 2, RowsPerRoundMin: 2, RowsPerRoundMax: 2}
	}
	ivs := []bench.Interval{iv(64, 20), iv(0, 40), iv(0, 44)}
	res := []Result{{End: 4, Usage: &wire.Usage{CompletionTokens: 101}, Labels: []string{}}}
	p2 := NewPoint(2, res, 4, ivs, "")
	if p2.SteadyDecodeTPS == nil || *p2.SteadyDecodeTPS != 42 || p2.SteadyIntervals != 2 || *p2.AvgDecodeBatch != 2 {
		t.Errorf("steady %v over %d intervals, batch %v", p2.SteadyDecodeTPS, p2.SteadyIntervals, p2.AvgDecodeBatch)
	}
	p1 := NewPoint(1, []Result{{End: 8, Usage: &wire.Usage{CompletionTokens: 101}, Labels: []string{}}}, 8, nil, "none")
	points := []Point{p1, p2}
	SetSpeedups(points)
	// Corpus decode 100/8 at C=1, 100/4 at C=2: throughput 2x, makespan 8/4 = 2x.
	if *points[1].DecodeSpeedup != 2 || *points[1].MakespanSpeedup != 2 || *points[0].DecodeSpeedup != 1 {
		t.Errorf("speedups %v %v", *points[1].DecodeSpeedup, *points[1].MakespanSpeedup)
	}
}

func TestPhaseTableAndAcceptance(t *testing.T) {
	i := func(v int) *int { return &v }
	mk := func(cat string, promptN int, promptMS float64, completion int, predictedMS float64, drafted, accepted int) Result {
		return Result{Request: Request{Category: cat}, Usage: &wire.Usage{PromptTokens: promptN, CompletionTokens: completion},
			Timings: &wire.Timings{PromptN: promptN, PromptMS: promptMS, PredictedN: completion, PredictedMS: predictedMS, DraftN: i(drafted), DraftNAccepted: i(accepted)}}
	}
	results := []Result{
		mk("Code", 100, 100, 11, 1000, 4, 4),  // prefill 1000 tok/s, decode 10 tok/s, acceptance 1
		mk("Code", 100, 50, 21, 1000, 96, 24), // 2000, 20, 0.25
		mk("Story", 30, 10, 5, 200, 0, 0),     // 3000, 20, nothing drafted
	}
	rows := Phase(results, []string{"Code", "Story"})
	std := func(v float64) *float64 { return &v }
	want := []PhaseRow{
		{Category: "Code", N: 2, PrefillTPS: bench.MeanStd{Mean: 1500, Std: std(707.1067811865476), N: 2},
			ServerTTFTms: bench.MeanStd{Mean: 75, Std: std(35.35533905932738), N: 2},
			DecodeTPS:    bench.MeanStd{Mean: 15, Std: std(7.0710678118654755), N: 2}, Acceptance: std(0.625)},
		{Category: "Story", N: 1, PrefillTPS: bench.MeanStd{Mean: 3000, N: 1}, ServerTTFTms: bench.MeanStd{Mean: 10, N: 1},
			DecodeTPS: bench.MeanStd{Mean: 20, N: 1}},
		{Category: "All", N: 3, PrefillTPS: bench.MeanStd{Mean: 2000, Std: std(1000), N: 3},
			ServerTTFTms: bench.MeanStd{Mean: 160.0 / 3, Std: std(45.092497528228944), N: 3},
			DecodeTPS:    bench.MeanStd{Mean: 50.0 / 3, Std: std(5.773502691896258), N: 3}, Acceptance: std(0.625)},
	}
	if diff := cmp.Diff(want, rows, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Phase (-want +got):\n%s", diff)
	}
	// The corpus aggregation of the same requests is the ratio of sums.
	p := NewPoint(1, results, 1, nil, "")
	if *p.SpecAcceptance != 28.0/100 || p.SpecDrafted != 100 {
		t.Errorf("corpus acceptance %v of %d drafted", *p.SpecAcceptance, p.SpecDrafted)
	}
}

func TestFetchIntervals(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc(IntervalsPath, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("since_unix_ms") == "" {
			http.Error(w, "since_unix_ms missing", 400)
			return
		}
		fmt.Fprint(w, `{"interval_seconds":1,"intervals":[{"start_unix_ms":1,"seconds":1,"complete":true,"decode_tokens":9}]}`)
	})
	with := httptest.NewServer(mux)
	defer with.Close()
	ivs, err := FetchIntervals(context.Background(), nil, with.URL, time.Now())
	if err != nil || len(ivs) != 1 || ivs[0].DecodeTokens != 9 {
		t.Errorf("FetchIntervals = %+v, %v", ivs, err)
	}
	without := httptest.NewServer(http.NotFoundHandler())
	defer without.Close()
	if _, err := FetchIntervals(context.Background(), nil, without.URL, time.Now()); err != ErrNoIntervals {
		t.Errorf("without the endpoint: %v, want ErrNoIntervals", err)
	}
}

func TestReportMarkdownAndPlots(t *testing.T) {
	f := &fakeServer{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, Model: "m", Chat: true, Sampling: Greedy()}
	r := &Report{Model: "fake", Manifest: "test", Endpoint: "/v1/chat/completions", Sampling: Greedy(), SendOrder: []string{"f0:0"}}
	for _, conc := range []int{1, 2} {
		res, mk, _ := Run(context.Background(), c, testRequests(4, 3), conc)
		for i := range res {
			Check(&res[i])
		}
		r.Points = append(r.Points, NewPoint(conc, res, mk, nil, ErrNoIntervals.Error()))
		if conc == 1 {
			r.Phase = Phase(res, []string{"Code", "Story"})
		}
	}
	SetSpeedups(r.Points)
	r.Checks = Summarize(r.Points)
	md := r.Markdown()
	for _, want := range []string{"| C | requests | failed | prompt tokens | completion tokens | decode tokens | makespan s |",
		"| 1 | 4 | 0 | 40 | 12 | 8 |", "Steady decode not measured at C=2: the server exposes no per-second engine intervals",
		"| Code | 3 |", "| 2 | TTFT | 4 |", "No request failed a check"} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	paths, err := Plots(r, dir)
	if err != nil || len(paths) != 2 {
		t.Fatalf("Plots = %v, %v", paths, err)
	}
	for _, p := range paths {
		fh, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(fh)
		fh.Close()
		if err != nil || img.Bounds().Dx() < 400 {
			t.Errorf("%s: not a plot-sized PNG: %v", p, err)
		}
	}
}
