package tensor

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
