package cpu

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Reference kernels of the quantized weight types beyond Q8_0 and Q4_0. Each
// copies the arithmetic llama.cpp's CPU backend runs for its type on x86:
// the activations are quantized to the weight's dot type
// (tensor.DType.DotType: Q8_0, Q8_1 or Q8_K) and integer products are
// summed exactly; then
//   - for Q3_K, Q5_K, Q6_K, IQ4_XS, Q4_1, Q5_0 and Q5_1, ggml's AVX2
//     vec_dot: 8 int32 lanes scaled and accumulated in 8 float32 lanes with
//     fused multiply-adds in ggml's order, reduced as hsum8 (the integer lane
//     sums of a super-block of 256, kLanes, follow the AVX2 register layout:
//     lane l gathers, from every 32-element chunk, the 4 elements at
//     4l..4l+3, each chunk's group weighted by its sub-block scale);
//   - for Q4_K, Q2_K and IQ4_NL, which llama.cpp repacks into interleaved
//     8-row blocks, its repacked kernels: one integer sum per block (Q2_K:
//     per half of it) scaled by one fused multiply-add, one order for every
//     token of a batch (docs/cpu-numerics.md).

// actQuant holds activations [T, K] quantized to a dot type.
type actQuant struct {
	dt    tensor.DType // Q8_0, Q8_1 or Q8_K
	K     int
	qs    []int8    // [T*K] quants
	d     []float32 // [T*K/bs] block scales (Q8_0, Q8_1: the fp16 value as float32)
	s     []float32 // [T*K/32] Q8_1 only: fp16(d*sum(q)) as float32
	bsums []int16   // [T*K/16] Q8_K only: sums of 16 quants
	// x4 holds, for the first interleaved tokens (a multiple of 4; 0
	// until interleave4 runs), the Q8_K activations of each group of four
	// tokens laid out for the kernels that take a row's 4 groups of 64 for
	// 4 tokens in one register (q4KDot1x8): [T/4, K/256, q8KGroupBlock],
	// see interleave4.
	x4          []byte
	interleaved int
}

// actRow is one token of an actQuant.
type actRow struct {
	qs    []int8
	d     []float32
	s     []float32
	bsums []int16
}

// resize makes a hold T rows of K activations of dot type dt.
func (a *actQuant) resize(dt tensor.DType, T, K int) {
	a.dt, a.K = dt, K
	n := T * K
	bs := dt.BlockSize()
	a.qs, a.d = grow(a.qs, n), grow(a.d, n/bs)
	if dt == tensor.Q8_1 {
		a.s = grow(a.s, n/32)
	}
	if dt == tensor.Q8_K {
		a.bsums = grow(a.bsums, n/16)
	}
	a.interleaved = 0
}

// q8KGroupBlock is the bytes of one super-block of four tokens in
// actQuant.x4: 1024 of quants, 128 of sums, 32 of scales.
const q8KGroupBlock = 1184

// interleave4 writes the token groups s of [lo/4, hi/4) (lo a multiple of
// 4) into x4 (which must have room: q8KGroupBlock per super-block and 4
// tokens). For super-block b of group s, q8KGroupBlock bytes: first, for
// chunk parity c and position p (0..7) of the 4-byte pieces of a
// 32-element chunk, 64 bytes in which byte 16t+4g+j is token 4s+t's quant
// 256b + 64g + 32c + 4p + j, so that each 32-bit lane 4t+g meets, in
// turn, the 32 quants of chunk 2g+c of token t; then the 16 sums of tokens
// 0..3 (int16) and their scales, each twice (float32: d0, d0, d1, d1, ...).
func (a *actQuant) interleave4(lo, hi int) {
	K, nb := a.K, a.K/256
	qs := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(a.qs))), len(a.qs))
	for s := lo / 4; 4*s+4 <= hi; s++ {
		for b := range nb {
			dst := a.x4[(s*nb+b)*q8KGroupBlock : (s*nb+b+1)*q8KGroupBlock]
			var src [4][]byte
			for t := range 4 {
				src[t] = qs[(4*s+t)*K+256*b : (4*s+t)*K+256*b+256]
			}
			o := 0
			for c := range 2 {
				for p := range 8 {
					for t := range 4 {
						for g := range 4 {
							binary.LittleEndian.PutUint32(dst[o:], binary.LittleEndian.Uint32(src[t][64*g+32*c+4*p:]))
							o += 4
						}
					}
				}
			}
			for t := range 4 {
				tok := 4*s + t
				for i, v := range a.bsums[16*(tok*nb+b) : 16*(tok*nb+b)+16] {
					binary.LittleEndian.PutUint16(dst[1024+32*t+2*i:], uint16(v))
				}
				d := math.Float32bits(a.d[tok*nb+b])
				binary.LittleEndian.PutUint32(dst[1152+8*t:], d)
				binary.LittleEndian.PutUint32(dst[1156+8*t:], d)
			}
		}
	}
}

