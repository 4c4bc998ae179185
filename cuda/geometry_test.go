package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The tests below model each kernel's index arithmetic (the code in
// kernels/*.cuh that turns blockIdx/threadIdx into the elements it writes)
// and check that the geometry the wrappers launch makes every output element
// written exactly once, within the hardware limits.

// coverage counts how often each of n indexes is written.
type coverage []int

// mark records a write of index i.
func (c coverage) mark(i int) {
	if i >= 0 && i < len(c) {
		c[i]++
	}
}

// bad returns the first index not written exactly once, or -1.
func (c coverage) bad() int {
	for i, n := range c {
		if n != 1 {
			return i
		}
	}
	return -1
}

func TestLaunchDimsCheckRejectsWhatTheDriverRefuses(t *testing.T) {
	tests := []struct {
		name string
		d    launchDims
		ok   bool
	}{
		{"a plain launch", dims1(10, 256), true},
		{"the largest block", dims1(1, 1024), true},
		{"too many threads", dims1(1, 1025), false},
		{"an empty grid", dims1(0, 32), false},
		{"grid.y over 65535", launchDims{grid: [3]int{1, 65536, 1}, block: [3]int{32, 1, 1}}, false},
		{"grid.x at its limit", dims1(maxGridX, 32), true},
		{"48 KiB of shared memory", launchDims{grid: [3]int{1, 1, 1}, block: [3]int{32, 1, 1}, shared: 48 << 10}, true},
		{"more shared memory than without opt-in", launchDims{grid: [3]int{1, 1, 1}, block: [3]int{32, 1, 1}, shared: 48<<10 + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.check() == nil; got != tt.ok {
				t.Errorf("check(%+v) ok = %v, want %v", tt.d, got, tt.ok)
			}
		})
	}
}

func TestGEMVTokenVariantIsTheSmallestThatHoldsTheRows(t *testing.T) {
	var got []int
	for rows := 1; rows <= gemvMaxRows; rows++ {
		got = append(got, gemvTokens(rows))
	}
	want := []int{1, 2, 4, 4, 8, 8, 8, 8}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("gemvTokens(1..8) (-want +got):\n%s", diff)
	}
}

// matmulCoverage models the matmul kernels' writes for plan p: GEMV warp w
// of block b belongs to column group b*(4/ks) + w/ks and, when it is slice
// w%ks == 0 (the one that stores), writes columns [group*R, group*R+R) of
// every token; GEMM block (bx, by), thread (ty, tx) writes tokens
// by*64+4ty+i and columns bx*64+4tx+j, i, j < 4. It returns the coverage of
// the columns and of the tokens (the writes are their Cartesian product).
func matmulCoverage(p matmulPlan, rows, outN int) (cols, toks coverage) {
	cols, toks = make(coverage, outN), make(coverage, rows)
	if p.gemv {
		r := gemvColsPerWarp(p.nt)
		for b := 0; b < p.dims.grid[0]; b++ {
			for w := 0; w < p.dims.block[0]/warpSize; w++ {
				if w%p.ks != 0 {
					continue
				}
				n0 := (b*(gemvWarps/p.ks) + w/p.ks) * r
				for c := n0; c < n0+r && c < outN; c++ {
					cols.mark(c)
				}
			}
		}
		for t := 0; t < rows && t < p.nt; t++ {
			toks.mark(t)
		}
		return cols, toks
	}
	for bx := 0; bx < p.dims.grid[0]; bx++ {
		for tx := 0; tx < 16; tx++ {
			for j := 0; j < 4; j++ {
				cols.mark(bx*gemmTile + 4*tx + j)
			}
		}
	}
	for by := 0; by < p.dims.grid[1]; by++ {
		for ty := 0; ty < p.dims.block[0]/16; ty++ {
			for i := 0; i < 4; i++ {
				toks.mark(by*gemmTile + 4*ty + i)
			}
		}
	}
	return cols, toks
}

