//go:build cudaemu

package cuda

// Kernel parity without a GPU: every kernel of kernels/ninfer.cu runs in
// the CPU emulator (cuda/emu, under AddressSanitizer and
// UndefinedBehaviorSanitizer) through the launches of launch.go, the
// parameters and geometry the backend uses, and its result is compared
// with the CPU backend's on the same inputs. `just cuda-emu` runs
// TestEmu*, which prints "N passed, M failed" over the parity cases.
//
// Tolerances, relative to max(1, max |cpu|) of each output:
//   - exact (0): get_rows, select_rows, add, quantize_q8, quantize_q8k and
//     the KV page bytes, which the kernels compute with the CPU's exact
//     arithmetic;
//   - 1e-6: rms_norm and swiglu (the same roundings; a double sum in another
//     order can move the rounded mean by one ulp);
//   - 1e-5: rope (device-side sin and cos are double, as the CPU's, but the
//     host libm and Go's math differ in the last bits);
//   - 2e-5: matmul and attention, whose float accumulation order differs
//     from the CPU's (warp-strided partial sums, the online softmax).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// emuPassed and emuFailed count the parity cases.
var emuPassed, emuFailed atomic.Int64

func TestMain(m *testing.M) {
	code := m.Run()
	if n, f := emuPassed.Load(), emuFailed.Load(); n+f > 0 {
		fmt.Printf("%d passed, %d failed\n", n, f)
		if f > 0 && code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// parityCase runs one parity case as a parallel subtest of t and counts it.
func parityCase(t *testing.T, name string, fn func(t *testing.T, e *emulator)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		e := theEmulator(t)
		defer func() {
			if t.Failed() {
				emuFailed.Add(1)
			} else {
				emuPassed.Add(1)
			}
		}()
		fn(t, e)
	})
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func i32Bytes(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// cpuRun runs rec's graph on the CPU backend for each batch and returns
// every named output of every batch.
func cpuRun(t *testing.T, f *weights.File, l exec.KVLayout, rec func(b *tensor.Builder, rows, logitRows int), batches ...*exec.Batch) []map[string][]float32 {
	t.Helper()
	be := cpu.New(exec.Options{Threads: 1})
	defer be.Close()
	if err := be.Load(f); err != nil {
		t.Fatalf("cpu: load: %v", err)
	}
	if err := be.Reserve(l); err != nil {
		t.Fatalf("cpu: reserve: %v", err)
	}
	var outs []map[string][]float32
	for _, batch := range batches {
		b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
			w, err := f.Tensor(name)
			if err != nil {
				return 0, 0, 0, false
			}
			return w.DType, w.Rows(), w.RowLen(), true
		})
		rec(b, len(batch.Tokens), len(batch.LogitRows))
		g, err := b.Finish()
		if err != nil {
			t.Fatal(err)
		}
		x, err := be.Prepare(g)
		if err != nil {
			t.Fatalf("cpu: prepare: %v", err)
		}
		if err := x.Run(t.Context(), batch); err != nil {
			t.Fatalf("cpu: run: %v", err)
		}
		o := map[string][]float32{}
		for name := range g.Outputs {
			data, rows, cols, err := x.Output(name)
			if err != nil {
				t.Fatal(err)
			}
			o[name] = slices.Clone(data[:rows*cols])
		}
		x.Close()
		outs = append(outs, o)
	}
	return outs
}

// smallKV is a KV layout for graphs without attention.
var smallKV = exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 8}

// noAttention is a batch of the tokens, all at position 0 of sequence 0.
func noAttention(tokens []int32, logitRows []int32) *exec.Batch {
	n := len(tokens)
	return seqBatch(tokens, make([]int32, n), make([]int32, n), [][]int32{{0}}, logitRows)
}

func weightF32(t *testing.T, f *weights.File, name string) []float32 {
	t.Helper()
	w, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, w.Rows()*w.RowLen())
	if err := tensor.DequantizeRow(w.DType, w.Data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestEmuGetRows(t *testing.T) {
	const vocab = 50
	for _, dt := range matmulDTypes {
		cols := 160
		if dt.BlockSize() == tensor.QKK {
			cols = 512
		}
		parityCase(t, dt.String(), func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(2, uint64(dt)))
			f := memFile(t, randTensor(r, "e", dt, vocab, cols))
			ids := randIDs(r, vocab, 7)
			want := cpuRun(t, f, smallKV, func(b *tensor.Builder, rows, logitRows int) {
				b.Input("positions", rows)
				b.Input("logit_rows", logitRows)
				b.Output("e", b.GetRows(b.Weight("e"), b.Input("tokens", rows)))
			}, noAttention(ids, []int32{0}))[0]["e"]
			w, _ := f.Tensor("e")
			// A negative id gives a row of zeros (the kernel's contract).
			ids = append(ids, -1)
			want = append(want, make([]float32, cols)...)
			var mem emuMem
			out := mem.nanBuf(4 * len(ids) * cols)
			table := mem.buf(w.Data, false)
			idb := mem.buf(i32Bytes(ids), false)
			l, err := getRowsLaunch(out.dev, table.dev, idb.dev, dt, len(ids), cols)
			e.launch(t, l, err, &mem)
			near(t, dt.String()+" get_rows", want, bytesF32(out.data), 0)
		})
	}
}

