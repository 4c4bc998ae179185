package vision

// The pixel stages of the JPEG decoder: the inverse DCT of each block, the
// chroma upsampling of each row, and the colour conversion to RGB, each in
// stb_image's fixed-point arithmetic (see jpeg.go).

// IDCT constants: cos-based factors scaled by 4096 and truncated toward
// zero after adding 0.5, as stb_image computes them.
const (
	idctC0541 = 2217   // 0.5411961
	idctC1847 = -7567  // -1.847759065
	idctC0765 = 3135   // 0.765366865
	idctC1175 = 4816   // 1.175875602
	idctC0298 = 1223   // 0.298631336
	idctC2053 = 8410   // 2.053119869
	idctC3072 = 12586  // 3.072711026
	idctC1501 = 6149   // 1.501321110
	idctC0899 = -3685  // -0.899976223
	idctC2562 = -10497 // -2.562915447
	idctC1961 = -8034  // -1.961570560
	idctC0390 = -1597  // -0.390180644
)

// idct1D is the even/odd butterfly of the islow 1-D IDCT over 8 samples in
// 32-bit wrapping arithmetic; outputs i and 7-i are x_i + t_(3-i) and
// x_i - t_(3-i).
func idct1D(s0, s1, s2, s3, s4, s5, s6, s7 int32) (x0, x1, x2, x3, t0, t1, t2, t3 int32) {
	p1 := (s2 + s6) * idctC0541
	t2 = p1 + s6*idctC1847
	t3 = p1 + s2*idctC0765
	t0 = (s0 + s4) * 4096
	t1 = (s0 - s4) * 4096
	x0, x3 = t0+t3, t0-t3
	x1, x2 = t1+t2, t1-t2

	t0, t1, t2, t3 = s7, s5, s3, s1
	p3 := t0 + t2
	p4 := t1 + t3
	p1 = t0 + t3
	p2 := t1 + t2
	p5 := (p3 + p4) * idctC1175
	t0 *= idctC0298
	t1 *= idctC2053
	t2 *= idctC3072
	t3 *= idctC1501
	p1 = p5 + p1*idctC0899
	p2 = p5 + p2*idctC2562
	p3 *= idctC1961
	p4 *= idctC0390
	t3 += p1 + p4
	t2 += p2 + p3
	t1 += p2 + p4
	t0 += p1 + p3
	return
}

// clampByte saturates x to 0..255.
func clampByte(x int32) byte {
	if uint32(x) > 255 {
		if x < 0 {
			return 0
		}
		return 255
	}
	return byte(x)
}

// idctBlock writes the 8x8 samples of a dequantized block ([64] row-major)
// to out, whose rows are stride bytes apart. The column pass keeps 2 extra
// bits; the row pass removes the remaining 17 bits of scale with rounding
// and adds the 128 level shift.
func idctBlock(out []byte, stride int, data *[64]int16) {
	var v [64]int32
	for i := range 8 {
		d := func(r int) int32 { return int32(data[8*r+i]) }
		if d(1) == 0 && d(2) == 0 && d(3) == 0 && d(4) == 0 && d(5) == 0 && d(6) == 0 && d(7) == 0 {
			dc := d(0) * 4
			for r := range 8 {
				v[8*r+i] = dc
			}
			continue
		}
		x0, x1, x2, x3, t0, t1, t2, t3 := idct1D(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7))
		x0, x1, x2, x3 = x0+512, x1+512, x2+512, x3+512
		v[i], v[56+i] = (x0+t3)>>10, (x0-t3)>>10
		v[8+i], v[48+i] = (x1+t2)>>10, (x1-t2)>>10
		v[16+i], v[40+i] = (x2+t1)>>10, (x2-t1)>>10
		v[24+i], v[32+i] = (x3+t0)>>10, (x3-t0)>>10
	}
	const bias = 65536 + 128<<17
	for r := range 8 {
		w := v[8*r : 8*r+8]
		x0, x1, x2, x3, t0, t1, t2, t3 := idct1D(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7])
		x0, x1, x2, x3 = x0+bias, x1+bias, x2+bias, x3+bias
		o := out[r*stride : r*stride+8]
		o[0], o[7] = clampByte((x0+t3)>>17), clampByte((x0-t3)>>17)
		o[1], o[6] = clampByte((x1+t2)>>17), clampByte((x1-t2)>>17)
		o[2], o[5] = clampByte((x2+t1)>>17), clampByte((x2-t1)>>17)
		o[3], o[4] = clampByte((x3+t0)>>17), clampByte((x3-t0)>>17)
	}
}

