//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly only the reference level runs (repackableK is
// false there); these stubs only satisfy the compiler.

func q4Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q6Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q5Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q3Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}

func q2Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q4Kx16GemmAVX2(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q2Kx16GemmAVX2(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func iq4XSx16Gemm(w unsafe.Pointer, nb int, x16, xd unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func iq4XSPairs(xq unsafe.Pointer, blocks int, dst unsafe.Pointer, dstride uintptr) {
	panic("cpu: no simd kernels")
}
func q3Kx16GemmNarrow(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q3KLaneSums(xq unsafe.Pointer, blocks int, dst unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
