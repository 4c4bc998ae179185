package vision

import "math"

// Stats are the checksums the vision goldens state for a tensor (and `ninfer
// run --json` reports for image embeddings): the count, sum, sum of squares,
// minimum and maximum of its values, summed in float64.
type Stats struct {
	N     int     `json:"n"`
	Sum   float64 `json:"sum"`
	SumSq float64 `json:"sum_sq"`
	Min   float64 `json:"min"`
	Max   float64 `json:"max"`
}

// StatsOf returns the Stats of xs.
func StatsOf(xs []float32) Stats {
	s := Stats{N: len(xs), Min: math.Inf(1), Max: math.Inf(-1)}
	for _, x := range xs {
		v := float64(x)
		s.Sum += v
		s.SumSq += v * v
		s.Min, s.Max = min(s.Min, v), max(s.Max, v)
	}
	return s
}
