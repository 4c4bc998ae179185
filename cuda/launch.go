package cuda

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The launches of the kernels in kernels/ninfer.cu, as plain data: for each
// op, the checks of its arguments, the kernel it runs, the geometry
// (geometry.go) and the parameter list. kernels.go hands the result to the
// driver; the emulator parity test (emu_test.go) runs the same launches on
// the CPU, so the parameter lists are tested without a GPU.

// devPtr is a device address.
type devPtr = uint64

// launchSpec is one kernel launch. Each parameter is boxed in a uint64: the
// driver reads the parameter's own size from the low bytes (little-endian),
// which is right for int, long long, float (its bits) and pointers. The
// count must match the kernel's parameter list exactly. A zero launchSpec
// (no kernel) launches nothing.
type launchSpec struct {
	kernel string
	dims   launchDims
	args   []uint64
}

func intArg(v int) uint64     { return uint64(int64(v)) }
func f32Arg(v float32) uint64 { return uint64(math.Float32bits(v)) }

func spec(kernel string, d launchDims, args ...uint64) (launchSpec, error) {
	if err := d.check(); err != nil {
		return launchSpec{}, fmt.Errorf("cuda: %s: %w", kernel, err)
	}
	return launchSpec{kernel: kernel, dims: d, args: args}, nil
}

// matmulDTypes are the weight dtypes with matmul and get_rows kernels.
var matmulDTypes = [...]tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1,
	tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_NL, tensor.IQ4_XS}

// kernelNames is every kernel the launches below use: the module must
// define them all.
func kernelNames() ([]string, error) {
	names := []string{"quantize_q8", "quantize_q8k", "get_rows", "rms_norm", "rope", "add", "swiglu", "select_rows", "argmax_rows",
		"columns", "concat", "unary", "mul", "add_row", "mul_row", "l2_norm", "short_conv", "delta_rule", "delta_rule_chunked", "state_widen", "state_narrow",
		"moe_route", "moe_matmul", "moe_combine"}
	for _, dt := range matmulDTypes {
		for _, nt := range gemvVariants {
			names = append(names, gemvKernel(dt, nt))
		}
		names = append(names, "gemm_"+dt.String())
		if quantized(dt) {
			names = append(names, "moe_mm_"+dt.String())
		}
	}
	for _, f := range page.Formats() {
		_, suf, err := kvFormat(f.Name)
		if err != nil {
			return nil, err
		}
		names = append(names, "kv_write_"+suf)
		for _, ni := range attnVariants {
			names = append(names, attnKernel(suf, ni))
		}
	}
	return names, nil
}

func gemvKernel(dt tensor.DType, nt int) string { return fmt.Sprintf("gemv_%v_%d", dt, nt) }
func attnKernel(suf string, ni int) string      { return fmt.Sprintf("attn_%s_%d", suf, ni) }

// getRowsLaunch writes out [rows, cols] f32: row r is row ids[r] (int32) of
// table, a weight of dtype dt whose rows take dt.RowBytes(cols) bytes. The
// ids must be below the table's row count (a negative id gives zeros).
func getRowsLaunch(out, table, ids devPtr, dt tensor.DType, rows, cols int) (launchSpec, error) {
	if !matmulDTypeOK(dt) {
		return launchSpec{}, fmt.Errorf("cuda: get_rows: dtype %v not supported", dt)
	}
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return launchSpec{}, fmt.Errorf("cuda: get_rows: %w", err)
	}
	if rows < 0 || cols > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: get_rows: shape [%d, %d]", rows, cols)
	}
	if rows == 0 || cols == 0 {
		return launchSpec{}, nil
	}
	return spec("get_rows", rowGeometry(rows), out, table, ids, intArg(int(dt)), intArg(cols), intArg(rb))
}

