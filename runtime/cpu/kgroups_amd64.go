package cpu

import "unsafe"

// The K-quant group kernels (AVX-512 VNNI): each is a kGroup.kernel.

// q4Kx16Gemm (q4kgroups_amd64.s) is q4KGroup's kernel: dotQ4K's bits.
//
//go:noescape
func q4Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)

// q6Kx16Gemm (q6kgroups_amd64.s) is q6KGroup's kernel: dotQ6K's bits.
//
//go:noescape
func q6Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)