// row returns token t.
func (a *actQuant) row(t int) actRow {
	K := a.K
	nb := K / a.dt.BlockSize()
	r := actRow{qs: a.qs[t*K : (t+1)*K], d: a.d[t*nb : (t+1)*nb]}
	if a.dt == tensor.Q8_1 {
		r.s = a.s[t*K/32 : (t+1)*K/32]
	}
	if a.dt == tensor.Q8_K {
		r.bsums = a.bsums[t*K/16 : (t+1)*K/16]
	}
	return r
}

// quantizeRows quantizes tokens [lo, hi) of x [T, K] into a (resized).
func (a *actQuant) quantizeRows(x []float32, lo, hi int) {
	K := a.K
	for t := lo; t < hi; t++ {
		r := a.row(t)
		xs := x[t*K : (t+1)*K]
		switch a.dt {
		case tensor.Q8_0:
			q := q8Blocks{d: r.d, qs: r.qs}
			quantizeQ8(xs, &q)
		case tensor.Q8_1:
			quantizeQ8_1(xs, r)
		case tensor.Q8_K:
			if useSIMD && K > 0 {
				quantQ8K(&xs[0], K/256, &r.qs[0], &r.d[0], &r.bsums[0])
				break
			}
			if level == levelAVX2 && K > 0 {
				quantQ8KAVX2(&xs[0], K/256, &r.qs[0], &r.d[0], &r.bsums[0])
				break
			}
			quantizeQ8K(xs, r)
		}
	}
}

// quantizeQ8_1 quantizes x as ggml's x86 quantize_row_q8_1: the Q8_0
// blocks of quantizeQ8, plus s = fp16(d * sum(q)) with d = max|x|/127 in
// float32.
func quantizeQ8_1(x []float32, r actRow) {
	q := q8Blocks{d: r.d, qs: r.qs}
	quantizeQ8(x, &q)
	q8_1BlockSums(r.s[:len(x)/32], x, r.qs)
}

// q8_1BlockSums writes into s [len(x)/32] the Q8_1 block sums (q8_1Sum) of
// x quantized to qs (quantizeQ8).
func q8_1BlockSums(s, x []float32, qs []int8) {
	for b := range s {
		var sum int32
		for _, v := range qs[b*32 : b*32+32] {
			sum += int32(v)
		}
		s[b] = q8_1Sum(x[b*32:b*32+32], sum)
	}
}

// q8_1Sum is the s of the Q8_1 block of the 32 values x whose quants sum
// to sum: fp16(d * sum) with d = max|x|/127 in float32.
func q8_1Sum(x []float32, sum int32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	return tensor.F16ToF32(tensor.F32ToF16(amax / 127 * float32(sum)))
}