// resampleRow upsamples w low-resolution samples into out (hs per sample);
// near is the source row closest to the output row, far the next one away.
// It returns the output row, which may be near itself.
type resampleRow func(out, near, far []byte, w, hs int) []byte

func resampleRow1(_, near, _ []byte, _, _ int) []byte { return near }

// resampleRowV2 blends two rows 3:1 (1x2 subsampling).
func resampleRowV2(out, near, far []byte, w, _ int) []byte {
	for i := range w {
		out[i] = byte((3*int(near[i]) + int(far[i]) + 2) >> 2)
	}
	return out
}

// resampleRowH2 doubles a row with 3:1 blends of neighbours (2x1
// subsampling); the end samples are copied.
func resampleRowH2(out, near, _ []byte, w, _ int) []byte {
	in := near
	if w == 1 {
		out[0], out[1] = in[0], in[0]
		return out
	}
	out[0] = in[0]
	out[1] = byte((3*int(in[0]) + int(in[1]) + 2) >> 2)
	i := 1
	for ; i < w-1; i++ {
		n := 3*int(in[i]) + 2
		out[2*i] = byte((n + int(in[i-1])) >> 2)
		out[2*i+1] = byte((n + int(in[i+1])) >> 2)
	}
	out[2*i] = byte((3*int(in[w-2]) + int(in[w-1]) + 2) >> 2)
	out[2*i+1] = in[w-1]
	return out
}

// resampleRowHV2 upsamples 2x2: a 3:1 vertical blend, then 3:1 horizontal
// blends of it at 1/16 precision; the end samples use the vertical blend alone.
func resampleRowHV2(out, near, far []byte, w, _ int) []byte {
	if w == 1 {
		v := byte((3*int(near[0]) + int(far[0]) + 2) >> 2)
		out[0], out[1] = v, v
		return out
	}
	t1 := 3*int(near[0]) + int(far[0])
	out[0] = byte((t1 + 2) >> 2)
	for i := 1; i < w; i++ {
		t0 := t1
		t1 = 3*int(near[i]) + int(far[i])
		out[2*i-1] = byte((3*t0 + t1 + 8) >> 4)
		out[2*i] = byte((3*t1 + t0 + 8) >> 4)
	}
	out[2*w-1] = byte((t1 + 2) >> 2)
	return out
}

// resampleRowGeneric replicates each sample hs times (every other ratio).
func resampleRowGeneric(out, near, _ []byte, w, hs int) []byte {
	for i := range w {
		for j := range hs {
			out[i*hs+j] = near[i]
		}
	}
	return out
}

// jpegResampler walks one component's rows down the image.
type jpegResampler struct {
	resample     resampleRow
	hs, vs       int // output samples per input sample
	ystep, ypos  int
	wLores       int // input samples per row
	line0, line1 int // offsets of the two source rows in the plane
	linebuf      []byte
}

// YCbCr -> RGB factors in 20-bit fixed point (12-bit constants shifted by 8).
const (
	ycbcrCrR = 1470208 // 1.40200
	ycbcrCrG = -748800 // -0.71414
	ycbcrCbG = -360960 // -0.34414
	ycbcrCbB = 1858048 // 1.77200
)

// ycbcrToRGB converts one sample; green's Cb term keeps only its high 16 bits.
func ycbcrToRGB(y, cb, cr byte) (r, g, b byte) {
	yFixed := int32(y)<<20 + 1<<19
	crs, cbs := int32(cr)-128, int32(cb)-128
	ri := yFixed + crs*ycbcrCrR
	gi := yFixed + crs*ycbcrCrG + int32(uint32(cbs*ycbcrCbG)&0xffff0000)
	bi := yFixed + cbs*ycbcrCbB
	return clampByte(ri >> 20), clampByte(gi >> 20), clampByte(bi >> 20)
}

