package engine

import (
	"sync"
	"time"
)

// StepInfo describes one finished engine step, for observers (traces,
// metrics) and the per-second intervals.
type StepInfo struct {
	Start, End    time.Time
	Rows          int   // tokens fed (the device graph's bucket)
	PrefillTokens int   // prompt (or recomputed) tokens fed
	DecodeRows    int   // sequences that fed their last token to decode
	DecodeTokens  int   // tokens committed by decode rows
	Running       int   // sequences holding KV when the step was scheduled
	Prefilling    int   // running sequences with more than one token pending
	DecodeReady   int   // running sequences with exactly one token pending
	Drafted       int   // draft tokens verified by decode rows (speculative plans)
	DraftAccepted int   // of those, accepted
	Tags          []any // Request.Tag of each sequence the step advanced
}

// StepObserver is called by the engine goroutine after every step. It must
// not block or call back into the engine.
type StepObserver interface {
	ObserveStep(StepInfo)
}

// Interval is what the engine did during one wall-clock second
// [StartUnixMs, StartUnixMs+1000), as GET /v1/stats/intervals returns it.
// The steady-decode metric of the serving-performance method is computed
// from these.
type Interval struct {
	StartUnixMs int64   `json:"start_unix_ms"`
	Seconds     float64 `json:"seconds"`
	// Complete is false for the interval still being filled.
	Complete bool `json:"complete"`
	// PrefillTokens are prompt tokens computed in the interval.
	PrefillTokens int `json:"prefill_tokens"`
	// DecodeTokens are committed decode tokens (the first completion token,
	// which prefill produces, excluded).
	DecodeTokens int `json:"decode_tokens"`
	// The min and max, over the interval's engine steps, of the requests
	// running (holding KV), prefilling, and ready to decode.
	RunningMin     int `json:"running_min"`
	RunningMax     int `json:"running_max"`
	PrefillingMax  int `json:"prefilling_max"`
	DecodeReadyMin int `json:"decode_ready_min"`
	DecodeReadyMax int `json:"decode_ready_max"`
	// DecodeRounds are steps that decoded at least one row; RowsPerRoundMin
	// and RowsPerRoundMax bound the decode rows of those steps.
	DecodeRounds    int `json:"decode_rounds"`
	RowsPerRoundMin int `json:"rows_per_round_min"`
	RowsPerRoundMax int `json:"rows_per_round_max"`
	// StepSeconds is the time the interval's steps took from scheduling to
	// their tokens (StepInfo.Start to End); Seconds minus it is the engine's
	// time between steps (event delivery, waiting for work).
	StepSeconds float64 `json:"step_seconds"`
}

// Steady reports whether iv is a steady interval at concurrency c, as the
// seed defines it: complete, zero computed prefill tokens, running = C,
// prefilling = 0, decode_ready = C, at least one decode round, and exactly
// C rows in every round.
func (iv Interval) Steady(c int) bool {
	return iv.Complete && iv.PrefillTokens == 0 &&
		iv.RunningMin == c && iv.RunningMax == c && iv.PrefillingMax == 0 &&
		iv.DecodeReadyMin == c && iv.DecodeReadyMax == c &&
		iv.DecodeRounds >= 1 && iv.RowsPerRoundMin == c && iv.RowsPerRoundMax == c
}

// maxIntervals bounds the history kept (one hour of busy seconds).
const maxIntervals = 3600

// intervals aggregates steps into one-second intervals. A step belongs to
// the second in which it ended. Seconds without steps are not recorded.
type intervals struct {
	mu   sync.Mutex
	list []Interval // oldest first; the last one may still be filling
}

func (iv *intervals) observe(s StepInfo) {
	sec := s.End.UnixMilli() / 1000 * 1000
	iv.mu.Lock()
	defer iv.mu.Unlock()
	n := len(iv.list)
	if n == 0 || iv.list[n-1].StartUnixMs != sec {
		iv.list = append(iv.list, Interval{StartUnixMs: sec, Seconds: 1,
			RunningMin: s.Running, DecodeReadyMin: s.DecodeReady, RowsPerRoundMin: -1})
		if len(iv.list) > maxIntervals {
			iv.list = append(iv.list[:0], iv.list[len(iv.list)-maxIntervals:]...)
		}
		n = len(iv.list)
	}
	c := &iv.list[n-1]
	c.PrefillTokens += s.PrefillTokens
	c.DecodeTokens += s.DecodeTokens
	c.StepSeconds += s.End.Sub(s.Start).Seconds()
	c.RunningMin, c.RunningMax = min(c.RunningMin, s.Running), max(c.RunningMax, s.Running)
	c.PrefillingMax = max(c.PrefillingMax, s.Prefilling)
	c.DecodeReadyMin, c.DecodeReadyMax = min(c.DecodeReadyMin, s.DecodeReady), max(c.DecodeReadyMax, s.DecodeReady)
	if s.DecodeRows > 0 {
		c.DecodeRounds++
		if c.RowsPerRoundMin < 0 {
			c.RowsPerRoundMin = s.DecodeRows
		}
		c.RowsPerRoundMin, c.RowsPerRoundMax = min(c.RowsPerRoundMin, s.DecodeRows), max(c.RowsPerRoundMax, s.DecodeRows)
	}
}

// since returns the intervals starting at or after sinceMs, marking the one
// that contains now as incomplete.
func (iv *intervals) since(sinceMs int64, now time.Time) []Interval {
	cur := now.UnixMilli() / 1000 * 1000
	iv.mu.Lock()
	defer iv.mu.Unlock()
	out := []Interval{}
	for _, x := range iv.list {
		if x.StartUnixMs+1000 <= sinceMs {
			continue
		}
		x.Complete = x.StartUnixMs < cur
		if x.RowsPerRoundMin < 0 {
			x.RowsPerRoundMin = 0
		}
		out = append(out, x)
	}
	return out
}

// Intervals returns the per-second engine intervals that end after
// sinceUnixMs, oldest first; the current second's interval is incomplete.
func (e *Engine) Intervals(sinceUnixMs int64) []Interval {
	return e.intervals.since(sinceUnixMs, time.Now())
}
