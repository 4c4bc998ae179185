package cpu

import (
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// weightKernel is how the backend multiplies weights of one dtype. The
// activations' format is the dtype's tensor.DType.DotType.
type weightKernel struct {
	// kind selects the matmul path: kindFloat (F32, F16, BF16: matmulRef's
	// and runFloat's float kernels), kindQ8 (Q8_0, Q4_0: the Q8_0 kernels of
	// runQuant), or kindBlock (every other quantized type: dot and the fast
	// kernels' dot4 and friends).
	kind int
	// dot is the reference dot product of one weight row and one token of
	// activations in the dot type (kindBlock only).
	dot func(row []byte, x actRow) float32
	// avx512 and avx2 are the fast kernels of each level (fast).
	avx512, avx2 fastKernels
}

// fastKernels are a dtype's fast matmul kernels at one kernel level.
type fastKernels struct {
	// direct reports (kindFloat and kindQ8) that the kernels runFloat and
	// runQuant call exist at this level; without them matmuls of the dtype
	// take the reference path.
	direct bool
	// dot4, if not nil, is the kernel for 4 rows (w + i*wstride, in
	// bytes) and one token, writing out + i*ostride; bit for bit dot.
	dot4 func(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr)
	// dot2x2, if not nil, is the kernel for 2 rows and 2 tokens (a, b),
	// writing out + r*ostride + t*otok; bit for bit dot. Batches of two
	// tokens or more use it: each row's unpacking serves both tokens.
	dot2x2 func(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr)
	// dot1x4, if not nil, is the kernel for one row and tokens t..t+3 of
	// a, writing out + i*otok for token t+i; bit for bit dot. Batches of
	// four tokens or more use it, for their first T&^3 tokens: each row's
	// unpacking serves four.
	dot1x4 func(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr)
	// dot1x4n, if not nil, is dot1x4 for n groups of four tokens
	// t..t+4n-1 in one call, for kernels that take n; a set has dot1x4 or
	// dot1x4n, not both (quad runs either on one group).
	dot1x4n func(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr)
	// dot1x8n, if not nil, is dot1x4n for n groups of eight tokens
	// t..t+8n-1 (t a multiple of 8) read from the activations' groups of
	// four (actQuant.interleave4); runBlock prefers it for the tokens that
	// were interleaved.
	dot1x8n func(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr)
}

// hasQuad reports whether f has a 1x4 kernel (dot1x4 or dot1x4n).
func (f *fastKernels) hasQuad() bool { return f.dot1x4 != nil || f.dot1x4n != nil }

// quad runs f's 1x4 kernel on tokens t..t+3 of a (hasQuad).
func (f *fastKernels) quad(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	if f.dot1x4n != nil {
		f.dot1x4n(w, a, t, 1, out, otok)
		return
	}
	f.dot1x4(w, a, t, out, otok)
}

// noKernels is the kernel set of the reference level.
var noKernels fastKernels

// fast returns k's kernels at the running level.
func (k *weightKernel) fast() *fastKernels {
	switch level {
	case levelAVX512:
		return &k.avx512
	case levelAVX2:
		return &k.avx2
	}
	return &noKernels
}

// fastMatmul reports whether matmuls by weights of dtype dt take the fast
// path (matmulFast) at the running level: kindBlock dtypes always do above
// the reference level (runBlock falls back to the reference dot per row
// where a kernel is missing), the others where their direct kernels exist.
func fastMatmul(dt tensor.DType) bool {
	k := kernelOf(dt)
	if level == levelRef || k.kind == kindNone {
		return false
	}
	return k.kind == kindBlock || k.fast().direct
}

const (
	kindNone = iota
	kindFloat
	kindQ8
	kindBlock
)

// weightKernels is the table of the dtypes a matmul can take as weights.
var weightKernels = func() [tensor.NumDTypes]weightKernel {
	var t [tensor.NumDTypes]weightKernel
	direct := fastKernels{direct: true}
	t[tensor.F32] = weightKernel{kind: kindFloat, avx512: direct, avx2: direct}
	t[tensor.F16] = weightKernel{kind: kindFloat, avx512: direct, avx2: direct}
	t[tensor.BF16] = weightKernel{kind: kindFloat, avx512: direct, avx2: direct}
	t[tensor.Q8_0] = weightKernel{kind: kindQ8, avx512: direct, avx2: direct}
	t[tensor.Q4_0] = weightKernel{kind: kindQ8, avx512: direct, avx2: direct}
	t[tensor.Q4_1] = weightKernel{kind: kindBlock, dot: dotQ4_1,
		avx512: fastKernels{dot4: q4_1Dot4},
		avx2:   fastKernels{dot4: q4_1Dot4AVX2, dot2x2: q4_1Dot22AVX2}}
	t[tensor.Q5_0] = weightKernel{kind: kindBlock, dot: dotQ5_0,
		avx512: fastKernels{dot4: q5_0Dot4, dot2x2: q5_0Dot22},
		avx2:   fastKernels{dot4: q5_0Dot4AVX2, dot2x2: q5_0Dot22AVX2}}
	t[tensor.Q5_1] = weightKernel{kind: kindBlock, dot: dotQ5_1,
		avx512: fastKernels{dot4: q5_1Dot4},
		avx2:   fastKernels{dot4: q5_1Dot4AVX2, dot2x2: q5_1Dot22AVX2}}
	t[tensor.IQ4_NL] = weightKernel{kind: kindBlock, dot: dotIQ4NL,
		avx512: fastKernels{dot4: iq4NLDot4, dot2x2: iq4NLDot22},
		avx2:   fastKernels{dot4: iq4NLDot4AVX2, dot2x2: iq4NLDot22AVX2}}
	t[tensor.Q2_K] = weightKernel{kind: kindBlock, dot: dotQ2K,
		avx512: fastKernels{dot4: q2KDot4, dot1x4: q2KDot14},
		avx2:   fastKernels{dot4: q2KDot4AVX2, dot1x4: q2KDot14AVX2}}
	t[tensor.Q3_K] = weightKernel{kind: kindBlock, dot: dotQ3K,
		avx512: fastKernels{dot4: q3KDot4, dot1x4: q3KDot14},
		avx2:   fastKernels{dot4: q3KDot4AVX2, dot1x4: q3KDot14AVX2}}
	t[tensor.Q4_K] = weightKernel{kind: kindBlock, dot: dotQ4K,
		avx512: fastKernels{dot4: q4KDot4, dot1x4n: q4KDot14n, dot1x8n: q4KDot18n},
		avx2:   fastKernels{dot4: q4KDot4AVX2, dot1x4n: q4KDot14nAVX2}}
	t[tensor.Q5_K] = weightKernel{kind: kindBlock, dot: dotQ5K,
		avx512: fastKernels{dot4: q5KDot4AVX2, dot2x2: q5KDot22, dot1x4: q5KDot14AVX2}, // the AVX2 dot4 and dot1x4 are faster
		avx2:   fastKernels{dot4: q5KDot4AVX2, dot1x4: q5KDot14AVX2}}
	t[tensor.Q6_K] = weightKernel{kind: kindBlock, dot: dotQ6K,
		avx512: fastKernels{dot4: q6KDot4, dot2x2: q6KDot22, dot1x4n: q6KDot14n},
		avx2:   fastKernels{dot4: q6KDot4AVX2, dot1x4n: q6KDot14nAVX2}}
	t[tensor.IQ4_XS] = weightKernel{kind: kindBlock, dot: dotIQ4XS,
		avx512: fastKernels{dot4: iq4XSDot4, dot1x4n: iq4XSDot14n},
		avx2:   fastKernels{dot4: iq4XSDot4AVX2, dot1x4: iq4XSDot14AVX2}}
	for dt, k := range t {
		if k.kind != kindNone && tensor.DType(dt).DotType() == 0 {
			panic("cpu: weight kernel for a dtype without a dot type")
		}
		for _, f := range []fastKernels{k.avx512, k.avx2} {
			if f.dot1x4 != nil && f.dot1x4n != nil {
				panic("cpu: both dot1x4 and dot1x4n in one kernel set")
			}
			blockKernels := f.dot4 != nil || f.dot2x2 != nil || f.dot1x4 != nil || f.dot1x4n != nil
			if f.direct && k.kind != kindFloat && k.kind != kindQ8 || blockKernels && k.kind != kindBlock {
				panic("cpu: direct kernels of a kindBlock dtype, or block kernels of another kind")
			}
		}
	}
	return t
}()

// kernelOf returns the kernel table entry of dt (kind kindNone if the
// backend cannot multiply it).
func kernelOf(dt tensor.DType) *weightKernel {
	if int(dt) >= len(weightKernels) {
		return &weightKernels[0]
	}
	return &weightKernels[dt]
}

// blockPrepTask quantizes activation rows [lo, hi) into a (quantize) and
// interleaves their whole groups of four (interleave: ranges start at
// multiples of 4).
type blockPrepTask struct {
	a                    *actQuant
	x                    []float32
	quantize, interleave bool
}

func (t *blockPrepTask) run(_, lo, hi int) {
	if t.quantize {
		t.a.quantizeRows(t.x, lo, hi)
	}
	if t.interleave {
		t.a.interleave4(lo, hi)
	}
}

// prepareBlock quantizes x [T, K] into a on up to parts workers, unless
// fresh says a already holds it, and interleaves it where the kernels k
// read interleaved tokens and a lacks them.
func (p *program) prepareBlock(pre *blockPrepTask, a *actQuant, x []float32, dot tensor.DType, T, K, parts int, fresh bool, k *fastKernels) {
	quantize := !fresh
	if quantize {
		a.resize(dot, T, K)
	}
	interleave := k.dot1x8n != nil && T >= 8 && a.interleaved < T&^3
	if !quantize && !interleave {
		return
	}
	*pre = blockPrepTask{a: a, x: x, quantize: quantize, interleave: interleave}
	grain := 1
	if interleave {
		grain = 4
		a.x4 = grow(a.x4, T/4*(K/256)*q8KGroupBlock)
	}
	p.b.pool.run(T, grain, min(parts, T), pre)
	if interleave {
		a.interleaved = T &^ 3
	}
}

// runBlock computes output columns (weight rows) [lo, hi) of a matmul whose
// weights are a kindBlock dtype, against activations t.aq. With a 1x4
// kernel, each row takes quads of tokens, and with a 2x2 kernel pairs of
// rows take pairs of tokens, a block of tokens at a time so that the
// block's activations stay in cache across the rows; the rows and tokens
// left over, or all of them without one, go to blockRange.
func (t *matmulTask) runBlock(lo, hi int) {
	k := kernelOf(t.dt).fast()
	N, rb := t.N, t.rowBytes
	const tb = 32 // tokens per block: 32 rows of Q8_K activations are ~40 KB at K = 1024
	t0 := 0
	if k.hasQuad() && t.T >= 4 {
		T4 := t.T &^ 3
		for b0 := 0; b0 < T4; b0 += tb {
			b1 := min(b0+tb, T4)
			if k.dot1x8n != nil && t.aq.interleaved >= b1 {
				n8 := (b1 - b0) / 8
				for r := lo; r < hi; r++ {
					o := unsafe.Pointer(&t.out[b0*N+r])
					if n8 > 0 {
						k.dot1x8n(unsafe.Pointer(&t.w[r*rb]), t.aq, b0, n8, o, uintptr(4*N))
					}
					if b0+8*n8 < b1 {
						k.quad(unsafe.Pointer(&t.w[r*rb]), t.aq, b0+8*n8, unsafe.Pointer(&t.out[(b0+8*n8)*N+r]), uintptr(4*N))
					}
				}
				continue
			}
			if k.dot1x4n != nil {
				for r := lo; r < hi; r++ {
					k.dot1x4n(unsafe.Pointer(&t.w[r*rb]), t.aq, b0, (b1-b0)/4, unsafe.Pointer(&t.out[b0*N+r]), uintptr(4*N))
				}
				continue
			}
			for r := lo; r < hi; r++ {
				for tt := b0; tt < b1; tt += 4 {
					k.dot1x4(unsafe.Pointer(&t.w[r*rb]), t.aq, tt, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*N))
				}
			}
		}
		t0 = T4
	}
	if k.dot2x2 != nil && t.T-t0 >= 2 {
		T2 := t0 + (t.T-t0)&^1
		for b0 := t0; b0 < T2; b0 += tb {
			b1 := min(b0+tb, T2)
			r := lo
			for ; r+2 <= hi; r += 2 {
				for tt := b0; tt < b1; tt += 2 {
					k.dot2x2(unsafe.Pointer(&t.w[r*rb]), uintptr(rb), t.aq.row(tt), t.aq.row(tt+1),
						unsafe.Pointer(&t.out[tt*N+r]), 4, uintptr(4*N))
				}
			}
			if r < hi {
				t.blockRange(r, hi, b0, b1)
			}
		}
		t0 = T2
	}
	t.blockRange(lo, hi, t0, t.T)
}