// quantizeQ8K quantizes x (len a multiple of 256) as ggml's
// quantize_row_q8_K_ref: m = the first element of largest magnitude,
// iscale = -127/m, q = min(127, round-half-even(iscale*x)), d = 1/iscale,
// and the sums of each 16 quants.
func quantizeQ8K(x []float32, r actRow) {
	for b := range len(x) / 256 {
		xs := x[b*256 : b*256+256]
		qs := r.qs[b*256 : b*256+256]
		sums := r.bsums[b*16 : b*16+16]
		var amax, m float32
		for _, v := range xs {
			if a := abs32(v); a > amax {
				amax, m = a, v
			}
		}
		if amax == 0 {
			r.d[b] = 0
			clear(qs)
			clear(sums)
			continue
		}
		iscale := -127 / m
		for j, v := range xs {
			qs[j] = int8(min(127, math.RoundToEven(float64(iscale*v))))
		}
		for j := range sums {
			var s int16
			for _, q := range qs[16*j : 16*j+16] {
				s += int16(q)
			}
			sums[j] = s
		}
		r.d[b] = 1 / iscale
	}
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}

// kLanes returns the 8 int32 lane sums of one super-block: lane l is the
// sum over the 8 chunks c of 32 elements of sc[(32c+4l)/16] times the dot
// of w and x over elements 32c+4l .. 32c+4l+3. sc holds one scale per 16
// elements.
func kLanes(w *[256]int8, sc *[16]int32, x []int8) (s [8]int32) {
	x = x[:256]
	for c := range 8 {
		for l := range 8 {
			e := 32*c + 4*l
			p := int32(w[e])*int32(x[e]) + int32(w[e+1])*int32(x[e+1]) +
				int32(w[e+2])*int32(x[e+2]) + int32(w[e+3])*int32(x[e+3])
			s[l] += sc[e/16] * p
		}
	}
	return s
}

// lanes32 returns the 8 int32 lane sums of one 32-element block: lane l is
// the dot of w and x over elements 4l .. 4l+3.
func lanes32(w *[32]int8, x []int8) (s [8]int32) {
	x = x[:32]
	for l := range 8 {
		e := 4 * l
		s[l] = int32(w[e])*int32(x[e]) + int32(w[e+1])*int32(x[e+1]) +
			int32(w[e+2])*int32(x[e+2]) + int32(w[e+3])*int32(x[e+3])
	}
	return s
}

// fmaLanes sets acc[l] = fma(d, float32(s[l]), acc[l]).
func fmaLanes(acc *[8]float32, d float32, s *[8]int32) {
	for l := range 8 {
		acc[l] = fma32(d, float32(s[l]), acc[l])
	}
}

// k4Scales unpacks the 8 6-bit scales and mins of a Q4_K/Q5_K super-block
// and spreads the scales to one per 16 elements.
func k4Scales(p []byte) (sc [16]int32, mins [8]int32) {
	for j := range 8 {
		s, m := tensor.ScaleMinK4(j, p)
		sc[2*j], sc[2*j+1] = int32(s), int32(s)
		mins[j] = int32(m)
	}
	return sc, mins
}

// k4Mins returns the 4 int32 lanes of ggml's Q4_K/Q5_K min products: lane
// k is mins[2k]*q8s[2k] + mins[2k+1]*q8s[2k+1], where q8s[i] is the sum of
// the quants of chunk i (two bsums).
func k4Mins(mins *[8]int32, bsums []int16) (p [4]int32) {
	for k := range 4 {
		s0 := int32(bsums[4*k]) + int32(bsums[4*k+1])
		s1 := int32(bsums[4*k+2]) + int32(bsums[4*k+3])
		p[k] = mins[2*k]*s0 + mins[2*k+1]*s1
	}
	return p
}

// q2KSums returns, for the Q2_K super-block blk against activations qs
// (256 quants) and bs (16 sums), the integer sums of each half of 128
// elements: the sub-block scale times weight times quant, and the
// sub-block min times its activation sum.
func q2KSums(blk []byte, qs []int8, bs []int16) (q, m [2]int32) {
	for e := range 256 {
		w := int32((blk[16+32*(e/128)+e%32] >> (2 * ((e / 32) % 4))) & 3)
		q[e/128] += int32(blk[e/16]&0xf) * w * int32(qs[e])
	}
	for j := range 16 {
		m[j/8] += int32(blk[j]>>4) * int32(bs[j])
	}
	return q, m
}