// rmsNormLaunch writes out [rows, cols] = x normalised per contiguous group
// of group elements, times w [group] f32.
func rmsNormLaunch(out, x, w devPtr, rows, cols, group int, eps float32) (launchSpec, error) {
	if rows < 0 || cols < 0 || group <= 0 || group > maxInt32 || cols%group != 0 {
		return launchSpec{}, fmt.Errorf("cuda: rms_norm: group %d does not divide row width %d", group, cols)
	}
	n := rows * cols / group
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec("rms_norm", warpItemGeometry(n), out, x, w, intArg(n), intArg(group), f32Arg(eps))
}

// quantizeLaunch writes x [rows, cols] f32 into dst as the quantized
// activations a matmul by a weight of dt reads, row-major, exactly as the
// CPU backend quantizes them: for dot types Q8_0 and Q8_1 (quantize_q8)
// rows*cols/32 Q8_0 blocks of 34 bytes (fp16 d, 32 int8), then their Q8_1
// sums (q8Bytes); for dot type Q8_K (kquant: quantize_q8k) rows*cols/256
// blocks of 292 bytes (f32 d, 256 int8, 16 int16 sums of 16). cols must be
// a multiple of the block.
func quantizeLaunch(dst, x devPtr, dt tensor.DType, rows, cols int) (launchSpec, error) {
	kernel, block := "quantize_q8", tensor.QK
	if kquant(dt) {
		kernel, block = "quantize_q8k", tensor.QKK
	}
	if rows < 0 || cols < 0 || cols%block != 0 {
		return launchSpec{}, fmt.Errorf("cuda: %s: row width %d is not a multiple of %d", kernel, cols, block)
	}
	n := rows * cols / block
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec(kernel, warpItemGeometry(n), dst, x, intArg(n))
}

// matmulLaunch writes out [rows, outN] = x [rows, in] . w[outN, in]^T, w of
// dtype dt in its GGUF bytes. For quantized weights xq must hold x
// quantized by quantizeLaunch and x is not read; for float weights x is read and xq
// ignored.
func matmulLaunch(out, x, xq, w devPtr, dt tensor.DType, rows, in, outN int) (launchSpec, error) {
	p, err := planMatmul(dt, rows, in, outN)
	if err != nil {
		return launchSpec{}, err
	}
	if quant := quantized(dt); quant && xq == 0 {
		return launchSpec{}, fmt.Errorf("cuda: matmul: %v weights need the quantized activations", dt)
	} else if !quant && x == 0 {
		return launchSpec{}, fmt.Errorf("cuda: matmul: %v weights need the f32 activations", dt)
	}
	name := "gemm_" + dt.String()
	if p.gemv {
		name = gemvKernel(dt, p.nt)
	}
	return spec(name, p.dims, out, x, xq, w, intArg(rows), intArg(in), intArg(outN), intArg(p.ks))
}

// ropeLaunch writes out [rows, cols] = x with every head rotated by its
// row's position (pos [rows] int32), pair i's angle divided by factors[i]
// (a.Dims/2 f32) unless factors is 0. out must not be x.
func ropeLaunch(out, x, pos, factors devPtr, rows, cols int, a tensor.RoPEArgs) (launchSpec, error) {
	if a.HeadDim <= 0 || cols%a.HeadDim != 0 || a.Dims <= 0 || a.Dims > a.HeadDim || a.Dims%2 != 0 || a.Dims > ropeMaxDims {
		return launchSpec{}, fmt.Errorf("cuda: rope: bad head_dim %d / dims %d for row width %d", a.HeadDim, a.Dims, cols)
	}
	if a.Mode != tensor.RoPENorm && a.Mode != tensor.RoPENeox {
		return launchSpec{}, fmt.Errorf("cuda: rope: unknown mode %d", a.Mode)
	}
	if out == x {
		return launchSpec{}, fmt.Errorf("cuda: rope: out and x are the same buffer")
	}
	if rows < 0 || cols > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: rope: shape [%d, %d]", rows, cols)
	}
	if rows == 0 || cols == 0 {
		return launchSpec{}, nil
	}
	// The angle step as the CPU backend computes it (runtime/cpu ropeRow).
	thetaScale := float32(math.Pow(float64(a.Base), float64(float32(-2.0)/float32(a.Dims))))
	neox := 0
	if a.Mode == tensor.RoPENeox {
		neox = 1
	}
	return spec("rope", rowGeometry(rows), out, x, pos, factors, intArg(cols), intArg(a.HeadDim), intArg(a.Dims), intArg(neox), f32Arg(thetaScale))
}

