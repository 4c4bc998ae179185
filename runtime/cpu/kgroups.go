package cpu

import (
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// K-quant weights in 16-row groups (weights.LayoutQ2Kx16, LayoutQ3Kx16,
// LayoutQ4Kx16, LayoutQ5Kx16, LayoutQ6Kx16, LayoutIQ4XSx16). At a level with
// the layout's kernel (kGroup.hasKernel: AVX-512 for all six, AVX2 for Q2_K
// and Q4_K) Backend.Load rewrites every such tensor of a Private file whose
// rows come in whole groups (repackableK) in place;
// every reader of such a tensor (matmul at each level, get_rows, MoE expert
// views) reads the groups. A group's super-block holds the bytes of its 16
// rows' super-blocks, moved (kGroup.offset), so the layout costs no memory.
// The kernels put one row in each of 16 lanes and keep the reference dot's
// arithmetic (dotQ4K: the single-token order; dotQ2K: its halves;
// dotQ3K, dotQ5K, dotQ6K, dotIQ4XS: ggml's 8 lanes and hsum8), so every row of every token takes exactly the reference's
// sequence of operations: results do not depend on the batch, the tile,
// the thread count or the level.

// kGroup describes the group layout of one K-quant dtype.
type kGroup struct {
	layout weights.Layout
	// offset returns where byte j of row i's super-block lies within its
	// group's super-block (16 times the dtype's block bytes).
	offset func(i, j int) int
	// tile is the most tokens a kernel call takes: their activations (K
	// bytes each) stay in L2 while a worker sweeps its groups, and their
	// sums and accumulators in L1 (those of 64 Q5_K or Q6_K tokens, 40 KiB,
	// partly in L2: still ~2% faster than 32 tokens, which unpack each
	// group twice as often).
	tile, scratch int
	// vocab reports whether the vocabulary matrices (vocabMatrix) are
	// repacked too. Decode, one row per sequence, is their main use (the
	// output matrix gives the last position's logits, the embedding rows
	// go through get_rows); Q5_K and Q6_K groups stream slower than the
	// file-layout kernels at one token (Q6_K ~30% on a 151936-row matrix),
	// Q2_K and Q4_K groups faster; Q3_K's keep the file's layout, whose
	// kernels they were not measured against.
	vocab bool
	// avx2 reports whether the AVX2 level has a kernel for the layout
	// (every layout has one at AVX-512); without one, AVX2 keeps the
	// file's layout and its kernels.
	avx2 bool
}

// hasKernel reports whether level lv has a kernel for g's layout.
func (g *kGroup) hasKernel(lv kernelLevel) bool {
	return lv == levelAVX512 || lv == levelAVX2 && g.avx2
}

// vocabMatrix reports whether w is the token embedding or the output
// matrix.
func vocabMatrix(w *weights.Tensor) bool {
	return w.Name == "token_embd.weight" || w.Name == "output.weight"
}

const (
	q2KScratch = 16*64 + 8*64 + 64*3*64
	// q3KScratch: q3Kx16Gemm's 16 sub-blocks' 2 byte tables, then per
	// token (q3KTile) 8 lane accumulators and d_x*d_w (576 bytes); or
	// q3Kx16GemmNarrow's 8 scale pair vectors, then per token (fewer than
	// q3KWideTokens) those and 5 vectors of activation sums (832 bytes).
	q3KTile       = 32
	q3KWideTokens = 8
	q3KScratch    = max(16*2*64+q3KTile*576, 8*64+(q3KWideTokens-1)*832)
	q4KScratch    = 2*8*64 + 64*3*64
	q5KScratch    = 2*8*64 + 64 + 64*10*64
	q6KScratch    = 8*64 + 8*64 + 64*9*64
	// iq4XSScratch: 8 scale vectors, then per token (iq4XSTile) d_w*d_x
	// (64 bytes) and 8 lane accumulators (512).
	iq4XSTile    = 32
	iq4XSScratch = 8*64 + iq4XSTile*64 + iq4XSTile*512
	// maxKGroupScratch is the largest kGroup.scratch.
	maxKGroupScratch = max(q2KScratch, q3KScratch, q4KScratch, q5KScratch, q6KScratch, iq4XSScratch)
)

// kGroupOf returns the group layout of dt, or nil.
func kGroupOf(dt tensor.DType) *kGroup {
	switch dt {
	case tensor.Q2_K:
		return &q2KGroup
	case tensor.Q3_K:
		return &q3KGroup
	case tensor.Q4_K:
		return &q4KGroup
	case tensor.Q5_K:
		return &q5KGroup
	case tensor.Q6_K:
		return &q6KGroup
	case tensor.IQ4_XS:
		return &iq4XSGroup
	}
	return nil
}

// Q2_K: per group and super-block, 1344 bytes: 16 fp16 d, 16 fp16 dmin,
// for each of the 16 scale bytes the 16 rows' byte, then for half h = 0..1
// and k = 0..7 the 16 rows' quant bytes 32h+4k..32h+4k+3. Its kernel's
// scratch: 16 scale vectors and 8 min pair vectors (int16), then per token
// the half's integer sum and the two float accumulators of 16 rows.
var q2KGroup = kGroup{layout: weights.LayoutQ2Kx16, offset: q2KGroupOffset, tile: 64, scratch: q2KScratch, vocab: true, avx2: true}

func q2KGroupOffset(i, j int) int {
	switch {
	case j < 16: // scales
		return 64 + 16*j + i
	case j < 80: // quant byte 32h + 4k + c
		q := j - 16
		return 320 + 64*(q/4) + 4*i + q%4
	case j < 82: // d
		return 2*i + j - 80
	}
	return 32 + 2*i + j - 82 // dmin
}

// Q3_K: per group and super-block, 1760 bytes: 16 fp16 d, for each of the
// 12 packed scale bytes the 16 rows' byte, then for k = 0..7 three times 64
// bytes, the 16 rows' bytes 4k..4k+3 of qs[0:], of qs[32:] and of hmask
// (the kernel's order of reading them). Its kernels' scratch: q3KScratch.
// A tile of q3KWideTokens or more takes q3Kx16Gemm, which unpacks each
// super-block's weights once into bytes scaled by their sub-block scale
// (costly, for many tokens) and reads the tile's activations' lane sums
// (q3KLaneSums), made once per tile into the worker's matmulTask.unpacked
// (q3KLaneSumBytes); fewer tokens (decode) take q3Kx16GemmNarrow, which
// unpacks cheaply and scales per token: the same arithmetic.
var q3KGroup = kGroup{layout: weights.LayoutQ3Kx16, offset: q3KGroupOffset, tile: q3KTile, scratch: q3KScratch}

// q3KLaneSumBytes is the bytes of a worker's buffer of the lane sums of T
// tokens of K Q8_K quants, at most a tile: 32 per token and super-block.
func q3KLaneSumBytes(T, K int) int { return min(T, q3KTile) * K / 8 }

func q3KGroupOffset(i, j int) int {
	const quants = 32 + 12*16
	switch {
	case j < 32: // hmask
		return quants + 192*(j/4) + 128 + 4*i + j%4
	case j < 96: // qs byte 32h + r
		h, r := (j-32)/32, (j-32)%32
		return quants + 192*(r/4) + 64*h + 4*i + r%4
	case j < 108: // packed scales
		return 32 + 16*(j-96) + i
	}
	return 2*i + j - 108 // d
}

// Q4_K: per group and super-block, 2304 bytes: 16 fp16 d, 16 fp16 dmin,
// for each of the 12 packed scale bytes the 16 rows' byte, then for chunk
// pair g = 0..3 and k = 0..7 the 16 rows' quant bytes 32g+4k..32g+4k+3.
// Its kernel's scratch: 8 scale and 8 min vectors, then per token the
// integer sum and the two float accumulators of 16 rows.
var q4KGroup = kGroup{layout: weights.LayoutQ4Kx16, offset: q4KGroupOffset, tile: 64, scratch: q4KScratch, vocab: true, avx2: true}

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

// Q5_K: per group and super-block, 2816 bytes: 16 fp16 d, 16 fp16 dmin,
// for each of the 12 packed scale bytes the 16 rows' byte, then for
// k = 0..7 five times 64 bytes, the 16 rows' bytes 4k..4k+3 of qs[32g:]
// for g = 0..3 and of qh (the kernel's order of reading them). Its
// kernel's scratch: 8 scale vectors (int16 pairs) and 8 min vectors, a
// token's 8 sums of 32 quants, then per token the 8 float lane
// accumulators, the mins' accumulator and d_x*d_w of 16 rows.
var q5KGroup = kGroup{layout: weights.LayoutQ5Kx16, offset: q5KGroupOffset, tile: 64, scratch: q5KScratch}

func q5KGroupOffset(i, j int) int {
	switch {
	case j < 2: // d
		return 2*i + j
	case j < 4: // dmin
		return 32 + 2*i + j - 2
	case j < 16: // packed scales
		return 64 + 16*(j-4) + i
	case j < 48: // qh byte 4k + c
		q := j - 16
		return 256 + 320*(q/4) + 256 + 4*i + q%4
	}
	q := j - 48 // qs byte 32g + 4k + c
	g, r := q/32, q%32
	return 256 + 320*(r/4) + 64*g + 4*i + r%4
}

// Q6_K: per group and super-block, 3360 bytes: 16 fp16 d, for each of the
// 16 int8 scales the 16 rows' byte, then for k = 0..7 and half h = 0..1
// three times 64 bytes, the 16 rows' bytes 4k..4k+3 of ql[64h:], of
// ql[64h+32:] and of qh[32h:] (the kernel's order of reading them). Its
// kernel's scratch: 8 vectors of the scale pairs of two chunks (int16), 8
// pairs of minus 32 times the scales, then per token the 8 float lane
// accumulators and d_x*d_w of 16 rows.
var q6KGroup = kGroup{layout: weights.LayoutQ6Kx16, offset: q6KGroupOffset, tile: 64, scratch: q6KScratch}

func q6KGroupOffset(i, j int) int {
	const quants = 32 + 16*16
	switch {
	case j < 128: // ql
		h, r := j/64, j%64
		return quants + 192*(2*(r%32/4)+h) + 64*(r/32) + 4*i + r%4
	case j < 192: // qh
		h, r := (j-128)/32, (j-128)%32
		return quants + 192*(2*(r/4)+h) + 128 + 4*i + r%4
	case j < 208: // scales
		return 32 + 16*(j-192) + i
	}
	return 2*i + j - 208 // d
}

// IQ4_XS: per group and super-block, 2176 bytes: 16 fp16 d, for each of
// the 6 scale bytes (scales_h, then scales_l) the 16 rows' byte, then for
// k = 0..3 and chunk c = 0..7 the 16 rows' quant bytes 16c+4k..16c+4k+3
// (lane k's low nibbles, lane k+4's high ones: the kernel's order of
// reading them). Its kernel's scratch: iq4XSScratch; it reads the tile's
// activations as int16 pairs (iq4XSPairs), made once per tile into the
// worker's matmulTask.unpacked (iq4XSPairBytes).

var iq4XSGroup = kGroup{layout: weights.LayoutIQ4XSx16, offset: iq4XSGroupOffset, tile: iq4XSTile, scratch: iq4XSScratch, vocab: true}

// iq4XSPairBytes is the bytes of a worker's buffer of T tokens of K Q8_K
// quants as iq4XSPairs writes them, at most a tile.
func iq4XSPairBytes(T, K int) int { return 2 * min(T, iq4XSTile) * K }

func iq4XSGroupOffset(i, j int) int {
	switch {
	case j < 2: // d
		return 2*i + j
	case j < 8: // scales_h, scales_l
		return 32 + 16*(j-2) + i
	}
	q := j - 8 // quant byte 16c + 4k + m
	c, k, m := q/16, q%16/4, q%4
	return 128 + 64*(8*k+c) + 4*i + m
}

// repackableK reports whether Backend.Load repacks w: a dtype with a group
// layout whose kernel the running level has (kGroup.hasKernel; the other
// levels keep the file's layout and its kernels), groupableK, and not a
// vocabulary matrix of a dtype whose groups decode slower (kGroup.vocab).
func repackableK(w *weights.Tensor) bool {
	g := kGroupOf(w.DType)
	return g != nil && g.hasKernel(level) && groupableK(w) && (g.vocab || !vocabMatrix(w))
}

// groupableK reports whether w can be laid out in its dtype's groups:
// groupable, in whole super-blocks of 256 columns.
func groupableK(w *weights.Tensor) bool {
	return kGroupOf(w.DType) != nil && groupable(w) && w.Shape[0]%256 == 0
}

// repackK rewrites w (groupableK) in place into its group layout, its
// groups spread over the pool's workers, each through its scratch[worker],
// at least one group's bytes (16 rows).
func repackK(pool *pool, w *weights.Tensor, scratch [][]byte) {
	g := kGroupOf(w.DType)
	bb := w.DType.BlockBytes()
	nb, gb := w.RowLen()/256, q8GroupRows*bb
	var offsets []int // of byte j of row i's block: [16*bb]
	for i := range q8GroupRows {
		for j := range bb {
			offsets = append(offsets, g.offset(i, j))
		}
	}
	regroup(pool, w, scratch, g.layout, func(grp []byte, i int, row []byte) {
		off := offsets[i*bb : (i+1)*bb]
		for b := range nb {
			dst := grp[b*gb : (b+1)*gb]
			for j, v := range row[bb*b : bb*(b+1)] {
				dst[off[j]] = v
			}
		}
	})
}

// kGroupActBytes is the bytes of a worker's matmulTask.unpacked that
// runKGroups needs for T tokens of K activations against w: the tile's
// activations as its layout's kernel reads them, or 0.
func kGroupActBytes(w *weights.Tensor, T, K int) int {
	switch w.Layout {
	case weights.LayoutIQ4XSx16:
		return iq4XSPairBytes(T, K)
	case weights.LayoutQ3Kx16:
		return q3KLaneSumBytes(T, K)
	}
	return 0
}

// kGroupRow writes row r of data (dt's group layout, nb super-blocks per
// row) as the file stores it into dst.
func kGroupRow(dt tensor.DType, data []byte, nb, r int, dst []byte) {
	g, bb := kGroupOf(dt), dt.BlockBytes()
	grp, i := r/q8GroupRows, r%q8GroupRows
	gb := q8GroupRows * bb
	for b := range nb {
		src := data[(grp*nb+b)*gb : (grp*nb+b+1)*gb]
		for j := range bb {
			dst[bb*b+j] = src[g.offset(i, j)]
		}
	}
}

// fileRow writes row r of w, in any layout, as the file stores it into
// dst [w.RowBytes()] and returns it; a LayoutRows row is returned as is.
func fileRow(w *weights.Tensor, r int, dst []byte) []byte {
	switch w.Layout {
	case weights.LayoutRows:
		return w.Row(r)
	case weights.LayoutQ8x16:
		q8GroupRow(w, r, dst)
	case weights.LayoutQ4x16:
		q4GroupRow(w, r, dst)
	default:
		kGroupRow(w.DType, w.Data, w.RowLen()/256, r, dst)
	}
	return dst
}

// runKGroups is runBlock for weights in a K-quant group layout: output
// columns (weight rows) [lo, hi), both multiples of 16, for every token.
// At a level with the dtype's kernel (kGroup.hasKernel) it takes each group
// for up to kGroup.tile tokens at a time, the same operations for every
// token count; elsewhere (a level without one, or set after the weights
// were repacked) each row is unpacked and takes the reference dot.
func (t *matmulTask) runKGroups(worker, lo, hi int) {
	T, N, nb := t.T, t.N, t.K/256
	a, g := t.aq, kGroupOf(t.dt)
	if !g.hasKernel(level) {
		dot, row := kernelOf(t.dt).dot, make([]byte, t.rowBytes)
		for r := lo; r < hi; r++ {
			kGroupRow(t.dt, t.w, nb, r, row)
			for tt := range T {
				t.out[tt*N+r] = dot(row, a.row(tt))
			}
		}
		return
	}
	var scratch [maxKGroupScratch]byte
	gb := q8GroupRows * t.rowBytes
	for t0 := 0; t0 < T; t0 += g.tile {
		n := min(g.tile, T-t0)
		xq, xd, xb, _ := q8KTokens(a, t0, n)
		var x16 unsafe.Pointer
		if t.dt == tensor.IQ4_XS {
			u := t.unpacked[worker][:iq4XSPairBytes(n, t.K)]
			for tt := range n { // super-block b of token tt at 512*(b*n + tt)
				iq4XSPairs(unsafe.Add(xq, tt*t.K), nb, unsafe.Pointer(&u[512*tt]), uintptr(512*n))
			}
			x16 = unsafe.Pointer(&u[0])
		}
		if t.dt == tensor.Q3_K && n >= q3KWideTokens {
			u := t.unpacked[worker][:q3KLaneSumBytes(n, t.K)]
			for tt := range n { // super-block b of token tt at 32*(tt*nb + b)
				q3KLaneSums(unsafe.Add(xq, tt*t.K), nb, unsafe.Pointer(&u[32*nb*tt]))
			}
			xb = unsafe.Pointer(&u[0])
		}
		for grp := lo / q8GroupRows; grp < hi/q8GroupRows; grp++ {
			w, out := unsafe.Pointer(&t.w[grp*gb]), unsafe.Pointer(&t.out[t0*N+q8GroupRows*grp])
			switch t.dt { // direct calls: scratch stays on the stack
			case tensor.Q2_K:
				if level == levelAVX2 {
					q2Kx16GemmAVX2(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
					break
				}
				q2Kx16Gemm(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			case tensor.Q3_K:
				if n < q3KWideTokens {
					q3Kx16GemmNarrow(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
					break
				}
				q3Kx16Gemm(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			case tensor.Q4_K:
				if level == levelAVX2 {
					q4Kx16GemmAVX2(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
					break
				}
				q4Kx16Gemm(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			case tensor.Q5_K:
				q5Kx16Gemm(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			case tensor.IQ4_XS:
				iq4XSx16Gemm(w, nb, x16, xd, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			default:
				q6Kx16Gemm(w, nb, xq, xd, xb, n, out, uintptr(4*N), unsafe.Pointer(&scratch[0]))
			}
		}
	}
}

// blockKernels returns the fast kernels runBlock uses for the kindBlock
// weights w at the running level: none for weights in groups, whose
// kernels (runKGroups) read the activations as quantized, uninterleaved.
func blockKernels(w *weights.Tensor) *fastKernels {
	if w.Layout != weights.LayoutRows {
		return &noKernels
	}
	return kernelOf(w.DType).fast()
}
