package tensor

import "fmt"

// The ops of hybrid models (Qwen3.5's Gated DeltaNet layers and gated
// attention): column selection, element-wise functions and products, L2
// normalisation, and the two ops that keep a per-sequence recurrent state
// (ShortConv, DeltaRule). Like Attention with the KV cache, the stateful
// ops hide their state: they read and write the state slot of each row's
// sequence (exec.Batch.StateSlots), reset to zero at a sequence's position
// 0, and process a sequence's rows in order, so a prompt fed in chunks
// over several steps gives the same result as in one step.

// UnaryFn is the function of an OpUnary.
type UnaryFn uint8

// Unary functions.
const (
	Sigmoid  UnaryFn = iota + 1 // 1 / (1 + exp(-x))
	SiLU                        // x * sigmoid(x)
	Softplus                    // log(1 + exp(x)); x above 20 passes through (ggml's threshold)
)

func (f UnaryFn) String() string {
	switch f {
	case Sigmoid:
		return "sigmoid"
	case SiLU:
		return "silu"
	case Softplus:
		return "softplus"
	}
	return fmt.Sprintf("unary(%d)", f)
}

// StateArgs configures a stateful op. Layer is the state layer (an index
// among the model's state layers, not its layer number).
type StateArgs struct {
	Layer int
	// ShortConv: Kernel taps per channel (the state keeps Kernel-1 inputs).
	Kernel int
	// DeltaRule: KeyHeads heads of KeyDim for q and k, ValueHeads heads of
	// ValueDim for v and the output; value head h reads key head
	// h % KeyHeads. Scale multiplies q.
	KeyHeads, KeyDim, ValueHeads, ValueDim int
	Scale                                  float32
}

// ConvStateFloats is the state ShortConv keeps per sequence for x of
// channels columns: the last Kernel-1 inputs.
func (a StateArgs) ConvStateFloats(channels int) int { return (a.Kernel - 1) * channels }

// DeltaStateFloats is the state DeltaRule keeps per sequence: one
// KeyDim x ValueDim matrix per value head.
func (a StateArgs) DeltaStateFloats() int { return a.ValueHeads * a.KeyDim * a.ValueDim }

// Columns returns, from each group of group columns of x [T, d], the width
// columns starting at offset: [T, d/group*width]. With group = d it is a
// plain column range; with group = a head's width it takes one part of
// every head (the query half of Qwen3.5's [q | gate] heads).
func (b *Builder) Columns(x Tensor, group, offset, width int) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	if group <= 0 || x.Cols()%group != 0 || offset < 0 || width <= 0 || offset+width > group {
		return b.fail("columns: group %d offset %d width %d do not fit row width %d", group, offset, width, x.Cols())
	}
	return b.push(Op{Kind: OpColumns, Args: []Tensor{x}, Group: group, Offset: offset, Width: width,
		Out: Tensor{Shape: [2]int{x.Rows(), x.Cols() / group * width}, DType: F32}})
}

// Concat joins the columns of x [T, a] and y [T, b] into [T, a+b]: each
// row is x's row followed by y's (an MTP head's [enorm(embed) ; hnorm(h)]).
func (b *Builder) Concat(x, y Tensor) Tensor {
	if b.bad(x, y) {
		return Tensor{ID: -1}
	}
	if x.Rows() != y.Rows() || x.DType != F32 || y.DType != F32 {
		return b.fail("concat: %v %v and %v %v", x.DType, x.Shape, y.DType, y.Shape)
	}
	return b.push(Op{Kind: OpConcat, Args: []Tensor{x, y}, Out: Tensor{Shape: [2]int{x.Rows(), x.Cols() + y.Cols()}, DType: F32}})
}

