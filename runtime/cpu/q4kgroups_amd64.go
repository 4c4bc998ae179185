package cpu

import "unsafe"

// q4Kx16Gemm (AVX-512 VNNI, q4kgroups_amd64.s) multiplies one group of 16
// LayoutQ4Kx16 rows w (nb super-blocks of q4KGroupBlock bytes) by n
// tokens (1..q4KTokenTile) of Q8_K activations: token t's quants at
// xq + t*256*nb, scales at xd + t*4*nb, sums of 16 at xb + t*32*nb. It
// stores token t's 16 results, dotQ4K's bits, as float32 at
// out + t*ostride, using scratch (q4KScratch bytes).
//
//go:noescape
func q4Kx16Gemm(w unsafe.Pointer, nb int, xq, xd, xb unsafe.Pointer, n int, out unsafe.Pointer, ostride uintptr, scratch unsafe.Pointer)