// quantizeQ8Ref is runtime/cpu quantizeQ8 (kernels.go), the activation
// quantization the CPU backend's Q8_0 and Q4_0 matmuls use, written as
// Q8_0 block bytes: d = max|x|/127 rounded to f16, q = round-half-even(x *
// 127/max|x|); then, as quantize_q8 lays them out (q8Bytes), each block's
// Q8_1 sum fp16(d * sum(q)) as runtime/cpu quantizeQ8_1 computes it.
func quantizeQ8Ref(x []float32) []byte {
	nb := len(x) / 32
	out := bytes.Repeat([]byte{0xff}, int(q8Bytes(1, len(x)))) // the padding before the sums stays unwritten (the test's NaN fill)
	sums := int(alignUp(int64(34*nb), 16))
	for b := range len(x) / 32 {
		blk := x[b*32 : b*32+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		binary.LittleEndian.PutUint16(out[b*34:], tensor.F32ToF16(d))
		var sum int32
		for i, v := range blk {
			q := int8(math.RoundToEven(float64(v * id)))
			out[b*34+2+i] = byte(q)
			sum += int32(q)
		}
		s := tensor.F16ToF32(tensor.F32ToF16(d * float32(sum)))
		binary.LittleEndian.PutUint32(out[sums+4*b:], math.Float32bits(s))
	}
	return out
}

// quantizeQ8KRef is runtime/cpu quantizeQ8K (quantdot.go), the activation
// quantization of the CPU backend's K-quant and IQ4_XS matmuls, written as
// Q8_K blocks: m = the first value of largest magnitude, iscale = -127/m,
// q = min(127, round-half-even(iscale*x)), d = 1/iscale (f32 at 0), the
// quants at 4 and the int16 sums of each 16 at 260.
func quantizeQ8KRef(x []float32) []byte {
	out := make([]byte, q8KBytes(1, len(x)))
	for b := range len(x) / 256 {
		xs, blk := x[b*256:b*256+256], out[b*292:b*292+292]
		var amax, m float32
		for _, v := range xs {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, m = a, v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / m
		for j, v := range xs {
			q := int8(min(127, math.RoundToEven(float64(iscale*v))))
			blk[4+j] = byte(q)
			s := int16(binary.LittleEndian.Uint16(blk[260+2*(j/16):])) + int16(q)
			binary.LittleEndian.PutUint16(blk[260+2*(j/16):], uint16(s))
		}
		binary.LittleEndian.PutUint32(blk, math.Float32bits(1/iscale))
	}
	return out
}

// quantizeAct launches the quantization a matmul by a weight of dt reads
// (quantize_q8 or quantize_q8k) of x [rows, cols] into a new buffer and
// returns it.
func quantizeAct(t *testing.T, e *emulator, mem *emuMem, dt tensor.DType, x devPtr, rows, cols int) *emuBuf {
	t.Helper()
	q := mem.nanBuf(int(quantBytes(dt, rows, cols)))
	l, err := quantizeLaunch(q.dev, x, dt, rows, cols)
	e.launch(t, l, err, mem)
	q.back = false
	return q
}

// TestEmuQuantize checks quantize_q8 (the activations of weights whose dot
// type is Q8_0 or Q8_1, here a Q8_0 weight's) and quantize_q8k (dot type
// Q8_K, here a Q4_K weight's) byte for byte against the CPU's roundings.
func TestEmuQuantize(t *testing.T) {
	for _, c := range []struct {
		name       string
		dt         tensor.DType // the weight whose activation format is quantized
		rows, cols int
		gen        func(r *rand.Rand, i int) float32
		ref        func(x []float32) []byte
	}{
		{"q8: normal values", tensor.Q8_0, 3, 96, func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64()) }, quantizeQ8Ref},
		{"q8: zero blocks, ties and large values", tensor.Q8_0, 9, 96, func(r *rand.Rand, i int) float32 {
			switch (i / 32) % 3 {
			case 0:
				return 0
			case 1:
				return float32(i%32-16) * 0.5 // q = x*127/8: many near-ties
			}
			return float32(r.NormFloat64() * 1e30)
		}, quantizeQ8Ref},
		{"q8_K: normal values", tensor.Q4_K, 3, 512, func(r *rand.Rand, i int) float32 { return float32(r.NormFloat64()) }, quantizeQ8KRef},
		{"q8_K: zero blocks, ties of magnitude and large values", tensor.Q4_K, 7, 512, func(r *rand.Rand, i int) float32 {
			switch (i / 256) % 3 {
			case 0:
				return 0
			case 1:
				if i%256 == 77 { // -3 first, then +3 at 200: m is -3
					return -3
				}
				if i%256 == 200 {
					return 3
				}
				return float32(i%16-8) * 0.375 // many near-ties of iscale*x
			}
			return float32(r.NormFloat64() * 1e30)
		}, quantizeQ8KRef},
	} {
		parityCase(t, c.name, func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(7, uint64(c.rows)))
			x := make([]float32, c.rows*c.cols)
			for i := range x {
				x[i] = c.gen(r, i)
			}
			var mem emuMem
			dst := mem.nanBuf(int(quantBytes(c.dt, c.rows, c.cols)))
			xb := mem.buf(f32Bytes(x), false)
			l, err := quantizeLaunch(dst.dev, xb.dev, c.dt, c.rows, c.cols)
			e.launch(t, l, err, &mem)
			if want := c.ref(x); !bytes.Equal(dst.data, want) {
				for i := range want {
					if dst.data[i] != want[i] {
						t.Fatalf("%s: byte %d: got %#x, want %#x", l.kernel, i, dst.data[i], want[i])
					}
				}
			}
		})
	}
}