// dotQ2K is the Q2_K x Q8_K dot product of ggml's repacked Q2_K kernel
// for groups of 4 tokens (ggml_gemm_q2_K_8x8_q8_K, which llama.cpp's CPU
// backend runs for Q2_K weights of a multiple of 8 rows on AVX-512
// machines): per super-block, each half of 128 elements scaled on its own,
// acc = fma(float(q[h]), d_w*d_x, acc) and accm = fma(float(m[h]),
// dmin_w*d_x, accm) for h = 0, 1; the result is acc - accm. Every token of
// a batch takes this order (ggml's single-token kernel adds the halves
// first), so a row's result never depends on the other rows of its step;
// of the two orders it is the one whose kq-qwen3-q2_k golden passes the
// teacher-forced rule.
func dotQ2K(row []byte, x actRow) float32 {
	var acc, accm float32
	for b := range x.d {
		blk := row[b*84 : b*84+84]
		q, m := q2KSums(blk, x.qs[256*b:256*b+256], x.bsums[16*b:16*b+16])
		d := f16tab[binary.LittleEndian.Uint16(blk[80:])] * x.d[b]
		dm := f16tab[binary.LittleEndian.Uint16(blk[82:])] * x.d[b]
		for h := range 2 {
			acc = fma32(float32(q[h]), d, acc)
			accm = fma32(float32(m[h]), dm, accm)
		}
	}
	return acc - accm
}

