package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// randWeight returns an [n, k] weight of dtype dt with random contents:
// float rows of normal values, quantized rows of random quants (the full
// int8 range for Q8_0, -128 included) and random fp16 scales.
func randWeight(r *rand.Rand, dt tensor.DType, n, k int) *weights.Tensor {
	rb, err := dt.RowBytes(k)
	if err != nil {
		panic(err)
	}
	data := make([]byte, n*rb)
	scale := func() uint16 { return tensor.F32ToF16(float32(math.Ldexp(0.5+r.Float64(), -r.IntN(12)))) }
	for row := 0; row < n; row++ {
		b := data[row*rb : (row+1)*rb]
		switch dt {
		case tensor.F32:
			for i := 0; i < k; i++ {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(r.NormFloat64())))
			}
		case tensor.F16:
			for i := 0; i < k; i++ {
				binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToF16(float32(r.NormFloat64())))
			}
		case tensor.BF16:
			for i := 0; i < k; i++ {
				binary.LittleEndian.PutUint16(b[2*i:], tensor.F32ToBF16(float32(r.NormFloat64())))
			}
		case tensor.Q8_0:
			for blk := 0; blk < k/32; blk++ {
				binary.LittleEndian.PutUint16(b[blk*34:], scale())
				for i := 0; i < 32; i++ {
					b[blk*34+2+i] = byte(r.IntN(256))
				}
			}
		case tensor.Q4_0:
			for blk := 0; blk < k/32; blk++ {
				binary.LittleEndian.PutUint16(b[blk*18:], scale())
				for i := 0; i < 16; i++ {
					b[blk*18+2+i] = byte(r.IntN(256))
				}
			}
		default:
			// Random bits everywhere, then random fp16 scales (and mins)
			// where the format keeps them.
			bb := dt.BlockBytes()
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			for blk := 0; blk < len(b)/bb; blk++ {
				for _, off := range blockF16s[dt] {
					binary.LittleEndian.PutUint16(b[blk*bb+off:], scale())
				}
			}
		}
	}
	return &weights.Tensor{Name: "w", DType: dt, Shape: []int{k, n}, Data: data}
}

// blockF16s lists the offsets of the fp16 fields in a block of each
// kindBlock dtype.
var blockF16s = map[tensor.DType][]int{
	tensor.Q4_1: {0, 2}, tensor.Q5_0: {0}, tensor.Q5_1: {0, 2}, tensor.IQ4_NL: {0},
	tensor.Q2_K: {80, 82}, tensor.Q3_K: {108}, tensor.Q4_K: {0, 2}, tensor.Q5_K: {0, 2},
	tensor.Q6_K: {208}, tensor.IQ4_XS: {0},
}

// randActivations returns T rows of k values with a spread of magnitudes
// per row and the odd exact zero, so block scales vary.
func randActivations(r *rand.Rand, T, k int) []float32 {
	x := make([]float32, T*k)
	for i := range x {
		switch r.IntN(50) {
		case 0:
			x[i] = 0
		default:
			x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(8)-4))
		}
	}
	return x
}

// runMatMul runs one matmul op through a program with the given threads and
// kernels (simd: the running level's fast path, where the dtype has one)
// and returns its output [T, N].
func runMatMul(w *weights.Tensor, x []float32, T, threads int, simd bool) []float32 {
	b := &Backend{pool: newPool(threads)}
	defer b.pool.close()
	K, N := w.Shape[0], w.Rows()
	xt := tensor.Tensor{ID: 0, Shape: [2]int{T, K}, DType: tensor.F32}
	wt := tensor.Tensor{ID: 1, Shape: [2]int{N, K}, DType: w.DType}
	op := tensor.Op{Kind: tensor.OpMatMul, Args: []tensor.Tensor{xt, wt}, Out: tensor.Tensor{ID: 2, Shape: [2]int{T, N}, DType: tensor.F32}}
	p := &program{b: b, f32: [][]float32{x, nil, make([]float32, T*N)}, w: []*weights.Tensor{nil, w, nil}}
	if simd && fastMatmul(w.DType) {
		p.matmulFast(p.f32[2], op)
	} else {
		p.matmulRef(p.f32[2], op)
	}
	return p.f32[2]
}

// testLevels returns the kernel levels this CPU can run, best first, down
// to the reference.
func testLevels() []kernelLevel {
	var ls []kernelLevel
	for lv := chooseLevel(""); lv >= levelRef; lv-- {
		ls = append(ls, lv)
	}
	return ls
}

