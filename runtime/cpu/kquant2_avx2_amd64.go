package cpu

import "unsafe"

// Kernels in kquant2_avx2_amd64.s; they need the features hasAVX2 checks.
// Their shapes and contracts are those of the AVX-512 kernels of the same
// name without the suffix (kquant2_amd64.s).

// q2KDot4x1AVX2 sets out + i*ostride = dotQ2K(row i, x) for the 4 Q2_K rows
// w + i*wstride (strides in bytes) and the nb Q8_K blocks of x: quants xq,
// scales xd, sums xb.
//
//go:noescape
func q2KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q2KDot1x4AVX2 sets out + t*otok = dotQ2K(row, token t) for one Q2_K
// row w and tokens t = 0..3 of Q8_K activations, token t's quants, scales
// and sums at xq + t*xqstride, xd + t*xdstride and xb + t*xbstride.
//
//go:noescape
func q2KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)

// q3KDot4x1AVX2 sets out + i*ostride = dotQ3K(row i, x) for the 4 Q3_K rows
// w + i*wstride (strides in bytes) and the nb Q8_K blocks of x: quants xq,
// scales xd.
//
//go:noescape
func q3KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q3KDot1x4AVX2 sets out + t*otok = dotQ3K(row, token t) for one Q3_K row
// w and tokens t = 0..3 of Q8_K activations, token t's quants and scales
// at xq + t*xqstride and xd + t*xdstride (xb is not read).
//
//go:noescape
func q3KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)

// iq4XSDot4x1AVX2 sets out + i*ostride = dotIQ4XS(row i, x) for the 4
// IQ4_XS rows w + i*wstride (strides in bytes) and the nb Q8_K blocks of
// x: quants xq, scales xd.
//
//go:noescape
func iq4XSDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// iq4XSDot1x4AVX2 sets out + t*otok = dotIQ4XS(row, token t) for one
// IQ4_XS row w and tokens t = 0..3 of Q8_K activations, token t's quants
// and scales at xq + t*xqstride and xd + t*xdstride (xb is not read).
//
//go:noescape
func iq4XSDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
