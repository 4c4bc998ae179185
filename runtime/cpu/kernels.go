package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The reference kernels below are written for clarity and for numerical
// agreement with llama.cpp's CPU backend (the golden reference): activations
// are rounded to the weight's "dot type" before a dot product (f16 for F16
// weights, bf16 for BF16, Q8_0 blocks for Q8_0 and Q4_0), exactly as ggml does.

// dotF32 returns sum(x[i]*y[i]) with 8 interleaved float32 accumulators.
func dotF32(x, y []float32) float32 {
	n := len(x)
	y = y[:n]
	var a [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		a[0] += x[i] * y[i]
		a[1] += x[i+1] * y[i+1]
		a[2] += x[i+2] * y[i+2]
		a[3] += x[i+3] * y[i+3]
		a[4] += x[i+4] * y[i+4]
		a[5] += x[i+5] * y[i+5]
		a[6] += x[i+6] * y[i+6]
		a[7] += x[i+7] * y[i+7]
	}
	s := ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
	for ; i < n; i++ {
		s += x[i] * y[i]
	}
	return s
}

// dotF16 returns the dot product of f32 x (already rounded to f16 values)
// and an f16 row.
func dotF16(x []float32, row []byte) float32 {
	n := len(x)
	var a [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		b := row[2*i : 2*i+16]
		a[0] += x[i] * f16tab[binary.LittleEndian.Uint16(b[0:])]
		a[1] += x[i+1] * f16tab[binary.LittleEndian.Uint16(b[2:])]
		a[2] += x[i+2] * f16tab[binary.LittleEndian.Uint16(b[4:])]
		a[3] += x[i+3] * f16tab[binary.LittleEndian.Uint16(b[6:])]
		a[4] += x[i+4] * f16tab[binary.LittleEndian.Uint16(b[8:])]
		a[5] += x[i+5] * f16tab[binary.LittleEndian.Uint16(b[10:])]
		a[6] += x[i+6] * f16tab[binary.LittleEndian.Uint16(b[12:])]
		a[7] += x[i+7] * f16tab[binary.LittleEndian.Uint16(b[14:])]
	}
	s := ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
	for ; i < n; i++ {
		s += x[i] * f16tab[binary.LittleEndian.Uint16(row[2*i:])]
	}
	return s
}

// dotBF16 returns the dot product of f32 x (already rounded to bf16 values)
// and a bf16 row.
func dotBF16(x []float32, row []byte) float32 {
	n := len(x)
	var a [8]float32
	i := 0
	for ; i+8 <= n; i += 8 {
		for l := 0; l < 8; l++ {
			a[l] += x[i+l] * math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*(i+l):]))<<16)
		}
	}
	s := ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
	for ; i < n; i++ {
		s += x[i] * math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*i:]))<<16)
	}
	return s
}

var f16tab = func() []float32 {
	t := make([]float32, 1<<16)
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return t
}()

// q8Blocks is a row of activations quantized to Q8_0 blocks of 32.
type q8Blocks struct {
	d  []float32 // [n/32] block scales, as the fp16 value ggml stores
	qs []int8    // [n]
}

func (q *q8Blocks) resize(n int) {
	if cap(q.qs) < n {
		q.qs = make([]int8, n)
		q.d = make([]float32, n/32)
	}
	q.qs = q.qs[:n]
	q.d = q.d[:n/32]
}

// quantizeQ8 quantizes x (len a multiple of 32) into q as ggml's x86
// quantize_row_q8_0 does: d = max|x|/127 stored as fp16, q = round-half-even(x * 127/max|x|).
func quantizeQ8(x []float32, q *q8Blocks) {
	q.resize(len(x))
	for b := 0; b < len(x)/32; b++ {
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
		q.d[b] = tensor.F16ToF32(tensor.F32ToF16(d))
		qs := q.qs[b*32 : b*32+32]
		for i, v := range blk {
			qs[i] = int8(math.RoundToEven(float64(v * id)))
		}
	}
}

// hsum8 adds 8 lanes in the order of an AVX 256-bit horizontal sum.
func hsum8(a *[8]float32) float32 {
	r0, r1, r2, r3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (r0 + r2) + (r1 + r3)
}

// fma32 returns a*b+c rounded once to float32, as a hardware float32 fused
// multiply-add does. a*b is exact in float64, so the float64 sum is off the
// exact value by at most half a float64 ulp; rounding it to float32 is then
// correct unless it lands exactly on a midpoint between two float32s (or in
// the subnormal range), which fma32Slow handles.
func fma32(a, b, c float32) float32 {
	s := float64(a)*float64(b) + float64(c)
	if bits := math.Float64bits(s); bits&(1<<29-1) == 1<<28 || bits&(0x7ff<<52) < 0x381<<52 {
		return fma32Slow(a, b, c)
	}
	return float32(s)
}

