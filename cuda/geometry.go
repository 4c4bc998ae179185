package cuda

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Launch geometry of the kernels in kernels/ninfer.cu. Every decision about
// grid and block sizes, kernel variants and shared memory lives here, in
// plain Go, so that it is tested on machines without a GPU; kernels.go only
// passes the results to the driver. The constants mirror the kernels' own:
// a change on one side needs the same change on the other.

// Hardware limits the launches respect (compute capability 8.0 and later).
const (
	maxBlockThreads = 1024
	maxGridX        = 1<<31 - 1
	maxGridYZ       = 65535
	maxSharedBytes  = 48 << 10 // without the opt-in attribute
	warpSize        = 32
	maxInt32        = 1<<31 - 1 // kernels take sizes as C int
)

// launchDims is the geometry of one kernel launch.
type launchDims struct {
	grid   [3]int
	block  [3]int
	shared int // dynamic shared memory, bytes
}

func dims1(grid, block int) launchDims {
	return launchDims{grid: [3]int{grid, 1, 1}, block: [3]int{block, 1, 1}}
}

// threads is the number of threads per block.
func (d launchDims) threads() int { return d.block[0] * d.block[1] * d.block[2] }

// check reports a geometry the driver would refuse.
func (d launchDims) check() error {
	switch {
	case d.grid[0] < 1 || d.grid[1] < 1 || d.grid[2] < 1 || d.block[0] < 1 || d.block[1] < 1 || d.block[2] < 1:
		return fmt.Errorf("cuda: empty launch %v x %v", d.grid, d.block)
	case d.threads() > maxBlockThreads:
		return fmt.Errorf("cuda: %d threads per block (max %d)", d.threads(), maxBlockThreads)
	case d.grid[0] > maxGridX || d.grid[1] > maxGridYZ || d.grid[2] > maxGridYZ:
		return fmt.Errorf("cuda: grid %v over the limits", d.grid)
	case d.shared < 0 || d.shared > maxSharedBytes:
		return fmt.Errorf("cuda: %d bytes of shared memory (max %d)", d.shared, maxSharedBytes)
	}
	return nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// rowThreads is the block size of the kernels that run one block per row
// (get_rows, select_rows, rope).
const rowThreads = 256

// rowGeometry is one block of rowThreads per row.
func rowGeometry(rows int) launchDims { return dims1(rows, rowThreads) }

// Grid-stride element-wise kernels (add, swiglu).
const (
	elemThreads   = 256
	maxElemBlocks = 8192
)

// elemGeometry covers n elements with grid-stride loops.
func elemGeometry(n int) launchDims {
	return dims1(min(ceilDiv(n, elemThreads), maxElemBlocks), elemThreads)
}

// itemWarps is the warps per block of the kernels that give one warp to
// each item (rms_norm: a group; quantize_q8: a block of 32 values).
const itemWarps = 8

// warpItemGeometry gives one warp to each of items items.
func warpItemGeometry(items int) launchDims {
	return dims1(ceilDiv(items, itemWarps), itemWarps*warpSize)
}

// ropeMaxDims is the most rotated elements per head (ROPE_MAX_PAIRS pairs).
const ropeMaxDims = 1024

// kvWriteThreads is the block size of kv_write: one block per (row, K or V).
const kvWriteThreads = 128

// kvWriteGeometry is grid (rows, 2): blockIdx.y 0 writes K, 1 writes V.
func kvWriteGeometry(rows int) launchDims {
	return launchDims{grid: [3]int{rows, 2, 1}, block: [3]int{kvWriteThreads, 1, 1}}
}

// kvFormat returns the kernel suffix of the KV page format called name ("" is f32).
func kvFormat(name string) (page.Format, string, error) {
	f, err := page.LookupFormat(name)
	if err != nil {
		return page.Format{}, "", err
	}
	switch f.Name {
	case page.F32.Name, page.F16.Name, page.BF16.Name:
		return f, f.Name, nil
	case page.Int8G64.Name:
		return f, "int8", nil
	case page.FP8E4M3Row256.Name:
		return f, "fp8", nil
	}
	return page.Format{}, "", fmt.Errorf("cuda: no kernels for kv format %q", f.Name)
}

// Matrix multiplication.
const (
	// gemvMaxRows is the most tokens a matmul runs as a GEMV; more take the
	// tiled GEMM.
	gemvMaxRows = 8
	// gemvWarps is the warps per block of the GEMV kernels (GEMV_WARPS,
	// __launch_bounds__(128)).
	gemvWarps = 4
	// gemvBusyWarps is the number of column-group warps from which a GEMV
	// keeps the GPU's memory busy without splitting K (about 31 warps on
	// each of an H200's 132 SMs); below it, 2 or 4 warps share each group.
	gemvBusyWarps = 4096
	// gemmTile is the GEMM tile edge (tokens and output columns); gemmThreads
	// its block size.
	gemmTile    = 64
	gemmThreads = 256
)

// gemvVariants are the token counts NT of the GEMV kernels gemv_<dtype>_<NT>.
var gemvVariants = [...]int{1, 2, 4, 8}

// matmulDTypeOK reports whether there are matmul kernels for weights of dt.
func matmulDTypeOK(dt tensor.DType) bool {
	return slices.Contains(matmulDTypes[:], dt)
}

// gemvTokens is the GEMV variant NT for rows tokens: the smallest that holds them.
func gemvTokens(rows int) int {
	for _, nt := range gemvVariants {
		if rows <= nt {
			return nt
		}
	}
	return 0
}

// gemvColsPerWarp is R, the output columns one warp of gemv_<dtype>_<nt>
// computes (the second argument of the GEMV_* macros in matmul.cuh).
func gemvColsPerWarp(nt int) int {
	switch nt {
	case 1:
		return 1
	case 2:
		return 2
	case 4:
		return 4
	}
	return 2
}

// gemvSplit is ks, the warps that share one GEMV column group (each
// taking a slice of K), for colWarps groups over rows of in elements: more
// warps when the columns alone give too few, as long as each slice keeps
// whole warp steps of work.
func gemvSplit(colWarps, in int) int {
	switch {
	case colWarps < gemvBusyWarps/2 && in >= 1024:
		return 4
	case colWarps < gemvBusyWarps && in >= 512:
		return 2
	}
	return 1
}

// matmulPlan is how one matmul runs.
type matmulPlan struct {
	gemv bool // gemv_<dtype>_<nt>, else gemm_<dtype>
	nt   int  // GEMV token variant
	ks   int  // GEMV warps per column group (1 for the GEMM, which ignores it)
	dims launchDims
}

// planMatmul chooses the kernel and geometry of out [rows, outN] = x [rows,
// in] . W[outN, in]^T for weights of dtype dt.
func planMatmul(dt tensor.DType, rows, in, outN int) (matmulPlan, error) {
	if !matmulDTypeOK(dt) {
		return matmulPlan{}, fmt.Errorf("cuda: matmul: weight dtype %v not supported", dt)
	}
	if rows < 1 || in < 1 || outN < 1 {
		return matmulPlan{}, fmt.Errorf("cuda: matmul: empty shape [%d, %d] x [%d, %d]", rows, in, outN, in)
	}
	if in%dt.BlockSize() != 0 {
		return matmulPlan{}, fmt.Errorf("cuda: matmul: %d columns is not a multiple of the %v block size %d", in, dt, dt.BlockSize())
	}
	if rows > maxInt32 || in > maxInt32 || outN > maxInt32 {
		return matmulPlan{}, fmt.Errorf("cuda: matmul: shape [%d, %d] x [%d, %d] too large", rows, in, outN, in)
	}
	p := matmulPlan{ks: 1}
	if rows <= gemvMaxRows {
		p.gemv, p.nt = true, gemvTokens(rows)
		groups := ceilDiv(outN, gemvColsPerWarp(p.nt))
		p.ks = gemvSplit(groups, in)
		p.dims = dims1(ceilDiv(groups, gemvWarps/p.ks), gemvWarps*warpSize)
	} else {
		p.dims = launchDims{grid: [3]int{ceilDiv(outN, gemmTile), ceilDiv(rows, gemmTile), 1}, block: [3]int{gemmThreads, 1, 1}}
	}
	return p, p.dims.check()
}

// Attention.
const (
	// attnMaxHeadDim is the largest head the attention kernels take (NI = 8).
	attnMaxHeadDim = 256
	// attnManyBlocks is the block count from which attention runs 4 warps
	// per block instead of 8 (enough blocks to fill the GPU).
	attnManyBlocks = 1024
)

// attnVariants are the NI of the kernels attn_<format>_<NI>: a lane owns
// NI = ceil(headDim/32) dimensions, rounded up to a variant.
var attnVariants = [...]int{1, 2, 4, 8}

// attnMaxNI is the largest attention variant.
const attnMaxNI = 8

// attnHeadsPerBlock is G, the most query heads one block of
// attn_<format>_<ni> handles (the last argument of the ATTN macro).
func attnHeadsPerBlock(ni int) int {
	return min(8, 16/ni)
}

// attnSharedBytes is the dynamic shared memory of an attention block: Q
// [G][32*NI], then per warp O [G][32*NI] and the running max and sum [G]
// (which also hold the softmax weights [G][32] during the loop).
func attnSharedBytes(ni, g, warps int) int {
	hdp := 32 * ni
	return 4 * (g*hdp + warps*g*hdp + 2*warps*g)
}

// attnPlan is how one attention op runs.
type attnPlan struct {
	ni     int // kernel variant attn_<format>_<ni>
	hpb    int // query heads per block
	chunks int // blocks per (row, KV head)
	dims   launchDims
}

// planAttention chooses the kernel variant and geometry of attention over
// rows rows of heads query heads of headDim, sharing kvHeads KV heads.
func planAttention(rows, heads, kvHeads, headDim int) (attnPlan, error) {
	if rows < 1 || heads < 1 || kvHeads < 1 || heads%kvHeads != 0 {
		return attnPlan{}, fmt.Errorf("cuda: attention: %d rows, %d heads, %d kv heads", rows, heads, kvHeads)
	}
	if headDim < 1 || headDim > attnMaxHeadDim {
		return attnPlan{}, fmt.Errorf("cuda: attention: head dim %d not in [1, %d]", headDim, attnMaxHeadDim)
	}
	var p attnPlan
	for _, ni := range attnVariants {
		if 32*ni >= headDim {
			p.ni = ni
			break
		}
	}
	g := attnHeadsPerBlock(p.ni)
	group := heads / kvHeads
	p.chunks = ceilDiv(group, g)
	p.hpb = ceilDiv(group, p.chunks) // balanced: 7 heads in 2 chunks are 4 + 3
	blocks := int64(rows) * int64(kvHeads) * int64(p.chunks)
	if blocks > maxGridX {
		return attnPlan{}, fmt.Errorf("cuda: attention: %d blocks", blocks)
	}
	warps := 8
	if blocks >= attnManyBlocks {
		warps = 4
	}
	p.dims = dims1(int(blocks), warps*warpSize)
	p.dims.shared = attnSharedBytes(p.ni, g, warps)
	return p, p.dims.check()
}
