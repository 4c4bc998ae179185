//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// ptx is kernels/ninfer.cu compiled for compute capability 8.0 (`just
// ptx`); the driver JIT-compiles it for the device at load.
//
//go:embed ninfer.ptx
var ptx string

// kernel is one function of the module.
type kernel struct {
	name string
	fn   cu.Function
}

// kernels holds the module's functions. Its launch methods enqueue one
// kernel on a stream and return at once: they allocate no device memory and
// never synchronise, so they can be captured into a CUDA Graph. Pointers
// are device addresses, and every buffer must be at least 4-byte aligned
// (16-byte alignment enables the vectorised paths).
type kernels struct {
	mod cu.Module
	fn  struct {
		quantizeQ8, getRows, rmsNorm, rope, add, swiglu, selectRows kernel
	}
	gemv      [tensor.Q4_0 + 1][gemvMaxRows + 1]kernel // [dtype][NT]
	gemm      [tensor.Q4_0 + 1]kernel                  // [dtype]
	kvWriters map[string]kernel                        // by format suffix
	attn      map[string][attnMaxNI + 1]kernel         // [format suffix][NI]
}

// loadKernels loads the module into the current CUDA context and looks up
// every kernel. The context must be current on the calling thread.
func loadKernels() (*kernels, error) {
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return nil, fmt.Errorf("cuda: load kernel module: %w", err)
	}
	k := &kernels{mod: mod, kvWriters: map[string]kernel{}, attn: map[string][attnMaxNI + 1]kernel{}}
	var lerr error
	get := func(name string) kernel {
		fn, err := mod.Function(name)
		if err != nil && lerr == nil {
			lerr = fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		return kernel{name: name, fn: fn}
	}
	k.fn.quantizeQ8 = get("quantize_q8")
	k.fn.getRows = get("get_rows")
	k.fn.rmsNorm = get("rms_norm")
	k.fn.rope = get("rope")
	k.fn.add = get("add")
	k.fn.swiglu = get("swiglu")
	k.fn.selectRows = get("select_rows")
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0} {
		for _, nt := range gemvVariants {
			k.gemv[dt][nt] = get(fmt.Sprintf("gemv_%v_%d", dt, nt))
		}
		k.gemm[dt] = get("gemm_" + dt.String())
	}
	for _, f := range kv.Formats() {
		_, suf, err := kvFormat(f.Name)
		if err != nil {
			_ = mod.Unload()
			return nil, err
		}
		k.kvWriters[suf] = get("kv_write_" + suf)
		var a [attnMaxNI + 1]kernel
		for _, ni := range attnVariants {
			a[ni] = get(fmt.Sprintf("attn_%s_%d", suf, ni))
		}
		k.attn[suf] = a
	}
	if lerr != nil {
		_ = mod.Unload()
		return nil, lerr
	}
	return k, nil
}

// close unloads the module.
func (k *kernels) close() error { return k.mod.Unload() }

// launch enqueues k with geometry d on stream s. Each argument is boxed in
// its own uint64 because cu.Function.Launch copies eight bytes from every
// parameter pointer; the driver then reads the parameter's own size from
// the low bytes (little-endian), which is right for int, long long, float
// and pointers. The count must match the kernel's parameter list exactly.
func launch(k kernel, d launchDims, s cu.Stream, args ...uint64) error {
	if err := d.check(); err != nil {
		return fmt.Errorf("cuda: %s: %w", k.name, err)
	}
	params := make([]unsafe.Pointer, len(args))
	for i := range args {
		params[i] = unsafe.Pointer(&args[i])
	}
	if err := k.fn.Launch(d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2], d.shared, s, params); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", k.name, err)
	}
	return nil
}

// ptrArg, intArg and f32Arg box kernel arguments for launch.
func ptrArg(p cu.DevicePtr) uint64 { return uint64(p) }
func intArg(v int) uint64          { return uint64(int64(v)) }
func f32Arg(v float32) uint64      { return uint64(math.Float32bits(v)) }

