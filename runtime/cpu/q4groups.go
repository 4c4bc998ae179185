package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Q4_0, IQ4_NL, Q5_0, Q4_1 and Q5_1 weights in 16-row groups
// (weights.LayoutQ4x16), the 4-bit side of q8groups.go: Backend.Load
// rewrites every Q4_0 and IQ4_NL tensor of a Private file whose rows come
// in whole groups (repackableQ4) in place, and at the AVX-512 level every
// Q5_0, Q4_1 and Q5_1 one, and every reader (matmul at each level,
// get_rows, MoE expert views) reads the groups. The kernels take the same activations as the LayoutQ8x16 ones
// (q8GroupActs: Q8_0 quants, -128 times their sum, scale) and the same
// order: per block the exact integer dot s of the row's levels (nibble - 8
// for Q4_0, the IQ4_NL table for IQ4_NL, the 5-bit value - 16 for Q5_0)
// and the token's quants, then acc = fma(float32(s), d_w*d_x, acc), blocks
// in order, one row per lane. That is llama.cpp's own order for Q4_0 and
// IQ4_NL (its repacked ggml_gemv/gemm_q4_0_8x8_q8_0 and
// _iq4_nl_8x8_q8_0) and ggml's scalar definition for Q5_0 (the numerics
// decision of docs/cpu-numerics.md; Q5_0 tensors left in the file's layout
// keep dotQ5_0's 8 lanes). At AVX-512 a VPSHUFB table turns the nibbles
// into the levels plus 128, unsigned bytes for VPDPBUSD (for Q5_0 the
// levels of a clear high bit, plus 16 where it is set), and the block's
// -128*sum(x) takes the 128 back out; AVX2 looks up the signed levels.
// Q4_1 and Q5_1 keep their reference dots' order instead (runQ8_1Groups):
// Q8_1 activations (the Q8_0 ones plus the block sums), 8 float lanes per
// row, the mins' products summed apart and added last.

const (
	// q8_1UnpackedBlock is the bytes of one Q5_1 block of one group
	// unpacked (q5_1x16Unpack): the 16 rows' 32 quant values, at most
	// q8GroupBlock, the buffer unpacksQ4 provides.
	q8_1UnpackedBlock = 512
	q4GroupBlock      = 16 * 18 // bytes of one block of one group: 16 fp16 scales, then 4 x 64 quant bytes
	// q5GroupBlock is the bytes of one Q5_0 block of one group: a
	// q4GroupBlock of the scales and the low 4 bits, then the 16 rows'
	// high bits, 4 bytes each (q5High).
	q5GroupBlock = 16 * 22
)

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
	// q5_0Levels are the levels of Q5_0 quants whose high bit is clear;
	// a set one adds 16.
	q5_0Levels = newQ4Levels(func(n uint8) int8 { return int8(n) - 16 })
)

// levelsOf returns the level table of dt (Q4_0, IQ4_NL or Q5_0).
func levelsOf(dt tensor.DType) *q4Levels {
	switch dt {
	case tensor.IQ4_NL:
		return iq4NLLevels
	case tensor.Q5_0:
		return q5_0Levels
	}
	return q4_0Levels
}

// q4AVX512Only reports whether dt is repacked into LayoutQ4x16 only at the
// AVX-512 level: Q5_0, Q4_1 and Q5_1, which have no AVX2 group kernels
// (after a level change runQ4Groups unpacks their groups in Go).
func q4AVX512Only(dt tensor.DType) bool {
	return dt == tensor.Q5_0 || q4HasMins(dt)
}

// q4HasHigh reports whether dt's quants have a fifth, high bit (Q5_0,
// Q5_1), and q4HasMins whether its blocks have a min (Q4_1, Q5_1: their
// activations are Q8_1, with block sums).
func q4HasHigh(dt tensor.DType) bool { return dt == tensor.Q5_0 || dt == tensor.Q5_1 }

