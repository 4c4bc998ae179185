package cpu

import "unsafe"

// Kernels in kquant2_amd64.s; they need the features hasAVX512 checks.

//go:noescape
func q3KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func iq4XSDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q2KDot4x1(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q2KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)

//go:noescape
func iq4XSDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)

// iq4XSDot1x8 is iq4XSDot1x4 for eight tokens (out + t*otok, t = 0..7),
// the row's unpacking shared by all eight.
//
//go:noescape
func iq4XSDot1x8(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, nb int, out unsafe.Pointer, otok uintptr)

//go:noescape
func q3KDot1x4(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