// kvWriteLaunch encodes row t of kx and vx [rows, kvDim] f32 into slot
// slots[t] (int32) of the page areas kc and vc in format (a page.Format name;
// "" is f32); slot s starts at byte s*RowBytes(kvDim). A negative slot
// skips the row.
func kvWriteLaunch(kc, vc, kx, vx, slots devPtr, format string, rows, kvDim int) (launchSpec, error) {
	f, suf, err := kvFormat(format)
	if err != nil {
		return launchSpec{}, fmt.Errorf("cuda: kv write: %w", err)
	}
	if rows < 0 || kvDim < 1 || kvDim > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: kv write: %d rows of %d values", rows, kvDim)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	return spec("kv_write_"+suf, kvWriteGeometry(rows), kc, vc, kx, vx, slots, intArg(kvDim), intArg(f.RowBytes(kvDim)))
}

// attentionLaunch writes out [rows, Heads*HeadDim]: causal softmax
// attention of q (same shape) over the KV pages kc and vc (format, rows of
// kvDim values). Row t attends positions 0..pos[t] of its sequence, whose
// block ids are tables[rowTab[t]:] (int32, position order); position j is
// slot tables[rowTab[t]+j/blockTokens]*blockTokens + j%blockTokens. This
// step's rows must already be written (kv_write). A row with pos < 0 gets
// zeros.
func attentionLaunch(out, q, kc, vc, pos, rowTab, tables devPtr, format string, rows int, a tensor.AttentionArgs, blockTokens, kvDim int) (launchSpec, error) {
	f, suf, err := kvFormat(format)
	if err != nil {
		return launchSpec{}, fmt.Errorf("cuda: attention: %w", err)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	p, err := planAttention(rows, a.Heads, a.KVHeads, a.HeadDim)
	if err != nil {
		return launchSpec{}, err
	}
	if a.KVHeads*a.HeadDim > kvDim || kvDim > maxInt32 || blockTokens < 1 || blockTokens > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: attention: %d kv heads of %d do not fit kv rows of %d (block %d)", a.KVHeads, a.HeadDim, kvDim, blockTokens)
	}
	return spec(attnKernel(suf, p.ni), p.dims, out, q, kc, vc, pos, rowTab, tables,
		intArg(a.Heads), intArg(a.KVHeads), intArg(a.HeadDim), f32Arg(a.Scale), intArg(blockTokens), intArg(kvDim),
		intArg(f.RowBytes(kvDim)), intArg(p.chunks), intArg(p.hpb))
}

// addLaunch writes out = x + y, n elements.
func addLaunch(out, x, y devPtr, n int) (launchSpec, error) {
	if n <= 0 {
		return launchSpec{}, nil
	}
	return spec("add", elemGeometry(n), out, x, y, intArg(n))
}

// swigluLaunch writes out = silu(g) * u, n elements.
func swigluLaunch(out, g, u devPtr, n int) (launchSpec, error) {
	if n <= 0 {
		return launchSpec{}, nil
	}
	return spec("swiglu", elemGeometry(n), out, g, u, intArg(n))
}

// selectRowsLaunch writes out [r, cols]: row j is row rows[j] (int32) of x.
func selectRowsLaunch(out, x, rows devPtr, r, cols int) (launchSpec, error) {
	if r < 0 || cols < 0 || cols > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: select_rows: shape [%d, %d]", r, cols)
	}
	if r == 0 || cols == 0 {
		return launchSpec{}, nil
	}
	return spec("select_rows", rowGeometry(r), out, x, rows, intArg(cols))
}

