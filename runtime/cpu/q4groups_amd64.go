package cpu

import "unsafe"

// The LayoutQ4x16 kernels (q4groups_amd64.s), with the LayoutQ8x16
// kernels' signatures plus the level table lv (a *q4Levels): each
// multiplies one group of 16 weight rows w (nb blocks of q4GroupBlock
// bytes) by tokens of nb blocks of q8ActBlock bytes (token i at x +
// i*xstride) and stores the 16 results of token i as float32 at out +
// i*ostride.

// q4x16Gemm8 (AVX-512 VNNI) takes 8 tokens.
//
//go:noescape
func q4x16Gemm8(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr, lv unsafe.Pointer)

// q4x16Gemm4 (AVX-512 VNNI) takes 4 tokens.
//
//go:noescape
func q4x16Gemm4(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr, lv unsafe.Pointer)

// q4x16Gemv (AVX-512 VNNI) takes one token.
//
//go:noescape
func q4x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)

// q4x16GemvAVX2 (AVX2) takes one token: the signed levels (VPSHUFB),
// VPMADDUBSW of their magnitudes by the quants given their signs (no
// 16-bit sum saturates), then VPMADDWD to the same exact 32-bit block
// dots.
//
//go:noescape
func q4x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)