// blockRange computes rows [lo, hi) for tokens [t0, t1). With a fast
// kernel, each call takes one row from each quarter of [lo, hi) (the four
// streams of gemvFloat); the rows left over, or all rows without one, use
// the reference dot.
func (t *matmulTask) blockRange(lo, hi, t0, t1 int) {
	N, rb := t.N, t.rowBytes
	k := kernelOf(t.dt)
	if f := k.fast(); f.dot4 != nil {
		q := (hi - lo) / 4
		for r := lo; r < lo+q; r++ {
			for tt := t0; tt < t1; tt++ {
				x := t.aq.row(tt)
				f.dot4(unsafe.Pointer(&t.w[r*rb]), uintptr(q*rb), x, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*q))
			}
		}
		var one [4]float32
		for r := lo + 4*q; r < hi; r++ {
			for tt := t0; tt < t1; tt++ {
				x := t.aq.row(tt)
				f.dot4(unsafe.Pointer(&t.w[r*rb]), 0, x, unsafe.Pointer(&one[0]), 4)
				t.out[tt*N+r] = one[0]
			}
		}
		return
	}
	for r := lo; r < hi; r++ {
		row := t.w[r*rb : (r+1)*rb]
		for tt := t0; tt < t1; tt++ {
			t.out[tt*N+r] = k.dot(row, t.aq.row(tt))
		}
	}
}

