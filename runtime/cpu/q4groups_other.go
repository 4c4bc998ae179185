//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly only the reference level runs; these stubs only
// satisfy the compiler.

func q4x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q4x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q4x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q5x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q5x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
func q4_1x16Pair(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q5_1x16Pair(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q8_1x16PairUnpacked(u, w unsafe.Pointer, nb, bb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q5_1x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer) {
	panic("cpu: no simd kernels")
}