// argmaxThreads is the block size of argmax_rows (ARGMAX_THREADS).
const argmaxThreads = 256

// argmaxLaunch writes ids [rows] int32: the index of the largest value of
// each row of x [rows, cols] f32, ties to the lower index, as the CPU
// sampler's greedy pick (nodes/sample Argmax) chooses it, NaN included.
func argmaxLaunch(ids, x devPtr, rows, cols int) (launchSpec, error) {
	if rows < 0 || cols < 1 || cols > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: argmax_rows: shape [%d, %d]", rows, cols)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	return spec("argmax_rows", dims1(rows, argmaxThreads), ids, x, intArg(cols))
}

// columnsLaunch writes out [rows, cols/group*width]: from each group of
// group columns of x [rows, cols], the width columns from offset.
func columnsLaunch(out, x devPtr, rows, cols, group, offset, width int) (launchSpec, error) {
	if group <= 0 || cols%group != 0 || offset < 0 || width <= 0 || offset+width > group || cols > maxInt32 || rows < 0 {
		return launchSpec{}, fmt.Errorf("cuda: columns: group %d offset %d width %d do not fit row width %d", group, offset, width, cols)
	}
	n := rows * (cols / group * width)
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec("columns", elemGeometry(n), out, x, intArg(n), intArg(cols), intArg(group), intArg(offset), intArg(width))
}

// concatLaunch writes out [rows, a+c]: each row x's [a] then y's [c].
func concatLaunch(out, x, y devPtr, rows, a, c int) (launchSpec, error) {
	if rows < 0 || a < 0 || c < 0 || a+c > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: concat: %d rows of %d and %d", rows, a, c)
	}
	n := rows * (a + c)
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec("concat", elemGeometry(n), out, x, y, intArg(n), intArg(a), intArg(c))
}

// unaryLaunch writes out = fn(x), n elements.
func unaryLaunch(out, x devPtr, n int, fn tensor.UnaryFn) (launchSpec, error) {
	if fn < tensor.Sigmoid || fn > tensor.Softplus {
		return launchSpec{}, fmt.Errorf("cuda: unary: unknown function %v", fn)
	}
	if n <= 0 {
		return launchSpec{}, nil
	}
	return spec("unary", elemGeometry(n), out, x, intArg(n), intArg(int(fn)))
}

// mulLaunch writes out = x * y, n elements: element-wise with y of n
// elements (d = 0), or each row of d elements of x times its row's y [1].
func mulLaunch(out, x, y devPtr, n, d int) (launchSpec, error) {
	if d < 0 || d > maxInt32 || (d > 0 && n%d != 0) {
		return launchSpec{}, fmt.Errorf("cuda: mul: %d elements in rows of %d", n, d)
	}
	if n <= 0 {
		return launchSpec{}, nil
	}
	return spec("mul", elemGeometry(n), out, x, y, intArg(n), intArg(d))
}

// rowLaunch writes out = x + w (kernel add_row) or x * w (mul_row), w [d]
// f32 repeated over the rows of x (n elements).
func rowLaunch(kernel string, out, x, w devPtr, n, d int) (launchSpec, error) {
	if d <= 0 || d > maxInt32 || n%d != 0 {
		return launchSpec{}, fmt.Errorf("cuda: %s: %d elements in rows of %d", kernel, n, d)
	}
	if n <= 0 {
		return launchSpec{}, nil
	}
	return spec(kernel, elemGeometry(n), out, x, w, intArg(n), intArg(d))
}

// l2NormLaunch writes out [rows, cols] = x with each contiguous group of
// group elements divided by max(its L2 norm, eps).
func l2NormLaunch(out, x devPtr, rows, cols, group int, eps float32) (launchSpec, error) {
	if rows < 0 || cols < 0 || group <= 0 || group > maxInt32 || cols%group != 0 {
		return launchSpec{}, fmt.Errorf("cuda: l2_norm: group %d does not divide row width %d", group, cols)
	}
	n := rows * cols / group
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec("l2_norm", warpItemGeometry(n), out, x, intArg(n), intArg(group), f32Arg(eps))
}