// blinn8x8 is x*y/255 rounded, in stb_image's integer form.
func blinn8x8(x, y byte) byte {
	t := uint32(x)*uint32(y) + 128
	return byte((t + t>>8) >> 8)
}

// toRGB upsamples every component to full resolution row by row and
// converts to RGB: YCbCr, RGB (stb_image's rule: ids 'R','G','B', or an
// Adobe transform 0 without JFIF), CMYK (Adobe transform 0), YCCK (Adobe
// transform 2), or grey.
func (d *jpegDecoder) toRGB() *RGB {
	out := &RGB{Width: d.width, Height: d.height, Pix: make([]byte, 3*d.width*d.height)}
	res := make([]jpegResampler, len(d.comps))
	for k := range res {
		r := &res[k]
		comp := &d.comps[k]
		r.hs, r.vs = d.hMax/comp.h, d.vMax/comp.v
		r.ystep = r.vs >> 1
		r.wLores = (d.width + r.hs - 1) / r.hs
		r.linebuf = make([]byte, d.width+3)
		switch {
		case r.hs == 1 && r.vs == 1:
			r.resample = resampleRow1
		case r.hs == 1 && r.vs == 2:
			r.resample = resampleRowV2
		case r.hs == 2 && r.vs == 1:
			r.resample = resampleRowH2
		case r.hs == 2 && r.vs == 2:
			r.resample = resampleRowHV2
		default:
			r.resample = resampleRowGeneric
		}
	}
	isRGB := len(d.comps) == 3 && (d.rgbIDs == 3 || d.app14Transform == 0 && !d.jfif)
	rows := make([][]byte, len(d.comps))
	for j := range d.height {
		for k := range res {
			r := &res[k]
			comp := &d.comps[k]
			near, far := r.line0, r.line1
			if r.ystep >= r.vs>>1 {
				near, far = r.line1, r.line0
			}
			rows[k] = r.resample(r.linebuf, comp.data[near:], comp.data[far:], r.wLores, r.hs)
			r.ystep++
			if r.ystep >= r.vs {
				r.ystep = 0
				r.line0 = r.line1
				r.ypos++
				if r.ypos < comp.y {
					r.line1 += comp.w2
				}
			}
		}
		o := out.Pix[3*d.width*j : 3*d.width*(j+1)]
		w := d.width
		switch {
		case len(d.comps) == 1:
			for i, v := range rows[0][:w] {
				o[3*i], o[3*i+1], o[3*i+2] = v, v, v
			}
		case isRGB:
			r, g, b := rows[0][:w], rows[1][:w], rows[2][:w]
			for i := range w {
				o[3*i], o[3*i+1], o[3*i+2] = r[i], g[i], b[i]
			}
		case len(d.comps) == 4 && d.app14Transform == 0: // CMYK
			c, m, y, k := rows[0][:w], rows[1][:w], rows[2][:w], rows[3][:w]
			for i := range w {
				o[3*i], o[3*i+1], o[3*i+2] = blinn8x8(c[i], k[i]), blinn8x8(m[i], k[i]), blinn8x8(y[i], k[i])
			}
		case len(d.comps) == 4 && d.app14Transform == 2: // YCCK
			y, cb, cr, k := rows[0][:w], rows[1][:w], rows[2][:w], rows[3][:w]
			for i := range w {
				r, g, b := ycbcrToRGB(y[i], cb[i], cr[i])
				o[3*i], o[3*i+1], o[3*i+2] = blinn8x8(255-r, k[i]), blinn8x8(255-g, k[i]), blinn8x8(255-b, k[i])
			}
		default: // YCbCr, and YCbCr with a fourth component that is ignored
			y, cb, cr := rows[0][:w], rows[1][:w], rows[2][:w]
			for i := range w {
				o[3*i], o[3*i+1], o[3*i+2] = ycbcrToRGB(y[i], cb[i], cr[i])
			}
		}
	}
	return out
}
