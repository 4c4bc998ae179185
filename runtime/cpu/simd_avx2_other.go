//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the levelAVX2 kernels are never selected; these
// stubs only satisfy the compiler.

func f32Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func f16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func bf16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func f32Dot4x4AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func cvtF16AVX2(dst *float32, src unsafe.Pointer, n int)  { panic("cpu: no simd kernels") }
func cvtBF16AVX2(dst *float32, src unsafe.Pointer, n int) { panic("cpu: no simd kernels") }
func q8Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q4Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q8Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q4Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr) {
	panic("cpu: no simd kernels")
}
func roundF16AVX2(dst, src *float32, n int)                 { panic("cpu: no simd kernels") }
func quantQ8AVX2(x *float32, nb int, xu *byte, d *float32)  { panic("cpu: no simd kernels") }
func geluF16VAVX2(dst, src *float32, n int, table *float32) { panic("cpu: no simd kernels") }