// shortConvMaxKernel is the most taps short_conv takes (SHORT_CONV_MAX_K).
const shortConvMaxKernel = 16

// stateRows are the per-row state bindings of a stateful op: the slot
// each row reads and the one it writes (int32 [rows], exec.Batch.StateRows)
// and the rows' positions (a row at position 0 starts from zeros).
type stateRows struct{ read, write, pos devPtr }

// shortConvLaunch writes out [rows, channels]: the causal depthwise conv
// of x with taps w [channels, kernel] f32 over each row's window in the
// state area (slots of (kernel-1)*channels f32), which it advances.
func shortConvLaunch(out, x, w, state devPtr, sr stateRows, rows, channels, kernel int) (launchSpec, error) {
	if kernel < 1 || kernel > shortConvMaxKernel || channels < 1 || channels > maxInt32 || rows < 0 || rows > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: short_conv: %d rows of %d channels, kernel %d (at most %d)", rows, channels, kernel, shortConvMaxKernel)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	return spec("short_conv", elemGeometry(channels), out, x, w, state, sr.read, sr.write, sr.pos, intArg(rows), intArg(channels), intArg(kernel))
}

// deltaRuleThreads is the most threads of a delta_rule block: one per
// column of a value head's state (DELTA_CHUNK_THREADS).
const deltaRuleThreads = 128

// deltaChunkMin is the fewest rows of a step (a bucket) launched on
// delta_rule_chunked, which takes the chunked form for runs of at least
// as many prefill rows of one sequence (DELTA_CHUNK_MIN, runtime/cpu's
// deltaChunkMin); smaller steps (decode, verify) take delta_rule.
const deltaChunkMin = 16

// deltaRuleLaunch writes out [rows, ValueHeads*ValueDim]: the gated delta
// rule of q, k, v, g and beta over each row's state in the state area
// (slots of a.DeltaStateFloats() f32), which it advances. A step of
// deltaChunkMin rows or more runs delta_rule_chunked.
func deltaRuleLaunch(out, q, k, v, g, beta, state devPtr, sr stateRows, rows int, a tensor.StateArgs) (launchSpec, error) {
	if a.KeyHeads < 1 || a.ValueHeads%a.KeyHeads != 0 || a.KeyDim < 1 || a.ValueDim < 1 || a.ValueHeads > maxGridX ||
		rows < 0 || rows > maxInt32 || int64(a.ValueHeads)*int64(a.ValueDim) > maxInt32 || int64(a.KeyHeads)*int64(a.KeyDim) > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: delta_rule: %d key heads of %d, %d value heads of %d", a.KeyHeads, a.KeyDim, a.ValueHeads, a.ValueDim)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	block := min(deltaRuleThreads, ceilDiv(a.ValueDim, warpSize)*warpSize)
	d := launchDims{grid: [3]int{a.ValueHeads, ceilDiv(a.ValueDim, block), 1}, block: [3]int{block, 1, 1}}
	kernel := "delta_rule"
	if rows >= deltaChunkMin {
		kernel = "delta_rule_chunked"
	}
	return spec(kernel, d, out, q, k, v, g, beta, state, sr.read, sr.write, sr.pos, intArg(rows),
		intArg(a.KeyHeads), intArg(a.KeyDim), intArg(a.ValueHeads), intArg(a.ValueDim), f32Arg(a.Scale))
}

// stateStage is a step's staging of a bf16 state area: the step buffer's
// list of the staged slots (int32 [capacity]: each entry's slot, and
// whether a row writes it) and their count (int32 [1]), and the f32
// staging area of capacity slots.
type stateStage struct {
	area, slot, written, count devPtr
	capacity                   int
}

// stateWidenLaunch fills the staging area with the staged slots of store
// (bf16 slots of per values) widened to f32; stateNarrowLaunch rounds the
// entries the rows wrote back into their slots.
func stateWidenLaunch(st stateStage, store devPtr, per int) (launchSpec, error) {
	return stateStageLaunch("state_widen", st, store, per)
}

