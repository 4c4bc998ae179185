//go:build amd64

// Package r16proto is a measured prototype, not wired into the backend:
// Q8_0 weights repacked into 16-row groups (per 32-element block: the 16
// fp16 scales, then for each 4-byte group k = 0..7 the 16 rows' bytes
// 4k..4k+3, flipped to unsigned), multiplied by one VPDPBUSD per group
// against a broadcast activation dword, so that each of the 16 lanes ends
// the block holding one row's exact integer dot; then one conversion, one
// scale product and one fused multiply-add per block and token
// (acc = fma(float(isum), d_w*d_x, acc): the one-integer-per-block order,
// which keeps tiny-qwen3-q8_0 within the teacher-forced rule: 511/512, no
// position of margin >= 0.5 differs). Activations per token and block: 32
// signed quants, int32 -128*sum, float32 scale (40 bytes).
//
// Measured on the 2-vCPU AVX-512 host at load ~10 (BenchmarkR16 against
// runtime/cpu BenchmarkGEMM q8_0/avx512, K=1024, N=3072, one thread,
// alternating, best of 8): T=64 99 vs 29 GMAC/s, T=512 75 vs 27 GMAC/s.
//
// To ship it: the reference dotQ8 and every Q8_0 kernel (decode too, both
// levels) move to this order; Q8_0 tensors are repacked in place at load
// (a layout marker on weights.Tensor honoured by get_rows, the reference
// path, MoE expert views and a draft sharing the file; with --mmap a
// private copy replacing the mapped pages); an AVX2 16-row kernel
// (VPMADDUBSW with the sign trick); the activation layout made by the
// quantizer.
package r16proto

import (
	"encoding/binary"
	"math"
	"unsafe"
)

//go:noescape
func r16Gemm16x8(w unsafe.Pointer, nb int, x unsafe.Pointer, xstride uintptr, out unsafe.Pointer, ostride uintptr)

//go:noescape
func r16Gemv16x1(w unsafe.Pointer, nb int, x unsafe.Pointer, out unsafe.Pointer)

// repack turns Q8_0 rows [N, K] (34-byte blocks) into 16-row groups.
func repack(src []byte, N, K int) []byte {
	nb := K / 32
	rb := nb * 34
	dst := make([]byte, len(src))
	for g := 0; g < N/16; g++ {
		for b := 0; b < nb; b++ {
			o := (g*nb + b) * 544
			for i := 0; i < 16; i++ {
				blk := src[(16*g+i)*rb+34*b:]
				copy(dst[o+2*i:], blk[:2])
				for k := 0; k < 8; k++ {
					for j := 0; j < 4; j++ {
						dst[o+32+64*k+4*i+j] = blk[2+4*k+j] ^ 0x80
					}
				}
			}
		}
	}
	return dst
}

// actLayout: per token per block: 32 signed quants, int32 -128*sum, f32 d.
func actLayout(qs []int8, d []float32, T, K int) []byte {
	nb := K / 32
	out := make([]byte, T*nb*40)
	for t := 0; t < T; t++ {
		for b := 0; b < nb; b++ {
			o := (t*nb + b) * 40
			var s int32
			for j := 0; j < 32; j++ {
				v := qs[t*K+32*b+j]
				out[o+j] = byte(v)
				s += int32(v)
			}
			binary.LittleEndian.PutUint32(out[o+32:], uint32(-128*s))
			binary.LittleEndian.PutUint32(out[o+36:], math.Float32bits(d[t*nb+b]))
		}
	}
	return out
}

// refDot is the new order: one exact integer dot per block.
func refDot(row []byte, qs []int8, d []float32) float32 {
	var acc float32
	for b := range d {
		blk := row[34*b:]
		var s int32
		for j := 0; j < 32; j++ {
			s += int32(int8(blk[2+j])) * int32(qs[32*b+j])
		}
		dw := f16(binary.LittleEndian.Uint16(blk))
		acc = float32(math.FMA(float64(float32(s)), float64(dw*d[b]), float64(acc)))
	}
	return acc
}

func f16(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0:
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		man &= 0x3ff
		return math.Float32frombits(sign | e<<23 | man<<13)
	case exp == 31:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}
