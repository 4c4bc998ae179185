//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the fast kernels are never selected; these stubs
// only satisfy the compiler.

func hasAVX512() bool { return false }
func hasAVX2() bool   { return false }

func f32Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func f16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func bf16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func f32Dot4x4(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q8Dot4x1(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func cvtF16(dst *float32, src unsafe.Pointer, n int)       { panic("cpu: no simd kernels") }
func cvtBF16(dst *float32, src unsafe.Pointer, n int)      { panic("cpu: no simd kernels") }
func q8PairToken(xu *byte, xd *float32, nb int, dst *byte) { panic("cpu: no simd kernels") }
func q8Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q8Gemm4x4(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q8Gemm4x2(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}

func ropeNeox16(head, cos, sin *float32, half, n16 int) { panic("cpu: no simd kernels") }

func q4Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func geluF16V(dst, src *float32, n int, table *float32) { panic("cpu: no simd kernels") }
func f32Gemm4x4P(w unsafe.Pointer, x unsafe.Pointer, n16 int, quads int, xquad uintptr, acc unsafe.Pointer, flags int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func pack4x16(dst *float32, src unsafe.Pointer, stride uintptr, n16 int, kind int) {
	panic("cpu: no simd kernels")
}

func sumSquaresGroups(x *float32, stride uintptr, n16, groups int, out *float64) {
	panic("cpu: no simd kernels")
}

func addV(out, x, y *float32, n int) { panic("cpu: no simd kernels") }
