package corpus

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/ninfer/ninfer-go/suites/bench"
)

// Report is a corpus run: one point per concurrency, the serial phase
// table, and the checks.
type Report struct {
	Tool          string   `json:"tool"` // "ninfer_corpus"
	SchemaVersion int      `json:"schema_version"`
	Command       string   `json:"command"`
	Model         string   `json:"model"`
	Manifest      string   `json:"manifest"`
	Endpoint      string   `json:"endpoint"` // "/v1/chat/completions"
	Sampling      Sampling `json:"sampling"`
	Seeds         []uint64 `json:"seeds"`
	ShuffleSeed   uint64   `json:"shuffle_seed"`
	// SendOrder is "fixture:seed" for every request, in send order.
	SendOrder []string `json:"send_order"`
	// FreshServer is true when every point ran on a newly started server.
	FreshServer bool              `json:"fresh_server"`
	Environment bench.Environment `json:"environment"`
	Points      []Point           `json:"points"`
	// Phase is the per-request phase table of the C=1 (serial) point; nil
	// without one.
	Phase  []PhaseRow `json:"phase"`
	Checks Checks     `json:"checks"`
	Notes  []string   `json:"notes"`
}

// Latency is a client-side latency distribution in milliseconds.
type Latency struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean_ms"`
	P50  float64 `json:"p50_ms"`
	P90  float64 `json:"p90_ms"`
	P99  float64 `json:"p99_ms"`
}

func latency(secs []float64) Latency {
	if len(secs) == 0 {
		return Latency{}
	}
	ms := make([]float64, len(secs))
	for i, s := range secs {
		ms[i] = s * 1000
	}
	return Latency{N: len(ms), Mean: bench.Mean(ms), P50: bench.Percentile(ms, 50), P90: bench.Percentile(ms, 90), P99: bench.Percentile(ms, 99)}
}

// Point is one concurrency point: C workers over the whole corpus on a
// fresh server.
type Point struct {
	Concurrency int `json:"concurrency"`
	Requests    int `json:"requests"`
	Failures    int `json:"failures"`
	// PromptTokens are the computed prefill tokens (usage.prompt_tokens
	// summed; prefix reuse is off).
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	// DecodeTokens exclude each request's first completion token, which
	// prefill produces.
	DecodeTokens     int     `json:"decode_tokens"`
	MakespanSeconds  float64 `json:"makespan_seconds"`
	CorpusPrefillTPS float64 `json:"corpus_prefill_tok_s"` // prompt tokens / makespan
	CorpusDecodeTPS  float64 `json:"corpus_decode_tok_s"`  // decode tokens / makespan
	RequestsPerS     float64 `json:"requests_per_s"`       // requests / makespan
	// SteadyDecodeTPS is summed committed decode tokens over summed seconds
	// of the steady server intervals (bench.Interval.Steady); nil when the
	// server has no intervals or none was steady.
	SteadyDecodeTPS *float64 `json:"steady_decode_tok_s"`
	SteadyIntervals int      `json:"steady_intervals"`
	SteadySeconds   float64  `json:"steady_seconds"`
	// AvgDecodeBatch is decode tokens per decode round over the whole run,
	// from the server's intervals; nil without them.
	AvgDecodeBatch *float64 `json:"avg_decode_batch"`
	// IntervalsNote says why steady decode is missing, if it is.
	IntervalsNote string `json:"intervals_note,omitempty"`
	// SpecAcceptance is summed accepted / summed drafted tokens (the corpus
	// aggregation); nil when the server reported no drafts.
	SpecAcceptance *float64 `json:"spec_acceptance"`
	SpecDrafted    int      `json:"spec_drafted_tokens"`
	SpecAccepted   int      `json:"spec_accepted_tokens"`
	// DecodeSpeedup is CorpusDecodeTPS / the C=1 point's (throughput:
	// new / baseline); MakespanSpeedup is C=1's makespan / this one's
	// (baseline / new). Nil without a C=1 point.
	DecodeSpeedup   *float64         `json:"decode_speedup_vs_c1"`
	MakespanSpeedup *float64         `json:"makespan_speedup_vs_c1"`
	TTFT            Latency          `json:"ttft"`
	TPOT            Latency          `json:"tpot"`
	ITL             Latency          `json:"itl"`
	E2E             Latency          `json:"e2e"`
	Intervals       []bench.Interval `json:"intervals"`
	Results         []Result         `json:"results"`
}

