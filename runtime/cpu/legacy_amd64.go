package cpu

import "unsafe"

// Kernels in legacy_amd64.s; they need the features hasAVX512 checks.

//go:noescape
func q4_1Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q5_1Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q5_0Dot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func iq4NLDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q5_0Dot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

//go:noescape
func iq4NLDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