// q4KDot4 is the weightKernel.dot4 of Q4_K (q4KDot4x1).
func q4KDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q4KDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q4KDot14n is the weightKernel.dot1x4n of Q4_K (q4KDot1x4).
func q4KDot14n(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4n(q4KDot1x4, w, a, t, n, out, otok)
}

// q4KDot18n is the weightKernel.dot1x8n of Q4_K (q4KDot1x8).
func q4KDot18n(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	nb := a.K / 256
	_ = a.x4[((t+8*n)/4*nb)*q8KGroupBlock-1]
	q4KDot1x8(w, unsafe.Pointer(&a.x4[t/4*nb*q8KGroupBlock]), nb, out, otok, n)
}

// q6KDot14n is the weightKernel.dot1x4n of Q6_K (q6KDot1x4).
func q6KDot14n(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4n(q6KDot1x4, w, a, t, n, out, otok)
}

// kquantDot1x4 calls a 1x4 kernel of a Q8_K dot type on tokens t..t+3 of
// a, passing token t's quants, scales and sums and the strides between
// consecutive tokens' (in bytes).
func kquantDot1x4(kernel func(w, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr),
	w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	xq, xd, xb, nb := q8KTokens(a, t, 4)
	kernel(w, xq, uintptr(a.K), xd, uintptr(4*nb), xb, uintptr(2*a.K/16), nb, out, otok)
}

