package cpu

import (
	"encoding/binary"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Q4_0 and IQ4_NL weights in 16-row groups (weights.LayoutQ4x16), the
// 4-bit side of q8groups.go: Backend.Load rewrites every Q4_0 and IQ4_NL
// tensor of a Private file whose rows come in whole groups (repackableQ4)
// in place, and every reader (matmul at each level, get_rows, MoE expert
// views) reads the groups. The kernels take the same activations as the
// LayoutQ8x16 ones (q8GroupActs: Q8_0 quants, -128 times their sum, scale)
// and the same order: per block the exact integer dot s of the row's levels
// (nibble - 8 for Q4_0, the IQ4_NL table for IQ4_NL) and the token's quants,
// then acc = fma(float32(s), d_w*d_x, acc), blocks in order, one row per
// lane. That is llama.cpp's own order for both types (its repacked
// ggml_gemv/gemm_q4_0_8x8_q8_0 and _iq4_nl_8x8_q8_0). At AVX-512 a VPSHUFB
// table turns the nibbles into the levels plus 128, unsigned bytes for
// VPDPBUSD, and the block's -128*sum(x) takes the 128 back out; AVX2 looks
// up the signed levels.

const q4GroupBlock = 16 * 18 // bytes of one block of one group: 16 fp16 scales, then 4 x 64 quant bytes

// q4Levels is a 4-bit type's nibble-to-level table as the kernels take
// it: [0:16] the levels plus 128 (unsigned), [16:32] the levels (int8).
type q4Levels [32]byte

func newQ4Levels(level func(n uint8) int8) *q4Levels {
	var t q4Levels
	for n := range uint8(16) {
		t[n], t[16+n] = byte(int(level(n))+128), byte(level(n))
	}
	return &t
}

var (
	q4_0Levels  = newQ4Levels(func(n uint8) int8 { return int8(n) - 8 })
	iq4NLLevels = newQ4Levels(tensor.IQ4NLLevel)
)

// levelsOf returns the level table of dt (Q4_0 or IQ4_NL).
func levelsOf(dt tensor.DType) *q4Levels {
	if dt == tensor.IQ4_NL {
		return iq4NLLevels
	}
	return q4_0Levels
}

// repackableQ4 reports whether Backend.Load repacks w: Q4_0 or IQ4_NL in
// the file's layout with its rows (per expert, for a 3-D tensor) in whole
// groups.
func repackableQ4(w *weights.Tensor) bool {
	return (w.DType == tensor.Q4_0 || w.DType == tensor.IQ4_NL) && groupable(w)
}

// repackQ4 rewrites w (repackableQ4) in place into LayoutQ4x16, its groups
// spread over the pool's workers, each through its scratch[worker], at
// least one group's bytes (16 rows).
func repackQ4(pool *pool, w *weights.Tensor, scratch [][]byte) {
	nb := w.RowLen() / 32
	regroup(pool, w, scratch, weights.LayoutQ4x16, func(grp []byte, i int, row []byte) {
		for b := range nb {
			src, dst := row[18*b:18*b+18], grp[b*q4GroupBlock:(b+1)*q4GroupBlock]
			dst[2*i], dst[2*i+1] = src[0], src[1]
			for j := range 4 {
				copy(dst[32+64*j+4*i:32+64*j+4*i+4], src[2+4*j:2+4*j+4])
			}
		}
	})
}

// q4GroupRow writes row r of w (LayoutQ4x16) as the file stores it into
// dst [w.RowBytes()].
func q4GroupRow(w *weights.Tensor, r int, dst []byte) {
	nb := w.RowLen() / 32
	g, i := r/q8GroupRows, r%q8GroupRows
	grp := w.Data[g*nb*q4GroupBlock : (g+1)*nb*q4GroupBlock]
	for b := range nb {
		src, out := grp[b*q4GroupBlock:(b+1)*q4GroupBlock], dst[18*b:18*b+18]
		out[0], out[1] = src[2*i], src[2*i+1]
		for j := range 4 {
			copy(out[2+4*j:2+4*j+4], src[32+64*j+4*i:32+64*j+4*i+4])
		}
	}
}

// dotQ4Group is the reference dot product of row r of the LayoutQ4x16
// weights w (nb blocks per row, levels lv) and Q8_0 activations x: per
// block the exact integer dot, then one fused multiply-add of it by the
// product of the two scales.
func dotQ4Group(w []byte, nb, r int, x *q8Blocks, lv *q4Levels) float32 {
	g, i := r/q8GroupRows, r%q8GroupRows
	var acc float32
	for b := range nb {
		blk := w[(g*nb+b)*q4GroupBlock : (g*nb+b+1)*q4GroupBlock]
		xs := x.qs[32*b : 32*b+32]
		var s int32
		for j := range 4 {
			q := blk[32+64*j+4*i : 32+64*j+4*i+4]
			for m := range 4 {
				s += int32(int8(lv[16+q[m]&0xf]))*int32(xs[4*j+m]) + int32(int8(lv[16+q[m]>>4]))*int32(xs[16+4*j+m])
			}
		}
		d := f16tab[binary.LittleEndian.Uint16(blk[2*i:])] * x.d[b]
		acc = fma32(float32(s), d, acc)
	}
	return acc
}

// runQ4Groups is runQ8Groups for LayoutQ4x16 weights: output columns
// (weight rows) [lo, hi), both multiples of 16, for every token, from the
// activations in t.qz (q8GroupActs). AVX-512 unpacks each group into the
// worker's t.unpacked (q4x16Unpack: LayoutQ8x16 blocks of the levels) and
// runs the LayoutQ8x16 tiles of up to q8TileTokens tokens on it, then
// takes a last lone token from the group itself; AVX2 takes every token
// so. Both give each row the same operations.
func (t *matmulTask) runQ4Groups(worker, lo, hi int) {
	T, N, nb := t.T, t.N, t.K/32
	gb, xs, os := nb*q4GroupBlock, uintptr(nb*q8ActBlock), uintptr(4*N)
	tb := q8TokenBlock(nb)
	lv := unsafe.Pointer(levelsOf(t.dt))
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(t0+tb, T)
		for g := lo / q8GroupRows; g < hi/q8GroupRows; g++ {
			w := unsafe.Pointer(&t.w[g*gb])
			tt := t0
			if level == levelAVX512 && t1-t0 >= 4 {
				u := t.unpacked[worker][:nb*q8GroupBlock]
				q4x16Unpack(w, nb, unsafe.Pointer(&u[0]), lv)
				for tt+2 <= t1 {
					n := min(q8TileTokens, t1-tt)
					q8x16GemmN(unsafe.Pointer(&u[0]), nb, unsafe.Pointer(&t.qz[tt*nb*q8ActBlock]), xs, unsafe.Pointer(&t.out[tt*N+16*g]), os, n)
					tt += n
				}
			}
			for ; tt < t1; tt++ {
				x, out := unsafe.Pointer(&t.qz[tt*nb*q8ActBlock]), unsafe.Pointer(&t.out[tt*N+16*g])
				if level == levelAVX512 {
					q4x16Gemv(w, nb, x, out, lv)
				} else {
					q4x16GemvAVX2(w, nb, x, out, lv)
				}
			}
		}
	}
}