func q4HasMins(dt tensor.DType) bool { return dt == tensor.Q4_1 || dt == tensor.Q5_1 }

// q4GroupBlockOf returns the bytes of one block of one group of dt in
// LayoutQ4x16 (Q4_1, Q5_1: the mins of a group's blocks follow all its
// blocks, 16 fp16 each).
func q4GroupBlockOf(dt tensor.DType) int {
	if q4HasHigh(dt) {
		return q5GroupBlock
	}
	return q4GroupBlock
}

// q5High rearranges a Q5_0 block's high bits qh (bit j: quant j) into the
// group layout's: byte m holds at bit k the high bit of quant 4k+m, so
// that the kernels shift the bits of one register of quants 4k..4k+3 of
// each row (q4x16Unpack's order) into place at once. q5FileHigh undoes it.
func q5High(qh uint32) uint32 {
	var h uint32
	for j := range 32 {
		h |= (qh >> j & 1) << (8*(j%4) + j/4)
	}
	return h
}

func q5FileHigh(h uint32) uint32 {
	var qh uint32
	for j := range 32 {
		qh |= (h >> (8*(j%4) + j/4) & 1) << j
	}
	return qh
}

// repackableQ4 reports whether Backend.Load repacks w: Q4_0 or IQ4_NL, or
// Q5_0, Q4_1 or Q5_1 at the AVX-512 level (the other levels keep its file layout and
// kernels), in the file's layout with its rows (per expert, for a 3-D
// tensor) in whole groups.
func repackableQ4(w *weights.Tensor) bool {
	return (w.DType == tensor.Q4_0 || w.DType == tensor.IQ4_NL || q4AVX512Only(w.DType) && level == levelAVX512) && groupable(w)
}

// repackQ4 rewrites w (repackableQ4) in place into LayoutQ4x16, its groups
// spread over the pool's workers, each through its scratch[worker], at
// least one group's bytes (16 rows).
func repackQ4(pool *pool, w *weights.Tensor, scratch [][]byte) {
	nb, bb, gb := w.RowLen()/32, w.DType.BlockBytes(), q4GroupBlockOf(w.DType)
	regroup(pool, w, scratch, weights.LayoutQ4x16, func(grp []byte, i int, row []byte) {
		for b := range nb {
			src, dst := row[bb*b:bb*(b+1)], grp[b*gb:(b+1)*gb]
			dst[2*i], dst[2*i+1] = src[0], src[1]
			qs := src[bb-16:]
			for j := range 4 {
				copy(dst[32+64*j+4*i:32+64*j+4*i+4], qs[4*j:4*j+4])
			}
			if q4HasHigh(w.DType) {
				binary.LittleEndian.PutUint32(dst[q4GroupBlock+4*i:], q5High(binary.LittleEndian.Uint32(src[bb-20:])))
			}
			if q4HasMins(w.DType) {
				copy(grp[nb*gb+32*b+2*i:nb*gb+32*b+2*i+2], src[2:4])
			}
		}
	})
}

// q4GroupRow writes row r of w (LayoutQ4x16) as the file stores it into
// dst [w.RowBytes()].
func q4GroupRow(w *weights.Tensor, r int, dst []byte) {
	nb, bb, gb := w.RowLen()/32, w.DType.BlockBytes(), q4GroupBlockOf(w.DType)
	g, i := r/q8GroupRows, r%q8GroupRows
	grp := w.Data[g*q8GroupRows*nb*bb : (g+1)*q8GroupRows*nb*bb]
	for b := range nb {
		src, out := grp[b*gb:(b+1)*gb], dst[bb*b:bb*(b+1)]
		out[0], out[1] = src[2*i], src[2*i+1]
		qs := out[bb-16:]
		for j := range 4 {
			copy(qs[4*j:4*j+4], src[32+64*j+4*i:32+64*j+4*i+4])
		}
		if q4HasHigh(w.DType) {
			binary.LittleEndian.PutUint32(out[bb-20:], q5FileHigh(binary.LittleEndian.Uint32(src[q4GroupBlock+4*i:])))
		}
		if q4HasMins(w.DType) {
			copy(out[2:4], grp[nb*gb+32*b+2*i:nb*gb+32*b+2*i+2])
		}
	}
}