// fma32Slow is fma32 for sums on a float32 midpoint or below the normal
// float32 range: the sum's exact error (TwoSum) rounds it to odd, which
// makes the final rounding to float32 correct.
//
//go:noinline
func fma32Slow(a, b, c float32) float32 {
	p, cc := float64(a)*float64(b), float64(c)
	s := p + cc
	bv := s - p
	e := (p - (s - bv)) + (cc - bv) // s + e == p + c exactly
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 && !math.IsInf(s, 0) {
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// dotQ8 returns the dot product of a Q8_0 weight row (34-byte blocks) and
// Q8_0 activations: per block an exact integer dot, scaled by both block
// scales and accumulated in 8 float lanes of 4 products each.
func dotQ8(row []byte, x *q8Blocks) float32 {
	var acc [8]float32
	for b := range x.d {
		blk := row[b*34 : b*34+34]
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		ws := blk[2:34]
		xs := x.qs[b*32 : b*32+32]
		for l := 0; l < 8; l++ {
			j := 4 * l
			s := int32(int8(ws[j]))*int32(xs[j]) + int32(int8(ws[j+1]))*int32(xs[j+1]) +
				int32(int8(ws[j+2]))*int32(xs[j+2]) + int32(int8(ws[j+3]))*int32(xs[j+3])
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// dotQ4 returns the dot product of a Q4_0 weight row (18-byte blocks) and
// Q8_0 activations, with the same lane structure as dotQ8.
func dotQ4(row []byte, x *q8Blocks) float32 {
	var acc [8]float32
	var w [32]int32
	for b := range x.d {
		blk := row[b*18 : b*18+18]
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		for i := 0; i < 16; i++ {
			w[i] = int32(blk[2+i]&0x0f) - 8
			w[i+16] = int32(blk[2+i]>>4) - 8
		}
		xs := x.qs[b*32 : b*32+32]
		for l := 0; l < 8; l++ {
			j := 4 * l
			s := w[j]*int32(xs[j]) + w[j+1]*int32(xs[j+1]) + w[j+2]*int32(xs[j+2]) + w[j+3]*int32(xs[j+3])
			acc[l] = fma32(d, float32(s), acc[l])
		}
	}
	return hsum8(&acc)
}

// rmsNorm writes x / sqrt(mean(x^2) + eps) * w into dst for one group.
// The sum of squares is accumulated in float64 and the mean rounded to
// float32, as ggml does.
func rmsNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := rmsScale(sum, len(x), eps)
	for i, v := range x {
		dst[i] = (v * scale) * w[i]
	}
}

// rmsScale is 1 / sqrt(mean + eps) of a group of n values whose squares
// add up to sum, the mean rounded to float32 as ggml does.
func rmsScale(sum float64, n int, eps float32) float32 {
	mean := float32(sum / float64(n))
	return 1 / float32(math.Sqrt(float64(mean+eps)))
}

// rmsNormFast is rmsNorm with the AVX-512 kernels, bit for bit: the same
// float64 sum in order, then the same two float32 products per element.
func rmsNormFast(dst, x, w []float32, eps float32) {
	n := len(x)
	if n == 0 {
		return
	}
	dst, w = dst[:n], w[:n]
	scaleMul(&dst[0], &x[0], &w[0], n, rmsScale(sumSquares(&x[0], n), n, eps))
}

// rmsNormGroups is rmsNormFast of the n groups (16 or 8) of group values
// (a multiple of 16) at x[0:n*group] into dst, their float64 sums added
// side by side (sumSquaresGroups), each still in order, so bit for bit
// rmsNorm: one group's add chain is latency-bound, 8 or 16 of them fill
// the float64 lanes.
func rmsNormGroups(dst, x, w []float32, n, group int, eps float32) {
	dst, x, w = dst[:n*group], x[:n*group], w[:group]
	var sums [16]float64
	sumSquaresGroups(&x[0], uintptr(4*group), group/16, n, &sums[0])
	for g, sum := range sums[:n] {
		scaleMul(&dst[g*group], &x[g*group], &w[0], group, rmsScale(sum, group, eps))
	}
}

// ropeAngles writes the cosines and sines [Dims/2] of the rope angles of
// position pos as ggml computes them: the angle of pair i is
// pos * base^(-2i/dims), built as a running float32 product, divided by
// factors[i] when factors is not nil (freq_factors); its cosine and sine
// are glibc's (cosf32, sinf32).
func ropeAngles(pos int32, a tensor.RoPEArgs, factors, cos, sin []float32) {
	half := a.Dims / 2
	thetaScale := float32(math.Pow(float64(a.Base), float64(float32(-2.0)/float32(a.Dims))))
	theta := float32(pos)
	for i := 0; i < half; i++ {
		t := theta
		if factors != nil {
			t /= factors[i]
		}
		cos[i] = cosf32(t)
		sin[i] = sinf32(t)
		theta *= thetaScale
	}
}

// rotateHeads rotates every head of x by the angles whose cosines and
// sines are cos and sin [Dims/2], pairs as a.Mode says.
func rotateHeads(x []float32, a tensor.RoPEArgs, cos, sin []float32) {
	half := a.Dims / 2
	fast := 0 // the pairs ropeNeox16 rotates
	if useSIMD && a.Mode == tensor.RoPENeox {
		fast = half &^ 15
	}
	for h := 0; h+a.HeadDim <= len(x); h += a.HeadDim {
		head := x[h : h+a.HeadDim]
		if fast > 0 {
			_ = head[half+fast-1]
			ropeNeox16(&head[0], &cos[0], &sin[0], half, fast/16)
		}
		for i := fast; i < half; i++ {
			var i0, i1 int
			if a.Mode == tensor.RoPENeox {
				i0, i1 = i, i+half
			} else {
				i0, i1 = 2*i, 2*i+1
			}
			x0, x1 := head[i0], head[i1]
			head[i0] = fma32(x0, cos[i], -(x1 * sin[i]))
			head[i1] = fma32(x0, sin[i], x1*cos[i])
		}
	}
}

// expfV is exp(x) as ggml_v_expf computes it in each lane of its AVX-512
// build: x = n ln2 + b with n = round(x / ln2) by the 1.5*2^23 shift and
// ln2 split in two, a degree-5 polynomial in b, scaled by 2^n; beyond
// |n| > 192 it is 0 or +Inf. ggml's SiLU and softmax take their
// exponentials from it for every whole 16 of a row.
func expfV(x float32) float32 {
	const shift = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, shift)
	n := z - shift
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	if abs32(n) > 192 {
		if n <= 0 {
			return 0
		}
		return float32(math.Inf(1))
	}
	u := b * b
	j := fma32(fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u,
		fma32(0x1.ffffecp-1, b, 1))
	return float32(math.Ldexp(float64(j), int(n)))
}

// siluV is ggml_v_silu in one lane: x / (1 + expfV(0 - x)).
func siluV(x float32) float32 { return x / (1 + expfV(0-x)) }

// siluTail is ggml_silu_f32, which ggml uses past the last whole 16 of a
// row: x / (1 + expf(-x)), expf taken as float32(math.Exp) (glibc's expf
// is off correct rounding in rare cases this does not reproduce).
func siluTail(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// swigluRows writes out[i] = silu(g[i]) * u[i] for the elements
// [lo, lo+len(out)) of rows of cols elements, as ggml_vec_swiglu_f32 does
// per row: siluV for the row's whole 16s, siluTail after them.
func swigluRows(out, g, u []float32, lo, cols int) {
	whole := cols - cols%16
	for j := range out {
		if (lo+j)%cols < whole {
			out[j] = siluV(g[j]) * u[j]
		} else {
			out[j] = siluTail(g[j]) * u[j]
		}
	}
}

// reduce16 is _mm512_reduce_add_ps: the upper 8 lanes added to the lower
// 8, then the upper 4 of those to the lower 4, then (0+2) + (1+3).
func reduce16(a *[16]float32) float32 {
	var t [8]float32
	for i := range 8 {
		t[i] = a[8+i] + a[i]
	}
	for i := range 4 {
		t[i] = t[4+i] + t[i]
	}
	return (t[0] + t[2]) + (t[1] + t[3])
}

// reduce4x16 folds ggml's four 16-lane accumulators as GGML_F32x16_REDUCE
// does ((0+2) + (1+3), lane by lane) and reduces the result (reduce16).
func reduce4x16(s *[4][16]float32) float32 {
	for l := range 16 {
		s[0][l] += s[2][l]
		s[1][l] += s[3][l]
	}
	for l := range 16 {
		s[0][l] += s[1][l]
	}
	return reduce16(&s[0])
}

// dotVecF32 returns sum(x[i*xstride] * y[i]) for i < n as ggml_vec_dot_f32
// (AVX-512) does: element i of each step of 64 is fused into accumulator
// (i%64)/16, lane i%16; the accumulators are reduced by reduce4x16; the
// elements past the last whole 64 are then fused in order.
func dotVecF32(x []float32, xstride int, y []float32, n int) float32 {
	np := n &^ 63
	var sum [4][16]float32
	for i := 0; i < np; i += 64 {
		for e := i; e < i+64; e++ {
			a := &sum[(e-i)/16][e%16]
			*a = fma32(x[e*xstride], y[e], *a)
		}
	}
	var s float32
	if np > 0 {
		s = reduce4x16(&sum)
	}
	for i := np; i < n; i++ {
		s = fma32(x[i*xstride], y[i], s)
	}
	return s
}

// softmaxInPlace normalises s as ggml's soft_max does over a row padded
// with -Inf to a whole number of 16s: e = expfV(s - max); the sum of each
// 16 of them (reduce16, padding lanes 0) is added in float64; each e is
// then scaled by float32(1/sum).
func softmaxInPlace(s []float32) {
	m := float32(math.Inf(-1))
	for _, v := range s {
		m = max(m, v)
	}
	var sum float64
	for c := 0; c < len(s); c += 16 {
		var a [16]float32
		for l := 0; l < 16 && c+l < len(s); l++ {
			e := expfV(s[c+l] - m)
			s[c+l] = e
			a[l] = e
		}
		sum += float64(reduce16(&a))
	}
	inv := float32(1 / sum)
	for i := range s {
		s[i] *= inv
	}
}

// bytesAsF32 views little-endian float32 data without copying. b's length
// must be a multiple of 4 and its start 4-byte aligned (GGUF data is aligned).
func bytesAsF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
