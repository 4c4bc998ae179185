package vec

import (
	"math"

	"golang.org/x/sys/cpu"
)

// simd reports whether the AVX-512 kernels run (F and DQ, with the OS
// saving the ZMM state, which x/sys/cpu checks).
var simd = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ

// sumExp returns how many leading elements of row it summed (a multiple
// of 16) and the float64 sum of their exp(v - m).
func sumExp(row []float32, m float32) (int, float64) {
	n := len(row) &^ 15
	if !simd || n == 0 {
		return 0, 0
	}
	return n, sumExp16(&row[0], n, m)
}

// maxPrefix returns how many leading elements of row it scanned (a
// multiple of 16) and their maximum.
func maxPrefix(row []float32) (int, float32) {
	n := len(row) &^ 15
	if !simd || n == 0 {
		return 0, float32(math.Inf(-1))
	}
	return n, max16(&row[0], n)
}

//go:noescape
func sumExp16(x *float32, n int, m float32) float64

//go:noescape
func max16(x *float32, n int) float32