// kquantDot1x4n is kquantDot1x4 for a kernel that takes n groups of four
// tokens t..t+4n-1.
func kquantDot1x4n(kernel func(w, xq unsafe.Pointer, xqstride uintptr, xd unsafe.Pointer, xdstride uintptr, xb unsafe.Pointer, xbstride uintptr, nb int, out unsafe.Pointer, otok uintptr, n int),
	w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	xq, xd, xb, nb := q8KTokens(a, t, 4*n)
	kernel(w, xq, uintptr(a.K), xd, uintptr(4*nb), xb, uintptr(2*a.K/16), nb, out, otok, n)
}

// q8KTokens returns token t's quants, scales and sums in a (Q8_K
// activations) and its super-blocks per token, checking that tokens
// t..t+n-1 are there; consecutive tokens are K, 4*nb and 2*K/16 bytes
// apart.
func q8KTokens(a *actQuant, t, n int) (xq, xd, xb unsafe.Pointer, nb int) {
	K := a.K
	nb = K / 256
	_ = a.qs[(t+n)*K-1]
	return unsafe.Pointer(&a.qs[t*K]), unsafe.Pointer(&a.d[t*nb]), unsafe.Pointer(&a.bsums[t*K/16]), nb
}

// q6KDot22 is the weightKernel.dot2x2 of Q6_K (q6KDot2x2).
func q6KDot22(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q6KDot2x2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.bsums[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), unsafe.Pointer(&b.bsums[0]), len(a.d), out, ostride, otok)
}

