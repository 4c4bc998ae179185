package cpu

import "unsafe"

// Kernels in legacy_avx2_amd64.s; they need the features hasAVX2 checks.
// Each is bit for bit the reference dot of its dtype for activations of
// any int8 quants.

// q4_1Dot4x1AVX2 sets out + i*ostride = dotQ4_1(row i, x) for the 4 Q4_1
// rows w + i*wstride (strides in bytes), x being nb Q8_1 blocks: quants xq
// (32 per block), scales xd and sums xs (float32 per block).
//
//go:noescape
func q4_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q5_1Dot4x1AVX2 is q4_1Dot4x1AVX2 for Q5_1 rows: out + i*ostride =
// dotQ5_1(row i, x).
//
//go:noescape
func q5_1Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd, xs unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q5_0Dot4x1AVX2 sets out + i*ostride = dotQ5_0(row i, x) for the 4 Q5_0
// rows w + i*wstride (strides in bytes), x being nb Q8_0 blocks: quants xq
// (32 per block) and scales xd (float32 per block).
//
//go:noescape
func q5_0Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// iq4NLDot4x1AVX2 is q5_0Dot4x1AVX2 for IQ4_NL rows: out + i*ostride =
// dotIQ4NL(row i, x).
//
//go:noescape
func iq4NLDot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q5_0Dot2x2AVX2 sets out + r*ostride + t*otok = dotQ5_0(row r, token t)
// for the two Q5_0 rows w, w + wstride and two tokens of nb Q8_0 blocks
// (A: quants xqa, scales xda; B: xqb, xdb); strides in bytes.
//
//go:noescape
func q5_0Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

// iq4NLDot2x2AVX2 is q5_0Dot2x2AVX2 for IQ4_NL rows: out + r*ostride +
// t*otok = dotIQ4NL(row r, token t).
//
//go:noescape
func iq4NLDot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xqb, xdb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

// q4_1Dot2x2AVX2 sets out + r*ostride + t*otok = dotQ4_1(row r, token t)
// for the two Q4_1 rows w, w + wstride and two tokens of nb Q8_1 blocks
// (A: quants xqa, scales xda, sums xsa; B: xqb, xdb, xsb); strides in
// bytes.
//
//go:noescape
func q4_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)

// q5_1Dot2x2AVX2 is q4_1Dot2x2AVX2 for Q5_1 rows: out + r*ostride +
// t*otok = dotQ5_1(row r, token t).
//
//go:noescape
func q5_1Dot2x2AVX2(w unsafe.Pointer, wstride uintptr, xqa, xda, xsa, xqb, xdb, xsb unsafe.Pointer, nb int, out unsafe.Pointer, ostride, otok uintptr)