// NewPoint summarizes one concurrency point's results (checked with Check)
// and the server's intervals (nil if unavailable, with note saying why).
func NewPoint(conc int, results []Result, makespan float64, ivs []bench.Interval, note string) Point {
	p := Point{Concurrency: conc, Requests: len(results), MakespanSeconds: makespan, Intervals: ivs, IntervalsNote: note, Results: results}
	if p.Intervals == nil {
		p.Intervals = []bench.Interval{}
	}
	var ttft, tpot, itl, e2e []float64
	var spec []bench.SpecCounts
	for i := range results {
		r := &results[i]
		if r.Error != "" {
			p.Failures++
			continue
		}
		if r.Usage != nil {
			p.PromptTokens += r.Usage.PromptTokens
			p.CompletionTokens += r.Usage.CompletionTokens
			p.DecodeTokens += max(r.Usage.CompletionTokens-1, 0)
		}
		if r.Chunks > 0 {
			ttft = append(ttft, r.TTFT)
		}
		if t, ok := r.TPOT(); ok {
			tpot = append(tpot, t)
		}
		itl = append(itl, r.ITL...)
		e2e = append(e2e, r.E2E)
		if t := r.Timings; t != nil && t.DraftN != nil && t.DraftNAccepted != nil {
			spec = append(spec, bench.SpecCounts{Drafted: *t.DraftN, Accepted: *t.DraftNAccepted})
			p.SpecDrafted += *t.DraftN
			p.SpecAccepted += *t.DraftNAccepted
		}
	}
	if makespan > 0 {
		p.CorpusPrefillTPS = float64(p.PromptTokens) / makespan
		p.CorpusDecodeTPS = float64(p.DecodeTokens) / makespan
		p.RequestsPerS = float64(len(results)) / makespan
	}
	if a, ok := bench.CorpusAcceptance(spec); ok {
		p.SpecAcceptance = &a
	}
	p.TTFT, p.TPOT, p.ITL, p.E2E = latency(ttft), latency(tpot), latency(itl), latency(e2e)
	if ivs != nil {
		sel, rate, ok := bench.SteadyDecode(ivs, conc)
		p.SteadyIntervals = len(sel)
		for _, iv := range sel {
			p.SteadySeconds += iv.Seconds
		}
		if ok {
			p.SteadyDecodeTPS = &rate
		} else if p.IntervalsNote == "" {
			p.IntervalsNote = fmt.Sprintf("no steady interval at C=%d among %d", conc, len(ivs))
		}
		var tokens, rounds int
		for _, iv := range ivs {
			tokens += iv.DecodeTokens
			rounds += iv.DecodeRounds
		}
		if rounds > 0 {
			b := float64(tokens) / float64(rounds)
			p.AvgDecodeBatch = &b
		}
	}
	return p
}

// SetSpeedups fills every point's speedups against the C=1 point.
func SetSpeedups(points []Point) {
	i := slices.IndexFunc(points, func(p Point) bool { return p.Concurrency == 1 })
	if i < 0 {
		return
	}
	base := points[i]
	for j := range points {
		p := &points[j]
		if base.CorpusDecodeTPS > 0 {
			s := bench.ThroughputSpeedup(base.CorpusDecodeTPS, p.CorpusDecodeTPS)
			p.DecodeSpeedup = &s
		}
		if p.MakespanSeconds > 0 {
			s := bench.MakespanSpeedup(base.MakespanSeconds, p.MakespanSeconds)
			p.MakespanSpeedup = &s
		}
	}
}

// PhaseRow is one row of the serial phase table: mean ± sample standard
// deviation of per-request values over a category (or "All").
type PhaseRow struct {
	Category string `json:"category"`
	N        int    `json:"n"`
	// PrefillTPS is prompt_n / prompt seconds of each request.
	PrefillTPS bench.MeanStd `json:"prefill_tok_s"`
	// ServerTTFTms is the server's prompt_ms (prepare and vision phases
	// are not reported by the server and count as zero).
	ServerTTFTms bench.MeanStd `json:"server_ttft_ms"`
	// DecodeTPS is (completion_tokens - 1) / decode seconds of each request.
	DecodeTPS bench.MeanStd `json:"decode_tok_s"`
	// Acceptance is the mean of per-request accepted / drafted (the phase
	// aggregation); nil when no request drafted.
	Acceptance *float64 `json:"spec_acceptance"`
}

