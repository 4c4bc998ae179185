//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the attention kernels are never selected; these
// stubs only satisfy the compiler.

func attnScores(a *scoreArgs)                             { panic("cpu: no simd kernels") }
func softmaxV(s *float32, n int)                          { panic("cpu: no simd kernels") }
func attnValues4(a *valueArgs)                            { panic("cpu: no simd kernels") }
func attnValues1(a *valueArgs)                            { panic("cpu: no simd kernels") }
func attnReduce(acc, out *float32, nvec int, mask uint64) { panic("cpu: no simd kernels") }

func swigluV16(out, gate, up *float32, n16 int)        { panic("cpu: no simd kernels") }
func roundF16(dst, src *float32, n int)                { panic("cpu: no simd kernels") }
func quantQ8(x *float32, nb int, xu *byte, d *float32) { panic("cpu: no simd kernels") }
func quantQ8K(x *float32, nb int, qs *int8, d *float32, bsums *int16) {
	panic("cpu: no simd kernels")
}

func sumSquares(x *float32, n int) float64          { panic("cpu: no simd kernels") }
func scaleMul(dst, x, w *float32, n int, s float32) { panic("cpu: no simd kernels") }

func attnValues4q(a *valueArgs) { panic("cpu: no simd kernels") }
func attnValues2q(a *valueArgs) { panic("cpu: no simd kernels") }
func kvTranspose16(dst *float32, src unsafe.Pointer, rowStride uintptr, n16, kind int) {
	panic("cpu: no simd kernels")
}

func attnScores4q(a *score4Args) { panic("cpu: no simd kernels") }
