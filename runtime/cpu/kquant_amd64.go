package cpu

import "unsafe"

// Kernels in kquant_amd64.s; they need the features hasAVX512 checks.

//go:noescape
func q4KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q6KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q6KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

//go:noescape
func q5KDot2x2(w unsafe.Pointer, wstride uintptr, xqa, xda, xba, xqb, xdb, xbb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

//go:noescape
func q4KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)

//go:noescape
func q6KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)

// q4KDot1x8 is q4KDot1x4 for n groups of 8 tokens, their activations
// from actQuant.x4 (interleave4) at x4; out + t*otok = dotQ4K(row,
// token t).
//
//go:noescape
func q4KDot1x8(w, x4 unsafe.Pointer, nb int, out unsafe.Pointer, otok uintptr, n int)