func TestEmuMatMul(t *testing.T) {
	type shape struct{ rows, in, out, xOff int }
	shapes := []shape{
		{1, 256, 37, 0},   // gemv_1, one warp per column
		{2, 512, 37, 0},   // gemv_2, 2 warps split K
		{3, 1024, 19, 0},  // gemv_4 with a clamped token, 4 warps split K
		{5, 256, 64, 0},   // gemv_8
		{8, 1024, 37, 0},  // gemv_8, K split, a partial column group
		{70, 256, 96, 0},  // gemm: partial tiles in both directions
		{9, 96, 65, 0},    // gemm: K chunk cut short
		{4, 256, 33, 4},   // gemv_4 on activations 4 bytes off 16-byte alignment
		{70, 100, 40, 0},  // float only: gemm with a K tail
		{2, 100, 17, 0},   // float only: gemv, K not a multiple of 8
		{1, 1024, 300, 0}, // gemv_1 over 300 columns, K split in 4
	}
	for _, dt := range matmulDTypes {
		quant := quantized(dt)
		for _, s := range shapes {
			if s.in%dt.BlockSize() != 0 {
				continue
			}
			p, err := planMatmul(dt, s.rows, s.in, s.out)
			if err != nil {
				t.Fatal(err)
			}
			kind := fmt.Sprintf("gemm_%v", dt)
			if p.gemv {
				kind = fmt.Sprintf("%s ks=%d", gemvKernel(dt, p.nt), p.ks)
			}
			name := fmt.Sprintf("%v/%dx%d.%dx%d off %d (%s)", dt, s.rows, s.in, s.out, s.in, s.xOff, kind)
			parityCase(t, name, func(t *testing.T, e *emulator) {
				r := rand.New(rand.NewPCG(1, uint64(dt)*1000+uint64(s.rows*s.in+s.out)))
				const vocab = 80
				f := memFile(t, randTensor(r, "x", tensor.F32, vocab, s.in), randTensor(r, "w", dt, s.out, s.in))
				want := cpuRun(t, f, smallKV, func(b *tensor.Builder, rows, logitRows int) {
					x := b.GetRows(b.Weight("x"), b.Input("tokens", rows))
					b.Input("positions", rows)
					b.Input("logit_rows", logitRows)
					b.Output("y", b.MatMul(x, b.Weight("w")))
					b.Output("x", x)
				}, noAttention(randIDs(r, vocab, s.rows), []int32{0}))[0]
				w, _ := f.Tensor("w")
				var mem emuMem
				out := mem.nanBuf(4 * s.rows * s.out)
				xb := mem.buf(append(make([]byte, s.xOff), f32Bytes(want["x"])...), false)
				wb := mem.buf(w.Data, false)
				var xq devPtr
				if quant {
					xq = quantizeAct(t, e, &mem, dt, xb.at(s.xOff), s.rows, s.in).dev
				}
				l, err := matmulLaunch(out.dev, xb.at(s.xOff), xq, wb.dev, dt, s.rows, s.in, s.out)
				e.launch(t, l, err, &mem)
				near(t, name, want["y"], bytesF32(out.data), 2e-5)
				// Broken: the blocks read as a type of no more bytes per
				// block (the high bits, the level table or the layout lost)
				// must fail.
				if broken, ok := map[tensor.DType]tensor.DType{tensor.Q5_0: tensor.Q4_0, tensor.IQ4_NL: tensor.Q4_0, tensor.Q5_1: tensor.Q4_1,
					tensor.Q6_K: tensor.Q5_K, tensor.Q5_K: tensor.Q4_K, tensor.Q4_K: tensor.IQ4_XS, tensor.IQ4_XS: tensor.Q3_K, tensor.Q3_K: tensor.Q2_K}[dt]; ok {
					l, err := matmulLaunch(out.dev, xb.at(s.xOff), xq, wb.dev, broken, s.rows, s.in, s.out)
					e.launch(t, l, err, &mem)
					mustDiffer(t, name+" read as "+broken.String(), want["y"], bytesF32(out.data), 2e-5)
				}
				if dt == tensor.Q2_K {
					// Broken: Q8_0 activation blocks read as Q8_K must fail.
					q8 := quantizeAct(t, e, &mem, tensor.Q8_0, xb.at(s.xOff), s.rows, s.in)
					l, err := matmulLaunch(out.dev, xb.at(s.xOff), q8.dev, wb.dev, dt, s.rows, s.in, s.out)
					e.launch(t, l, err, &mem)
					mustDiffer(t, name+" on Q8_0 activations", want["y"], bytesF32(out.data), 2e-5)
				}
			})
		}
	}
}

