//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the fast kernels are never selected; these stubs
// only satisfy the compiler.

func q4_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q5_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q5_0Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func iq4NLDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q5_0Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
func iq4NLDot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q4_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q5_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
