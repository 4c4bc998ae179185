package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Q8_0 weights in 16-row groups (weights.LayoutQ8x16). Backend.Load
// rewrites every Q8_0 tensor of a Private file whose rows come in whole
// groups (repackableQ8) in place, so the layout costs no memory; every
// reader of such a tensor (matmul at each level, get_rows, MoE expert views)
// reads the groups. The arithmetic is ggml's scalar definition with one
// accumulator: per block an exact integer dot s of the row's and the
// token's quants, then acc = fma(float32(s), d_w*d_x, acc), blocks in order.
// The kernels put one row in each of 16 lanes, so every row of every token
// takes exactly that sequence of operations, whatever the tile: results do
// not depend on the batch, the tile shape, the thread count or the level.

const (
	q8GroupRows  = 16      // rows per group
	q8TileTokens = 16      // most tokens one kernel call takes
	q8GroupBlock = 16 * 34 // bytes of one block of one group: 16 fp16 scales, then 8 x 64 quant bytes
	// q8ActBlock is the bytes of one block of one token in the group
	// kernels' activation layout (q8GroupActs): the 32 signed quants,
	// int32 -128 * their sum, the float32 scale.
	q8ActBlock = 40
)

// repackableQ8 reports whether Backend.Load repacks w: Q8_0 in the file's
// layout with its rows (per expert, for a 3-D tensor) in whole groups.
func repackableQ8(w *weights.Tensor) bool {
	return w.DType == tensor.Q8_0 && groupable(w)
}

// repackQ8 rewrites w (repackableQ8) in place into LayoutQ8x16, its groups
// spread over the pool's workers, each through its scratch[worker], at
// least one group's bytes (16 rows).
func repackQ8(pool *pool, w *weights.Tensor, scratch [][]byte) {
	nb := w.RowLen() / 32
	regroup(pool, w, scratch, weights.LayoutQ8x16, func(grp []byte, i int, row []byte) {
		for b := range nb {
			src, dst := row[34*b:34*b+34], grp[b*q8GroupBlock:(b+1)*q8GroupBlock]
			dst[2*i], dst[2*i+1] = src[0], src[1]
			for k := range 8 {
				v := binary.LittleEndian.Uint32(src[2+4*k:]) ^ 0x80808080
				binary.LittleEndian.PutUint32(dst[32+64*k+4*i:], v)
			}
		}
	})
}

// q8GroupRow writes row r of w (LayoutQ8x16) as the file stores it into
// dst [w.RowBytes()].
func q8GroupRow(w *weights.Tensor, r int, dst []byte) {
	nb := w.RowLen() / 32
	g, i := r/q8GroupRows, r%q8GroupRows
	grp := w.Data[g*nb*q8GroupBlock : (g+1)*nb*q8GroupBlock]
	for b := range nb {
		src, out := grp[b*q8GroupBlock:(b+1)*q8GroupBlock], dst[34*b:34*b+34]
		out[0], out[1] = src[2*i], src[2*i+1]
		for k := range 8 {
			binary.LittleEndian.PutUint32(out[2+4*k:], binary.LittleEndian.Uint32(src[32+64*k+4*i:])^0x80808080)
		}
	}
}

// dotQ8Group is the reference dot product of row r of the LayoutQ8x16
// weights w (nb blocks per row) and Q8_0 activations x: per block the exact
// integer dot, then one fused multiply-add of it by the product of the two
// scales.
func dotQ8Group(w []byte, nb, r int, x *q8Blocks) float32 {
	g, i := r/q8GroupRows, r%q8GroupRows
	var acc float32
	for b := range nb {
		blk := w[(g*nb+b)*q8GroupBlock : (g*nb+b+1)*q8GroupBlock]
		xs := x.qs[32*b : 32*b+32]
		var s int32
		for k := range 8 {
			q := blk[32+64*k+4*i : 32+64*k+4*i+4]
			for j := range 4 {
				s += int32(int8(q[j]^0x80)) * int32(xs[4*k+j])
			}
		}
		d := f16tab[binary.LittleEndian.Uint16(blk[2*i:])] * x.d[b]
		acc = fma32(float32(s), d, acc)
	}
	return acc
}