func TestEmuRMSNorm(t *testing.T) {
	for _, c := range []struct {
		rows, cols, group int
		dt                tensor.DType
	}{
		{11, 128, 128, tensor.F32}, // one group per row
		{11, 128, 32, tensor.F16},  // per head, 44 groups over 6 blocks
		{5, 120, 40, tensor.F32},   // groups not a multiple of 32
	} {
		parityCase(t, fmt.Sprintf("%d rows of %d in groups of %d, %v weight", c.rows, c.cols, c.group, c.dt), func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(3, uint64(c.group)))
			f := memFile(t, randTensor(r, "a", tensor.F32, 30, c.cols), randTensor(r, "norm", c.dt, 1, c.group))
			const eps = 1e-5
			want := cpuRun(t, f, smallKV, func(b *tensor.Builder, rows, logitRows int) {
				x := b.GetRows(b.Weight("a"), b.Input("tokens", rows))
				b.Input("positions", rows)
				b.Input("logit_rows", logitRows)
				b.Output("x", x)
				b.Output("n", b.RMSNorm(x, b.Weight("norm"), c.group, eps))
			}, noAttention(randIDs(r, 30, c.rows), []int32{0}))[0]
			var mem emuMem
			out := mem.nanBuf(4 * c.rows * c.cols)
			xb := mem.buf(f32Bytes(want["x"]), false)
			wb := mem.buf(f32Bytes(weightF32(t, f, "norm")), false)
			l, err := rmsNormLaunch(out.dev, xb.dev, wb.dev, c.rows, c.cols, c.group, eps)
			e.launch(t, l, err, &mem)
			near(t, "rms_norm", want["n"], bytesF32(out.data), 1e-6)
		})
	}
}

func TestEmuRoPE(t *testing.T) {
	for _, c := range []struct {
		a       tensor.RoPEArgs
		factors bool // llama-3 frequency factors (rope_freqs)
	}{
		{tensor.RoPEArgs{HeadDim: 32, Dims: 32, Base: 1e6, Mode: tensor.RoPENeox}, false},
		{tensor.RoPEArgs{HeadDim: 32, Dims: 16, Base: 10000, Mode: tensor.RoPENorm}, false},
		{tensor.RoPEArgs{HeadDim: 64, Dims: 24, Base: 10000, Mode: tensor.RoPENeox}, false},
		{tensor.RoPEArgs{HeadDim: 128, Dims: 128, Base: 500000, Mode: tensor.RoPENorm}, false},
		{tensor.RoPEArgs{HeadDim: 64, Dims: 64, Base: 500000, Mode: tensor.RoPENorm}, true},
		{tensor.RoPEArgs{HeadDim: 64, Dims: 32, Base: 1e6, Mode: tensor.RoPENeox}, true}, // partial, with factors
	} {
		a := c.a
		mode := map[tensor.RoPEMode]string{tensor.RoPENorm: "norm", tensor.RoPENeox: "neox"}[a.Mode]
		name := fmt.Sprintf("%s head %d dims %d", mode, a.HeadDim, a.Dims)
		if c.factors {
			name += " with frequency factors"
		}
		parityCase(t, name, func(t *testing.T, e *emulator) {
			const rows = 9
			cols := 4 * a.HeadDim
			r := rand.New(rand.NewPCG(4, uint64(a.HeadDim+a.Dims)))
			ws := []*weights.Tensor{randTensor(r, "a", tensor.F32, 30, cols)}
			factors := make([]float32, a.Dims/2)
			for i := range factors {
				factors[i] = 1 + float32(i%7)*1.5 // llama-3 scales low frequencies by up to 8
			}
			ws = append(ws, &weights.Tensor{Name: "rope_freqs", DType: tensor.F32, Shape: []int{len(factors)}, Data: f32Bytes(factors)})
			f := memFile(t, ws...)
			batch := noAttention(randIDs(r, 30, rows), []int32{0})
			for i := range batch.Positions {
				batch.Positions[i] = int32(r.IntN(40000)) // large angles
			}
			want := cpuRun(t, f, exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 1 << 16, Blocks: 1}, func(b *tensor.Builder, rows, logitRows int) {
				x := b.GetRows(b.Weight("a"), b.Input("tokens", rows))
				b.Input("logit_rows", logitRows)
				b.Output("x", x)
				if c.factors {
					b.Output("r", b.RoPEFactors(x, b.Input("positions", rows), b.Weight("rope_freqs"), a))
				} else {
					b.Output("r", b.RoPE(x, b.Input("positions", rows), a))
				}
			}, batch)[0]
			var mem emuMem
			out := mem.nanBuf(4 * rows * cols)
			xb := mem.buf(f32Bytes(want["x"]), false)
			pb := mem.buf(i32Bytes(batch.Positions), false)
			fb := mem.buf(f32Bytes(factors), false)
			var fp devPtr
			if c.factors {
				fp = fb.dev
			}
			l, err := ropeLaunch(out.dev, xb.dev, pb.dev, fp, rows, cols, a)
			e.launch(t, l, err, &mem)
			near(t, "rope", want["r"], bytesF32(out.data), 1e-5)
			// Broken variant: the factors left out (or added) must fail.
			broken := fb.dev
			if c.factors {
				broken = 0
			}
			l, err = ropeLaunch(out.dev, xb.dev, pb.dev, broken, rows, cols, a)
			e.launch(t, l, err, &mem)
			mustDiffer(t, "rope with the factors toggled", want["r"], bytesF32(out.data), 1e-5)
		})
	}
}

