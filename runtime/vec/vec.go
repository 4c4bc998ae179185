// Package vec is vector math over host rows of logits that the engine and
// the samplers need per generated token (a vocabulary of 150k floats per
// row, every step): the row's maximum and its log-sum-exp. On amd64 with
// AVX-512 they run 16 lanes at a time; elsewhere, and for the tails, the
// same definitions in Go.
package vec

import "math"

// LogSumExp returns log(sum(exp(row))) computed stably, as max(row) +
// log(sum(exp(row - max))), the sum in float64. Each exp is accurate to a
// few float32 ulps (the SIMD path: a degree-7 polynomial after range
// reduction), so the result is within 1e-6 of the exact value for any row
// with a finite maximum. Entries more than 87 below the maximum add at
// most 1e-38 each; -Inf entries add nothing. An empty row or one of only
// -Inf gives -Inf.
func LogSumExp(row []float32) float32 {
	m := Max(row)
	if math.IsInf(float64(m), -1) {
		return m
	}
	done, sum := sumExp(row, m)
	for _, v := range row[done:] {
		sum += math.Exp(float64(v - m))
	}
	return m + float32(math.Log(sum))
}

// Max returns the largest element of row (-Inf for an empty row).
func Max(row []float32) float32 {
	done, m := maxPrefix(row)
	for _, v := range row[done:] {
		m = max(m, v)
	}
	return m
}

// sumExpGo is sumExp's definition: the sum of exp(v - m) over row, in
// float64, with everything done (it returns len(row)).
func sumExpGo(row []float32, m float32) (int, float64) {
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v - m))
	}
	return len(row), sum
}