// q4GroupLevel returns the level of quant j (0..31) of row i of the
// LayoutQ4x16 block blk of dtype dt, plus 128.
func q4GroupLevel(blk []byte, dt tensor.DType, i, j int) int {
	q := blk[32+64*(j%16/4)+4*i+j%4]
	if j >= 16 {
		q >>= 4
	}
	l := int(levelsOf(dt)[q&0xf])
	if dt == tensor.Q5_0 {
		l += 16 * int(blk[q4GroupBlock+4*i+j%4]>>(j/4)&1)
	}
	return l
}

// dotQ4Group is the reference dot product of row r of the LayoutQ4x16
// weights w (dtype dt: Q4_0, IQ4_NL or Q5_0; nb blocks per row) and Q8_0
// activations x: per block the exact integer dot, then one fused
// multiply-add of it by the product of the two scales.
func dotQ4Group(w []byte, dt tensor.DType, nb, r int, x *q8Blocks) float32 {
	gb := q4GroupBlockOf(dt)
	g, i := r/q8GroupRows, r%q8GroupRows
	var acc float32
	for b := range nb {
		blk := w[(g*nb+b)*gb : (g*nb+b+1)*gb]
		var s int32
		for j := range 32 {
			s += int32(q4GroupLevel(blk, dt, i, j)-128) * int32(x.qs[32*b+j])
		}
		d := f16tab[binary.LittleEndian.Uint16(blk[2*i:])] * x.d[b]
		acc = fma32(float32(s), d, acc)
	}
	return acc
}

// dotQ8_1Group is the reference dot product of row r of the Q4_1 or Q5_1
// weights w (LayoutQ4x16) and the Q8_1 activations of the Q8_0 blocks x
// and the block sums sums (q8_1Sums): dotQ4_1 or dotQ5_1 of the file's row,
// written into row [w.RowBytes()]. The group kernels keep their 8 lanes,
// which no order with one accumulator per row matches closely enough for
// the teacher-forced golden rule (kq-qwen3-q4_1: 98.44%, a mismatch of
// margin >= 0.5).
func dotQ8_1Group(w *weights.Tensor, r int, row []byte, x *q8Blocks, sums []float32) float32 {
	q4GroupRow(w, r, row)
	return kernelOf(w.DType).dot(row, actRow{qs: x.qs, d: x.d, s: sums})
}

// q8_1Sums returns the Q8_1 block sums (q8_1Sum) of x quantized to q
// (quantizeQ8).
func q8_1Sums(x []float32, q *q8Blocks) []float32 {
	sums := make([]float32, len(x)/32)
	q8_1BlockSums(sums, x, q.qs)
	return sums
}

// q8GroupActSums writes the Q8_1 block sums (q8_1Sum) of tokens [t0, t1) of
// x [T, K], quantized to qx (stored as x+128, unsigned), into dst [T, K/32]
// float32.
func q8GroupActSums(dst []byte, x []float32, qx []int8, t0, t1, K int) {
	nb := K / 32
	for tok := t0; tok < t1; tok++ {
		for b := range nb {
			var sum int32
			for _, v := range qx[tok*K+32*b : tok*K+32*b+32] {
				sum += int32(v ^ -0x80)
			}
			s := q8_1Sum(x[tok*K+32*b:tok*K+32*b+32], sum)
			binary.LittleEndian.PutUint32(dst[4*(tok*nb+b):], math.Float32bits(s))
		}
	}
}

