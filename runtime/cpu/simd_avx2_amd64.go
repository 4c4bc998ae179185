package cpu

import "unsafe"

// The levelAVX2 kernels of the direct matmul paths, in simd_avx2_amd64.s;
// they need the features hasAVX2 checks. Each has the shape and contract of
// its AVX-512 counterpart in simd_amd64.go (the name without AVX2) and
// gives the same bits: the float kernels the AVX-512 float kernels'
// (16 lanes of fused multiply-adds, HSUM16), the Q8_0/Q4_0 kernels
// dotQ8/dotQ4's.

// f32Dot4x1AVX2 is f32Dot4x1: out + i*ostride = dot(row i, x) for the 4
// float32 rows w + i*wstride, i < 4 (strides in bytes), k elements each.
//
//go:noescape
func f32Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

// f16Dot4x1AVX2 is f16Dot4x1: f32Dot4x1AVX2 for f16 rows.
//
//go:noescape
func f16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

// bf16Dot4x1AVX2 is bf16Dot4x1: f32Dot4x1AVX2 for bf16 rows.
//
//go:noescape
func bf16Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

// f32Dot4x4AVX2 is f32Dot4x4: for the 4 float32 rows w + i*wstride and the
// 4 float32 tokens x + j*xstride (strides in bytes), out + j*ostride + 4*i
// = dot(row i, token j), each the same bits as f32Dot4x1AVX2's.
//
//go:noescape
func f32Dot4x4AVX2(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr)

// cvtF16AVX2 is cvtF16: dst[i] = f16 src[i] as float32 for i < n rounded
// down to a multiple of 16.
//
//go:noescape
func cvtF16AVX2(dst *float32, src unsafe.Pointer, n int)

// cvtBF16AVX2 is cvtBF16: cvtF16AVX2 for bf16 values.
//
//go:noescape
func cvtBF16AVX2(dst *float32, src unsafe.Pointer, n int)

// q8Dot4x1AVX2 is q8Dot4x1: out + i*ostride = dotQ8(row i, x) for the 4
// Q8_0 rows w + i*wstride (strides in bytes), with activations xq (nb*32
// bytes, each quant plus 128, quants in -127..127 as quantizeQ8 makes
// them) and their block scales xd (nb float32).
//
//go:noescape
func q8Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q4Dot4x1AVX2 is q4Dot4x1: q8Dot4x1AVX2 for Q4_0 rows, out + i*ostride =
// dotQ4(row i, x).
//
//go:noescape
func q4Dot4x1AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// q8Dot4x2AVX2 is q8Dot4x1AVX2 for two tokens: token a's activations at
// xq, xd and token b's right after them (xq + nb*32, xd + nb*4, as
// consecutive rows of prepTask's qx and qd); out + i*ostride + t*otok =
// dotQ8(row i, token t) for t = 0 (a), 1 (b).
//
//go:noescape
func q8Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr)

// q4Dot4x2AVX2 is q8Dot4x2AVX2 for Q4_0 rows: dotQ4(row i, token t).
//
//go:noescape
func q4Dot4x2AVX2(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr, otok uintptr)

// roundF16AVX2 is roundF16: dst[i] = src[i] rounded to the nearest f16
// value (ties to even), as a float32, for i < n rounded down to a multiple
// of 16.
//
//go:noescape
func roundF16AVX2(dst, src *float32, n int)

// quantQ8AVX2 is quantQ8: quantizeQ8 of the nb blocks of 32 values at x,
// bit for bit, each quant stored plus 128 as an unsigned byte (xu, nb*32
// bytes) and each block scale in d (nb float32).
//
//go:noescape
func quantQ8AVX2(x *float32, nb int, xu *byte, d *float32)

// geluF16VAVX2 is geluF16V with AVX2.
//
//go:noescape
func geluF16VAVX2(dst, src *float32, n int, table *float32)
