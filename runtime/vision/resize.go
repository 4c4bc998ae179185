package vision

import "math"

// Fit resizes src into a black w x h canvas keeping its aspect ratio, as
// llama.cpp's img_tool::resize does with PAD_CEIL: an image already w x h is
// copied; otherwise scale = min(w/src.Width, h/src.Height) in float32, the
// image is resampled (Resample) to (min(ceil(src.Width scale), w),
// min(ceil(src.Height scale), h)) and pasted at ((w - nw)/2, (h - nh)/2).
func Fit(src *RGB, w, h int) *RGB {
	if src.Width == w && src.Height == h {
		return &RGB{Width: w, Height: h, Pix: append([]byte(nil), src.Pix...)}
	}
	scale := min(float32(w)/float32(src.Width), float32(h)/float32(src.Height))
	nw := min(int(math.Ceil(float64(float32(float32(src.Width)*scale)))), w)
	nh := min(int(math.Ceil(float64(float32(float32(src.Height)*scale)))), h)
	inner := Resample(src, nw, nh)
	if nw == w && nh == h {
		return inner
	}
	out := &RGB{Width: w, Height: h, Pix: make([]byte, 3*w*h)}
	ox, oy := (w-nw)/2, (h-nh)/2
	for y := range nh {
		copy(out.Pix[3*((oy+y)*w+ox):], inner.Pix[3*y*nw:3*(y+1)*nw])
	}
	return out
}

// Resample resizes src to w x h with Pillow's separable bicubic filter
// (a = -0.5), as llama.cpp's img_tool::resize_pillow does: the horizontal
// pass first, then the vertical one, each skipped when that side keeps its
// size, with uint8 pixels between the passes. w and h must be positive.
func Resample(src *RGB, w, h int) *RGB {
	cur := src
	if w != cur.Width {
		cur = resamplePass(cur, w, cur.Height, true)
	}
	if h != cur.Height {
		cur = resamplePass(cur, cur.Width, h, false)
	}
	if cur == src {
		cur = &RGB{Width: w, Height: h, Pix: append([]byte(nil), src.Pix...)}
	}
	return cur
}

// Fixed-point layout of Pillow's 8-bit resampler: weights carry 22
// fractional bits and the accumulator starts at one half.
const (
	precisionBits = 22
	bicubicA      = -0.5
	bicubicRadius = 2.0
)

// bicubic is the Keys cubic kernel with a = -0.5.
func bicubic(x float64) float64 {
	x = math.Abs(x)
	switch {
	case x < 1:
		return ((bicubicA+2)*x-(bicubicA+3))*x*x + 1
	case x < 2:
		return (((x-5)*x+8)*x - 4) * bicubicA
	}
	return 0
}

// kernel holds, for each output index, the first input index it reads and
// its fixed-point weights.
type kernel struct {
	first   []int
	weights [][]int32
}

// coefficients computes Pillow's resampling weights for inSize -> outSize:
// support widened by the scale when downsampling, weights normalised per
// output pixel, then rounded half away from zero to 22 fractional bits.
func coefficients(inSize, outSize int) kernel {
	scale := float64(inSize) / float64(outSize)
	filterScale := max(scale, 1)
	support := bicubicRadius * filterScale
	k := kernel{first: make([]int, outSize), weights: make([][]int32, outSize)}
	raw := make([]float64, int(math.Ceil(support))*2+1)
	for xx := range outSize {
		center := (float64(xx) + 0.5) * scale
		xmin := max(int(center-support+0.5), 0)
		xmax := min(int(center+support+0.5), inSize) - xmin
		var sum float64
		for x := range xmax {
			raw[x] = bicubic((float64(x+xmin) - center + 0.5) / filterScale)
			sum += raw[x]
		}
		ws := make([]int32, xmax)
		for x := range xmax {
			v := raw[x]
			if sum != 0 {
				v /= sum
			}
			if v < 0 {
				ws[x] = int32(math.Trunc(-0.5 + v*(1<<precisionBits)))
			} else {
				ws[x] = int32(math.Trunc(0.5 + v*(1<<precisionBits)))
			}
		}
		k.first[xx], k.weights[xx] = xmin, ws
	}
	return k
}

// resamplePass resizes one axis of src (horizontal when horizontal is true)
// to w x h.
func resamplePass(src *RGB, w, h int, horizontal bool) *RGB {
	out := &RGB{Width: w, Height: h, Pix: make([]byte, 3*w*h)}
	if horizontal {
		k := coefficients(src.Width, w)
		for y := range h {
			row := src.Pix[3*y*src.Width:]
			for x := range w {
				accumulate(out.Pix[3*(y*w+x):], row, k.first[x], 3, k.weights[x])
			}
		}
		return out
	}
	k := coefficients(src.Height, h)
	stride := 3 * src.Width
	for y := range h {
		for x := range w {
			accumulate(out.Pix[3*(y*w+x):], src.Pix[3*x:], k.first[y], stride, k.weights[y])
		}
	}
	return out
}

// accumulate writes the 3 channels of one output pixel: the weighted sum of
// the input pixels first, first+1, ... (step bytes apart in in), rounded and
// clamped to 0..255.
func accumulate(dst, in []byte, first, step int, ws []int32) {
	for c := range 3 {
		acc := int64(1) << (precisionBits - 1)
		for i, w := range ws {
			acc += int64(in[(first+i)*step+c]) * int64(w)
		}
		dst[c] = clamp8(acc >> precisionBits)
	}
}

func clamp8(v int64) byte {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return byte(v)
}
