//go:build !amd64

package cpu

import "unsafe"

// Without amd64 assembly the fast kernels are never selected; these stubs
// only satisfy the compiler.

func q3KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func iq4XSDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q2KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	panic("cpu: no simd kernels")
}
func q2KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr) {
	panic("cpu: no simd kernels")
}
func iq4XSDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr) {
	panic("cpu: no simd kernels")
}
func q3KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr) {
	panic("cpu: no simd kernels")
}

func iq4XSDot1x8(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, nb int, out unsafe.Pointer, otok uintptr) {
	panic("cpu: no simd kernels")
}
