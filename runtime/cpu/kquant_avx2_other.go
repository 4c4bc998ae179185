//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the AVX2 kernels are never selected; these stubs
// only satisfy the compiler.

func q4KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no avx2 kernels")
}
func q4KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int) {
	panic("cpu: no avx2 kernels")
}
func q6KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no avx2 kernels")
}
func q6KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int) {
	panic("cpu: no avx2 kernels")
}
func q5KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no avx2 kernels")
}
func q5KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr) {
	panic("cpu: no avx2 kernels")
}
