package cpu

import (
	"math"
	"sync"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The vision tower's ops (runtime/tensor/vision.go), in the float32
// arithmetic of ggml's CPU kernels.

// runVision runs op if it is a vision tower op and reports whether it was.
func (p *program) runVision(out []float32, op tensor.Op) bool {
	switch op.Kind {
	case tensor.OpNorm:
		x, d := p.f32[op.Args[0].ID], op.Out.Cols()
		p.b.pool.parallel(op.Out.Rows(), 8, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				layerNormRow(out[r*d:(r+1)*d], x[r*d:(r+1)*d], op.Eps)
			}
		})
	case tensor.OpGELU:
		x := p.f32[op.Args[0].ID]
		p.b.pool.parallel(len(out), 4096, func(_, lo, hi int) {
			geluRange(out[lo:hi], x[lo:hi])
		})
	case tensor.OpRoPE2D:
		copy(out, p.f32[op.Args[0].ID])
		ys, xs, w, a := p.i32[op.Args[1].ID], p.i32[op.Args[2].ID], op.Out.Cols(), op.RoPE
		trig := rope2DTable(a)
		p.b.pool.parallel(op.Out.Rows(), 8, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				rope2DRow(out[r*w:(r+1)*w], ys[r], xs[r], a.HeadDim, trig)
			}
		})
	case tensor.OpSelfAttention:
		p.selfAttention(out, op)
	case tensor.OpReshape:
		copy(out, p.f32[op.Args[0].ID])
	case tensor.OpMixRows:
		x, y, mask, d := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.i32[op.Args[2].ID], op.Out.Cols()
		for r, m := range mask {
			src := x
			if m != 0 {
				src = y
			}
			copy(out[r*d:(r+1)*d], src[r*d:(r+1)*d])
		}
	case tensor.OpMRoPE:
		p.mrope(out, op)
	default:
		return false
	}
	return true
}

// layerNormRow writes (x - mean) / sqrt(var + eps) of one row to dst as
// ggml_norm does: the sums in float64, the mean and variance rounded to
// float32.
func layerNormRow(dst, x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := float32(sum / float64(len(x)))
	var sq float64
	for _, v := range x {
		d := v - mean
		sq += float64(d * d)
	}
	scale := 1 / float32(math.Sqrt(float64(float32(sq/float64(len(x)))+eps)))
	for i, v := range x {
		dst[i] = (v - mean) * scale
	}
}

// geluF16 is ggml's tanh GELU through its fp16 table: 0 at or below -10,
// x at or above 10, else the table's value at x rounded to fp16.
func geluF16(x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	return geluTable()[tensor.F32ToF16(x)]
}

// geluRange writes geluF16(x[i]) into dst[i], 16 values a step with the
// level's kernel (the same table entries, bit for bit).
func geluRange(dst, x []float32) {
	i := 0
	if n := len(x) &^ 15; level != levelRef && n > 0 {
		if useSIMD {
			geluF16V(&dst[0], &x[0], n, &geluTable()[0])
		} else {
			geluF16VAVX2(&dst[0], &x[0], n, &geluTable()[0])
		}
		i = n
	}
	for ; i < len(x); i++ {
		dst[i] = geluF16(x[i])
	}
}

// geluTable is ggml's table_gelu_f16 as float32: for every fp16 bit
// pattern h, fp16(gelu(h)) with the tanh form in float32 (geluOfF16).
var geluTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for h := range t {
		t[h] = geluOfF16(tensor.F16ToF32(uint16(h)))
	}
	return t
})

// geluOfF16 is ggml's tanh GELU of the fp16 value h, rounded to fp16.
func geluOfF16(h float32) float32 {
	const sqrt2OverPi, coefA = 0.79788456080286535587989211986876, 0.044715
	inner := float32(sqrt2OverPi) * h * (1 + float32(coefA)*h*h)
	g := 0.5 * h * (1 + float32(math.Tanh(float64(inner))))
	return tensor.F16ToF32(tensor.F32ToF16(g))
}

// rope2DTable returns the inverse frequency of each pair of a section:
// Base^(-k/(HeadDim/4)), k = 0..HeadDim/4-1.
func rope2DTable(a tensor.RoPEArgs) []float32 {
	section := a.HeadDim / 4
	freq := make([]float32, section)
	for k := range freq {
		freq[k] = float32(math.Pow(float64(a.Base), -float64(k)/float64(section)))
	}
	return freq
}

// rope2DRow rotates every head of one row in place: pairs (i, i+half) of
// a head, the first half/2 pairs by y and the rest by x.
func rope2DRow(row []float32, y, x int32, headDim int, freq []float32) {
	half, section := headDim/2, headDim/4
	for h := 0; h < len(row); h += headDim {
		v := row[h : h+headDim]
		for i := range half {
			pos, k := y, i
			if i >= section {
				pos, k = x, i-section
			}
			theta := float32(pos) * freq[k]
			c, s := float32(math.Cos(float64(theta))), float32(math.Sin(float64(theta)))
			a, b := v[i], v[i+half]
			v[i], v[i+half] = a*c-b*s, a*s+b*c
		}
	}
}