func TestEmuElementwise(t *testing.T) {
	for _, c := range []struct {
		op         string
		rows, cols int
	}{
		{"add", 11, 128},
		{"add", 2049, 1024}, // past 8192 blocks of 256: the grid-stride loop
		{"swiglu", 11, 128},
		{"swiglu", 3, 1000},
	} {
		parityCase(t, fmt.Sprintf("%s %dx%d", c.op, c.rows, c.cols), func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(5, uint64(c.rows)))
			f := memFile(t, randTensor(r, "a", tensor.F32, c.rows, c.cols), randTensor(r, "b", tensor.F32, c.rows, c.cols))
			want := cpuRun(t, f, smallKV, func(b *tensor.Builder, rows, logitRows int) {
				tok := b.Input("tokens", rows)
				b.Input("positions", rows)
				b.Input("logit_rows", logitRows)
				x, y := b.GetRows(b.Weight("a"), tok), b.GetRows(b.Weight("b"), tok)
				b.Output("x", x)
				b.Output("y", y)
				if c.op == "add" {
					b.Output("z", b.Add(x, y))
				} else {
					b.Output("z", b.SwiGLU(x, y))
				}
			}, noAttention(count(0, c.rows), []int32{0}))[0]
			n := c.rows * c.cols
			var mem emuMem
			out := mem.nanBuf(4 * n)
			xb, yb := mem.buf(f32Bytes(want["x"]), false), mem.buf(f32Bytes(want["y"]), false)
			var l launchSpec
			var err error
			tol := 0.0
			if c.op == "add" {
				l, err = addLaunch(out.dev, xb.dev, yb.dev, n)
			} else {
				l, err = swigluLaunch(out.dev, xb.dev, yb.dev, n)
				tol = 1e-6
			}
			e.launch(t, l, err, &mem)
			near(t, c.op, want["z"], bytesF32(out.data), tol)
		})
	}
}

func TestEmuSelectRows(t *testing.T) {
	parityCase(t, "logit rows and a negative index", func(t *testing.T, e *emulator) {
		const rows, cols = 11, 200
		r := rand.New(rand.NewPCG(6, 6))
		f := memFile(t, randTensor(r, "a", tensor.F32, 30, cols))
		sel := []int32{10, 3, 0, 3}
		want := cpuRun(t, f, smallKV, func(b *tensor.Builder, rows, logitRows int) {
			x := b.GetRows(b.Weight("a"), b.Input("tokens", rows))
			b.Input("positions", rows)
			b.Output("x", x)
			b.Output("s", b.SelectRows(x, b.Input("logit_rows", logitRows)))
		}, noAttention(randIDs(r, 30, rows), sel))[0]
		sel = append(sel, -1) // zeros (the kernel's contract)
		var mem emuMem
		out := mem.nanBuf(4 * len(sel) * cols)
		xb := mem.buf(f32Bytes(want["x"]), false)
		sb := mem.buf(i32Bytes(sel), false)
		l, err := selectRowsLaunch(out.dev, xb.dev, sb.dev, len(sel), cols)
		e.launch(t, l, err, &mem)
		near(t, "select_rows", append(want["s"], make([]float32, cols)...), bytesF32(out.data), 0)
	})
}

