package cpu

import "unsafe"

// The K-quant group kernels (AVX-512 VNNI). Each multiplies one group w of
// nb super-blocks by n tokens (1..kGroup.tile) of Q8_K activations: token
// t's quants at xq + t*256*nb, scales at xd + t*4*nb, sums of 16 at xb +
// t*32*nb; it stores token t's 16 results, the reference dot's bits, as
// float32 at out + t*ostride, using scratch (kGroup.scratch bytes).

// q4Kx16Gemm (q4kgroups_amd64.s) is q4KGroup's kernel: dotQ4K's bits.
//
//go:noescape
func q4Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q6Kx16Gemm (q6kgroups_amd64.s) is q6KGroup's kernel: dotQ6K's bits.
//
//go:noescape
func q6Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q5Kx16Gemm (q5kgroups_amd64.s) is q5KGroup's kernel: dotQ5K's bits.
//
//go:noescape
func q5Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q3Kx16Gemm (q3kgroups_amd64.s) is q3KGroup's kernel: dotQ3K's bits.
//
//go:noescape
func q3Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q2Kx16Gemm (q2kgroups_amd64.s) is q2KGroup's kernel: dotQ2K's bits.
//
//go:noescape
func q2Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)