// q4x16UnpackRef is q4x16Unpack in Go, for any dtype of LayoutQ4x16: the nb
// blocks of the group at w (dtype dt) as LayoutQ8x16 blocks at dst.
func q4x16UnpackRef(w []byte, dt tensor.DType, nb int, dst []byte) {
	gb := q4GroupBlockOf(dt)
	for b := range nb {
		blk, out := w[b*gb:(b+1)*gb], dst[b*q8GroupBlock:(b+1)*q8GroupBlock]
		copy(out[:32], blk[:32])
		for i := range q8GroupRows {
			for j := range 32 {
				out[32+64*(j/4)+4*i+j%4] = byte(q4GroupLevel(blk, dt, i, j))
			}
		}
	}
}

// unpacksQ4 reports whether a matmul of T tokens by w (LayoutQ4x16) needs
// matmulTask.unpacked: at AVX-512 for tiles of tokens, and for Q5_0 at the
// other levels (a level set after the weights were repacked), where
// runQ4Groups unpacks its groups in Go for the LayoutQ8x16 kernels.
func unpacksQ4(w *weights.Tensor, T int) bool {
	return w.Layout == weights.LayoutQ4x16 && (T >= 4 || w.DType == tensor.Q5_0 && level != levelAVX512)
}

// runQ4Groups is runQ8Groups for LayoutQ4x16 weights: output columns
// (weight rows) [lo, hi), both multiples of 16, for every token, from the
// activations in t.qz (q8GroupActs). AVX-512 unpacks each group into the
// worker's t.unpacked (q4x16Unpack, q5x16Unpack: LayoutQ8x16 blocks of the
// levels) and runs the LayoutQ8x16 tiles of up to q8TileTokens tokens on
// it, then takes a last lone token from the group itself; AVX2 takes every
// Q4_0 and IQ4_NL token so, and unpacks Q5_0 groups in Go
// (q4x16UnpackRef) for its LayoutQ8x16 kernels. Q4_1 and Q5_1
// (runQ8_1Groups) keep their reference dots' lanes. All give each row the
// same operations.
func (t *matmulTask) runQ4Groups(worker, lo, hi int) {
	if q4HasMins(t.dt) {
		t.runQ8_1Groups(worker, lo, hi)
		return
	}
	T, N, nb := t.T, t.N, t.K/32
	gb, xs, os := nb*q4GroupBlockOf(t.dt), uintptr(nb*q8ActBlock), uintptr(4*N)
	tb := q8TokenBlock(nb)
	lv := unsafe.Pointer(levelsOf(t.dt))
	q5 := t.dt == tensor.Q5_0
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(t0+tb, T)
		for g := lo / q8GroupRows; g < hi/q8GroupRows; g++ {
			w := unsafe.Pointer(&t.w[g*gb])
			x, out := func(tt int) unsafe.Pointer { return unsafe.Pointer(&t.qz[tt*nb*q8ActBlock]) },
				func(tt int) unsafe.Pointer { return unsafe.Pointer(&t.out[tt*N+16*g]) }
			if q5 && level != levelAVX512 {
				u := t.unpacked[worker][:nb*q8GroupBlock]
				q4x16UnpackRef(t.w[g*gb:(g+1)*gb], t.dt, nb, u)
				for tt := t0; tt < t1; tt += q8TileTokens {
					q8GroupTile(unsafe.Pointer(&u[0]), nb, x(tt), xs, out(tt), os, min(q8TileTokens, t1-tt))
				}
				continue
			}
			tt := t0
			if level == levelAVX512 && t1-t0 >= 4 {
				u := unsafe.Pointer(&t.unpacked[worker][:nb*q8GroupBlock][0])
				if q5 {
					q5x16Unpack(w, nb, u, lv)
				} else {
					q4x16Unpack(w, nb, u, lv)
				}
				for tt+2 <= t1 {
					n := min(q8TileTokens, t1-tt)
					q8x16GemmN(u, nb, x(tt), xs, out(tt), os, n)
					tt += n
				}
			}
			for ; tt < t1; tt++ {
				switch {
				case q5:
					q5x16Gemv(w, nb, x(tt), out(tt), lv)
				case level == levelAVX512:
					q4x16Gemv(w, nb, x(tt), out(tt), lv)
				default:
					q4x16GemvAVX2(w, nb, x(tt), out(tt), lv)
				}
			}
		}
	}
}