// q8GroupActs writes tokens [t0, t1) of Q8_0 activations qx [T, K] (stored
// as x+128, unsigned) and qd [T, K/32] into dst [T, K/32, q8ActBlock], the
// group kernels' layout.
func q8GroupActs(dst []byte, qx []int8, qd []float32, t0, t1, K int) {
	const flip, lo8 = 0x8080808080808080, 0x00ff00ff00ff00ff
	nb := K / 32
	src := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(qx))), len(qx))
	for tok := t0; tok < t1; tok++ {
		for b := range nb {
			q, o := src[tok*K+32*b:tok*K+32*b+32], dst[(tok*nb+b)*q8ActBlock:(tok*nb+b+1)*q8ActBlock]
			var pairs uint64 // four 16-bit lanes of sums of the unsigned quants
			for j := 0; j < 32; j += 8 {
				u := binary.LittleEndian.Uint64(q[j:])
				binary.LittleEndian.PutUint64(o[j:], u^flip)
				pairs += u&lo8 + u>>8&lo8
			}
			sum := int32(pairs*0x0001000100010001>>48) - 32*128 // of the signed quants
			binary.LittleEndian.PutUint32(o[32:], uint32(-128*sum))
			binary.LittleEndian.PutUint32(o[36:], math.Float32bits(qd[tok*nb+b]))
		}
	}
}

// q8TokenBlock is the number of tokens whose activations (nb blocks each) a
// worker keeps hot in cache while it sweeps its groups: about 128 KiB of
// them, in whole tiles of q8TileTokens.
func q8TokenBlock(nb int) int {
	return max(q8TileTokens, (128<<10)/(nb*q8ActBlock)/q8TileTokens*q8TileTokens)
}

// runQ8Groups is runQuant for LayoutQ8x16 weights: output columns (weight
// rows) [lo, hi), both multiples of 16, for every token, from the
// activations in t.qz (q8GroupActs). Each kernel call takes a group and up
// to q8TileTokens tokens, so a decode step of up to 16 rows reads each
// weight block once. A worker sweeps its groups in order, one sequential
// stream of weights: decode, which reads them from memory, runs at the
// hardware prefetcher's pace, which splitting the range into several
// streams (as gemvQuant does for the file layout) only slows down.
func (t *matmulTask) runQ8Groups(lo, hi int) {
	T, N, nb := t.T, t.N, t.K/32
	gb, xs, os := nb*q8GroupBlock, uintptr(nb*q8ActBlock), uintptr(4*N)
	tb := q8TokenBlock(nb)
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(t0+tb, T)
		for g := lo / q8GroupRows; g < hi/q8GroupRows; g++ {
			w := unsafe.Pointer(&t.w[g*gb])
			for tt := t0; tt < t1; tt += q8TileTokens {
				n := min(q8TileTokens, t1-tt)
				q8GroupTile(w, nb, unsafe.Pointer(&t.qz[tt*nb*q8ActBlock]), xs, unsafe.Pointer(&t.out[tt*N+16*g]), os, n)
			}
		}
	}
}

// q8GroupTile multiplies the group at w (nb blocks) by the n tokens
// (1 <= n <= q8TileTokens) at x + i*xs, storing token i's 16 results at
// out + i*os, with the kernels of the running fast level.
func q8GroupTile(w unsafe.Pointer, nb int, x unsafe.Pointer, xs uintptr, out unsafe.Pointer, os uintptr, n int) {
	switch {
	case level != levelAVX512:
		q8GroupsAVX2(w, nb, x, xs, out, os, n)
	case n == 1:
		q8x16Gemv(w, nb, x, out)
	default:
		q8x16GemmN(w, nb, x, xs, out, os, n)
	}
}

// q8GroupsAVX2 is q8GroupTile at AVX2: n tokens in fours (a tail of two or
// three repeats its first token), a lone one by q8x16GemvAVX2.
func q8GroupsAVX2(w unsafe.Pointer, nb int, x unsafe.Pointer, xs uintptr, out unsafe.Pointer, os uintptr, n int) {
	for i := 0; i < n; i += 4 {
		m := min(4, n-i)
		if m == 1 {
			q8x16GemvAVX2(w, nb, unsafe.Add(x, uintptr(i)*xs), unsafe.Add(out, uintptr(i)*os))
			return
		}
		var xp, op [4]unsafe.Pointer
		for j := range 4 {
			k := uintptr(i + j)
			if j >= m {
				k = uintptr(i)
			}
			xp[j], op[j] = unsafe.Add(x, k*xs), unsafe.Add(out, k*os)
		}
		q8x16Gemm4AVX2(w, nb, &xp, &op)
	}
}
