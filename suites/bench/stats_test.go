package bench

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var approx = cmpopts.EquateApprox(0, 1e-12)

func TestMeanAndSampleStdDev(t *testing.T) {
	tests := []struct {
		name   string
		xs     []float64
		mean   float64
		std    float64
		stdDef bool
	}{
		{"one value has no sample deviation", []float64{3}, 3, 0, false},
		{"two values divide by n-1", []float64{1, 3}, 2, math.Sqrt2, true},
		{"the textbook eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, math.Sqrt(32.0 / 7), true},
		{"equal values deviate by zero", []float64{7, 7, 7}, 7, 0, true},
		// The seed's tg256 decode rates: 256 tokens over each repetition's decode seconds.
		{"the seed's tg256 decode rates", []float64{256 / 4.716577136, 256 / 4.710538149, 256 / 4.714154697}, 54.30914011, 0.03501916397, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tol := cmpopts.EquateApprox(1e-9, 0)
			if diff := cmp.Diff(tc.mean, Mean(tc.xs), tol); diff != "" {
				t.Errorf("Mean (-want +got):\n%s", diff)
			}
			std, ok := SampleStdDev(tc.xs)
			if ok != tc.stdDef || !cmp.Equal(tc.std, std, tol) {
				t.Errorf("SampleStdDev = %v, %v; want %v, %v", std, ok, tc.std, tc.stdDef)
			}
		})
	}
	if !math.IsNaN(Mean(nil)) {
		t.Errorf("Mean(nil) = %v, want NaN", Mean(nil))
	}
}