// Phase builds the phase table from serial results: one row per category
// in the given order, then "All". Failed requests and requests without
// server timings are left out of the rows.
func Phase(results []Result, categories []string) []PhaseRow {
	var rows []PhaseRow
	for _, cat := range append(slices.Clone(categories), "All") {
		var pre, ttft, dec []float64
		var spec []bench.SpecCounts
		n := 0
		for _, r := range results {
			if (cat != "All" && r.Category != cat) || r.Error != "" || r.Timings == nil || r.Usage == nil {
				continue
			}
			n++
			t := r.Timings
			if t.PromptMS > 0 {
				pre = append(pre, float64(t.PromptN)/(t.PromptMS/1000))
			}
			ttft = append(ttft, t.PromptMS)
			if t.PredictedMS > 0 && r.Usage.CompletionTokens > 1 {
				dec = append(dec, float64(r.Usage.CompletionTokens-1)/(t.PredictedMS/1000))
			}
			if t.DraftN != nil && t.DraftNAccepted != nil {
				spec = append(spec, bench.SpecCounts{Drafted: *t.DraftN, Accepted: *t.DraftNAccepted})
			}
		}
		if n == 0 {
			continue
		}
		row := PhaseRow{Category: cat, N: n, PrefillTPS: bench.Summarize(pre), ServerTTFTms: bench.Summarize(ttft), DecodeTPS: bench.Summarize(dec)}
		if a, _, ok := bench.PhaseAcceptance(spec); ok {
			row.Acceptance = &a
		}
		rows = append(rows, row)
	}
	return rows
}

// Checks summarizes the labels over every point.
type Checks struct {
	Requests int            `json:"requests"`
	Labelled map[string]int `json:"labelled"` // label -> requests with it, over all points
	Finish   map[string]int `json:"finish_reasons"`
	// Samples lists each labelled request: "C=2 #17 story_dragon:22: repetition (...)".
	Samples []string `json:"samples"`
}

// Summarize counts labels and finish reasons over points.
func Summarize(points []Point) Checks {
	c := Checks{Labelled: map[string]int{}, Finish: map[string]int{}, Samples: []string{}}
	for _, p := range points {
		for _, r := range p.Results {
			c.Requests++
			if r.Finish != "" {
				c.Finish[r.Finish]++
			}
			for _, l := range r.Labels {
				c.Labelled[l]++
			}
			if len(r.Labels) > 0 {
				why := strings.Join(r.Labels, ", ")
				if _, reason := Repetitive(r.Text); reason != "" {
					why += " (" + reason + ")"
				}
				if r.Error != "" {
					why += " (" + r.Error + ")"
				}
				c.Samples = append(c.Samples, fmt.Sprintf("C=%d #%d %s:%d: %s", p.Concurrency, r.Index, r.Fixture, r.Seed, why))
			}
		}
	}
	return c
}

func opt(x *float64, f func(float64) string) string { return bench.Opt(x, f) }

func ms(m bench.MeanStd, f func(float64) string) string {
	if m.N == 0 {
		return bench.Missing
	}
	return bench.PM(&m.Mean, m.Std, f)
}

