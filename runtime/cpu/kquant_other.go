//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the fast kernels are never selected; these stubs
// only satisfy the compiler.

func q4KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q6KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q6KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q5KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q4KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q6KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int) {
	panic("cpu: no simd kernels")
}
func q4KDot1x8(w, x4 unsafe.Pointer, nb int, out unsafe.Pointer, otok uintptr, n int) {
	panic("cpu: no simd kernels")
}