// q5KDot22 is the weightKernel.dot2x2 of Q5_K (q5KDot2x2).
func q5KDot22(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q5KDot2x2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.bsums[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), unsafe.Pointer(&b.bsums[0]), len(a.d), out, ostride, otok)
}

// q6KDot4 is the weightKernel.dot4 of Q6_K (q6KDot4x1).
func q6KDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q6KDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q3KDot4 is the weightKernel.dot4 of Q3_K (q3KDot4x1).
func q3KDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q3KDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// q3KDot14 is the weightKernel.dot1x4 of Q3_K (q3KDot1x4).
func q3KDot14(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(q3KDot1x4, w, a, t, out, otok)
}

// iq4XSDot14 is the weightKernel.dot1x4 of IQ4_XS (iq4XSDot1x4).
func iq4XSDot14(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(iq4XSDot1x4, w, a, t, out, otok)
}

// iq4XSDot14n is the weightKernel.dot1x4n of IQ4_XS at levelAVX512:
// iq4XSDot1x8 on pairs of groups of four, iq4XSDot1x4 on an odd last one.
func iq4XSDot14n(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	xq, xd, _, nb := q8KTokens(a, t, 4*n)
	for ; n >= 2; n -= 2 {
		iq4XSDot1x8(w, xq, uintptr(a.K), xd, uintptr(4*nb), nb, out, otok)
		if n > 2 { // advancing past the last group would point past the activations and the output
			xq, xd, out = unsafe.Add(xq, 8*a.K), unsafe.Add(xd, 8*4*nb), unsafe.Add(out, 8*otok)
		}
	}
	if n == 1 {
		iq4XSDot1x4(w, xq, uintptr(a.K), xd, uintptr(4*nb), nil, 0, nb, out, otok)
	}
}

// iq4XSDot4 is the weightKernel.dot4 of IQ4_XS (iq4XSDot4x1).
func iq4XSDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	iq4XSDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// q2KDot4 is the weightKernel.dot4 of Q2_K (q2KDot4x1).
func q2KDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q2KDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q2KDot14 is the weightKernel.dot1x4 of Q2_K (q2KDot1x4).
func q2KDot14(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(q2KDot1x4, w, a, t, out, otok)
}

// q4_1Dot4 is the weightKernel.dot4 of Q4_1 (q4_1Dot4x1).
func q4_1Dot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q4_1Dot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.s[0]), len(x.d), out, ostride)
}

// q5_0Dot22 is the weightKernel.dot2x2 of Q5_0 (q5_0Dot2x2).
func q5_0Dot22(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q5_0Dot2x2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), len(a.d), out, ostride, otok)
}

// q5_1Dot4 is the weightKernel.dot4 of Q5_1 (q5_1Dot4x1).
func q5_1Dot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q5_1Dot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.s[0]), len(x.d), out, ostride)
}

// q5_0Dot4 is the weightKernel.dot4 of Q5_0 (q5_0Dot4x1).
func q5_0Dot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q5_0Dot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// iq4NLDot4 is the weightKernel.dot4 of IQ4_NL (iq4NLDot4x1).
func iq4NLDot4(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	iq4NLDot4x1(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// iq4NLDot22 is the weightKernel.dot2x2 of IQ4_NL (iq4NLDot2x2).
func iq4NLDot22(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	iq4NLDot2x2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), len(a.d), out, ostride, otok)
}
