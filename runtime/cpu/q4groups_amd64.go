package cpu

import "unsafe"

// The LayoutQ4x16 kernels (q4groups_amd64.s), given the level table lv (a
// *q4Levels). The gemv kernels multiply one group of 16 weight rows w (nb
// blocks of q4GroupBlock bytes) by one token of nb blocks of q8ActBlock
// bytes and store its 16 results as float32 at out.

// q4x16Unpack (AVX-512) writes the nb blocks of the group at w as
// LayoutQ8x16 blocks (the levels plus 128) at dst (nb*q8GroupBlock bytes),
// for the LayoutQ8x16 GEMM kernels.
//
//go:noescape
func q4x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer)

// q4x16Gemv (AVX-512 VNNI) takes one token.
//
//go:noescape
func q4x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)

// q5x16Unpack and q5x16Gemv are q4x16Unpack and q4x16Gemv for Q5_0
// groups (q5GroupBlock bytes a block), lv q5_0Levels.
//
//go:noescape
func q5x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer, lv unsafe.Pointer)

//go:noescape
func q5x16Gemv(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)

// q4x16GemvAVX2 (AVX2) takes one token: the signed levels (VPSHUFB),
// VPMADDUBSW of their magnitudes by the quants given their signs (no
// 16-bit sum saturates), then VPMADDWD to the same exact 32-bit block
// dots.
//
//go:noescape
func q4x16GemvAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer, lv unsafe.Pointer)
