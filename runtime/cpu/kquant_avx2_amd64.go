package cpu

import "unsafe"

// Kernels in kquant_avx2_amd64.s; they need the features hasAVX2 checks.
// Their shapes and contracts are those of the AVX-512 kernels of the same
// names without the suffix (kquant_amd64.s): bit for bit the reference dots.

// q4KDot4x1AVX2 writes out + i*ostride = dotQ4K(row i, x) for the 4 Q4_K
// rows w + i*wstride, x being nb Q8_K blocks (quants xq, float32 scales
// xd, int16 sums xb).
//
//go:noescape
func q4KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q4KDot1x4AVX2 writes out + t*otok = dotQ4K(row w, token t) for 4n
// tokens of Q8_K activations, token t's quants at xq + t*xqstride, scales
// at xd + t*xdstride and sums at xb + t*xbstride; n >= 1.
//
//go:noescape
func q4KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)

// q6KDot4x1AVX2 writes out + i*ostride = dotQ6K(row i, x) for the 4 Q6_K
// rows w + i*wstride (as q4KDot4x1AVX2).
//
//go:noescape
func q6KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q6KDot1x4AVX2 writes out + t*otok = dotQ6K(row w, token t) for 4n tokens
// (as q4KDot1x4AVX2).
//
//go:noescape
func q6KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int)

// q5KDot4x1AVX2 writes out + i*ostride = dotQ5K(row i, x) for the 4 Q5_K
// rows w + i*wstride (as q4KDot4x1AVX2).
//
//go:noescape
func q5KDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xb unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q5KDot1x4AVX2 writes out + t*otok = dotQ5K(row w, token t) for 4 tokens
// (as q4KDot1x4AVX2 with n = 1).
//
//go:noescape
func q5KDot1x4AVX2(w unsafe.Pointer, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr)