// gemvKCoverage models how the ks warps of a GEMV column group split a row:
// for Q8_0, lane l of slice k takes quarter l%4 of blocks l/4 + 8k, stepping
// 8ks; for Q4_0, half l%2 of blocks l/2 + 16k, stepping 16ks; for float
// weights, 8-element chunk l + 32k, stepping 32ks. It returns how often each
// quarter-, half-block or chunk is read.
func gemvKCoverage(dt tensor.DType, ks, in int) coverage {
	var per, lanesPer, units int
	switch dt {
	case tensor.Q8_0:
		per, lanesPer, units = 8, 4, in/32
	case tensor.Q4_0:
		per, lanesPer, units = 16, 2, in/32
	default:
		per, lanesPer, units = 32, 1, ceilDiv(in, 8)
	}
	cov := make(coverage, units*lanesPer)
	for k := 0; k < ks; k++ {
		for lane := 0; lane < warpSize; lane++ {
			for u := lane/lanesPer + per*k; u < units; u += per * ks {
				cov.mark(u*lanesPer + lane%lanesPer)
			}
		}
	}
	return cov
}

func TestPlanMatmulWritesEveryOutputOnce(t *testing.T) {
	tests := []struct {
		dt                   tensor.DType
		rows, in, outN       int
		gemv                 bool
		nt, ks, grid0, grid1 int
	}{
		{tensor.Q8_0, 1, 896, 151936, true, 1, 1, 37984, 1},
		{tensor.F16, 1, 1024, 151936, true, 1, 1, 37984, 1},
		{tensor.Q4_0, 3, 1024, 151936, true, 4, 1, 9496, 1},
		{tensor.BF16, 8, 1024, 151936, true, 8, 1, 18992, 1},
		{tensor.Q8_0, 1, 4864, 896, true, 1, 4, 896, 1},
		{tensor.Q4_0, 1, 896, 896, true, 1, 2, 448, 1},
		{tensor.F16, 5, 896, 4864, true, 8, 2, 1216, 1},
		{tensor.Q8_0, 2, 8960, 1536, true, 2, 4, 768, 1},
		{tensor.Q8_0, 9, 1024, 151936, false, 0, 1, 2374, 1},
		{tensor.Q8_0, 512, 1024, 151936, false, 0, 1, 2374, 8},
		{tensor.F32, 512, 4864, 896, false, 0, 1, 14, 8},
		{tensor.F32, 2, 37, 5, true, 2, 1, 1, 1},
		{tensor.Q4_0, 70, 32, 1, false, 0, 1, 1, 2},
		{tensor.F16, 1, 8, 1, true, 1, 1, 1, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v %dx%d times %dx%d", tt.dt, tt.rows, tt.in, tt.outN, tt.in), func(t *testing.T) {
			p, err := planMatmul(tt.dt, tt.rows, tt.in, tt.outN)
			if err != nil {
				t.Fatalf("planMatmul: %v", err)
			}
			want := []int{btoi(tt.gemv), tt.nt, tt.ks, tt.grid0, tt.grid1}
			got := []int{btoi(p.gemv), p.nt, p.ks, p.dims.grid[0], p.dims.grid[1]}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("plan {gemv, nt, ks, grid.x, grid.y} (-want +got):\n%s", diff)
			}
			if p.gemv {
				if kc := gemvKCoverage(tt.dt, p.ks, tt.in); kc.bad() >= 0 {
					t.Errorf("K unit %d of a row read %d times by its column group", kc.bad(), kc[kc.bad()])
				}
			}
			cols, toks := matmulCoverage(p, tt.rows, tt.outN)
			if i := cols.bad(); i >= 0 {
				t.Errorf("column %d written %d times", i, cols[i])
			}
			if i := toks.bad(); i >= 0 {
				t.Errorf("token %d written %d times", i, toks[i])
			}
			wantThreads := gemmThreads
			if p.gemv {
				wantThreads = gemvWarps * warpSize // __launch_bounds__(128)
			}
			if p.dims.threads() != wantThreads || p.dims.shared != 0 {
				t.Errorf("block %v, %d shared bytes; want %d threads, no dynamic shared memory", p.dims.block, p.dims.shared, wantThreads)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPlanMatmulRejectsWhatNoKernelComputes(t *testing.T) {
	tests := []struct {
		name           string
		dt             tensor.DType
		rows, in, outN int
	}{
		{"an i32 weight", tensor.I32, 1, 32, 4},
		{"q8_0 rows not a multiple of 32", tensor.Q8_0, 1, 48, 4},
		{"q4_0 rows not a multiple of 32", tensor.Q4_0, 2, 16, 4},
		{"no tokens", tensor.F32, 0, 32, 4},
		{"no outputs", tensor.F16, 1, 32, 0},
		{"more tokens than a grid holds", tensor.F32, 64 * (maxGridYZ + 1), 32, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := planMatmul(tt.dt, tt.rows, tt.in, tt.outN); err == nil {
				t.Errorf("planMatmul(%v, %d, %d, %d) = nil error", tt.dt, tt.rows, tt.in, tt.outN)
			}
		})
	}
}

// attnCoverage models attention's writes: block b is chunk b%chunks of KV
// head (b/chunks)%kvHeads of row b/(chunks*kvHeads) and writes query heads
// kvh*group + c*hpb + [0, min(hpb, group-c*hpb)) of that row.
func attnCoverage(p attnPlan, rows, heads, kvHeads int) coverage {
	cov := make(coverage, rows*heads)
	group := heads / kvHeads
	for b := 0; b < p.dims.grid[0]; b++ {
		c, kvh, t := b%p.chunks, (b/p.chunks)%kvHeads, b/(p.chunks*kvHeads)
		gr := min(p.hpb, group-c*p.hpb)
		for g := 0; g < gr; g++ {
			cov.mark(t*heads + kvh*group + c*p.hpb + g)
		}
	}
	return cov
}

func TestPlanAttentionWritesEveryRowAndHeadOnce(t *testing.T) {
	type plan struct{ NI, HPB, Chunks, Blocks, Warps, Shared int }
	tests := []struct {
		rows, heads, kvHeads, headDim int
		want                          plan
	}{
		{1, 14, 2, 64, plan{2, 7, 1, 2, 8, 4 * (8*64 + 8*8*64 + 2*8*8)}},
		{512, 14, 2, 64, plan{2, 7, 1, 1024, 4, 4 * (8*64 + 4*8*64 + 2*4*8)}},
		{7, 28, 4, 128, plan{4, 4, 2, 56, 8, 4 * (4*128 + 8*4*128 + 2*8*4)}},
		{1, 32, 8, 128, plan{4, 4, 1, 8, 8, 4 * (4*128 + 8*4*128 + 2*8*4)}},
		{3, 4, 1, 256, plan{8, 2, 2, 6, 8, 4 * (2*256 + 8*2*256 + 2*8*2)}},
		{1, 16, 16, 80, plan{4, 1, 1, 16, 8, 4 * (4*128 + 8*4*128 + 2*8*4)}},
		{2, 1, 1, 1, plan{1, 1, 1, 2, 8, 4 * (8*32 + 8*8*32 + 2*8*8)}},
		{5, 24, 2, 32, plan{1, 6, 2, 20, 8, 4 * (8*32 + 8*8*32 + 2*8*8)}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d rows %d/%d heads of %d", tt.rows, tt.heads, tt.kvHeads, tt.headDim), func(t *testing.T) {
			p, err := planAttention(tt.rows, tt.heads, tt.kvHeads, tt.headDim)
			if err != nil {
				t.Fatalf("planAttention: %v", err)
			}
			got := plan{p.ni, p.hpb, p.chunks, p.dims.grid[0], p.dims.block[0] / warpSize, p.dims.shared}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if 32*p.ni < tt.headDim || p.hpb > attnHeadsPerBlock(p.ni) {
				t.Errorf("variant %d with %d heads per block cannot hold heads of %d", p.ni, p.hpb, tt.headDim)
			}
			if p.dims.threads() > 256 {
				t.Errorf("%d threads: the kernels have no launch bounds, so blocks stay <= 256 threads to launch at any register count", p.dims.threads())
			}
			if i := attnCoverage(p, tt.rows, tt.heads, tt.kvHeads).bad(); i >= 0 {
				t.Errorf("row %d head %d not written exactly once", i/tt.heads, i%tt.heads)
			}
		})
	}
}

func TestPlanAttentionRejectsShapesWithoutAKernel(t *testing.T) {
	tests := []struct {
		name                          string
		rows, heads, kvHeads, headDim int
	}{
		{"heads not a multiple of kv heads", 1, 6, 4, 64},
		{"a head wider than 256", 1, 4, 4, 257},
		{"no rows", 0, 4, 4, 64},
		{"an empty head", 1, 4, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := planAttention(tt.rows, tt.heads, tt.kvHeads, tt.headDim); err == nil {
				t.Errorf("planAttention(%d, %d, %d, %d) = nil error", tt.rows, tt.heads, tt.kvHeads, tt.headDim)
			}
		})
	}
}

