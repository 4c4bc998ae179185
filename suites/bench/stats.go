package bench

import (
	"github.com/ninfer/ninfer-go/runtime/engine"
	"math"
	"slices"
)

// Mean is the arithmetic mean of xs; NaN for none.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// SampleStdDev is the sample standard deviation of xs (divisor n-1); false
// with fewer than two values, which have no sample deviation.
func SampleStdDev(xs []float64) (float64, bool) {
	if len(xs) < 2 {
		return 0, false
	}
	m := Mean(xs)
	var ss float64
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	return math.Sqrt(ss / float64(len(xs)-1)), true
}

// Percentile is the p-th percentile (0..100) of xs by linear interpolation
// between closest ranks (numpy's default, which vLLM's bench uses); NaN
// for none. xs need not be sorted.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	pos := p / 100 * float64(len(s)-1)
	lo := int(math.Floor(pos))
	if lo >= len(s)-1 {
		return s[len(s)-1]
	}
	if lo < 0 {
		return s[0]
	}
	return s[lo] + (pos-float64(lo))*(s[lo+1]-s[lo])
}

// ThroughputSpeedup is a throughput (rate) speedup: new / baseline.
func ThroughputSpeedup(baseline, new float64) float64 { return new / baseline }

// MakespanSpeedup is a makespan (time) speedup: baseline / new.
func MakespanSpeedup(baseline, new float64) float64 { return baseline / new }

// RelativeChange is (new / baseline - 1) * 100, in percent.
func RelativeChange(baseline, new float64) float64 { return (new/baseline - 1) * 100 }

// SpecCounts are one request's (or one run's) speculative counts.
type SpecCounts struct {
	Rounds, Drafted, Accepted int
}

// CorpusAcceptance is acceptance for a corpus or wave table: the ratio of
// summed accepted and summed drafted tokens. False if nothing was drafted.
func CorpusAcceptance(cs []SpecCounts) (float64, bool) {
	var d, a int
	for _, c := range cs {
		d += c.Drafted
		a += c.Accepted
	}
	if d == 0 {
		return 0, false
	}
	return float64(a) / float64(d), true
}

// PhaseAcceptance is acceptance for a phase (per-request) table: the mean
// of per-request ratios accepted / drafted, over the requests that drafted;
// n is how many did. False if none did.
func PhaseAcceptance(cs []SpecCounts) (mean float64, n int, ok bool) {
	var rs []float64
	for _, c := range cs {
		if c.Drafted > 0 {
			rs = append(rs, float64(c.Accepted)/float64(c.Drafted))
		}
	}
	if len(rs) == 0 {
		return 0, 0, false
	}
	return Mean(rs), len(rs), true
}

// TokensPerRound is 1 + accepted / rounds, summed over cs. False without rounds.
func TokensPerRound(cs []SpecCounts) (float64, bool) {
	var r, a int
	for _, c := range cs {
		r += c.Rounds
		a += c.Accepted
	}
	if r == 0 {
		return 0, false
	}
	return 1 + float64(a)/float64(r), true
}

// Interval is one server-side stats interval, as GET /v1/stats/intervals
// returns it: the engine's own per-second record (see engine.Interval, which
// also defines Steady).
type Interval = engine.Interval

// SteadyDecode selects the steady intervals at concurrency c and returns
// them with the steady decode rate: summed committed decode tokens over
// summed interval seconds. ok is false when no interval qualifies.
func SteadyDecode(ivs []Interval, c int) (sel []Interval, rate float64, ok bool) {
	var tokens int
	var secs float64
	for _, iv := range ivs {
		if iv.Steady(c) {
			sel = append(sel, iv)
			tokens += iv.DecodeTokens
			secs += iv.Seconds
		}
	}
	if len(sel) == 0 || secs <= 0 {
		return sel, 0, false
	}
	return sel, float64(tokens) / secs, true
}

// MeanStd is a mean with its sample standard deviation (Std nil for fewer
// than two values), the form the seed's single-request tables print.
type MeanStd struct {
	Mean float64  `json:"mean"`
	Std  *float64 `json:"stddev"`
	N    int      `json:"n"`
}

// Summarize returns xs' mean and sample standard deviation.
func Summarize(xs []float64) MeanStd {
	m := MeanStd{Mean: Mean(xs), N: len(xs)}
	if s, ok := SampleStdDev(xs); ok {
		m.Std = &s
	}
	return m
}
