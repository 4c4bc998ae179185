package cpu

import (
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The packed float GEMM (levelAVX512, 4 tokens or more): weight rows of a
// quad and activation tokens of a quad are each laid out as one stream,
// [chunks16(K)][4][16] float32, so that f32Gemm4x4P reads two sequential
// streams and sweeps a whole token block per call. The activations are
// packed once per step (prepTask, beside their f16/bf16 rounding), the
// weights once per panel of a worker's rows (converted from f16/bf16 as
// they are packed, exactly). Every output element is computed by
// f32Dot4x4's sequence of operations (16 lanes of fused multiply-adds in k
// order, the last chunk zero-padded as f32Dot4x4's masked tail is, reduced
// in HSUM16's order), so the results are those of the decode kernels, bit
// for bit, and do not depend on how tokens are batched.

// packedFloat reports whether a float matmul of T tokens runs the packed
// GEMM.
func packedFloat(T int) bool { return useSIMD && T >= 4 }

// chunks16 is the number of 16-lane chunks of a packed row of K values.
func chunks16(K int) int { return (K + 15) / 16 }

// packedQuadLen is the float32 length of one packed quad of rows of K
// values.
func packedQuadLen(K int) int { return chunks16(K) * 64 }

// packCode is pack4x16's code for a float dtype.
func packCode(dt tensor.DType) int {
	switch dt {
	case tensor.F16:
		return 1
	case tensor.BF16:
		return 2
	}
	return 0
}

// floatAt returns value j of a row of dtype dt (F32, F16 or BF16) at row,
// as float32 (exactly).
func floatAt(dt tensor.DType, row unsafe.Pointer, j int) float32 {
	switch dt {
	case tensor.F16:
		return f16tab[*(*uint16)(unsafe.Add(row, 2*j))]
	case tensor.BF16:
		return math.Float32frombits(uint32(*(*uint16)(unsafe.Add(row, 2*j))) << 16)
	}
	return *(*float32)(unsafe.Add(row, 4*j))
}

// packQuad packs rows rows (1 to 4; the missing ones as zeros) of K values
// of dtype dt at src + i*stride bytes into dst [chunks16(K)][4][16],
// zero-padding the last chunk.
func packQuad(dst []float32, dt tensor.DType, src unsafe.Pointer, stride uintptr, K, rows int) {
	dst = dst[:packedQuadLen(K)]
	n16 := K / 16
	if rows == 4 && n16 > 0 {
		pack4x16(&dst[0], src, stride, n16, packCode(dt))
	} else {
		n16 = 0 // all chunks below
	}
	for c := n16; c < chunks16(K); c++ {
		for i := range 4 {
			out := dst[(c*4+i)*16 : (c*4+i+1)*16]
			clear(out)
			if i >= rows {
				continue // src + i*stride may lie past src's memory
			}
			row := unsafe.Add(src, uintptr(i)*stride)
			for l := range min(16, K-c*16) {
				out[l] = floatAt(dt, row, c*16+l)
			}
		}
	}
}

// packTokens packs tokens [lo, hi) of x [T, K] (lo a multiple of 4) into
// xp [ceil(T/4)][chunks16(K)][4][16], the tokens past T as zeros.
func packTokens(xp, x []float32, K, T, lo, hi int) {
	ql := packedQuadLen(K)
	for q0 := lo; q0 < hi; q0 += 4 {
		packQuad(xp[q0/4*ql:], tensor.F32, unsafe.Pointer(&x[q0*K]), uintptr(4*K), K, min(4, T-q0))
	}
}

// packedChunk is the most 16-lane chunks of k one f32Gemm4x4P call
// takes: 1024 values, so that the quad of weight rows it reads (16 KiB)
// stays in L1 while the token quads stream by. Longer rows are split into
// equal chunks, the accumulators carried between calls.
const packedChunk = 64

// f32Gemm4x4P's flags.
const (
	gemmFirst = 1 // the accumulators start at zero
	gemmLast  = 2 // reduce them into out
)

// packedAccLen is the float32 length of the accumulators f32Gemm4x4P
// carries between the k chunks of a token block: 16 zmm per token quad.
func packedAccLen(K int) int { return tokenBlock(4*K) / 4 * 256 }

// gemmQuads computes quads token quads, packed at xq quad after quad
// (xquad bytes apart), against the packed row quad wq, through every k
// chunk, into out (token j of quad q at out + (4*q+j)*ostride bytes).
func gemmQuads(wq, xq unsafe.Pointer, n16, quads int, xquad uintptr, acc, out unsafe.Pointer, ostride uintptr) {
	kc := (n16 + packedChunk - 1) / packedChunk
	kc = (n16 + kc - 1) / kc // equal chunks of at most packedChunk
	for c0 := 0; c0 < n16; c0 += kc {
		flags := 0
		if c0 == 0 {
			flags |= gemmFirst
		}
		if c0+kc >= n16 {
			flags |= gemmLast
		}
		off := uintptr(c0) * 256
		f32Gemm4x4P(unsafe.Add(wq, off), unsafe.Add(xq, off), min(kc, n16-c0), quads, xquad, acc, flags, out, ostride)
	}
}

// runPacked is runFloat at levelAVX512 for 4 tokens or more: output
// columns (weight rows) [lo, hi), the activations packed in t.xp. Rows
// are packed into the worker's tile a panel at a time (a quad when the
// tokens are one block, so that the quad stays in L1) and each quad sweeps
// a token block per k chunk (gemmQuads); the token quad T does not fill
// is computed into a scratch quad.
func (t *matmulTask) runPacked(worker, lo, hi int) {
	T, K, N, rb := t.T, t.K, t.N, t.rowBytes
	ql := packedQuadLen(K)
	n16 := chunks16(K)
	full := T / 4             // whole token quads
	tb := tokenBlock(K*4) / 4 // token quads per block
	pr := 4
	if full > tb {
		pr = floatPanel(K)
	}
	tile := t.tiles[worker]
	acc := unsafe.Pointer(&tile[floatPanel(K)/4*ql])
	xq := uintptr(4 * ql)
	var part [16]float32 // [token][row] of the partial token quad
	for p0 := lo; p0 < hi; p0 += pr {
		p1 := min(p0+pr, hi)
		q1 := p0 + (p1-p0)&^3 // rows [p0, q1) go in quads
		for r := p0; r < q1; r += 4 {
			packQuad(tile[(r-p0)/4*ql:], t.dt, unsafe.Pointer(&t.w[r*rb]), uintptr(rb), K, 4)
		}
		for b0 := 0; b0 < full; b0 += tb {
			nq := min(tb, full-b0)
			for r := p0; r < q1; r += 4 {
				gemmQuads(unsafe.Pointer(&tile[(r-p0)/4*ql]), unsafe.Pointer(&t.xp[b0*ql]), n16, nq, xq, acc,
					unsafe.Pointer(&t.out[4*b0*N+r]), uintptr(4*N))
			}
		}
		if rest := T - 4*full; rest > 0 {
			for r := p0; r < q1; r += 4 {
				gemmQuads(unsafe.Pointer(&tile[(r-p0)/4*ql]), unsafe.Pointer(&t.xp[full*ql]), n16, 1, xq, acc, unsafe.Pointer(&part[0]), 16)
				for j := range rest {
					copy(t.out[(4*full+j)*N+r:(4*full+j)*N+r+4], part[4*j:4*j+4])
				}
			}
		}
		for r := q1; r < p1; r++ {
			t.floatRow(r, 0, T)
		}
	}
}