func TestAttentionSharedMemoryFitsEveryVariant(t *testing.T) {
	for _, ni := range attnVariants {
		for _, warps := range []int{4, 8} {
			if b := attnSharedBytes(ni, attnHeadsPerBlock(ni), warps); b > maxSharedBytes {
				t.Errorf("attn NI=%d with %d warps needs %d bytes of shared memory", ni, warps, b)
			}
		}
	}
}

func TestElementwiseGeometryWritesEveryElementOnce(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 151936, 512 * 4864} {
		t.Run(fmt.Sprint(n, " elements"), func(t *testing.T) {
			d := elemGeometry(n)
			if err := d.check(); err != nil {
				t.Fatal(err)
			}
			// for (i = blockIdx*blockDim + tid; i < n; i += gridDim*blockDim)
			cov := make(coverage, n)
			stride := d.grid[0] * d.block[0]
			for b := 0; b < d.grid[0]; b++ {
				for tid := 0; tid < d.block[0]; tid++ {
					for i := b*d.block[0] + tid; i < n; i += stride {
						cov.mark(i)
					}
				}
			}
			if i := cov.bad(); i >= 0 {
				t.Errorf("element %d written %d times", i, cov[i])
			}
		})
	}
}

func TestWarpItemGeometryGivesEveryItemOneWarp(t *testing.T) {
	// rms_norm groups and quantize_q8 blocks: item = blockIdx*warps + warp.
	for _, items := range []int{1, 7, 8, 9, 512 * 14, 512 * 4864 / 32} {
		t.Run(fmt.Sprint(items, " items"), func(t *testing.T) {
			d := warpItemGeometry(items)
			if err := d.check(); err != nil {
				t.Fatal(err)
			}
			cov := make(coverage, items)
			for b := 0; b < d.grid[0]; b++ {
				for w := 0; w < d.block[0]/warpSize; w++ {
					cov.mark(b*d.block[0]/warpSize + w)
				}
			}
			if i := cov.bad(); i >= 0 {
				t.Errorf("item %d taken by %d warps", i, cov[i])
			}
		})
	}
}