// dotQ3K is ggml_vec_dot_q3_K_q8_K.
func dotQ3K(row []byte, x actRow) float32 {
	var acc [8]float32
	var w [256]int8
	var sc [16]int32
	for b := range x.d {
		blk := row[b*110 : b*110+110]
		d := x.d[b] * f16tab[binary.LittleEndian.Uint16(blk[108:])]
		s3 := tensor.Q3KScales(blk[96:108])
		for i, v := range s3 {
			sc[i] = int32(v)
		}
		for e := range 256 {
			l := e % 32
			q := int8((blk[32+32*(e/128)+l] >> (2 * ((e / 32) % 4))) & 3)
			if blk[l]&(1<<(e/32)) == 0 {
				q -= 4
			}
			w[e] = q
		}
		s := kLanes(&w, &sc, x.qs[256*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc)
}

// q4KWeights unpacks the 256 nibbles of a Q4_K super-block (qs: 128 bytes).
func q4KWeights(w *[256]int8, qs []byte) {
	for e := range 256 {
		q := qs[32*(e/64)+e%32]
		if (e/32)%2 == 0 {
			q &= 0xf
		} else {
			q >>= 4
		}
		w[e] = int8(q)
	}
}

// q4KSums returns, for the Q4_K super-block blk against activations qs
// (256 quants) and bs (16 sums), the integer sums of each 64 elements
// (chunk pair g): sum of the sub-block scale times weight times quant over
// its 64 elements, and its mins term mins[2g]*(bs[4g]+bs[4g+1]) +
// mins[2g+1]*(bs[4g+2]+bs[4g+3]).
func q4KSums(blk []byte, qs []int8, bs []int16) (q, m [4]int32) {
	var w [256]int8
	sc, mins := k4Scales(blk[4:16])
	q4KWeights(&w, blk[16:144])
	for g := range 4 {
		for e := 64 * g; e < 64*g+64; e++ {
			q[g] += sc[e/16] * int32(w[e]) * int32(qs[e])
		}
		m[g] = mins[2*g]*(int32(bs[4*g])+int32(bs[4*g+1])) + mins[2*g+1]*(int32(bs[4*g+2])+int32(bs[4*g+3]))
	}
	return q, m
}

// dotQ4K is the Q4_K x Q8_K dot product of ggml's repacked Q4_K kernel
// for one token (ggml_gemv_q4_K_8x8_q8_K), which llama.cpp's CPU backend
// runs for Q4_K weights (of a multiple of 8 rows) on AVX2 and AVX-512
// machines: per super-block, the whole block's integer sums, scaled once:
// acc = fma(float(q), d_w*d_x, acc) and accm = fma(float(m), dmin_w*d_x,
// accm); the result is acc - accm. Every token of a batch takes this order
// (ggml's kernel for groups of 4 tokens scales each 64 elements on its
// own), so a row's result never depends on the other rows of its step;
// docs/cpu-numerics.md says what that costs against the goldens.
func dotQ4K(row []byte, x actRow) float32 {
	var acc, accm float32
	for b := range x.d {
		blk := row[b*144 : b*144+144]
		q, m := q4KSums(blk, x.qs[256*b:256*b+256], x.bsums[16*b:16*b+16])
		d := f16tab[binary.LittleEndian.Uint16(blk[0:])] * x.d[b]
		dm := f16tab[binary.LittleEndian.Uint16(blk[2:])] * x.d[b]
		acc = fma32(float32(q[0]+q[1]+q[2]+q[3]), d, acc)
		accm = fma32(float32(m[0]+m[1]+m[2]+m[3]), dm, accm)
	}
	return acc - accm
}

// dotQ5K is ggml_vec_dot_q5_K_q8_K: the mins are summed as one integer per
// super-block and accumulated in a scalar, added after hsum8.
func dotQ5K(row []byte, x actRow) float32 {
	var acc [8]float32
	var summs float32
	var w [256]int8
	for b := range x.d {
		blk := row[b*176 : b*176+176]
		d := x.d[b] * f16tab[binary.LittleEndian.Uint16(blk[0:])]
		dmin := -x.d[b] * f16tab[binary.LittleEndian.Uint16(blk[2:])]
		sc, mins := k4Scales(blk[4:16])
		p := k4Mins(&mins, x.bsums[16*b:16*b+16])
		summs = fma32(dmin, float32(p[0]+p[1]+p[2]+p[3]), summs)
		q4KWeights(&w, blk[48:176])
		for e := range 256 {
			w[e] |= int8((blk[16+e%32]>>(e/32))&1) << 4
		}
		s := kLanes(&w, &sc, x.qs[256*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc) + summs
}

// q6KWeights unpacks the 256 unsigned 6-bit quants of a Q6_K super-block.
func q6KWeights(w *[256]int8, blk []byte) {
	for e := range 256 {
		h, l, part := e/128, e%32, (e%128)/32
		ql := blk[64*h+l+32*(part%2)]
		if part >= 2 {
			ql >>= 4
		}
		qh := (blk[128+32*h+l] >> (2 * part)) & 3
		w[e] = int8(ql&0xf | qh<<4)
	}
}

// dotQ6K is ggml_vec_dot_q6_K_q8_K: the unsigned quants' lanes, minus 32
// times the scaled bsums of two sub-blocks per lane.
func dotQ6K(row []byte, x actRow) float32 {
	var acc [8]float32
	var w [256]int8
	var sc [16]int32
	for b := range x.d {
		blk := row[b*210 : b*210+210]
		d := x.d[b] * f16tab[binary.LittleEndian.Uint16(blk[208:])]
		for i := range 16 {
			sc[i] = int32(int8(blk[192+i]))
		}
		q6KWeights(&w, blk)
		s := kLanes(&w, &sc, x.qs[256*b:])
		bs := x.bsums[16*b : 16*b+16]
		for l := range 8 {
			s[l] -= 32 * (int32(bs[2*l])*sc[2*l] + int32(bs[2*l+1])*sc[2*l+1])
		}
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc)
}

// dotIQ4XS is ggml_vec_dot_iq4_xs_q8_K.
func dotIQ4XS(row []byte, x actRow) float32 {
	var acc [8]float32
	var w [256]int8
	var sc [16]int32
	for b := range x.d {
		blk := row[b*136 : b*136+136]
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		for ib := range 8 {
			s := tensor.IQ4XSScale(blk, ib)
			sc[2*ib], sc[2*ib+1] = s, s
			qs := blk[8+16*ib : 8+16*ib+16]
			for j := range 16 {
				w[32*ib+j] = tensor.IQ4NLLevel(qs[j] & 0xf)
				w[32*ib+j+16] = tensor.IQ4NLLevel(qs[j] >> 4)
			}
		}
		s := kLanes(&w, &sc, x.qs[256*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc)
}

// nibbles32 unpacks 16 bytes of nibbles (element j low, j+16 high) into w.
func nibbles32(w *[32]int8, qs []byte) {
	for j := range 16 {
		w[j] = int8(qs[j] & 0xf)
		w[j+16] = int8(qs[j] >> 4)
	}
}

// q5Weights unpacks a Q5_0/Q5_1 block's 5-bit values (high bits qh).
func q5Weights(w *[32]int8, qh uint32, qs []byte) {
	nibbles32(w, qs)
	for j := range 32 {
		w[j] |= int8((qh>>j)&1) << 4
	}
}

// dotQ5_0 is ggml_vec_dot_q5_0_q8_0: per block fma(d_w*d_x, lane, acc).
func dotQ5_0(row []byte, x actRow) float32 {
	var acc [8]float32
	var w [32]int8
	for b := range x.d {
		blk := row[b*22 : b*22+22]
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		q5Weights(&w, binary.LittleEndian.Uint32(blk[2:]), blk[6:22])
		for j := range w {
			w[j] -= 16
		}
		s := lanes32(&w, x.qs[32*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc)
}

// dotIQ4NL is the IQ4_NL x Q8_0 dot product of ggml's repacked IQ4_NL
// kernels (ggml_gemv/gemm_iq4_nl_8x8_q8_0, which llama.cpp's CPU backend
// runs for IQ4_NL weights of a multiple of 8 rows on AVX2 machines, one
// token or four alike): per block of 32, acc = fma(float(sum), d_w*d_x,
// acc) with the block's whole integer sum.
func dotIQ4NL(row []byte, x actRow) float32 {
	var acc float32
	for b := range x.d {
		blk := row[b*18 : b*18+18]
		var sum int32
		for j := range 16 {
			sum += int32(tensor.IQ4NLLevel(blk[2+j]&0xf))*int32(x.qs[32*b+j]) +
				int32(tensor.IQ4NLLevel(blk[2+j]>>4))*int32(x.qs[32*b+j+16])
		}
		acc = fma32(float32(sum), f16tab[binary.LittleEndian.Uint16(blk)]*x.d[b], acc)
	}
	return acc
}

// dotQ4_1 is ggml_vec_dot_q4_1_q8_1: unsigned nibbles, fma(d_w*d_x, lane,
// acc) per block, and the offsets m_w*s_x summed in a scalar added after
// hsum8.
func dotQ4_1(row []byte, x actRow) float32 {
	var acc [8]float32
	var summs float32
	var w [32]int8
	for b := range x.d {
		blk := row[b*20 : b*20+20]
		summs = fma32(f16tab[binary.LittleEndian.Uint16(blk[2:])], x.s[b], summs)
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		nibbles32(&w, blk[4:20])
		s := lanes32(&w, x.qs[32*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc) + summs
}

// dotQ5_1 is ggml_vec_dot_q5_1_q8_1 (as dotQ4_1, with 5-bit values).
func dotQ5_1(row []byte, x actRow) float32 {
	var acc [8]float32
	var summs float32
	var w [32]int8
	for b := range x.d {
		blk := row[b*24 : b*24+24]
		summs = fma32(f16tab[binary.LittleEndian.Uint16(blk[2:])], x.s[b], summs)
		d := f16tab[binary.LittleEndian.Uint16(blk)] * x.d[b]
		q5Weights(&w, binary.LittleEndian.Uint32(blk[4:]), blk[8:24])
		s := lanes32(&w, x.qs[32*b:])
		fmaLanes(&acc, d, &s)
	}
	return hsum8(&acc) + summs
}