// kvRows returns rows*kvDim values with the special cases of page.Codec in
// some groups: zeros, a NaN, an Inf, tiny values and values near the float
// maximum.
func kvRows(r *rand.Rand, rows, kvDim int) []float32 {
	x := make([]float32, rows*kvDim)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for row := range rows {
		v := x[row*kvDim : (row+1)*kvDim]
		switch row % 6 {
		case 1:
			clear(v[:min(64, kvDim)])
		case 2:
			v[kvDim/2] = float32(math.NaN())
		case 3:
			v[0] = float32(math.Inf(-1))
		case 4:
			for i := range v {
				v[i] *= 1e-40
			}
		case 5:
			for i := range v {
				v[i] = math.MaxFloat32 * float32(math.Tanh(float64(v[i])))
			}
		}
	}
	return x
}

func TestEmuKVWrite(t *testing.T) {
	for _, format := range page.FormatNames() {
		for _, kvDim := range []int{96, 320} {
			parityCase(t, fmt.Sprintf("%s/kvDim %d", format, kvDim), func(t *testing.T, e *emulator) {
				c, err := page.NewCodec(format, kvDim)
				if err != nil {
					t.Fatal(err)
				}
				const rows, slotCount = 13, 40
				r := rand.New(rand.NewPCG(8, uint64(kvDim)))
				kx, vx := kvRows(r, rows, kvDim), kvRows(r, rows, kvDim)
				slots := make([]int32, rows)
				for i, s := range r.Perm(slotCount)[:rows] {
					slots[i] = int32(s)
				}
				slots[4] = -1 // skipped
				rb := c.RowBytes()
				pattern := bytes.Repeat([]byte{0xa5}, slotCount*rb)
				var mem emuMem
				kc, vc := mem.buf(pattern, true), mem.buf(pattern, true)
				kb, vb := mem.buf(f32Bytes(kx), false), mem.buf(f32Bytes(vx), false)
				sb := mem.buf(i32Bytes(slots), false)
				l, err := kvWriteLaunch(kc.dev, vc.dev, kb.dev, vb.dev, sb.dev, format, rows, kvDim)
				e.launch(t, l, err, &mem)
				for name, pc := range map[string]struct {
					pages []byte
					src   []float32
				}{"k": {kc.data, kx}, "v": {vc.data, vx}} {
					want := bytes.Clone(pattern)
					for t, s := range slots {
						if s >= 0 {
							c.Encode(want[int(s)*rb:int(s+1)*rb], pc.src[t*kvDim:(t+1)*kvDim])
						}
					}
					for s := range slotCount {
						got, w := pc.pages[s*rb:(s+1)*rb], want[s*rb:(s+1)*rb]
						if !bytes.Equal(got, w) {
							i := 0
							for got[i] == w[i] {
								i++
							}
							t.Errorf("%s page slot %d: byte %d is %#x, page.Codec (or untouched) %#x", name, s, i, got[i], w[i])
							break
						}
					}
				}
			})
		}
	}
}

// attnCase is one attention configuration.
type attnCase struct {
	heads, kvHeads, headDim, blockTokens int
	prefill                              int  // tokens of the first sequence's prefill
	nonCausal                            bool // each row attends its sequence's rows of the step too
}

func TestEmuAttention(t *testing.T) {
	cases := []attnCase{
		{16, 2, 32, 16, 37, false}, // NI 1, 8 heads per block
		{12, 1, 64, 4, 37, false},  // NI 2, a group of 12 in 2 chunks of 6
		{8, 8, 128, 32, 37, false}, // NI 4, one head per KV head
		{7, 1, 256, 16, 37, false}, // NI 8, 7 heads in 4 chunks (2+2+2+1)
		{4, 2, 40, 16, 37, false},  // NI 2 with a partial lane group
		{6, 3, 30, 8, 37, false},   // head dim not a multiple of 4: scalar loads
		{8, 4, 32, 16, 300, false}, // 1200 blocks: 4 warps, several tiles per warp
		{8, 2, 32, 4, 37, true},    // non-causal (a block drafter's): rows attend their step's later rows
	}
	for _, format := range page.FormatNames() {
		for _, c := range cases {
			if c.prefill > 100 && format != page.F16.Name && format != page.Int8G64.Name {
				continue // the long context is slow under the sanitizers: two formats
			}
			p, err := planAttention(1, c.heads, c.kvHeads, c.headDim)
			if err != nil {
				t.Fatal(err)
			}
			fname := format
			if fname == "" {
				fname = "f32"
			}
			name := fmt.Sprintf("%s/h%d-kv%d-d%d-b%d-ctx%d (NI %d)", fname, c.heads, c.kvHeads, c.headDim, c.blockTokens, c.prefill, p.ni)
			if c.nonCausal {
				name += " non-causal"
			}
			parityCase(t, name, func(t *testing.T, e *emulator) { emuAttention(t, e, format, c) })
		}
	}
}