// Markdown renders the corpus, phase, latency and checks tables with the
// seed's rounding.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## ninfer corpus: %s\n\n", r.Model)
	fresh := "a fresh `ninfer serve` per concurrency point"
	if !r.FreshServer {
		fresh = "one already-running server (not fresh per point)"
	}
	fmt.Fprintf(&b, "Manifest %s: %d requests (fixtures × seeds %v), send order shuffled once with seed %d and kept at every C; %s; %s streaming, temperature %g, top-p %g, top-k %d, min-p %g, presence penalty %g, frequency penalty %g. %s, %d cores, %s.\n\n",
		r.Manifest, len(r.SendOrder), r.Seeds, r.ShuffleSeed, fresh, r.Endpoint, r.Sampling.Temperature, r.Sampling.TopP,
		r.Sampling.TopK, r.Sampling.MinP, r.Sampling.PresencePenalty, r.Sampling.FrequencyPenalty,
		orUnknown(r.Environment.CPUModel), r.Environment.CPUCores, r.Environment.GoVersion)
	b.WriteString("### Corpus makespan\n\n")
	var rows [][]string
	for _, p := range r.Points {
		rows = append(rows, []string{bench.Count(p.Concurrency), bench.Count(p.Requests), bench.Count(p.Failures),
			bench.Count(p.PromptTokens), bench.Count(p.CompletionTokens), bench.Count(p.DecodeTokens),
			bench.Seconds(p.MakespanSeconds), bench.Rate(p.CorpusPrefillTPS), bench.Rate(p.CorpusDecodeTPS),
			opt(p.SteadyDecodeTPS, bench.Rate), bench.Ratio(p.RequestsPerS), opt(p.SpecAcceptance, bench.Percent),
			opt(p.DecodeSpeedup, bench.Ratio), opt(p.MakespanSpeedup, bench.Ratio)})
	}
	b.WriteString(bench.Table([]string{"C", "requests", "failed", "prompt tokens", "completion tokens", "decode tokens",
		"makespan s", "corpus prefill tok/s", "corpus decode tok/s", "steady decode tok/s", "requests/s",
		"acceptance (Σacc/Σdraft)", "decode speedup", "makespan speedup"}, "rrrrrrrrrrrrrr", rows))
	b.WriteString("\nCorpus rates divide by the full makespan (worker release to the last complete response); decode tokens exclude each request's first token. Speedups are against C=1: throughput new/baseline, makespan baseline/new. Token totals can vary with concurrency: outputs are measurements, not budgets.\n")
	for _, p := range r.Points {
		if p.SteadyDecodeTPS == nil && p.IntervalsNote != "" {
			fmt.Fprintf(&b, "Steady decode not measured at C=%d: %s.\n", p.Concurrency, p.IntervalsNote)
		}
	}
	if len(r.Phase) > 0 {
		b.WriteString("\n### Serial phases (C=1), mean ± sample standard deviation per request\n\n")
		rows = nil
		for _, ph := range r.Phase {
			rows = append(rows, []string{ph.Category, bench.Count(ph.N), ms(ph.PrefillTPS, bench.Rate), ms(ph.ServerTTFTms, bench.Millis),
				ms(ph.DecodeTPS, bench.Rate), opt(ph.Acceptance, bench.Percent)})
		}
		b.WriteString(bench.Table([]string{"category", "n", "prefill tok/s", "server TTFT ms", "decode tok/s", "acceptance (mean of ratios)"}, "lrrrrr", rows))
		b.WriteString("\nServer TTFT is the server's prefill phase (timings.prompt_ms; it reports no prepare phase), not the client's streaming TTFT below. Category rows pool fixtures × seeds.\n")
	}
	b.WriteString("\n### Client latency (ms)\n\n")
	rows = nil
	for _, p := range r.Points {
		for _, m := range []struct {
			name string
			l    Latency
		}{{"TTFT", p.TTFT}, {"TPOT", p.TPOT}, {"ITL", p.ITL}, {"E2E", p.E2E}} {
			if m.l.N == 0 {
				continue
			}
			rows = append(rows, []string{bench.Count(p.Concurrency), m.name, bench.Count(m.l.N), bench.Millis(m.l.Mean),
				bench.Millis(m.l.P50), bench.Millis(m.l.P90), bench.Millis(m.l.P99)})
		}
	}
	b.WriteString(bench.Table([]string{"C", "metric", "n", "mean", "p50", "p90", "p99"}, "rlrrrrr", rows))
	b.WriteString("\nMeasured by the client from the SSE stream: TTFT to the first token-bearing chunk, TPOT = (E2E − TTFT)/(tokens − 1), ITL between token-bearing chunks, E2E to the last byte.\n")
	b.WriteString("\n### Checks\n\n")
	c := r.Checks
	fmt.Fprintf(&b, "%d requests over %d points. Finish reasons: %s. ", c.Requests, len(r.Points), counts(c.Finish))
	if len(c.Labelled) == 0 {
		b.WriteString("No request failed a check (execution failures, usage vs streamed tokens and server timings, termination reasons, obvious repetition).\n")
	} else {
		fmt.Fprintf(&b, "Labelled (kept in every statistic): %s.\n\n", counts(c.Labelled))
		for _, s := range c.Samples {
			b.WriteString("- " + s + "\n")
		}
	}
	for _, n := range r.Notes {
		b.WriteString("\n" + n + "\n")
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown CPU"
	}
	return s
}

// counts renders a map as "a 3, b 1", keys sorted.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