// unpackQ8_1 reports whether runQ8_1Groups unpacks the groups of a dt
// matmul for n tokens: for Q5_1 from 8 tokens on (one merge of the high
// bits instead of one per token pair; fewer tokens, reading the weights
// from memory, lose more to the unpacking than they gain), never for Q4_1
// (its pair kernel unpacks a block's nibbles as fast as it loads them
// unpacked).
func unpackQ8_1(dt tensor.DType, n int) bool { return q4HasHigh(dt) && n >= 8 }

// runQ8_1Groups is runQ4Groups for Q4_1 and Q5_1, from the activations in
// t.qz (q8Sums: q8GroupActs, then the Q8_1 block sums). At AVX-512 each
// group takes its tokens two at a time (q4_1x16Pair, q5_1x16Pair), where
// unpackQ8_1 from its blocks unpacked once into the worker's t.unpacked
// (q5_1x16Unpack; q8_1x16PairUnpacked), the same
// operations; at the other levels (a level set after the weights were
// repacked) each row is unpacked and takes the reference dot.
func (t *matmulTask) runQ8_1Groups(worker, lo, hi int) {
	T, N, K, nb := t.T, t.N, t.K, t.K/32
	gb, xs, os := q8GroupRows*t.rowBytes, uintptr(nb*q8ActBlock), uintptr(4*N)
	sums := t.qz[T*nb*q8ActBlock:] // [T, nb] float32
	if level != levelAVX512 {
		w := &weights.Tensor{Shape: []int{K, N}, DType: t.dt, Data: t.w, Layout: weights.LayoutQ4x16}
		row := make([]byte, t.rowBytes)
		x := q8Blocks{qs: make([]int8, K), d: make([]float32, nb)}
		for tt := range T {
			for b := range nb {
				a := t.qz[(tt*nb+b)*q8ActBlock:]
				for j := range 32 {
					x.qs[32*b+j] = int8(a[j])
				}
				x.d[b] = math.Float32frombits(binary.LittleEndian.Uint32(a[36:]))
			}
			s := unsafe.Slice((*float32)(unsafe.Pointer(&sums[4*tt*nb])), nb)
			for r := lo; r < hi; r++ {
				t.out[tt*N+r] = dotQ8_1Group(w, r, row, &x, s)
			}
		}
		return
	}
	pair := q4_1x16Pair
	if q4HasHigh(t.dt) {
		pair = q5_1x16Pair
	}
	tb, ss, bb := q8TokenBlock(nb), uintptr(4*nb), q4GroupBlockOf(t.dt)
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(t0+tb, T)
		for g := lo / q8GroupRows; g < hi/q8GroupRows; g++ {
			w := unsafe.Pointer(&t.w[g*gb])
			x, s, out := func(tt int) unsafe.Pointer { return unsafe.Pointer(&t.qz[tt*nb*q8ActBlock]) },
				func(tt int) unsafe.Pointer { return unsafe.Pointer(&sums[4*tt*nb]) },
				func(tt int) unsafe.Pointer { return unsafe.Pointer(&t.out[tt*N+16*g]) }
			if unpackQ8_1(t.dt, t1-t0) {
				u := unsafe.Pointer(&t.unpacked[worker][:nb*q8_1UnpackedBlock][0])
				q5_1x16Unpack(w, nb, u)
				for tt := t0; tt < t1; tt += 2 {
					q8_1x16PairUnpacked(u, w, nb, bb, x(tt), xs, s(tt), ss, out(tt), os, min(2, t1-tt))
				}
				continue
			}
			for tt := t0; tt < t1; tt += 2 {
				pair(w, nb, x(tt), xs, s(tt), ss, out(tt), os, min(2, t1-tt))
			}
		}
	}
}
