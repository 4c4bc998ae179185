//go:build cuda

package cuda

import (
	_ "embed"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

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

// kernels holds the module's functions by name. Its launch methods enqueue
// one kernel (built by launch.go) on a stream and return at once: they
// allocate no device memory and never synchronise, so they can be captured
// into a CUDA Graph. Pointers are device addresses, and every buffer must be
// at least 4-byte aligned (16-byte alignment enables the vectorised paths).
type kernels struct {
	mod cu.Module
	fns map[string]kernel
}

// loadKernels loads the module into the current CUDA context and looks up
// every kernel. The context must be current on the calling thread.
func loadKernels() (*kernels, error) {
	names, err := kernelNames()
	if err != nil {
		return nil, err
	}
	mod, err := cu.LoadData(ptx)
	if err != nil {
		return nil, fmt.Errorf("cuda: load kernel module: %w", err)
	}
	k := &kernels{mod: mod, fns: make(map[string]kernel, len(names))}
	for _, name := range names {
		fn, err := mod.Function(name)
		if err != nil {
			_ = mod.Unload()
			return nil, fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		k.fns[name] = kernel{name: name, fn: fn}
	}
	return k, nil
}

// close unloads the module.
func (k *kernels) close() error { return k.mod.Unload() }

// launch enqueues l on stream s (nothing for a zero launchSpec). Each
// argument box is passed by its address because cu.Function.Launch copies
// eight bytes from every parameter pointer.
func (k *kernels) launch(s cu.Stream, l launchSpec, err error) error {
	if err != nil || l.kernel == "" {
		return err
	}
	kn, ok := k.fns[l.kernel]
	if !ok {
		return fmt.Errorf("cuda: kernel %s not loaded", l.kernel)
	}
	d := l.dims
	params := make([]unsafe.Pointer, len(l.args))
	for i := range l.args {
		params[i] = unsafe.Pointer(&l.args[i])
	}
	if err := kn.fn.Launch(d.grid[0], d.grid[1], d.grid[2], d.block[0], d.block[1], d.block[2], d.shared, s, params); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", kn.name, err)
	}
	return nil
}

func ptr(p cu.DevicePtr) devPtr { return devPtr(p) }

// getRows writes out [rows, cols] f32: row r is row ids[r] (int32) of
// table, a weight of dtype dt (getRowsLaunch).
func (k *kernels) getRows(s cu.Stream, out, table, ids cu.DevicePtr, dt tensor.DType, rows, cols int) error {
	l, err := getRowsLaunch(ptr(out), ptr(table), ptr(ids), dt, rows, cols)
	return k.launch(s, l, err)
}

// rmsNorm writes out [rows, cols] = x normalised per contiguous group of
// group elements, times w [group] f32 (rmsNormLaunch).
func (k *kernels) rmsNorm(s cu.Stream, out, x, w cu.DevicePtr, rows, cols, group int, eps float32) error {
	l, err := rmsNormLaunch(ptr(out), ptr(x), ptr(w), rows, cols, group, eps)
	return k.launch(s, l, err)
}

// quantize writes x [rows, cols] f32 into dst as the quantized activations
// a matmul by a weight of dt reads (quantizeLaunch).
func (k *kernels) quantize(s cu.Stream, dst, x cu.DevicePtr, dt tensor.DType, rows, cols int) error {
	l, err := quantizeLaunch(ptr(dst), ptr(x), dt, rows, cols)
	return k.launch(s, l, err)
}

// matmul writes out [rows, outN] = x [rows, in] . w[outN, in]^T
// (matmulLaunch).
func (k *kernels) matmul(s cu.Stream, out, x, xq, w cu.DevicePtr, dt tensor.DType, rows, in, outN int) error {
	l, err := matmulLaunch(ptr(out), ptr(x), ptr(xq), ptr(w), dt, rows, in, outN)
	return k.launch(s, l, err)
}

// rope writes out [rows, cols] = x with every head rotated by its row's
// position, the angles divided by factors unless it is 0 (ropeLaunch).
func (k *kernels) rope(s cu.Stream, out, x, pos, factors cu.DevicePtr, rows, cols int, a tensor.RoPEArgs) error {
	l, err := ropeLaunch(ptr(out), ptr(x), ptr(pos), ptr(factors), rows, cols, a)
	return k.launch(s, l, err)
}

// kvWrite encodes rows of kx and vx into their KV slots (kvWriteLaunch).
func (k *kernels) kvWrite(s cu.Stream, kc, vc, kx, vx, slots cu.DevicePtr, format string, rows, kvDim int) error {
	l, err := kvWriteLaunch(ptr(kc), ptr(vc), ptr(kx), ptr(vx), ptr(slots), format, rows, kvDim)
	return k.launch(s, l, err)
}

// attention writes out [rows, Heads*HeadDim]: causal softmax attention of
// q over the KV pages (attentionLaunch).
func (k *kernels) attention(s cu.Stream, out, q, kc, vc, pos, rowTab, tables cu.DevicePtr, format string, rows int, a tensor.AttentionArgs, blockTokens, kvDim int) error {
	l, err := attentionLaunch(ptr(out), ptr(q), ptr(kc), ptr(vc), ptr(pos), ptr(rowTab), ptr(tables), format, rows, a, blockTokens, kvDim)
	return k.launch(s, l, err)
}

// add writes out = x + y, n elements.
func (k *kernels) add(s cu.Stream, out, x, y cu.DevicePtr, n int) error {
	l, err := addLaunch(ptr(out), ptr(x), ptr(y), n)
	return k.launch(s, l, err)
}

// swiglu writes out = silu(g) * u, n elements.
func (k *kernels) swiglu(s cu.Stream, out, g, u cu.DevicePtr, n int) error {
	l, err := swigluLaunch(ptr(out), ptr(g), ptr(u), n)
	return k.launch(s, l, err)
}

// selectRows writes out [r, cols]: row j is row rows[j] (int32) of x.
func (k *kernels) selectRows(s cu.Stream, out, x, rows cu.DevicePtr, r, cols int) error {
	l, err := selectRowsLaunch(ptr(out), ptr(x), ptr(rows), r, cols)
	return k.launch(s, l, err)
}

// argmax writes ids [rows] int32: the greedy token of each row of x [rows,
// cols] f32 (argmaxLaunch).
func (k *kernels) argmax(s cu.Stream, ids, x cu.DevicePtr, rows, cols int) error {
	l, err := argmaxLaunch(ptr(ids), ptr(x), rows, cols)
	return k.launch(s, l, err)
}

// columns writes out: from each group of group columns of x [rows, cols],
// width columns from offset (columnsLaunch).
func (k *kernels) columns(s cu.Stream, out, x cu.DevicePtr, rows, cols, group, offset, width int) error {
	l, err := columnsLaunch(ptr(out), ptr(x), rows, cols, group, offset, width)
	return k.launch(s, l, err)
}

// concat writes out [rows, a+c], x's row then y's (concatLaunch).
func (k *kernels) concat(s cu.Stream, out, x, y cu.DevicePtr, rows, a, c int) error {
	l, err := concatLaunch(ptr(out), ptr(x), ptr(y), rows, a, c)
	return k.launch(s, l, err)
}

// unary writes out = fn(x), n elements (unaryLaunch).
func (k *kernels) unary(s cu.Stream, out, x cu.DevicePtr, n int, fn tensor.UnaryFn) error {
	l, err := unaryLaunch(ptr(out), ptr(x), n, fn)
	return k.launch(s, l, err)
}

// mul writes out = x * y, element-wise or by row scalars (mulLaunch).
func (k *kernels) mul(s cu.Stream, out, x, y cu.DevicePtr, n, d int) error {
	l, err := mulLaunch(ptr(out), ptr(x), ptr(y), n, d)
	return k.launch(s, l, err)
}

// row writes out = x + w (add_row) or x * w (mul_row), w [d] per row
// (rowLaunch).
func (k *kernels) row(s cu.Stream, kernel string, out, x, w cu.DevicePtr, n, d int) error {
	l, err := rowLaunch(kernel, ptr(out), ptr(x), ptr(w), n, d)
	return k.launch(s, l, err)
}

// l2Norm writes out = x / max(|x|, eps) per group (l2NormLaunch).
func (k *kernels) l2Norm(s cu.Stream, out, x cu.DevicePtr, rows, cols, group int, eps float32) error {
	l, err := l2NormLaunch(ptr(out), ptr(x), rows, cols, group, eps)
	return k.launch(s, l, err)
}

// shortConv writes out [rows, channels]: the causal depthwise conv of x over
// each row's window in state, which it advances (shortConvLaunch).
func (k *kernels) shortConv(s cu.Stream, out, x, w, state cu.DevicePtr, sr stateRows, rows, channels, kernel int) error {
	l, err := shortConvLaunch(ptr(out), ptr(x), ptr(w), ptr(state), sr, rows, channels, kernel)
	return k.launch(s, l, err)
}

// deltaRule writes out: the gated delta rule over each row's state, which
// it advances (deltaRuleLaunch).
func (k *kernels) deltaRule(s cu.Stream, out, q, kk, v, g, beta, state cu.DevicePtr, sr stateRows, rows int, a tensor.StateArgs) error {
	l, err := deltaRuleLaunch(ptr(out), ptr(q), ptr(kk), ptr(v), ptr(g), ptr(beta), ptr(state), sr, rows, a)
	return k.launch(s, l, err)
}

// stateStage widens the staged slots of a bf16 state area store (slots of
// per values) into the staging area (widen), or rounds the written ones
// back (stateWidenLaunch, stateNarrowLaunch).
func (k *kernels) stateStage(s cu.Stream, widen bool, st stateStage, store cu.DevicePtr, per int) error {
	l, err := stateNarrowLaunch(st, ptr(store), per)
	if widen {
		l, err = stateWidenLaunch(st, ptr(store), per)
	}
	return k.launch(s, l, err)
}

// moe runs an MoE op into out from h and router with the stacked expert
// weights and the op's scratch, all on the device (moeLaunches).
func (k *kernels) moe(s cu.Stream, out, h, router, scratch cu.DevicePtr, gate, up, down deviceTensor, rows, cols int, a tensor.MoEArgs) error {
	w := moeExperts{gate: ptr(gate.ptr), up: ptr(up.ptr), down: ptr(down.ptr), gateDT: gate.dt, upDT: up.dt, downDT: down.dt}
	ls, err := moeLaunches(ptr(out), ptr(h), ptr(router), ptr(scratch), w, rows, cols, a)
	if err != nil {
		return err
	}
	for _, l := range ls {
		if err := k.launch(s, l, nil); err != nil {
			return err
		}
	}
	return nil
}
