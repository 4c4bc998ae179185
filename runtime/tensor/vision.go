package tensor

import "fmt"

// The ops of a vision tower (a ViT encoder, Qwen3-VL's qwen3vl_merger): a
// LayerNorm without its affine part, GELU, the 2-D rotary embedding of image
// patches, attention of every row over every row with no KV cache, and a
// reshape. A tower graph runs over the patches of one image: its rows are
// patches, not tokens of sequences.

// Norm normalises each row of x [T, d] to zero mean and unit variance:
// (x - mean) / sqrt(var + eps), mean and variance over the row (ggml_norm,
// a LayerNorm before its weight and bias, which MulRow and AddRow apply).
func (b *Builder) Norm(x Tensor, eps float32) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	if x.DType != F32 {
		return b.fail("norm: x is %v, want f32", x.DType)
	}
	return b.push(Op{Kind: OpNorm, Args: []Tensor{x}, Eps: eps, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// GELU applies ggml's tanh GELU to every element of x [T, d] through its
// fp16 table: y = fp16(gelu(fp16(x))) for -10 < x < 10, 0 at or below -10,
// x at or above 10 (ggml_vec_gelu_f32 with GGML_GELU_FP16).
func (b *Builder) GELU(x Tensor) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	if x.DType != F32 {
		return b.fail("gelu: x is %v, want f32", x.DType)
	}
	return b.push(Op{Kind: OpGELU, Args: []Tensor{x}, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// RoPE2D rotates each head of x [T, heads*HeadDim] by the 2-D position of
// its row, ys [T] and xs [T] (i32: a patch's row and column): pairs
// (i, i + HeadDim/2) of a head, the first HeadDim/4 pairs by y and the rest
// by x, pair k of a section turning by position x Base^(-k/(HeadDim/4))
// (ggml_rope_multi in vision mode with sections [d/4, d/4, d/4, d/4]).
// a.Dims must equal a.HeadDim, a multiple of 4.
func (b *Builder) RoPE2D(x, ys, xs Tensor, a RoPEArgs) Tensor {
	if b.bad(x, ys, xs) {
		return Tensor{ID: -1}
	}
	if a.HeadDim <= 0 || a.HeadDim%4 != 0 || a.Dims != a.HeadDim || x.Cols()%a.HeadDim != 0 || !(a.Base > 0) {
		return b.fail("rope_2d: head_dim %d / dims %d / base %g for row width %d: want dims = head_dim, a multiple of 4 dividing the row, and a positive base",
			a.HeadDim, a.Dims, a.Base, x.Cols())
	}
	if ys.DType != I32 || xs.DType != I32 || ys.Rows() != x.Rows() || xs.Rows() != x.Rows() || ys.Cols() != 1 || xs.Cols() != 1 {
		return b.fail("rope_2d: positions %v %v and %v %v for %d rows, want i32 [%d] each", ys.DType, ys.Shape, xs.DType, xs.Shape, x.Rows(), x.Rows())
	}
	return b.push(Op{Kind: OpRoPE2D, Args: []Tensor{x, ys, xs}, RoPE: a, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// SelfAttention is softmax(q k^T x Scale) v per head over all rows of the
// graph, with no mask and no KV cache: q, k, v [T, Heads*HeadDim] ->
// [T, Heads*HeadDim] (an encoder's attention over one image's patches).
// a.Layer and a.NonCausal are unused; KVHeads must equal Heads.
func (b *Builder) SelfAttention(q, k, v Tensor, a AttentionArgs) Tensor {
	if b.bad(q, k, v) {
		return Tensor{ID: -1}
	}
	if a.Heads <= 0 || a.KVHeads != a.Heads || a.HeadDim <= 0 {
		return b.fail("self_attention: %d heads, %d kv heads of %d: want equal head counts", a.Heads, a.KVHeads, a.HeadDim)
	}
	if q.Shape != k.Shape || k.Shape != v.Shape || q.Cols() != a.Heads*a.HeadDim {
		return b.fail("self_attention: q %v k %v v %v do not fit %d heads of %d", q.Shape, k.Shape, v.Shape, a.Heads, a.HeadDim)
	}
	return b.push(Op{Kind: OpSelfAttention, Args: []Tensor{q, k, v}, Attn: a, Out: Tensor{Shape: q.Shape, DType: F32}})
}

// Reshape returns x [T, d] read as [T*d/cols, cols], the same values in the
// same order (an image's consecutive patches merged into one row).
func (b *Builder) Reshape(x Tensor, cols int) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	n := x.Rows() * x.Cols()
	if cols <= 0 || n%cols != 0 || x.DType != F32 {
		return b.fail("reshape: %v %v into rows of %d", x.DType, x.Shape, cols)
	}
	return b.push(Op{Kind: OpReshape, Args: []Tensor{x}, Out: Tensor{Shape: [2]int{n / cols, cols}, DType: F32}})
}

// The ops a text model needs to read images: rows of input embeddings in
// place of token embeddings, and M-RoPE positions.

// MixRows returns x [T, d] with every row r whose mask[r] is not zero
// replaced by y's row r (y [T, d] f32, mask [T] i32): an image's token
// rows take the tower's embeddings.
func (b *Builder) MixRows(x, y, mask Tensor) Tensor {
	if b.bad(x, y, mask) {
		return Tensor{ID: -1}
	}
	if x.Shape != y.Shape || y.DType != F32 || mask.DType != I32 || mask.Rows() != x.Rows() || mask.Cols() != 1 {
		return b.fail("mix_rows: x %v, y %v %v and mask %v %v, want equal shapes and an i32 mask of %d rows",
			x.Shape, y.DType, y.Shape, mask.DType, mask.Shape, x.Rows())
	}
	return b.push(Op{Kind: OpMixRows, Args: []Tensor{x, y, mask}, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// MRoPE is RoPE with a position of three components per row, t, h and w
// ([T] i32 each), interleaved over the rotated pairs as ggml's IMROPE
// does (Qwen3.5): pair i takes component s = i mod (s0+s1+s2) by
// s%3 == 0 -> t (while s < 3 s0), 1 -> h (s < 3 s1), 2 -> w (s < 3 s2),
// with sections = a.Sections; every pair must fall to one of them. Each
// component's angle is its position x Base^(-2i/Dims), as RoPE's, so a
// row whose three components are equal rotates exactly as RoPE at that
// position. a.Mode must be RoPENeox.
func (b *Builder) MRoPE(x, t, h, w Tensor, a RoPEArgs) Tensor {
	if b.bad(x, t, h, w) {
		return Tensor{ID: -1}
	}
	if a.HeadDim <= 0 || x.Cols()%a.HeadDim != 0 || a.Dims <= 0 || a.Dims > a.HeadDim || a.Dims%2 != 0 || a.Mode != RoPENeox {
		return b.fail("mrope: bad head_dim %d / dims %d / mode %d for row width %d", a.HeadDim, a.Dims, a.Mode, x.Cols())
	}
	if _, err := a.SectionComponents(); err != nil {
		return b.fail("mrope: %v", err)
	}
	for _, p := range []Tensor{t, h, w} {
		if p.DType != I32 || p.Rows() != x.Rows() || p.Cols() != 1 {
			return b.fail("mrope: positions %v %v for %d rows, want i32 [%d]", p.DType, p.Shape, x.Rows(), x.Rows())
		}
	}
	return b.push(Op{Kind: OpMRoPE, Args: []Tensor{x, t, h, w}, RoPE: a, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// SectionComponents returns, for each rotated pair of an MRoPE, the
// position component it turns by: 0 (t), 1 (h) or 2 (w).
func (a RoPEArgs) SectionComponents() ([]int, error) {
	s := a.Sections
	total := s[0] + s[1] + s[2] + s[3]
	if total <= 0 || s[0] < 0 || s[1] < 0 || s[2] < 0 || s[3] < 0 {
		return nil, fmt.Errorf("sections %v: want non-negative counts with a positive sum", s)
	}
	out := make([]int, a.Dims/2)
	for i := range out {
		sector := i % total
		switch {
		case sector%3 == 1 && sector < 3*s[1]:
			out[i] = 1
		case sector%3 == 2 && sector < 3*s[2]:
			out[i] = 2
		case sector%3 == 0 && sector < 3*s[0]:
			out[i] = 0
		default:
			return nil, fmt.Errorf("sections %v: pair %d turns by a fourth component, which text and image positions do not have", s, i)
		}
	}
	return out, nil
}