func TestPercentileInterpolatesLikeNumpy(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50} // unsorted input is fine; these are numpy.percentile values
	tests := []struct {
		p, want float64
	}{{0, 15}, {25, 20}, {40, 29}, {50, 35}, {90, 46}, {99, 49.6}, {100, 50}}
	for _, tc := range tests {
		if got := Percentile([]float64{40, 15, 50, 35, 20}, tc.p); !cmp.Equal(tc.want, got, approx) {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	if got := Percentile([]float64{4}, 99); got != 4 {
		t.Errorf("one value: %v", got)
	}
}

func TestSpeedupDefinitions(t *testing.T) {
	tests := []struct {
		name           string
		got, want      float64
		baseline, newv float64
	}{
		{"throughput speedup is new over baseline", ThroughputSpeedup(50, 75), 1.5, 50, 75},
		{"makespan speedup is baseline over new", MakespanSpeedup(30, 20), 1.5, 30, 20},
		{"a slower makespan is a speedup below one", MakespanSpeedup(20, 30), 2.0 / 3, 20, 30},
		{"relative change is a percentage", RelativeChange(50, 75), 50, 50, 75},
		{"a drop is negative", RelativeChange(80, 60), -25, 80, 60},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !cmp.Equal(tc.want, tc.got, approx) {
				t.Errorf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestAcceptanceAggregationsDiffer(t *testing.T) {
	// A short request that accepts everything and a long one that accepts
	// little: the corpus ratio weights by drafted tokens, the phase mean
	// weights every request equally. Neither may stand in for the other.
	reqs := []SpecCounts{
		{Rounds: 2, Drafted: 4, Accepted: 4},
		{Rounds: 48, Drafted: 96, Accepted: 24},
		{Rounds: 0, Drafted: 0, Accepted: 0}, // never drafted: no ratio of its own
	}
	corpus, ok := CorpusAcceptance(reqs)
	if !ok || !cmp.Equal(28.0/100, corpus, approx) {
		t.Errorf("CorpusAcceptance = %v, %v; want 0.28", corpus, ok)
	}
	phase, n, ok := PhaseAcceptance(reqs)
	if !ok || n != 2 || !cmp.Equal((1.0+0.25)/2, phase, approx) {
		t.Errorf("PhaseAcceptance = %v over %d, %v; want 0.625 over 2", phase, n, ok)
	}
	tpr, ok := TokensPerRound(reqs)
	if !ok || !cmp.Equal(1+28.0/50, tpr, approx) {
		t.Errorf("TokensPerRound = %v, %v; want 1.56", tpr, ok)
	}
	if _, ok := CorpusAcceptance([]SpecCounts{{}}); ok {
		t.Error("CorpusAcceptance of nothing drafted is defined")
	}
	if _, _, ok := PhaseAcceptance(nil); ok {
		t.Error("PhaseAcceptance of no requests is defined")
	}
	if _, ok := TokensPerRound(nil); ok {
		t.Error("TokensPerRound without rounds is defined")
	}
}

// steady is a steady interval at concurrency c with tokens decode tokens.
func steady(c, tokens int) Interval {
	return Interval{Seconds: 1, Complete: true, DecodeTokens: tokens, RunningMin: c, RunningMax: c,
		DecodeReadyMin: c, DecodeReadyMax: c, DecodeRounds: tokens / c, RowsPerRoundMin: c, RowsPerRoundMax: c}
}

func TestSteadyIntervalSelection(t *testing.T) {
	const c = 4
	tests := []struct {
		name   string
		modify func(*Interval)
		steady bool
	}{
		{"a complete interval of C decoding rows is steady", func(*Interval) {}, true},
		{"the interval still filling is not", func(iv *Interval) { iv.Complete = false }, false},
		{"any computed prefill token excludes it", func(iv *Interval) { iv.PrefillTokens = 1 }, false},
		{"ramp-up: fewer than C running at some step", func(iv *Interval) { iv.RunningMin = c - 1 }, false},
		{"more than C running", func(iv *Interval) { iv.RunningMax = c + 1 }, false},
		{"a request prefilling", func(iv *Interval) { iv.PrefillingMax = 1 }, false},
		{"fewer than C ready to decode", func(iv *Interval) { iv.DecodeReadyMin = c - 1 }, false},
		{"more than C ready to decode", func(iv *Interval) { iv.DecodeReadyMax = c + 1 }, false},
		{"no decode round", func(iv *Interval) { iv.DecodeRounds = 0 }, false},
		{"drain: a round with fewer rows", func(iv *Interval) { iv.RowsPerRoundMin = c - 1 }, false},
		{"a round with more rows", func(iv *Interval) { iv.RowsPerRoundMax = c + 1 }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			iv := steady(c, 40)
			tc.modify(&iv)
			if got := iv.Steady(c); got != tc.steady {
				t.Errorf("Steady(%d) = %v, want %v for %+v", c, got, tc.steady, iv)
			}
		})
	}
}

func TestSteadyDecodeSumsTokensOverSeconds(t *testing.T) {
	ramp := steady(4, 12)
	ramp.PrefillTokens = 300
	short := steady(4, 20)
	short.Seconds = 0.5 // a server may close an interval early at shutdown; its length counts
	drain := steady(4, 9)
	drain.RowsPerRoundMin = 1
	ivs := []Interval{ramp, steady(4, 40), short, steady(4, 44), drain}
	sel, rate, ok := SteadyDecode(ivs, 4)
	if !ok || len(sel) != 3 {
		t.Fatalf("selected %d intervals, ok %v; want 3", len(sel), ok)
	}
	// (40 + 20 + 44) / (1 + 0.5 + 1), not the mean of per-interval rates.
	if !cmp.Equal(104/2.5, rate, approx) {
		t.Errorf("rate = %v, want %v", rate, 104/2.5)
	}
	if _, _, ok := SteadyDecode([]Interval{ramp, drain}, 4); ok {
		t.Error("no steady interval still gave a rate")
	}
}

func TestDisplayRounding(t *testing.T) {
	f := func(x float64) *float64 { return &x }
	tests := []struct {
		name, got, want string
	}{
		{"rates to one decimal", Rate(54.30914011), "54.3"},
		{"rates round the binary value (77.15 is stored just above)", Rate(77.15), "77.2"},
		{"deviations to one decimal too", Rate(0.03501916397), "0.0"},
		{"seconds to two decimals", Seconds(4.713756661), "4.71"},
		{"small seconds keep two decimals", Seconds(0.0328), "0.03"},
		{"acceptance to one percentage decimal", Percent(0.5078740157), "50.8%"},
		{"full acceptance", Percent(1), "100.0%"},
		{"tokens per round to two decimals", Ratio(2.015748031), "2.02"},
		{"speedups to two decimals", Ratio(ThroughputSpeedup(54.30914011, 78.41489219)), "1.44"},
		{"token totals exact", Count(1234567), "1234567"},
		{"mean ± deviation", PM(f(3609.875478), f(3.395740868), Rate), "3609.9 ± 3.4"},
		{"one sample prints the mean alone", PM(f(3609.875478), nil, Rate), "3609.9"},
		{"no value prints a dash", PM(nil, nil, Rate), Missing},
		{"latencies in milliseconds to one decimal", Millis(12.345), "12.3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestTable(t *testing.T) {
	got := Table([]string{"C", "tok/s"}, "rr", [][]string{{"1", "10.0"}, {"2", "19.5"}})
	want := "| C | tok/s |\n|---:|---:|\n| 1 | 10.0 |\n| 2 | 19.5 |\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Table (-want +got):\n%s", diff)
	}
}

func TestLabels(t *testing.T) {
	got := []string{Label(KindPP, 512, 0), Label(KindTG, 0, 128), Label(KindPPTG, 2048, 512)}
	if diff := cmp.Diff([]string{"pp512", "tg128", "pp2048+tg512"}, got); diff != "" {
		t.Error(diff)
	}
}