func stateNarrowLaunch(st stateStage, store devPtr, per int) (launchSpec, error) {
	return stateStageLaunch("state_narrow", st, store, per)
}

func stateStageLaunch(kernel string, st stateStage, store devPtr, per int) (launchSpec, error) {
	if per < 1 || per > maxInt32 || st.capacity < 1 || st.capacity > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: %s: %d staged slots of %d values", kernel, st.capacity, per)
	}
	d := elemGeometry(st.capacity * per)
	if kernel == "state_widen" {
		return spec(kernel, d, st.area, store, st.slot, st.count, intArg(per))
	}
	return spec(kernel, d, store, st.area, st.slot, st.written, st.count, intArg(per))
}

// moeMaxTopK is the most experts a row may be routed to (moe_route keeps
// them in a 32-entry array); moeMaxExperts the most experts it routes among.
const (
	moeMaxTopK    = 32
	moeMaxExperts = 1 << 16
)

// moeRouteLaunch writes ids [rows, a.TopK] int32 and wts [rows, a.TopK]:
// each row's most probable experts under the softmax of router [rows,
// a.Experts] and their probabilities (renormalised with a.Normalize).
func moeRouteLaunch(ids, wts, router devPtr, rows int, a tensor.MoEArgs) (launchSpec, error) {
	if a.Experts < 1 || a.Experts > moeMaxExperts || a.TopK < 1 || a.TopK > min(a.Experts, moeMaxTopK) || rows < 0 || rows > maxInt32 {
		return launchSpec{}, fmt.Errorf("cuda: moe: %d experts, top %d (at most %d), %d rows", a.Experts, a.TopK, moeMaxTopK, rows)
	}
	if rows == 0 {
		return launchSpec{}, nil
	}
	norm := 0
	if a.Normalize {
		norm = 1
	}
	return spec("moe_route", warpItemGeometry(rows), ids, wts, router, intArg(rows), intArg(a.Experts), intArg(a.TopK), intArg(norm))
}

// moeMatmulLaunch writes out [slots, n]: slot s's input row s/xdiv times
// the n rows of expert ids[s] in the stacked weight w of dtype dt. The
// input is x (rows of in f32) for float weights (moe_matmul) and xq, its
// xrows rows quantized for dt (quantize_q8 or quantize_q8k), for quantized
// ones (moe_mm_<dtype>).
func moeMatmulLaunch(out, x, xq, w, ids devPtr, dt tensor.DType, slots, in, n, xdiv, xrows int) (launchSpec, error) {
	if why := weightKernelDType(dt); why != "" {
		return launchSpec{}, fmt.Errorf("cuda: moe: expert weights of dtype %v: %s", dt, why)
	}
	rb, err := dt.RowBytes(in)
	if err != nil || slots < 0 || slots > maxGridX || in < 1 || n < 1 || in > maxInt32 || ceilDiv(n, itemWarps) > maxGridYZ || xdiv < 1 {
		return launchSpec{}, fmt.Errorf("cuda: moe: %d slots of %d x %d (input every %d): %v", slots, in, n, xdiv, err)
	}
	if slots == 0 {
		return launchSpec{}, nil
	}
	d := launchDims{grid: [3]int{slots, ceilDiv(n, itemWarps), 1}, block: [3]int{itemWarps * warpSize, 1, 1}}
	if quantized(dt) {
		if xq == 0 {
			return launchSpec{}, fmt.Errorf("cuda: moe: %v experts need the quantized activations", dt)
		}
		return spec("moe_mm_"+dt.String(), d, out, xq, w, ids, intArg(in), intArg(n), intArg(xdiv), intArg(xrows))
	}
	return spec("moe_matmul", d, out, x, w, ids, intArg(int(dt)), intArg(in), intArg(n), intArg(xdiv), intArg(rb))
}