// getRows writes out [rows, cols] f32: row r is row ids[r] (int32) of
// table, a weight of dtype dt whose rows take dt.RowBytes(cols) bytes. The
// ids must be below the table's row count (a negative id gives zeros).
func (k *kernels) getRows(s cu.Stream, out, table, ids cu.DevicePtr, dt tensor.DType, rows, cols int) error {
	if !matmulDTypeOK(dt) {
		return fmt.Errorf("cuda: get_rows: dtype %v not supported", dt)
	}
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return fmt.Errorf("cuda: get_rows: %w", err)
	}
	if rows < 0 || cols > maxInt32 {
		return fmt.Errorf("cuda: get_rows: shape [%d, %d]", rows, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	return launch(k.fn.getRows, rowGeometry(rows), s, ptrArg(out), ptrArg(table), ptrArg(ids), intArg(int(dt)), intArg(cols), intArg(rb))
}

// rmsNorm writes out [rows, cols] = x normalised per contiguous group of
// group elements, times w [group] f32.
func (k *kernels) rmsNorm(s cu.Stream, out, x, w cu.DevicePtr, rows, cols, group int, eps float32) error {
	if rows < 0 || cols < 0 || group <= 0 || group > maxInt32 || cols%group != 0 {
		return fmt.Errorf("cuda: rms_norm: group %d does not divide row width %d", group, cols)
	}
	n := rows * cols / group
	if n == 0 {
		return nil
	}
	return launch(k.fn.rmsNorm, warpItemGeometry(n), s, ptrArg(out), ptrArg(x), ptrArg(w), intArg(n), intArg(group), f32Arg(eps))
}

// quantizeQ8 writes x [rows, cols] f32 as Q8_0 blocks into dst (rows*cols/32
// blocks of 34 bytes: fp16 d, 32 int8), row-major, exactly as the CPU
// backend quantizes activations. cols must be a multiple of 32.
func (k *kernels) quantizeQ8(s cu.Stream, dst, x cu.DevicePtr, rows, cols int) error {
	if rows < 0 || cols < 0 || cols%tensor.QK != 0 {
		return fmt.Errorf("cuda: quantize_q8: row width %d is not a multiple of %d", cols, tensor.QK)
	}
	n := rows * cols / tensor.QK
	if n == 0 {
		return nil
	}
	return launch(k.fn.quantizeQ8, warpItemGeometry(n), s, ptrArg(dst), ptrArg(x), intArg(n))
}

// matmul writes out [rows, outN] = x [rows, in] . w[outN, in]^T, w of dtype
// dt in its GGUF bytes. For Q8_0 and Q4_0 weights xq must hold x quantized
// by quantizeQ8 (x is not read); for float weights x is read and xq ignored.
func (k *kernels) matmul(s cu.Stream, out, x, xq, w cu.DevicePtr, dt tensor.DType, rows, in, outN int) error {
	p, err := planMatmul(dt, rows, in, outN)
	if err != nil {
		return err
	}
	if quant := dt == tensor.Q8_0 || dt == tensor.Q4_0; quant && xq == 0 {
		return fmt.Errorf("cuda: matmul: %v weights need the quantized activations", dt)
	} else if !quant && x == 0 {
		return fmt.Errorf("cuda: matmul: %v weights need the f32 activations", dt)
	}
	kn := k.gemm[dt]
	if p.gemv {
		kn = k.gemv[dt][p.nt]
	}
	return launch(kn, p.dims, s, ptrArg(out), ptrArg(x), ptrArg(xq), ptrArg(w), intArg(rows), intArg(in), intArg(outN), intArg(p.ks))
}

// rope writes out [rows, cols] = x with every head rotated by its row's
// position (pos [rows] int32). out must not be x.
func (k *kernels) rope(s cu.Stream, out, x, pos cu.DevicePtr, rows, cols int, a tensor.RoPEArgs) error {
	if a.HeadDim <= 0 || cols%a.HeadDim != 0 || a.Dims <= 0 || a.Dims > a.HeadDim || a.Dims%2 != 0 || a.Dims > ropeMaxDims {
		return fmt.Errorf("cuda: rope: bad head_dim %d / dims %d for row width %d", a.HeadDim, a.Dims, cols)
	}
	if a.Mode != tensor.RoPENorm && a.Mode != tensor.RoPENeox {
		return fmt.Errorf("cuda: rope: unknown mode %d", a.Mode)
	}
	if out == x {
		return fmt.Errorf("cuda: rope: out and x are the same buffer")
	}
	if rows < 0 || cols > maxInt32 {
		return fmt.Errorf("cuda: rope: shape [%d, %d]", rows, cols)
	}
	if rows == 0 || cols == 0 {
		return nil
	}
	// The angle step as the CPU backend computes it (runtime/cpu ropeRow).
	thetaScale := float32(math.Pow(float64(a.Base), float64(float32(-2.0)/float32(a.Dims))))
	neox := 0
	if a.Mode == tensor.RoPENeox {
		neox = 1
	}
	return launch(k.fn.rope, rowGeometry(rows), s, ptrArg(out), ptrArg(x), ptrArg(pos),
		intArg(cols), intArg(a.HeadDim), intArg(a.Dims), intArg(neox), f32Arg(thetaScale))
}

// kvWrite encodes row t of kx and vx [rows, kvDim] f32 into slot slots[t]
// (int32) of the page areas kc and vc in format (a kv.Format name; "" is
// f32); slot s starts at byte s*RowBytes(kvDim). A negative slot skips the row.
func (k *kernels) kvWrite(s cu.Stream, kc, vc, kx, vx, slots cu.DevicePtr, format string, rows, kvDim int) error {
	f, suf, err := kvFormat(format)
	if err != nil {
		return fmt.Errorf("cuda: kv write: %w", err)
	}
	if rows < 0 || kvDim < 1 || kvDim > maxInt32 {
		return fmt.Errorf("cuda: kv write: %d rows of %d values", rows, kvDim)
	}
	if rows == 0 {
		return nil
	}
	return launch(k.kvWriters[suf], kvWriteGeometry(rows), s, ptrArg(kc), ptrArg(vc), ptrArg(kx), ptrArg(vx), ptrArg(slots),
		intArg(kvDim), intArg(f.RowBytes(kvDim)))
}

// attention writes out [rows, Heads*HeadDim]: causal softmax attention of
// q (same shape) over the KV pages kc and vc (format, rows of kvDim values).
// Row t attends positions 0..pos[t] of its sequence, whose block ids are
// tables[rowTab[t]:] (int32, position order); position j is slot
// tables[rowTab[t]+j/blockTokens]*blockTokens + j%blockTokens. This step's
// rows must already be written (kvWrite). A row with pos < 0 gets zeros.
func (k *kernels) attention(s cu.Stream, out, q, kc, vc, pos, rowTab, tables cu.DevicePtr, format string, rows int, a tensor.AttentionArgs, blockTokens, kvDim int) error {
	f, suf, err := kvFormat(format)
	if err != nil {
		return fmt.Errorf("cuda: attention: %w", err)
	}
	if rows == 0 {
		return nil
	}
	p, err := planAttention(rows, a.Heads, a.KVHeads, a.HeadDim)
	if err != nil {
		return err
	}
	if a.KVHeads*a.HeadDim > kvDim || kvDim > maxInt32 || blockTokens < 1 || blockTokens > maxInt32 {
		return fmt.Errorf("cuda: attention: %d kv heads of %d do not fit kv rows of %d (block %d)", a.KVHeads, a.HeadDim, kvDim, blockTokens)
	}
	return launch(k.attn[suf][p.ni], p.dims, s, ptrArg(out), ptrArg(q), ptrArg(kc), ptrArg(vc), ptrArg(pos), ptrArg(rowTab), ptrArg(tables),
		intArg(a.Heads), intArg(a.KVHeads), intArg(a.HeadDim), f32Arg(a.Scale), intArg(blockTokens), intArg(kvDim),
		intArg(f.RowBytes(kvDim)), intArg(p.chunks), intArg(p.hpb))
}

// add writes out = x + y, n elements.
func (k *kernels) add(s cu.Stream, out, x, y cu.DevicePtr, n int) error {
	if n <= 0 {
		return nil
	}
	return launch(k.fn.add, elemGeometry(n), s, ptrArg(out), ptrArg(x), ptrArg(y), intArg(n))
}

// swiglu writes out = silu(g) * u, n elements.
func (k *kernels) swiglu(s cu.Stream, out, g, u cu.DevicePtr, n int) error {
	if n <= 0 {
		return nil
	}
	return launch(k.fn.swiglu, elemGeometry(n), s, ptrArg(out), ptrArg(g), ptrArg(u), intArg(n))
}

// selectRows writes out [r, cols]: row j is row rows[j] (int32) of x.
func (k *kernels) selectRows(s cu.Stream, out, x, rows cu.DevicePtr, r, cols int) error {
	if r < 0 || cols < 0 || cols > maxInt32 {
		return fmt.Errorf("cuda: select_rows: shape [%d, %d]", r, cols)
	}
	if r == 0 || cols == 0 {
		return nil
	}
	return launch(k.fn.selectRows, rowGeometry(r), s, ptrArg(out), ptrArg(x), ptrArg(rows), intArg(cols))
}