// setLevel makes lv the running kernel level and returns the function that
// restores the previous one.
func setLevel(lv kernelLevel) (restore func()) {
	l, u := level, useSIMD
	level, useSIMD = lv, lv == levelAVX512
	return func() { level, useSIMD = l, u }
}

// requireSIMD skips tests of the fast matmul kernels at the reference
// level (NINFER_CPU_KERNELS=ref, or a CPU without AVX2).
func requireSIMD(t *testing.T) {
	if level == levelRef {
		t.Skip("reference kernels: the fast kernels are not used on this CPU")
	}
}

// TestBlockMatMulBitExact checks that the fast path for every kindBlock
// dtype (its dot4 kernel where it has one, the reference dot otherwise, on
// workers) gives bit for bit the reference results, for every thread
// count and batch size, including row counts that leave partial quads.
func TestBlockMatMulBitExact(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(9, 10))
	for dt := range blockF16s {
		if len(blockF16s[dt]) == 0 || kernelOf(dt).kind != kindBlock {
			t.Fatalf("%v: not a kindBlock dtype", dt)
		}
		for _, k := range []int{256, 512, 768} {
			for _, n := range []int{1, 4, 7, 13} {
				w := randWeight(r, dt, n, k)
				for _, T := range []int{1, 2, 5, 8, 37, 70} {
					x := randActivations(r, T, k)
					want := runMatMul(w, x, T, 1, false)
					for _, threads := range []int{1, 3} {
						got := runMatMul(w, x, T, threads, true)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v k=%d n=%d T=%d threads=%d: out[%d] = %g (%#x), reference %g (%#x)",
									dt, k, n, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}

// TestQuantMatMulTokenAlone checks that every quantized dtype computes each
// token of a batch bit for bit as that token alone, at every kernel level:
// a row's result does not depend on the rows sharing its step, nor on
// where a prompt is cut into chunks.
func TestQuantMatMulTokenAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	dts := []tensor.DType{tensor.Q8_0, tensor.Q4_0}
	for dt := range blockF16s {
		dts = append(dts, dt)
	}
	const k, n = 512, 13
	for _, lv := range testLevels() {
		defer setLevel(lv)()
		for _, dt := range dts {
			w := randWeight(r, dt, n, k)
			for _, T := range []int{2, 5, 8, 9, 37} {
				x := randActivations(r, T, k)
				got := runMatMul(w, x, T, 2, lv != levelRef)
				for tok := range T {
					alone := runMatMul(w, x[tok*k:(tok+1)*k], 1, 2, lv != levelRef)
					for j := range alone {
						if math.Float32bits(alone[j]) != math.Float32bits(got[tok*n+j]) {
							t.Fatalf("%v %v T=%d: token %d alone: out[%d] = %g, in the batch %g", lv, dt, T, tok, j, alone[j], got[tok*n+j])
						}
					}
				}
			}
		}
	}
}

// TestBlock32MatMulBitExact is TestBlockMatMulBitExact for the dtypes of
// 32-element blocks at K of an odd number of blocks, which leaves the fast
// kernels' last block outside their two-block steps.
func TestBlock32MatMulBitExact(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []tensor.DType{tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.IQ4_NL} {
		for _, k := range []int{32, 96, 288} {
			for _, n := range []int{1, 4, 9} {
				w := randWeight(r, dt, n, k)
				for _, T := range []int{1, 3} {
					x := randActivations(r, T, k)
					want := runMatMul(w, x, T, 1, false)
					got := runMatMul(w, x, T, 2, true)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v k=%d n=%d T=%d: out[%d] = %g (%#x), reference %g (%#x)",
								dt, k, n, T, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		}
	}
}

// TestQuantMatMulBitExact checks that the fast Q8_0 and Q4_0 kernels give
// bit for bit the reference dotQ8/dotQ4 results, for every thread count and
// batch size, including row counts that leave partial quads.
func TestQuantMatMulBitExact(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, k := range []int{32, 64, 96, 1024} {
			for _, n := range []int{1, 3, 4, 7, 13, 64} {
				w := randWeight(r, dt, n, k)
				for _, T := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 14, 15, 16, 17} {
					x := randActivations(r, T, k)
					want := runMatMul(w, x, T, 1, false)
					for _, threads := range []int{1, 2, 3} {
						got := runMatMul(w, x, T, threads, true)
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v k=%d n=%d T=%d threads=%d: out[%d] = %g (%#x), reference %g (%#x)",
									dt, k, n, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}

// TestQuantMatMulRanges runs a Q8_0 matmul task over row ranges that start
// and end off the quads the pair kernels work on, as a fused group hands a
// matmul whose predecessor's rows are not a multiple of 4, and checks each
// range against the reference.
func TestQuantMatMulRanges(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(13, 14))
	const T, K, N = 9, 96, 23
	w := randWeight(r, tensor.Q8_0, N, K)
	x := randActivations(r, T, K)
	want := runMatMul(w, x, T, 1, false)
	b := &Backend{pool: newPool(1)}
	defer b.pool.close()
	xt := tensor.Tensor{ID: 0, Shape: [2]int{T, K}, DType: tensor.F32}
	wt := tensor.Tensor{ID: 1, Shape: [2]int{N, K}, DType: w.DType}
	op := tensor.Op{Kind: tensor.OpMatMul, Args: []tensor.Tensor{xt, wt}, Out: tensor.Tensor{ID: 2, Shape: [2]int{T, N}, DType: tensor.F32}}
	p := &program{b: b, f32: [][]float32{x, nil, make([]float32, T*N)}, w: []*weights.Tensor{nil, w, nil}}
	for _, rg := range [][2]int{{0, 23}, {1, 23}, {2, 9}, {3, 4}, {5, 22}, {7, 15}} {
		out := make([]float32, T*N)
		task := &matmulTask{}
		p.setupMatmul(task, out, op)
		task.run(0, rg[0], rg[1])
		for tt := range T {
			for n := rg[0]; n < rg[1]; n++ {
				if got := out[tt*N+n]; math.Float32bits(got) != math.Float32bits(want[tt*N+n]) {
					t.Fatalf("rows [%d,%d): out[%d,%d] = %g, reference %g", rg[0], rg[1], tt, n, got, want[tt*N+n])
				}
			}
		}
	}
}

// TestQuantMatMulBitExactLarge is TestQuantMatMulBitExact on the shapes of
// a 0.6B model's projections, with a prefill-sized batch.
func TestQuantMatMulBitExactLarge(t *testing.T) {
	requireSIMD(t)
	if testing.Short() {
		t.Skip("short")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		w := randWeight(r, dt, 130, 3072)
		x := randActivations(r, 70, 3072)
		want := runMatMul(w, x, 70, 1, false)
		got := runMatMul(w, x, 70, 2, true)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%v: out[%d] = %g, reference %g", dt, i, got[i], want[i])
			}
		}
	}
}

// TestFloatMatMul checks the fast F32, F16 and BF16 kernels against the
// reference within a tolerance, and checks that each output is exactly the
// same whatever the thread count and whichever batch the token is in.
func TestFloatMatMul(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, k := range []int{1, 15, 16, 17, 64, 172, 1024} {
			for _, n := range []int{1, 5, 8, 67} {
				t.Run(fmt.Sprintf("%v k=%d n=%d", dt, k, n), func(t *testing.T) {
					w := randWeight(r, dt, n, k)
					const T = 11
					x := randActivations(r, T, k)
					want := runMatMul(w, x, T, 1, false)
					got := runMatMul(w, x, T, 2, true)
					var maxDiff float64
					for i := range want {
						d := math.Abs(float64(got[i]) - float64(want[i]))
						maxDiff = max(maxDiff, d)
						if d > 1e-4*(1+math.Sqrt(float64(k))) {
							t.Fatalf("out[%d] = %g, reference %g (diff %g)", i, got[i], want[i], d)
						}
					}
					for _, threads := range []int{1, 3} {
						again := runMatMul(w, x, T, threads, true)
						for i := range got {
							if math.Float32bits(again[i]) != math.Float32bits(got[i]) {
								t.Fatalf("threads=%d: out[%d] = %g, with 2 threads %g", threads, i, again[i], got[i])
							}
						}
					}
					for tok := 0; tok < T; tok++ {
						alone := runMatMul(w, x[tok*k:(tok+1)*k], 1, 2, true)
						for j := range alone {
							if math.Float32bits(alone[j]) != math.Float32bits(got[tok*n+j]) {
								t.Fatalf("token %d alone: out[%d] = %g, in the batch %g", tok, j, alone[j], got[tok*n+j])
							}
						}
					}
					t.Logf("max diff vs reference %g", maxDiff)
				})
			}
		}
	}
}

// TestFMA32 checks fma32 against a*b+c computed exactly and rounded once.
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	rnd := func() float32 {
		return float32(math.Ldexp(r.NormFloat64(), r.IntN(80)-40))
	}
	// The float64 sum of this case rounds onto a float32 midpoint: rounding
	// it again would round up; the exact value is just below the midpoint.
	ma, mb, mc := float32(math.Ldexp(1+0x1p-23, -12)), float32(math.Ldexp(1-0x1p-23, -12)), float32(1+0x1p-23)
	for i := 0; i < 200000; i++ {
		a, b, c := rnd(), rnd(), rnd()
		switch {
		case i == 0:
			a, b, c = ma, mb, mc
		case i%3 == 0: // near-cancellation
			c = -float32(float64(a) * float64(b))
		}
		exact := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		exact.Mul(exact, new(big.Float).SetFloat64(float64(b)))
		exact.Add(exact, new(big.Float).SetFloat64(float64(c)))
		want, _ := exact.Float32()
		if got := fma32(a, b, c); got != want {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
}

// TestElementwiseThreadInvariant checks that add, swiglu and rms_norm give
// the same bits on one thread and split across three.
func TestElementwiseThreadInvariant(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const T, d = 40, 1024
	x, y, w := randActivations(r, T, d), randActivations(r, T, d), randActivations(r, 1, d)
	run := func(threads int, kind tensor.OpKind) []float32 {
		b := &Backend{pool: newPool(threads)}
		defer b.pool.close()
		xt := tensor.Tensor{ID: 0, Shape: [2]int{T, d}}
		yt := tensor.Tensor{ID: 1, Shape: [2]int{T, d}}
		op := tensor.Op{Kind: kind, Args: []tensor.Tensor{xt, yt}, Group: d, Eps: 1e-6, Out: tensor.Tensor{ID: 2, Shape: [2]int{T, d}}}
		p := &program{b: b, f32: [][]float32{x, y, make([]float32, T*d)}, w: make([]*weights.Tensor, 3)}
		if kind == tensor.OpRMSNorm {
			p.f32[1] = w // Prepare stores norm weights as float32 here
		}
		p.elementwise(p.f32[2], op)
		return p.f32[2]
	}
	for _, kind := range []tensor.OpKind{tensor.OpAdd, tensor.OpSwiGLU, tensor.OpRMSNorm} {
		one, three := run(1, kind), run(3, kind)
		for i := range one {
			if math.Float32bits(one[i]) != math.Float32bits(three[i]) {
				t.Fatalf("%v: out[%d] = %g on 1 thread, %g on 3", kind, i, one[i], three[i])
			}
		}
	}
}

// TestFusedMatMuls checks that matmuls sharing their activations are
// grouped and that the group computes each output as the matmul alone does.
func TestFusedMatMuls(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0} {
		if !fastMatmul(dt) {
			continue
		}
		for _, T := range []int{1, 5} {
			const K = 64
			ns := []int{36, 8, 21}
			x := randActivations(r, T, K)
			xt := tensor.Tensor{ID: 0, Shape: [2]int{T, K}, DType: tensor.F32}
			g := &tensor.Graph{Ops: []tensor.Op{{Kind: tensor.OpInput, Out: xt}}}
			ws := []*weights.Tensor{nil}
			for _, n := range ns {
				w := randWeight(r, dt, n, K)
				wt := tensor.Tensor{ID: len(g.Ops), Shape: [2]int{n, K}, DType: dt}
				g.Ops = append(g.Ops, tensor.Op{Kind: tensor.OpWeight, Out: wt})
				ws = append(ws, w)
				g.Ops = append(g.Ops, tensor.Op{Kind: tensor.OpMatMul, Args: []tensor.Tensor{xt, wt},
					Out: tensor.Tensor{ID: len(g.Ops), Shape: [2]int{T, n}, DType: tensor.F32}})
				ws = append(ws, nil)
			}
			fused := fuseMatmuls(g, ws)
			if fmt.Sprint(fused[2]) != "[2 4 6]" || fused[4] == nil || len(fused[4]) != 0 {
				t.Fatalf("fuseMatmuls = %v", fused)
			}
			b := &Backend{pool: newPool(2)}
			p := &program{b: b, g: g, f32: make([][]float32, len(g.Ops)), w: ws}
			p.f32[0] = x
			for _, i := range fused[2] {
				p.f32[i] = make([]float32, T*g.Ops[i].Out.Cols())
			}
			p.matmulFused(fused[2])
			for k, i := range fused[2] {
				want := runMatMul(ws[i-1], x, T, 1, true)
				for j := range want {
					if math.Float32bits(p.f32[i][j]) != math.Float32bits(want[j]) {
						t.Fatalf("%v T=%d matmul %d: [%d] = %v, want %v", dt, T, k, j, p.f32[i][j], want[j])
					}
				}
			}
			b.pool.close()
		}
	}
}

// TestMatMulTokenBlockTail checks a batch whose last token block holds a
// single token, which then takes the decode (four row streams) path while
// the other blocks take the tiled one: every output must equal the token's
// output computed alone, and for the quantized dtypes the reference bit for
// bit.
func TestMatMulTokenBlockTail(t *testing.T) {
	requireSIMD(t)
	if testing.Short() {
		t.Skip("short")
	}
	r := rand.New(rand.NewPCG(15, 16))
	const k, n = 1024, 70
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0} {
		t.Run(dt.String(), func(t *testing.T) {
			tb := tokenBlock(4 * k)
			if dt == tensor.Q8_0 || dt == tensor.Q4_0 {
				tb = tokenBlock(2 * k)
			}
			T := tb + 1
			w := randWeight(r, dt, n, k)
			x := randActivations(r, T, k)
			got := runMatMul(w, x, T, 2, true)
			for _, tok := range []int{0, T - 2, T - 1} {
				alone := runMatMul(w, x[tok*k:(tok+1)*k], 1, 3, true)
				for j := range alone {
					if math.Float32bits(alone[j]) != math.Float32bits(got[tok*n+j]) {
						t.Fatalf("token %d alone: out[%d] = %g, in the batch %g", tok, j, alone[j], got[tok*n+j])
					}
				}
			}
			if dt != tensor.Q8_0 && dt != tensor.Q4_0 {
				return
			}
			want := runMatMul(w, x, T, 1, false)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("out[%d] = %g, reference %g", i, got[i], want[i])
				}
			}
		})
	}
}

// q8PairLayoutRef is q8PairLayout spelled out: per pair p (tokens 2p and
// 2p+1) and block b, 192 bytes: both tokens' signed quants (32 each), their
// corrections -128*(sum of each lane of 4 quants) as int32 (8 lanes each),
// their scales over 8 lanes each.
func q8PairLayoutRef(dst []byte, qx []int8, qd []float32, p0, p1, K int) {
	nb := K / 32
	for p := p0; p < p1; p++ {
		for b := range nb {
			blk := dst[(p*nb+b)*q8PairBlock : (p*nb+b+1)*q8PairBlock]
			for h := range 2 {
				tok := 2*p + h
				xs := qx[tok*K+32*b : tok*K+32*b+32]
				d := math.Float32bits(qd[tok*nb+b])
				for l := range 8 {
					var sum int32
					for j := range 4 {
						v := xs[4*l+j] ^ -0x80
						blk[32*h+4*l+j] = byte(v)
						sum += int32(v)
					}
					binary.LittleEndian.PutUint32(blk[64+32*h+4*l:], uint32(-128*sum))
					binary.LittleEndian.PutUint32(blk[128+32*h+4*l:], d)
				}
			}
		}
	}
}

// TestQ8PairLayout checks the pair kernels' activation layout against its
// spelled-out definition, including extreme quants.
func TestQ8PairLayout(t *testing.T) {
	if !useSIMD {
		t.Skip("the pair kernels run at levelAVX512 only")
	}
	r := rand.New(rand.NewPCG(17, 18))
	const T, K = 7, 96
	qx := make([]int8, T*K)
	for i := range qx {
		qx[i] = int8(r.IntN(256) - 128)
	}
	qx[0], qx[1], qx[2], qx[3] = -128, -128, -128, -128 // x = 0 stored as 0x80... and its extremes
	qx[4], qx[5], qx[6], qx[7] = 127, 127, 127, 127
	qd := make([]float32, T*K/32)
	for i := range qd {
		qd[i] = r.Float32()
	}
	want := make([]byte, T/2*(K/32)*q8PairBlock)
	q8PairLayoutRef(want, qx, qd, 0, T/2, K)
	got := grow64(nil, len(want))
	q8PairLayout(got, qx, qd, 0, 2, K)
	q8PairLayout(got, qx, qd, 2, T/2*2, K)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	if uintptr(unsafe.Pointer(&got[0]))%64 != 0 {
		t.Errorf("grow64 result not 64-byte aligned")
	}
}
