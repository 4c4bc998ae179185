package cpu

import "unsafe"

// The K-quant group kernels (AVX-512 VNNI, and AVX2 where named). Each multiplies one group w of
// nb super-blocks by n tokens (1..kGroup.tile) of Q8_K activations: token
// t's quants at xq + t*256*nb, scales at xd + t*4*nb, sums of 16 at xb +
// t*32*nb; it stores token t's 16 results, the reference dot's bits, as
// float32 at out + t*ostride, using scratch (kGroup.scratch bytes).

// q4Kx16Gemm (q4kgroups_amd64.s) is q4KGroup's kernel: dotQ4K's bits.
//
//go:noescape
func q4Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q4Kx16GemmAVX2 (q4kgroups_avx2_amd64.s) is q4KGroup's kernel at the AVX2
// level: dotQ4K's bits, VPMADDUBSW and VPMADDWD for VPDPBUSD.
//
//go:noescape
func q4Kx16GemmAVX2(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q6Kx16Gemm (q6kgroups_amd64.s) is q6KGroup's kernel: dotQ6K's bits.
//
//go:noescape
func q6Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q5Kx16Gemm (q5kgroups_amd64.s) is q5KGroup's kernel: dotQ5K's bits.
//
//go:noescape
func q5Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// iq4XSx16Gemm (iq4xsgroups_amd64.s) is iq4XSGroup's kernel: dotIQ4XS's
// bits. It takes the tokens' quants as iq4XSPairs wrote them at x16,
// super-block b of token t at x16 + 512*(b*n + t), and their scales at xd.
//
//go:noescape
func iq4XSx16Gemm(w unsafe.Pointer, nb int, x16, xd unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// iq4XSPairs (iq4xsgroups_amd64.s) writes blocks consecutive super-blocks
// of Q8_K quants (256 bytes each) at xq as iq4XSx16Gemm reads them, 512
// bytes each, dstride bytes apart from dst: the int16 pairs of quants
// (4l, 4l+2) of each 32, then (4l+1, 4l+3).
//
//go:noescape
func iq4XSPairs(xq unsafe.Pointer, blocks int, dst unsafe.Pointer, dstride uintptr)

// q3Kx16Gemm (q3kgroups_amd64.s) is q3KGroup's kernel: dotQ3K's bits. It
// takes at xb, for token t and super-block b at xb + 32*(t*nb + b), the
// 8 lane sums q3KLaneSums writes.
//
//go:noescape
func q3Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q2Kx16Gemm (q2kgroups_amd64.s) is q2KGroup's kernel: dotQ2K's bits.
//
//go:noescape
func q2Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q2Kx16GemmAVX2 (q2kgroups_avx2_amd64.s) is q2KGroup's kernel at the AVX2
// level: dotQ2K's bits, VPMADDUBSW and VPMADDWD for VPDPWSSD.
//
//go:noescape
func q2Kx16GemmAVX2(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q3Kx16GemmNarrow (q3kgroups_narrow_amd64.s) is q3KGroup's kernel for
// fewer than q3KWideTokens tokens: dotQ3K's bits; xb is unused.
//
//go:noescape
func q3Kx16GemmNarrow(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q3KLaneSums (q3kgroups_amd64.s) writes for each of blocks consecutive
// super-blocks of Q8_K quants (256 bytes each) at xq the 8 int32 -124 times
// the sum of its quants 32c+4l..32c+4l+3 over chunks c (l = 0..7) to dst,
// 32 bytes per super-block.
//
//go:noescape
func q3KLaneSums(xq unsafe.Pointer, blocks int, dst unsafe.Pointer)