// moeCombineLaunch writes out [rows, cols]: each row's expert outputs res
// [rows*topK, cols] summed with their weights wts [rows, topK], in order.
func moeCombineLaunch(out, res, wts devPtr, rows, cols, topK int) (launchSpec, error) {
	if rows < 0 || cols < 1 || cols > maxInt32 || topK < 1 {
		return launchSpec{}, fmt.Errorf("cuda: moe: combine %d rows of %d from %d experts", rows, cols, topK)
	}
	n := rows * cols
	if n == 0 {
		return launchSpec{}, nil
	}
	return spec("moe_combine", elemGeometry(n), out, res, wts, intArg(n), intArg(topK), intArg(cols))
}

// moeExperts are an MoE op's stacked expert weights: device addresses and
// dtypes of gate and up [Experts*FFN, cols] and down [Experts*cols, FFN].
type moeExperts struct {
	gate, up, down       devPtr
	gateDT, upDT, downDT tensor.DType
}

// moeLaunches are the launches of an MoE op (tensor.Builder.MoE) writing
// out [rows, cols] from h [rows, cols] and router [rows, a.Experts], its
// intermediates in the scratch at scratch (newMoEScratch): the routing,
// the routed experts' gate and up, swiglu, down, and the weighted sum in
// routing order, with no host round trip between them.
func moeLaunches(out, h, router, scratch devPtr, w moeExperts, rows, cols int, a tensor.MoEArgs) ([]launchSpec, error) {
	sc := newMoEScratch(rows, cols, a, [3]tensor.DType{w.gateDT, w.upDT, w.downDT})
	at := func(off int64) devPtr {
		if off < 0 {
			return 0
		}
		return scratch + devPtr(off)
	}
	// hq is where h quantized for experts of dt are (0 for float experts).
	hq := func(dt tensor.DType) devPtr {
		switch {
		case kquant(dt):
			return at(sc.hqK)
		case quantized(dt):
			return at(sc.hq)
		}
		return 0
	}
	slots := rows * a.TopK
	launches := []func() (launchSpec, error){
		func() (launchSpec, error) { return moeRouteLaunch(at(sc.ids), at(sc.wts), router, rows, a) },
	}
	done := map[devPtr]bool{} // h quantized once per form that gate and up read
	for _, dt := range []tensor.DType{w.gateDT, w.upDT} {
		if dst := hq(dt); dst != 0 && !done[dst] {
			done[dst] = true
			launches = append(launches, func() (launchSpec, error) { return quantizeLaunch(dst, h, dt, rows, cols) })
		}
	}
	launches = append(launches,
		func() (launchSpec, error) {
			return moeMatmulLaunch(at(sc.gate), h, hq(w.gateDT), w.gate, at(sc.ids), w.gateDT, slots, cols, a.FFN, a.TopK, rows)
		},
		func() (launchSpec, error) {
			return moeMatmulLaunch(at(sc.up), h, hq(w.upDT), w.up, at(sc.ids), w.upDT, slots, cols, a.FFN, a.TopK, rows)
		},
		func() (launchSpec, error) { return swigluLaunch(at(sc.gate), at(sc.gate), at(sc.up), slots*a.FFN) })
	if sc.gq >= 0 {
		launches = append(launches, func() (launchSpec, error) { return quantizeLaunch(at(sc.gq), at(sc.gate), w.downDT, slots, a.FFN) })
	}
	launches = append(launches,
		func() (launchSpec, error) {
			return moeMatmulLaunch(at(sc.res), at(sc.gate), at(sc.gq), w.down, at(sc.ids), w.downDT, slots, a.FFN, cols, 1, slots)
		},
		func() (launchSpec, error) { return moeCombineLaunch(out, at(sc.res), at(sc.wts), rows, cols, a.TopK) })
	var ls []launchSpec
	for _, l := range launches {
		spec, err := l()
		if err != nil {
			return nil, err
		}
		if spec.kernel != "" {
			ls = append(ls, spec)
		}
	}
	return ls, nil
}