// selfAttention computes softmax(q k^T x scale) v for every head and row
// over all rows: each head's keys and transposed values are gathered once
// (so both products are dot products of contiguous rows), then the work
// is split by (head, row) across workers.
func (p *program) selfAttention(out []float32, op tensor.Op) {
	q, k, v := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	n, width, hd, heads, scale := op.Out.Rows(), op.Out.Cols(), op.Attn.HeadDim, op.Attn.Heads, op.Attn.Scale
	if cap(p.attnKV) < 2*n*width {
		p.attnKV = make([]float32, 2*n*width)
	}
	kh, vt := p.attnKV[:n*width], p.attnKV[n*width:2*n*width] // per head: keys [n, hd], values [hd, n]
	p.b.pool.parallel(heads, 1, func(_, lo, hi int) {
		for h := lo; h < hi; h++ {
			base := h * n * hd
			for j := range n {
				row := j*width + h*hd
				copy(kh[base+j*hd:base+(j+1)*hd], k[row:row+hd])
				for d := range hd {
					vt[base+d*n+j] = v[row+d]
				}
			}
		}
	})
	blocks := (n + attnQueries - 1) / attnQueries // query blocks per head
	stride := (n + 15) &^ 15                      // a row of scores, whole vectors for softmaxScores' kernels
	p.b.pool.parallel(heads*blocks, 1, func(worker, lo, hi int) {
		scores := p.scratch(p.score, worker, attnQueries*stride) // [attnQueries, stride]
		for item := lo; item < hi; item++ {
			h, i0 := item/blocks, item%blocks*attnQueries
			m := min(attnQueries, n-i0)
			base := h * n * hd
			keys, values := kh[base:base+n*hd], vt[base:base+hd*n]
			qs := q[i0*width+h*hd:]
			fast := m == attnQueries && level != levelRef
			rowDots(scores, stride, qs, width, keys, n, hd, m, fast) // scores[i][j] = q_i . k_j
			for i := range m {
				row := scores[i*stride : i*stride+n]
				for j := range row {
					row[j] *= scale
				}
				softmaxScores(row)
			}
			rowDots(out[i0*width+h*hd:], width, scores, stride, values, hd, n, m, fast) // out_i[d] = p_i . v^T_d
		}
	})
}

// rowDots sets out[i*ostride+j] = a_i . b_j for the m rows a_i of a (row
// stride astride) and the cols rows b_j of b, k values each: out [m,
// ostride], a [m, astride], b [cols, k]. fast (m == attnQueries, a kernel
// level) takes four b rows by four a rows a call; otherwise each a row
// goes through dots.
func rowDots(out []float32, ostride int, a []float32, astride int, b []float32, cols, k, m int, fast bool) {
	if !fast {
		for i := range m {
			dots(out[i*ostride:i*ostride+cols], b, k, a[i*astride:i*astride+k])
		}
		return
	}
	for j := 0; j+4 <= cols; j += 4 {
		floatDot4x4(unsafe.Pointer(&b[j*k]), uintptr(4*k), unsafe.Pointer(&a[0]), uintptr(4*astride), k, unsafe.Pointer(&out[j]), uintptr(4*ostride))
	}
	for j := cols &^ 3; j < cols; j++ {
		for i := range m {
			out[i*ostride+j] = dotF32(a[i*astride:i*astride+k], b[j*k:(j+1)*k])
		}
	}
}

// attnQueries is how many queries of one head selfAttention scores and
// weighs together, reading each key and value row once for all of them.
const attnQueries = 4

// softmaxScores normalises one row of attention scores as ggml's soft_max
// does (softmaxInPlace), with the level's kernel.
func softmaxScores(s []float32) {
	switch level {
	case levelAVX512:
		softmaxV(&s[0], len(s))
	case levelAVX2:
		softmaxVAVX2(&s[0], len(s))
	default:
		softmaxInPlace(s)
	}
}

// mrope rotates the rows of an MRoPE op: ropeAngles' angles, each pair's
// from its section's position component.
func (p *program) mrope(out []float32, op tensor.Op) {
	copy(out, p.f32[op.Args[0].ID])
	a, w := op.RoPE, op.Out.Cols()
	comps, _ := a.SectionComponents() // checked by the builder
	pos := [3][]int32{p.i32[op.Args[1].ID], p.i32[op.Args[2].ID], p.i32[op.Args[3].ID]}
	thetaScale := float32(math.Pow(float64(a.Base), float64(float32(-2.0)/float32(a.Dims))))
	p.b.pool.parallel(op.Out.Rows(), 8, func(worker, lo, hi int) {
		trig := p.scratch(p.trig, worker, a.Dims)
		cos, sin := trig[:a.Dims/2], trig[a.Dims/2:]
		for r := lo; r < hi; r++ {
			theta := [3]float32{float32(pos[0][r]), float32(pos[1][r]), float32(pos[2][r])}
			for i, c := range comps {
				cos[i], sin[i] = cosf32(theta[c]), sinf32(theta[c])
				for k := range theta {
					theta[k] *= thetaScale
				}
			}
			rotateHeads(out[r*w:(r+1)*w], a, cos, sin)
		}
	})
}

// dots writes into out[r] the dot product of row r of rows (len(out) rows
// of k values) with x, four rows at a time with the level's kernel.
func dots(out, rows []float32, k int, x []float32) {
	r := 0
	if level != levelRef {
		for ; r+4 <= len(out); r += 4 {
			floatDot4x1(tensor.F32, unsafe.Pointer(&rows[r*k]), uintptr(4*k), unsafe.Pointer(&x[0]), k, unsafe.Pointer(&out[r]), 4)
		}
	}
	for ; r < len(out); r++ {
		out[r] = dotF32(x, rows[r*k:(r+1)*k])
	}
}
