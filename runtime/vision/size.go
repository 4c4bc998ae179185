package vision

import (
	"fmt"
	"math"
)

// Budget is the dynamic-resolution rule of a projector: the resized image's
// sides are multiples of Factor (patch size x spatial merge) and its area
// lies within [MinPixels, MaxPixels] (llama.cpp's
// img_tool::calc_size_preserved_ratio with clip.cpp's image-token limits).
type Budget struct {
	Factor    int // patch x merge, 32 for Qwen3-VL
	MinPixels int // min image tokens x Factor², 8 x 1024 for Qwen3-VL
	MaxPixels int // max image tokens x Factor², 4096 x 1024 for Qwen3-VL
}

// Qwen3VLBudget returns the budget llama.cpp uses for a qwen3vl_merger
// projector with the given patch size and spatial merge: 8 to 4096 merged
// image tokens.
func Qwen3VLBudget(patch, merge int) Budget {
	f := patch * merge
	return Budget{Factor: f, MinPixels: 8 * f * f, MaxPixels: 4096 * f * f}
}

// Validate reports a budget that cannot produce a size.
func (b Budget) Validate() error {
	if b.Factor <= 0 || b.MinPixels < 0 || b.MaxPixels < b.Factor*b.Factor || b.MinPixels > b.MaxPixels {
		return fmt.Errorf("vision: invalid resize budget %+v", b)
	}
	return nil
}

// Target returns the size (w', h') an image of w x h is resized to. All
// arithmetic is float32 with C's rounding, as in llama.cpp: round the sides
// to the nearest multiple of Factor (at least Factor); if the area is above
// MaxPixels scale down by sqrt(area/MaxPixels) rounding the sides down; if
// below MinPixels scale up by sqrt(MinPixels/area) rounding the sides up.
func (b Budget) Target(w, h int) (int, int) {
	f := float32(b.Factor)
	fw, fh := float32(w), float32(h)
	wb := max(b.Factor, int(roundHalfAway(float32(fw/f)))*b.Factor)
	hb := max(b.Factor, int(roundHalfAway(float32(fh/f)))*b.Factor)
	switch {
	case wb*hb > b.MaxPixels:
		beta := float32(math.Sqrt(float64(float32(fh*fw) / float32(b.MaxPixels))))
		hb = max(b.Factor, int(math.Floor(float64(float32(float32(fh/beta)/f))))*b.Factor)
		wb = max(b.Factor, int(math.Floor(float64(float32(float32(fw/beta)/f))))*b.Factor)
	case wb*hb < b.MinPixels:
		beta := float32(math.Sqrt(float64(float32(b.MinPixels) / float32(fh*fw))))
		hb = int(math.Ceil(float64(float32(float32(fh*beta)/f)))) * b.Factor
		wb = int(math.Ceil(float64(float32(float32(fw*beta)/f)))) * b.Factor
	}
	return wb, hb
}

// roundHalfAway is C's roundf: halves go away from zero.
func roundHalfAway(x float32) float32 { return float32(math.Round(float64(x))) }

// Grid is the merged-token grid of a preprocessed image: NX tokens per row,
// NY rows, NX x NY image tokens (clip_n_output_tokens_x/_y for Qwen3-VL).
type Grid struct{ NX, NY int }

// Tokens returns the number of image tokens, NX x NY.
func (g Grid) Tokens() int { return g.NX * g.NY }

// Positions returns the number of text positions the image takes, max(NX,
// NY): the text after it resumes at P + Positions().
func (g Grid) Positions() int { return max(g.NX, g.NY) }