// padBucket is the emulated steps' bucket of rows rows: a power of two
// with at least one pad row.
func padBucket(rows int) int {
	b := 1
	for b < rows+1 {
		b *= 2
	}
	return b
}

// emuAttention runs a prefill of each of two sequences, three decode steps
// of both and a 3-row verify step of the second through the CPU backend
// and through attn_<format>_<NI> on pages page.Codec encodes from the same K
// and V rows, the step buffer packed as the backend packs it (stepPacker)
// at a bucket shape with pad rows.
func emuAttention(t *testing.T, e *emulator, format string, c attnCase) {
	const vocab = 64
	r := rand.New(rand.NewPCG(9, uint64(c.headDim*100+c.heads)))
	kvDim := c.kvHeads * c.headDim
	qd := c.heads * c.headDim
	f := memFile(t, randTensor(r, "q", tensor.F32, vocab, qd), randTensor(r, "k", tensor.F32, vocab, kvDim), randTensor(r, "v", tensor.F32, vocab, kvDim))
	blocks := ceilDiv(c.prefill+8, c.blockTokens) + ceilDiv(16, c.blockTokens) + 4
	tables := [][]int32{nil, nil}
	perm := r.Perm(blocks)
	n0 := ceilDiv(c.prefill+4, c.blockTokens)
	for _, b := range perm[:n0] {
		tables[0] = append(tables[0], int32(b))
	}
	for _, b := range perm[n0:] {
		tables[1] = append(tables[1], int32(b))
	}
	steps := []*exec.Batch{
		seqBatch(randIDs(r, vocab, c.prefill), count(0, c.prefill), make([]int32, c.prefill), tables, []int32{int32(c.prefill - 1)}),
		seqBatch(randIDs(r, vocab, 5), count(0, 5), fill(1, 5), tables, []int32{4}),
	}
	for s := range 3 {
		steps = append(steps, seqBatch(randIDs(r, vocab, 2), []int32{int32(c.prefill + s), int32(5 + s)}, []int32{0, 1}, tables, []int32{0, 1}))
	}
	steps = append(steps, seqBatch(randIDs(r, vocab, 3), count(8, 3), fill(1, 3), tables, []int32{0, 1, 2}))
	a := tensor.AttentionArgs{Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.headDim, Scale: float32(1 / math.Sqrt(float64(c.headDim))),
		NonCausal: c.nonCausal}
	l := exec.KVLayout{Layers: 1, KVDim: kvDim, BlockTokens: c.blockTokens, Blocks: blocks, DType: format}
	outs := cpuRun(t, f, l, func(b *tensor.Builder, rows, logitRows int) {
		tok := b.Input("tokens", rows)
		b.Input("positions", rows)
		b.Input("logit_rows", logitRows)
		q, k, v := b.GetRows(b.Weight("q"), tok), b.GetRows(b.Weight("k"), tok), b.GetRows(b.Weight("v"), tok)
		b.Output("o", b.Attention(q, k, v, a))
		b.Output("q", q)
		b.Output("k", k)
		b.Output("v", v)
	}, steps...)

	codec, err := page.NewCodec(format, kvDim)
	if err != nil {
		t.Fatal(err)
	}
	rb := codec.RowBytes()
	area := (blocks + 1) * c.blockTokens * rb // the pad block after the engine's
	var mem emuMem
	kc, vc := mem.buf(make([]byte, area), false), mem.buf(make([]byte, area), false)
	var packer stepPacker
	for i, s := range steps {
		rows := len(s.Tokens)
		bucket := padBucket(rows)
		sl := newStepLayout(bucket, len(s.LogitRows), blocks)
		words := make([]int32, sl.Words)
		if err := packer.pack(words, sl, s, c.blockTokens, vocab); err != nil {
			t.Fatal(err)
		}
		// This step's K and V rows, as kv_write stores them (its own parity
		// case checks those bytes); pad rows write zeros to the pad block.
		zero := make([]float32, kvDim)
		for row := range bucket {
			slot := int(words[sl.Slots+row])
			kr, vr := zero, zero
			if row < rows {
				kr, vr = outs[i]["k"][row*kvDim:(row+1)*kvDim], outs[i]["v"][row*kvDim:(row+1)*kvDim]
			}
			codec.Encode(kc.data[slot*rb:(slot+1)*rb], kr)
			codec.Encode(vc.data[slot*rb:(slot+1)*rb], vr)
		}
		q := append(slices.Clone(outs[i]["q"]), make([]float32, (bucket-rows)*qd)...)
		step := mem.buf(i32Bytes(words), false)
		qb := mem.buf(f32Bytes(q), false)
		out := mem.nanBuf(4 * bucket * qd)
		attends := sl.Positions
		if c.nonCausal {
			attends = sl.Reach
		}
		ls, err := attentionLaunch(out.dev, qb.dev, kc.dev, vc.dev, step.at(4*attends), step.at(4*sl.RowTables), step.at(4*sl.Tables),
			format, bucket, a, c.blockTokens, kvDim)
		e.launch(t, ls, err, &mem)
		got := bytesF32(out.data)
		near(t, fmt.Sprintf("step %d (%d rows in a bucket of %d)", i, rows, bucket), outs[i]["o"], got[:rows*qd], 2e-5)
		for _, v := range got[rows*qd:] {
			if math.IsNaN(float64(v)) {
				t.Errorf("step %d: a pad row's output was not written", i)
				break
			}
		}
		mem.bufs = mem.bufs[:2] // keep the pages
	}
}

