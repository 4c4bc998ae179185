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

// q4_1x16Pair (q41groups_amd64.s, AVX-512 VNNI) multiplies a Q4_1 group w
// (nb blocks of q4GroupBlock bytes, then its fp16 mins, 32 bytes a block)
// by n tokens, 1 <= n <= 2, of q8GroupActs blocks (token i's at x +
// i*xstride) and Q8_1 block sums (token i's nb float32 at sums +
// i*sstride), with dotQ4_1's 8 lanes, hsum8 and mins: token i's 16
// results at out + i*ostride. q5_1x16Pair is it for Q5_1 groups
// (q5GroupBlock bytes a block): dotQ5_1's bits.
//
//go:noescape
func q4_1x16Pair(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int)

//go:noescape
func q5_1x16Pair(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int)

// q8_1x16PairUnpacked is q5_1x16Pair (bb: q5GroupBlock, the group's
// block bytes) with the quants of the group's blocks unpacked at u as
// q5_1x16Unpack writes them (the scales and mins still read at w): the
// same operations.
//
//go:noescape
func q8_1x16PairUnpacked(u, w unsafe.Pointer, nb, bb int, x unsafe.Pointer, xstride uintptr, sums unsafe.Pointer, sstride uintptr, out unsafe.Pointer, ostride uintptr, n int)

// q5_1x16Unpack (AVX-512) writes the quants of the nb blocks of the Q5_1
// group at w to dst, q8_1UnpackedBlock bytes a block: the 16 rows' quants
// 4l..4l+3 (unsigned 5-bit values) at 64l.
//
//go:noescape
func q5_1x16Unpack(w unsafe.Pointer, nb int, dst unsafe.Pointer)
