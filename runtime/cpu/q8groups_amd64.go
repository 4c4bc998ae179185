package cpu

import "unsafe"

// The LayoutQ8x16 kernels (q8groups_amd64.s). Each multiplies one group of
// 16 weight rows w (nb blocks of q8GroupBlock bytes) by tokens of nb blocks
// of q8ActBlock bytes (token i at x + i*xstride) and stores the 16 results
// of token i as float32 at out + i*ostride.

// q8x16Gemv (AVX-512 VNNI) takes one token.
//
//go:noescape
func q8x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer)

// q8x16GemvAVX2 (AVX2) takes one token: VPMADDUBSW of the weights'
// magnitudes by the quants given the weights' signs, so that no 16-bit sum
// saturates, then VPMADDWD to the same exact 32-bit block dots.
//
//go:noescape
func q8x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer)

// q8x16GemmN (AVX-512 VNNI) takes n tokens, 1 <= n <= 16, each group
// block loaded once for all of them.
//
//go:noescape
func q8x16GemmN(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr, n int)

// q8x16Gemm4AVX2 (AVX2) takes the four tokens at x[i], storing token i's
// results at out[i], each group block loaded once for all four, with
// q8x16GemvAVX2's arithmetic. A token may repeat (with the same out) where
// fewer than four are left.
//
//go:noescape
func q8x16Gemm4AVX2(w unsafe.Pointer, nb int, x *[4]unsafe.Pointer, out *[4]unsafe.Pointer)
