//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly only the reference level runs; these stubs only
// satisfy the compiler.

func q8x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q8x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q8x16GemmN(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q8x16Gemm4AVX2(w unsafe.Pointer, nb int, x *[4]unsafe.Pointer, out *[4]unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
