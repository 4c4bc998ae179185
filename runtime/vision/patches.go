package vision

// Layout describes how a preprocessed image is cut for the tower: Patch x
// Patch pixel patches, Merge x Merge patches per image token.
type Layout struct {
	Patch, Merge int
	// PW, PH are the image's size in patches (width/Patch, height/Patch);
	// both are multiples of Merge.
	PW, PH int
}

// LayoutOf returns the layout of p for a tower with the given patch size
// and spatial merge.
func LayoutOf(p *Preprocessed, patch, merge int) Layout {
	return Layout{Patch: patch, Merge: merge, PW: p.Image.Width / patch, PH: p.Image.Height / patch}
}

// Patches returns the number of patches, PW x PH.
func (l Layout) Patches() int { return l.PW * l.PH }

// MergeOrder returns, for each patch in the order the tower processes
// them, its (row, column) in the patch grid: Merge x Merge blocks row-major,
// and inside a block (0,0), (0,1), (1,0), (1,1) for Merge 2, so that each
// image token's patches are consecutive (llama.cpp's qwen2vl/qwen3vl
// input). The rows and columns are also the patches' 2-D rotary positions
// (y, x).
func (l Layout) MergeOrder() [][2]int {
	out := make([][2]int, 0, l.Patches())
	for by := 0; by < l.PH; by += l.Merge {
		for bx := 0; bx < l.PW; bx += l.Merge {
			for dy := range l.Merge {
				for dx := range l.Merge {
					out = append(out, [2]int{by + dy, bx + dx})
				}
			}
		}
	}
	return out
}

// PatchRows returns the patch convolution's input as rows, one per patch in
// MergeOrder: [Patches(), 3 x Patch x Patch], columns ordered channel,
// kernel row, kernel column (ggml's im2col for a [Patch, Patch, 3, width]
// kernel). p.Pixels are already rounded to fp16.
func (l Layout) PatchRows(p *Preprocessed) []float32 {
	k := l.Patch
	cols := 3 * k * k
	out := make([]float32, l.Patches()*cols)
	w := p.Image.Width
	for i, yx := range l.MergeOrder() {
		row := out[i*cols : (i+1)*cols]
		for c := range 3 {
			for ky := range k {
				for kx := range k {
					y, x := yx[0]*k+ky, yx[1]*k+kx
					row[(c*k+ky)*k+kx] = p.Pixels[(y*w+x)*3+c]
				}
			}
		}
	}
	return out
}

// PositionEmbeddings resizes the learned position table to the layout's
// patch grid and returns it in MergeOrder: [Patches(), width]. table is
// [grid*grid, width], row gy*grid+gx. The resize is ggml's bilinear with
// aligned corners: output row i reads input coordinate i / ((PH-1)/(grid-1))
// in float32, likewise for columns (ggml_compute_forward_upscale_f32).
func (l Layout) PositionEmbeddings(table []float32, grid, width int) []float32 {
	resized := make([]float32, l.PH*l.PW*width) // [PH, PW, width], row-major
	sy := alignCornersScale(grid, l.PH)
	sx := alignCornersScale(grid, l.PW)
	for oy := range l.PH {
		fy := float32(oy) / sy
		y0 := min(int(fy), grid-1)
		y1 := min(y0+1, grid-1)
		dy := fy - float32(y0)
		for ox := range l.PW {
			fx := float32(ox) / sx
			x0 := min(int(fx), grid-1)
			x1 := min(x0+1, grid-1)
			dx := fx - float32(x0)
			dst := resized[(oy*l.PW+ox)*width:][:width]
			a, b := table[(y0*grid+x0)*width:], table[(y0*grid+x1)*width:]
			c, d := table[(y1*grid+x0)*width:], table[(y1*grid+x1)*width:]
			for e := range width {
				dst[e] = a[e]*(1-dx)*(1-dy) + b[e]*dx*(1-dy) + c[e]*(1-dx)*dy + d[e]*dx*dy
			}
		}
	}
	out := make([]float32, len(resized))
	for i, yx := range l.MergeOrder() {
		copy(out[i*width:(i+1)*width], resized[(yx[0]*l.PW+yx[1])*width:][:width])
	}
	return out
}

// alignCornersScale is ggml's scale factor of an aligned-corner resize
// from in to out samples: output index i reads input coordinate i / scale.
// A side of one sample on either end keeps the plain ratio out/in.
func alignCornersScale(in, out int) float32 {
	if in <= 1 || out <= 1 {
		return float32(out) / float32(in)
	}
	return float32(out-1) / float32(in-1)
}

// DecoderPositions returns the text model's M-RoPE position (t, h, w, e) of
// each image token of grid g when the image starts at position start:
// token i (row-major over NY rows of NX) gets (start, start + i/NX,
// start + i%NX, 0). Text after the image resumes at start + g.Positions().
func (g Grid) DecoderPositions(start int) [][4]int32 {
	out := make([][4]int32, g.Tokens())
	for i := range out {
		out[i] = [4]int32{int32(start), int32(start + i/g.NX), int32(start + i%g.NX), 0}
	}
	return out
}
