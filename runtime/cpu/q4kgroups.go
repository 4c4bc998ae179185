package cpu

import (
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Q4_K weights in 16-row groups (weights.LayoutQ4Kx16). At the AVX-512
// level Backend.Load rewrites every Q4_K tensor of a Private file whose
// rows come in whole groups (repackableQ4K) in place; every reader of such
// a tensor (matmul at each level, get_rows, MoE expert views) reads the
// groups. The arithmetic is dotQ4K's, the single-token order: per
// super-block the exact integer sums q = sum_j sc_j * dot_j and
// m = sum_j min_j * bsum_j, then acc = fma(float32(q), d_w*d_x, acc) and
// accm = fma(float32(m), dmin_w*d_x, accm), super-blocks in order, result
// acc - accm. The kernel puts one row in each of 16 lanes, so every row of
// every token takes exactly that sequence of operations: results do not
// depend on the batch, the tile, the thread count or the level.

const (
	// q4KGroupBlock is the bytes of one super-block of one group: 16 fp16
	// d, 16 fp16 dmin, 12 x 16 packed scale bytes, 4 x 8 x 64 quant bytes.
	q4KGroupBlock = q8GroupRows * 144
	// q4KTokenTile is the most tokens one q4Kx16Gemm call takes: their
	// activations (K bytes each) stay in L2 while a worker sweeps its
	// groups, and their per-token sums and accumulators (q4KTokenScratch)
	// in L1.
	q4KTokenTile = 32
	// q4KTokenScratch is the kernel's scratch per token: the integer sum
	// and the two float accumulators of 16 rows.
	q4KTokenScratch = 3 * 64
	// q4KScratch is the kernel's scratch: 8 scale and 8 min vectors, then
	// q4KTokenTile tokens' sums and accumulators.
	q4KScratch = 2*8*64 + q4KTokenTile*q4KTokenScratch
)

// repackableQ4K reports whether Backend.Load repacks w: Q4_K in the file's
// layout with its rows (per expert, for a 3-D tensor) in whole groups, at
// the AVX-512 level, whose kernel reads the groups (the other levels keep
// the file's layout and its kernels).
func repackableQ4K(w *weights.Tensor) bool {
	return level == levelAVX512 && groupableQ4K(w)
}

// groupableQ4K reports whether w can be laid out as LayoutQ4Kx16: Q4_K in
// the file's layout with its rows (per expert) in whole groups.
func groupableQ4K(w *weights.Tensor) bool {
	return w.DType == tensor.Q4_K && w.Layout == weights.LayoutRows && len(w.Shape) >= 2 &&
		w.Shape[0]%256 == 0 && w.Shape[1]%q8GroupRows == 0 && len(w.Data) == w.Rows()*w.RowBytes()
}

// q4KGroupOffsets returns where byte j (0..143) of row i's super-block
// lies within its group's super-block (q4KGroupBlock bytes).
func q4KGroupOffset(i, j int) int {
	switch {
	case j < 2: // d
		return 2*i + j
	case j < 4: // dmin
		return 32 + 2*i + j - 2
	case j < 16: // packed scales
		return 64 + 16*(j-4) + i
	}
	q := j - 16 // quant byte 32g + 4k + c at 256 + 64(8g + k) + 4i + c
	return 256 + 64*(q/4) + 4*i + q%4
}

// repackQ4K rewrites w (groupableQ4K) in place into LayoutQ4Kx16, its
// groups spread over the pool's workers, each through its scratch[worker],
// at least one group's bytes (16 rows).
func repackQ4K(pool *pool, w *weights.Tensor, scratch [][]byte) {
	rb, nb := w.RowBytes(), w.RowLen()/256
	pool.parallel(w.Rows()/q8GroupRows, 1, func(worker, lo, hi int) {
		scratch := scratch[worker][:q8GroupRows*rb]
		for g := lo; g < hi; g++ {
			grp := w.Data[g*q8GroupRows*rb : (g+1)*q8GroupRows*rb]
			copy(scratch, grp)
			for i := range q8GroupRows {
				for b := range nb {
					src, dst := scratch[i*rb+144*b:i*rb+144*b+144], grp[b*q4KGroupBlock:(b+1)*q4KGroupBlock]
					for j, v := range src {
						dst[q4KGroupOffset(i, j)] = v
					}
				}
			}
		}
	})
	w.Layout = weights.LayoutQ4Kx16
}

// q4KGroupRow writes row r of the LayoutQ4Kx16 weights data (nb
// super-blocks per row) as the file stores it into dst [144*nb].
func q4KGroupRow(data []byte, nb, r int, dst []byte) {
	g, i := r/q8GroupRows, r%q8GroupRows
	for b := range nb {
		src := data[(g*nb+b)*q4KGroupBlock : (g*nb+b+1)*q4KGroupBlock]
		for j := range 144 {
			dst[144*b+j] = src[q4KGroupOffset(i, j)]
		}
	}
}

// fileRow writes row r of w, in any layout, as the file stores it into
// dst [w.RowBytes()] and returns it; a LayoutRows row is returned as is.
func fileRow(w *weights.Tensor, r int, dst []byte) []byte {
	switch w.Layout {
	case weights.LayoutQ8x16:
		q8GroupRow(w, r, dst)
	case weights.LayoutQ4Kx16:
		q4KGroupRow(w.Data, w.RowLen()/256, r, dst)
	default:
		return w.Row(r)
	}
	return dst
}

// runQ4KGroups is runBlock for LayoutQ4Kx16 weights: output columns
// (weight rows) [lo, hi), both multiples of 16, for every token. At the
// AVX-512 level q4Kx16Gemm takes each group for up to q4KTokenTile tokens
// at a time; elsewhere (a level set after the weights were repacked) each
// row is unpacked and takes the reference dot.
func (t *matmulTask) runQ4KGroups(lo, hi int) {
	T, N, nb := t.T, t.N, t.K/256
	a := t.aq
	if level != levelAVX512 {
		row := make([]byte, t.rowBytes)
		for r := lo; r < hi; r++ {
			q4KGroupRow(t.w, nb, r, row)
			for tt := range T {
				t.out[tt*N+r] = dotQ4K(row, a.row(tt))
			}
		}
		return
	}
	var scratch [q4KScratch]byte
	gb := nb * q4KGroupBlock
	for t0 := 0; t0 < T; t0 += q4KTokenTile {
		n := min(q4KTokenTile, T-t0)
		xq, xd, xb, _ := q8KTokens(a, t0, n)
		for g := lo / q8GroupRows; g < hi/q8GroupRows; g++ {
			q4Kx16Gemm(unsafe.Pointer(&t.w[g*gb]), nb, xq, xd, xb, n,
				unsafe.Pointer(&t.out[t0*N+q8GroupRows*g]), uintptr(4*N), unsafe.Pointer(&scratch[0]))
		}
	}
}

// blockKernels returns the fast kernels runBlock uses for the kindBlock
// weights w at the running level: none for weights in groups, whose kernel
// (runQ4KGroups) reads the activations as quantized, uninterleaved.
func blockKernels(w *weights.Tensor) *fastKernels {
	if w.Layout != weights.LayoutRows {
		return &noKernels
	}
	return kernelOf(w.DType).fast()
}
