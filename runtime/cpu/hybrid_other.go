//go:build !amd64

package cpu

// Without amd64 assembly the hybrid kernels are never selected; these
// stubs only satisfy the compiler.

func deltaDecayPred(s, k, pred *float32, dk, dv int, decay float32)    { panic("cpu: no simd kernels") }
func deltaUpdateOut(s, k, q, d, o *float32, dk, dv int, scale float32) { panic("cpu: no simd kernels") }
func gemmF32(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32) {
	panic("cpu: no simd kernels")
}
func gemmF32AVX2(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32) {
	panic("cpu: no simd kernels")
}
func convRow(o, win, x, taps *float32, n, c, k int)     { panic("cpu: no simd kernels") }
func convRowAVX2(o, win, x, taps *float32, n, c, k int) { panic("cpu: no simd kernels") }