func TestRowAndKVWriteGeometry(t *testing.T) {
	got := []launchDims{rowGeometry(512), kvWriteGeometry(512)}
	want := []launchDims{
		{grid: [3]int{512, 1, 1}, block: [3]int{rowThreads, 1, 1}},
		{grid: [3]int{512, 2, 1}, block: [3]int{kvWriteThreads, 1, 1}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(launchDims{})); diff != "" {
		t.Errorf("geometry (-want +got):\n%s", diff)
	}
	if rowThreads%warpSize != 0 {
		t.Errorf("row kernels need whole warps, have %d threads", rowThreads)
	}
}

func TestEveryKVFormatHasKernels(t *testing.T) {
	var got []string
	for _, f := range page.Formats() {
		_, suf, err := kvFormat(f.Name)
		if err != nil {
			t.Fatalf("kvFormat(%q): %v", f.Name, err)
		}
		got = append(got, suf)
	}
	if diff := cmp.Diff([]string{"f32", "f16", "bf16", "int8", "fp8"}, got); diff != "" {
		t.Errorf("kernel suffixes (-want +got):\n%s", diff)
	}
	if _, suf, err := kvFormat(""); err != nil || suf != "f32" {
		t.Errorf(`kvFormat("") = %q, %v; want f32`, suf, err)
	}
	if _, _, err := kvFormat("int4"); err == nil {
		t.Errorf(`kvFormat("int4") = nil error`)
	}
}

// TestGeometryMatchesTheKernelSource checks the constants the geometry
// shares with kernels/*.cuh against the source, since nothing else would
// notice them drifting apart on a machine without a GPU.
func TestGeometryMatchesTheKernelSource(t *testing.T) {
	src := func(name string) string {
		b, err := os.ReadFile(filepath.Join("kernels", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	matmul, attn, elem := src("matmul.cuh")+src("kquant.cuh"), src("attention.cuh"), src("elementwise.cuh")

	gemv := map[string]int{} // "q8_0 8" -> R
	for _, d := range regexp.MustCompile(`(?m)^MM_KERNELS\((\w+), \w+\)`).FindAllStringSubmatch(matmul, -1) {
		for _, m := range regexp.MustCompile(`gemv_##name##_(\d+)\(MM_PARAMS\) \{ mm_kind<dt>::gemv<(\d+), (\d+)>`).FindAllStringSubmatch(matmul, -1) {
			if m[1] != m[2] {
				t.Errorf("matmul.cuh: gemv_<dtype>_%s runs the NT %s template", m[1], m[2])
			}
			gemv[d[1]+" "+m[1]] = atoi(t, m[3])
		}
	}
	want := map[string]int{}
	for _, dt := range matmulDTypes {
		for _, nt := range gemvVariants {
			want[fmt.Sprint(dt, " ", nt)] = gemvColsPerWarp(nt)
		}
	}
	if diff := cmp.Diff(want, gemv); diff != "" {
		t.Errorf("GEMV variants and columns per warp (-geometry.go +matmul.cuh):\n%s", diff)
	}

	heads := map[int]int{}
	for _, m := range regexp.MustCompile(`(?m)^\s*ATTN\(name, fmt, (\d+), (\d+)\)`).FindAllStringSubmatch(attn, -1) {
		heads[atoi(t, m[1])] = atoi(t, m[2])
	}
	wantHeads := map[int]int{}
	for _, ni := range attnVariants {
		wantHeads[ni] = attnHeadsPerBlock(ni)
	}
	if diff := cmp.Diff(wantHeads, heads); diff != "" {
		t.Errorf("attention variants and heads per block (-geometry.go +attention.cuh):\n%s", diff)
	}

	defines := func(text string) map[string]int {
		d := map[string]int{}
		for _, m := range regexp.MustCompile(`(?m)^#define (\w+) (\d+)\b`).FindAllStringSubmatch(text, -1) {
			d[m[1]] = atoi(t, m[2])
		}
		return d
	}
	mm, el, smp := defines(matmul), defines(elem), defines(src("sample.cuh"))
	if smp["ARGMAX_THREADS"] != argmaxThreads {
		t.Errorf("ARGMAX_THREADS is %d in sample.cuh, argmaxThreads %d", smp["ARGMAX_THREADS"], argmaxThreads)
	}
	if diff := cmp.Diff([]int{gemmTile, ropeMaxDims}, []int{mm["GEMM_TILE"], 2 * el["ROPE_MAX_PAIRS"]}); diff != "" {
		t.Errorf("{GEMM_TILE, 2*ROPE_MAX_PAIRS} (-geometry.go +source):\n%s", diff)
	}
	bounds := map[string]string{}
	for _, m := range regexp.MustCompile(`__launch_bounds__\((\d+)\) (gemv|gemm)_`).FindAllStringSubmatch(matmul, -1) {
		bounds[m[2]+" "+m[1]] = m[2]
	}
	wantBounds := map[string]string{fmt.Sprint("gemv ", gemvWarps*warpSize): "gemv", fmt.Sprint("gemm ", gemmThreads): "gemm"}
	if diff := cmp.Diff(wantBounds, bounds); diff != "" {
		t.Errorf("matmul launch bounds (-geometry.go +matmul.cuh):\n%s", diff)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