// TestEmuMatMulQuantGolden reproduces ../shared/golden/matmul-quant.json
// (ggml's y = W @ x for real quantized tensors of the kq models) on the
// emulator, every entry (each type must have kernels): quantize_q8 (or
// quantize_q8k) then the GEMV (both columns as 2 tokens) and the GEMM (the
// columns repeated to 10 tokens), within 1e-5 of max|y| as the CPU
// backend's golden test.
func TestEmuMatMulQuantGolden(t *testing.T) {
	data, err := os.ReadFile("../../shared/golden/matmul-quant.json")
	if err != nil {
		t.Skipf("golden not found: %v", err)
	}
	var g struct {
		Results []struct {
			Model, Tensor, Type string
			Ne                  []int
			X, Y                [][]float64
		}
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range g.Results {
		dt := slices.IndexFunc(matmulDTypes[:], func(d tensor.DType) bool { return d.String() == c.Type })
		if dt < 0 {
			t.Errorf("%s %s: no matmul kernels for type %s", c.Model, c.Tensor, c.Type)
			continue
		}
		ran++
		for _, rows := range []int{2, 10} {
			parityCase(t, fmt.Sprintf("%s/%s K=%d %d tokens", c.Type, c.Tensor, c.Ne[0], rows), func(t *testing.T, e *emulator) {
				f, err := weights.Open("../../shared/models/" + c.Model)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				w, err := f.Tensor(c.Tensor)
				if err != nil {
					t.Fatal(err)
				}
				K, N := c.Ne[0], c.Ne[1]
				if w.DType != matmulDTypes[dt] || w.RowLen() != K || w.Rows() != N {
					t.Fatalf("tensor is %v %v, golden says %s %v", w.DType, w.Shape, c.Type, c.Ne)
				}
				var x, want []float32
				for i := range rows {
					for _, v := range c.X[i%2] {
						x = append(x, float32(v))
					}
					for _, v := range c.Y[i%2] {
						want = append(want, float32(v))
					}
				}
				var mem emuMem
				out := mem.nanBuf(4 * rows * N)
				xb, wb := mem.buf(f32Bytes(x), false), mem.buf(w.Data, false)
				q := quantizeAct(t, e, &mem, w.DType, xb.dev, rows, K)
				l, err := matmulLaunch(out.dev, xb.dev, q.dev, wb.dev, w.DType, rows, K, N)
				e.launch(t, l, err, &mem)
				near(t, "y", want, bytesF32(out.data), 1e-5)
			})
		}
	}
	if ran == 0 {
		t.Error("matmul-quant.json has no entries")
	}
}

// TestEmuZZCoversEveryKernel runs after the parity tests (tests run in
// source order, and this file's parity tests are all above): every kernel of
// ninfer.ptx must be in the emulator's table with the PTX's parameter types,
// and must have run in some parity case.
func TestEmuZZCoversEveryKernel(t *testing.T) {
	parityCase(t, "every kernel has a parity case", func(t *testing.T, e *emulator) {
		var missing, untested []string
		for name, p := range ptxEntries(t) {
			sig, ok := e.sigs[name]
			if !ok {
				missing = append(missing, name)
				continue
			}
			var kinds []string
			for i := range sig {
				kinds = append(kinds, ptxParamType(sig[i]))
			}
			if !slices.Equal(kinds, p.params) {
				t.Errorf("%s: parameters %v in ninfer.ptx, %v in the emulated kernel", name, p.params, kinds)
			}
			e.mu.Lock()
			n := e.launched[name]
			e.mu.Unlock()
			if n == 0 {
				untested = append(untested, name)
			}
		}
		sort.Strings(missing)
		sort.Strings(untested)
		if len(missing) > 0 {
			t.Errorf("kernels of ninfer.ptx missing from cuda/emu/kernels.cc: %s", strings.Join(missing, " "))
		}
		if len(untested) > 0 {
			t.Errorf("kernels no parity case launched (run all of TestEmu): %s", strings.Join(untested, " "))
		}
	})
}
