package vision

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Normalize returns the pixels of img as float32 x = (u/255 - mean[c]) /
// std[c] (clip_image_f32::from_u8 then normalize in llama.cpp), laid out
// [Height, Width, 3] like img.
func Normalize(img *RGB, mean, std [3]float32) []float32 {
	out := make([]float32, len(img.Pix))
	for i, u := range img.Pix {
		c := i % 3
		v := float32(u) / 255
		out[i] = float32(v-mean[c]) / std[c]
	}
	return out
}

// RoundToHalf rounds every value of xs to the nearest binary16 in place:
// what ggml's F16 im2col does to the patch convolution's input.
func RoundToHalf(xs []float32) {
	for i, x := range xs {
		xs[i] = tensor.F16ToF32(tensor.F32ToF16(x))
	}
}

// Preprocessed is an image ready for the patch embedding.
type Preprocessed struct {
	SourceWidth, SourceHeight int
	// Image is the resized, padded 8-bit image the tower sees.
	Image *RGB
	// Resized reports whether Image differs in size from the source.
	Resized bool
	// Pixels are Image normalised and rounded to fp16, [Height, Width, 3].
	Pixels []float32
	// Grid is the merged-token grid: Image.Width/Factor x Image.Height/Factor.
	Grid Grid
}

// Options are a projector's preprocessing parameters.
type Options struct {
	Budget    Budget
	Mean, Std [3]float32
	Limits    DecodeLimits
}

// Preprocess decodes data and prepares it for the tower: Decode,
// Budget.Target, Fit, Normalize and RoundToHalf.
func Preprocess(data []byte, o Options) (*Preprocessed, error) {
	if err := o.Budget.Validate(); err != nil {
		return nil, err
	}
	src, _, err := Decode(data, o.Limits)
	if err != nil {
		return nil, err
	}
	return PreprocessRGB(src, o)
}

// PreprocessRGB is Preprocess for an image already decoded.
func PreprocessRGB(src *RGB, o Options) (*Preprocessed, error) {
	if err := o.Budget.Validate(); err != nil {
		return nil, err
	}
	if src.Width <= 0 || src.Height <= 0 {
		return nil, fmt.Errorf("vision: %w: %dx%d", ErrEmptyImage, src.Width, src.Height)
	}
	if len(src.Pix) != 3*src.Width*src.Height {
		return nil, fmt.Errorf("vision: %w: %dx%d RGB image holds %d bytes", ErrCorrupt, src.Width, src.Height, len(src.Pix))
	}
	w, h := o.Budget.Target(src.Width, src.Height)
	img := Fit(src, w, h)
	px := Normalize(img, o.Mean, o.Std)
	RoundToHalf(px)
	return &Preprocessed{
		SourceWidth: src.Width, SourceHeight: src.Height,
		Image: img, Resized: w != src.Width || h != src.Height, Pixels: px,
		Grid: Grid{NX: w / o.Budget.Factor, NY: h / o.Budget.Factor},
	}, nil
}
