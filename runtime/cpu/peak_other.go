//go:build !amd64

package cpu

// Without amd64 assembly Peak measures nothing; these stubs only satisfy
// the compiler.

func peakVNNI(n int)   { panic("cpu: no simd kernels") }
func peakFMA512(n int) { panic("cpu: no simd kernels") }
func peakFMA256(n int) { panic("cpu: no simd kernels") }

func peakMADDUBSW256(n int) { panic("cpu: no simd kernels") }