// Unary applies fn to every element of x [T, d].
func (b *Builder) Unary(x Tensor, fn UnaryFn) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	if fn < Sigmoid || fn > Softplus {
		return b.fail("unary: unknown function %v", fn)
	}
	return b.push(Op{Kind: OpUnary, Args: []Tensor{x}, Fn: fn, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// Mul returns x * y element-wise for x [T, d] and y [T, d], or y [T, 1]
// scaling each row of x.
func (b *Builder) Mul(x, y Tensor) Tensor {
	if b.bad(x, y) {
		return Tensor{ID: -1}
	}
	if x.Shape != y.Shape && (y.Rows() != x.Rows() || y.Cols() != 1) {
		return b.fail("mul: shapes %v and %v differ", x.Shape, y.Shape)
	}
	return b.push(Op{Kind: OpMul, Args: []Tensor{x, y}, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// MulRow returns x [T, d] with every row multiplied element-wise by the
// f32 weight w (d elements).
func (b *Builder) MulRow(x, w Tensor) Tensor { return b.rowOp(OpMulRow, x, w) }

// L2Norm divides each contiguous group of `group` elements of x [T, d] by
// max(its L2 norm, eps), as ggml_l2_norm.
func (b *Builder) L2Norm(x Tensor, group int, eps float32) Tensor {
	if b.bad(x) {
		return Tensor{ID: -1}
	}
	if group <= 0 || x.Cols()%group != 0 {
		return b.fail("l2_norm: group %d does not divide row width %d", group, x.Cols())
	}
	return b.push(Op{Kind: OpL2Norm, Args: []Tensor{x}, Group: group, Eps: eps, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// ShortConv is a causal depthwise convolution over the sequence: for x
// [T, C] and the f32 weight w [C, K] (row c holds channel c's taps, tap
// K-1 multiplying the current input), out[t, c] = sum_j w[c, j] *
// in[t-K+1+j, c], where inputs before the sequence's first are zero and
// inputs of earlier steps come from the state (a.Layer, a.Kernel = K).
func (b *Builder) ShortConv(x, w Tensor, a StateArgs) Tensor {
	if b.bad(x, w) {
		return Tensor{ID: -1}
	}
	if w.DType != F32 || w.Rows() != x.Cols() || w.Cols() != a.Kernel || a.Kernel < 1 || a.Layer < 0 {
		return b.fail("short_conv: weight %v [%d,%d] for %d channels, kernel %d, layer %d", w.DType, w.Rows(), w.Cols(), x.Cols(), a.Kernel, a.Layer)
	}
	return b.push(Op{Kind: OpShortConv, Args: []Tensor{x, w}, State: a, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// DeltaRule is the gated delta rule (Gated DeltaNet's recurrence) over
// each row in order: with q, k [T, KeyHeads*KeyDim], v [T,
// ValueHeads*ValueDim] and g, beta [T, ValueHeads], for every value head h
// (key head h % KeyHeads) and its state S [KeyDim, ValueDim]:
//
//	S = exp(g) * S
//	S += k (beta * (v - S^T k))^T
//	o = S^T (Scale * q)
//
// giving o [T, ValueHeads*ValueDim]. S is the sequence's state of layer
// a.Layer, zero at its position 0.
func (b *Builder) DeltaRule(q, k, v, g, beta Tensor, a StateArgs) Tensor {
	if b.bad(q, k, v, g, beta) {
		return Tensor{ID: -1}
	}
	kd, vd := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim
	switch {
	case a.KeyHeads <= 0 || a.ValueHeads%a.KeyHeads != 0 || a.KeyDim <= 0 || a.ValueDim <= 0 || a.Layer < 0:
		return b.fail("delta_rule: %d key heads of %d, %d value heads of %d, layer %d", a.KeyHeads, a.KeyDim, a.ValueHeads, a.ValueDim, a.Layer)
	case q.Cols() != kd || k.Cols() != kd || v.Cols() != vd || g.Cols() != a.ValueHeads || beta.Cols() != a.ValueHeads:
		return b.fail("delta_rule: q %v k %v v %v g %v beta %v do not fit %d/%d heads of %d/%d", q.Shape, k.Shape, v.Shape, g.Shape, beta.Shape,
			a.KeyHeads, a.ValueHeads, a.KeyDim, a.ValueDim)
	case k.Rows() != q.Rows() || v.Rows() != q.Rows() || g.Rows() != q.Rows() || beta.Rows() != q.Rows():
		return b.fail("delta_rule: row counts differ")
	}
	return b.push(Op{Kind: OpDeltaRule, Args: []Tensor{q, k, v, g, beta}, State: a, Out: Tensor{Shape: v.Shape, DType: F32}})
}

// StateLayers returns, for a graph's stateful ops, the state each state
// layer needs per sequence, in floats: conv[l] for ShortConv and delta[l]
// for DeltaRule (0 where layer l has none). A layer's ops must agree.
func (g *Graph) StateLayers() (conv, delta []int, err error) {
	grow := func(s []int, l int) []int {
		for len(s) <= l {
			s = append(s, 0)
		}
		return s
	}
	set := func(s []int, l, n int, what string) ([]int, error) {
		s = grow(s, l)
		if s[l] != 0 && s[l] != n {
			return s, fmt.Errorf("state layer %d: %s state of %d and %d floats", l, what, s[l], n)
		}
		s[l] = n
		return s, nil
	}
	for _, op := range g.Ops {
		switch op.Kind {
		case OpShortConv:
			conv, err = set(conv, op.State.Layer, op.State.ConvStateFloats(op.Out.Cols()), "conv")
		case OpDeltaRule:
			delta, err = set(delta, op.State.Layer, op.State.DeltaStateFloats(), "delta")
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return conv, delta, nil
}
