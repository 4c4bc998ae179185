package tensor

import (
	"fmt"
	"strings"
)

// Tensor is a handle to a value recorded in a Graph. Shapes are row-major:
// Shape[0] is the number of rows (tokens), Shape[1] the row width.
type Tensor struct {
	ID    int
	Shape [2]int
	DType DType
}

// Rows is the number of rows of t.
func (t Tensor) Rows() int { return t.Shape[0] }

// Cols is the row width of t.
func (t Tensor) Cols() int { return t.Shape[1] }

// OpKind names one op of the closed op set every backend implements.
type OpKind uint8

// The closed op set. Each op's contract is documented on the Builder method that records it.
const (
	OpInput OpKind = iota + 1
	OpWeight
	OpGetRows
	OpRMSNorm
	OpMatMul
	OpRoPE
	OpAttention
	OpAdd
	OpSwiGLU
	OpSelectRows
	OpAddRow
	OpColumns       // hybrid.go
	OpUnary         // hybrid.go
	OpMul           // hybrid.go
	OpMulRow        // hybrid.go
	OpL2Norm        // hybrid.go
	OpShortConv     // hybrid.go
	OpDeltaRule     // hybrid.go
	OpMoE           // moe.go
	OpConcat        // hybrid.go
	OpNorm          // vision.go
	OpGELU          // vision.go
	OpRoPE2D        // vision.go
	OpSelfAttention // vision.go
	OpReshape       // vision.go
	OpMixRows       // vision.go
	OpMRoPE         // vision.go
)

var opNames = [...]string{
	OpInput: "input", OpWeight: "weight", OpGetRows: "get_rows", OpRMSNorm: "rms_norm",
	OpMatMul: "matmul", OpRoPE: "rope", OpAttention: "attention", OpAdd: "add",
	OpSwiGLU: "swiglu", OpSelectRows: "select_rows", OpAddRow: "add_row",
	OpColumns: "columns", OpUnary: "unary", OpMul: "mul", OpMulRow: "mul_row", OpL2Norm: "l2_norm",
	OpShortConv: "short_conv", OpDeltaRule: "delta_rule", OpMoE: "moe", OpConcat: "concat",
	OpNorm: "norm", OpGELU: "gelu", OpRoPE2D: "rope_2d", OpSelfAttention: "self_attention", OpReshape: "reshape",
	OpMixRows: "mix_rows", OpMRoPE: "mrope",
}

func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("op(%d)", k)
}

// RoPEMode selects how rotary embeddings pair the elements of a head.
type RoPEMode uint8

const (
	// RoPENorm rotates adjacent pairs (x[2i], x[2i+1]) (llama).
	RoPENorm RoPEMode = iota + 1
	// RoPENeox rotates halves (x[i], x[i+d/2]) (qwen2, qwen3).
	RoPENeox
)

// AttentionArgs configures an OpAttention.
type AttentionArgs struct {
	Layer   int     // KV cache layer written and read
	Heads   int     // query heads
	KVHeads int     // key/value heads; Heads % KVHeads == 0
	HeadDim int     // elements per head
	Scale   float32 // applied to q.k before softmax, usually 1/sqrt(HeadDim)
	// NonCausal lets each row also attend to the later rows of its
	// sequence in the step: a row sees every position up to its
	// sequence's last row (a block drafter's mask block); causal
	// otherwise.
	NonCausal bool
}

// RoPEArgs configures an OpRoPE.
type RoPEArgs struct {
	HeadDim int      // elements per head
	Dims    int      // rotated elements per head (<= HeadDim), usually HeadDim
	Base    float32  // frequency base (theta)
	Mode    RoPEMode // pairing of rotated elements
	// Sections are the rotated pairs per position component of an MRoPE
	// (t, h, w, e), ggml's rope sections; unused by RoPE.
	Sections [4]int
}

// Op is one recorded operation: Out = Kind(Args...).
type Op struct {
	Kind   OpKind
	Out    Tensor
	Args   []Tensor
	Name   string  // OpInput: binding name; OpWeight: tensor name
	Eps    float32 // OpRMSNorm
	Group  int     // OpRMSNorm: elements normalised together (row width or head size)
	RoPE   RoPEArgs
	Attn   AttentionArgs
	HasArg bool // OpRMSNorm: Args[1] is a weight to multiply by
	// OpColumns: from each group of Group columns, Width columns starting
	// at Offset.
	Offset, Width int
	Fn            UnaryFn   // OpUnary
	State         StateArgs // OpShortConv, OpDeltaRule
	MoE           MoEArgs   // OpMoE
}

// Graph is a recorded op list, in execution order, with its named outputs.
// A backend lowers it once and runs it many times with new bindings.
type Graph struct {
	Ops     []Op
	Outputs map[string]Tensor
	// Origin says what the graph computes, for logs and capture keys:
	// "plan <hash> seg0 rows 8 logits 8". Set by whoever records it.
	Origin string
}

// WeightInfo reports the dtype and [rows, cols] shape of a named weight.
type WeightInfo func(name string) (dt DType, rows, cols int, ok bool)

// Builder records ops into a Graph. It never computes: shapes are checked as
// ops are recorded, and the first error is kept and returned by Finish.
type Builder struct {
	g       Graph
	weights WeightInfo
	err     error
	wcache  map[string]Tensor
	inputs  map[string]Tensor
}

// NewBuilder returns a Builder that resolves weights with info.
func NewBuilder(info WeightInfo) *Builder {
	return &Builder{
		g:       Graph{Outputs: map[string]Tensor{}},
		weights: info,
		wcache:  map[string]Tensor{},
		inputs:  map[string]Tensor{},
	}
}

func (b *Builder) fail(format string, args ...any) Tensor {
	if b.err == nil {
		b.err = fmt.Errorf(format, args...)
	}
	return Tensor{ID: -1}
}

func (b *Builder) push(op Op) Tensor {
	op.Out.ID = len(b.g.Ops)
	b.g.Ops = append(b.g.Ops, op)
	return op.Out
}

func (b *Builder) bad(ts ...Tensor) bool {
	if b.err != nil {
		return true
	}
	for _, t := range ts {
		if t.ID < 0 {
			return true
		}
	}
	return false
}

// Input declares a per-step binding: an int32 vector of n elements (tokens,
// positions, selected rows). Declaring the same name twice returns the same
// tensor; n < 0 looks up an input the caller (the engine) already declared.
func (b *Builder) Input(name string, n int) Tensor {
	if t, ok := b.inputs[name]; ok {
		if n >= 0 && t.Rows() != n {
			return b.fail("input %q declared with %d and %d rows", name, t.Rows(), n)
		}
		return t
	}
	if n < 0 {
		return b.fail("input %q not declared", name)
	}
	t := b.push(Op{Kind: OpInput, Name: name, Out: Tensor{Shape: [2]int{n, 1}, DType: I32}})
	b.inputs[name] = t
	return t
}

// InputF32 declares a per-step float32 binding of n rows of cols values
// ([n, cols], row-major): hidden states a host node hands a pass (an MTP
// head reads the target's). Declaring the same name twice with the same
// shape returns the same tensor.
func (b *Builder) InputF32(name string, n, cols int) Tensor {
	if t, ok := b.inputs[name]; ok {
		if t.Rows() != n || t.Cols() != cols || t.DType != F32 {
			return b.fail("input %q declared as %v %dx%d and f32 %dx%d", name, t.DType, t.Rows(), t.Cols(), n, cols)
		}
		return t
	}
	if n < 0 || cols < 1 {
		return b.fail("input %q: bad shape %dx%d", name, n, cols)
	}
	t := b.push(Op{Kind: OpInput, Name: name, Out: Tensor{Shape: [2]int{n, cols}, DType: F32}})
	b.inputs[name] = t
	return t
}

// Weight returns the named model weight, [rows, cols] in its stored dtype.
func (b *Builder) Weight(name string) Tensor {
	if t, ok := b.wcache[name]; ok {
		return t
	}
	dt, rows, cols, ok := b.weights(name)
	if !ok {
		return b.fail("weight %q not found", name)
	}
	t := b.push(Op{Kind: OpWeight, Name: name, Out: Tensor{Shape: [2]int{rows, cols}, DType: dt}})
	b.wcache[name] = t
	return t
}

// HasWeight reports whether the named weight exists.
func (b *Builder) HasWeight(name string) bool {
	_, _, _, ok := b.weights(name)
	return ok
}

// GetRows gathers rows of table by ids: table [V, d] (any dtype), ids [T] -> [T, d] f32.
func (b *Builder) GetRows(table, ids Tensor) Tensor {
	if b.bad(table, ids) {
		return Tensor{ID: -1}
	}
	if ids.DType != I32 {
		return b.fail("get_rows: ids must be i32, got %v", ids.DType)
	}
	return b.push(Op{Kind: OpGetRows, Args: []Tensor{table, ids}, Out: Tensor{Shape: [2]int{ids.Rows(), table.Cols()}, DType: F32}})
}

// RMSNorm normalises each contiguous group of `group` elements of x [T, d]
// to unit root mean square (with eps), then multiplies element-wise by w
// [1, group] (a weight). group must divide d.
func (b *Builder) RMSNorm(x, w Tensor, group int, eps float32) Tensor {
	if b.bad(x, w) {
		return Tensor{ID: -1}
	}
	if group <= 0 || x.Cols()%group != 0 {
		return b.fail("rms_norm: group %d does not divide row width %d", group, x.Cols())
	}
	if w.Rows()*w.Cols() != group {
		return b.fail("rms_norm: weight has %d elements, want %d", w.Rows()*w.Cols(), group)
	}
	return b.push(Op{Kind: OpRMSNorm, Args: []Tensor{x, w}, Group: group, Eps: eps, HasArg: true, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// MatMul multiplies x [T, in] by the transpose of weight w [out, in]: [T, out].
func (b *Builder) MatMul(x, w Tensor) Tensor {
	if b.bad(x, w) {
		return Tensor{ID: -1}
	}
	if x.Cols() != w.Cols() {
		return b.fail("matmul: x has %d columns, weight has %d", x.Cols(), w.Cols())
	}
	return b.push(Op{Kind: OpMatMul, Args: []Tensor{x, w}, Out: Tensor{Shape: [2]int{x.Rows(), w.Rows()}, DType: F32}})
}

// RoPE rotates each head of x [T, heads*HeadDim] by the angle of its row's
// position (positions [T] i32).
func (b *Builder) RoPE(x, positions Tensor, a RoPEArgs) Tensor {
	return b.rope(x, positions, Tensor{ID: -1}, a)
}

// RoPEFactors is RoPE with per-pair frequency factors, ggml's freq_factors:
// factors is an f32 weight of a.Dims/2 elements, and the angle of pair i is
// divided by factors[i] (llama-3 rope scaling's rope_freqs.weight). The op
// is an OpRoPE with factors as its third argument.
func (b *Builder) RoPEFactors(x, positions, factors Tensor, a RoPEArgs) Tensor {
	if b.bad(factors) {
		return Tensor{ID: -1}
	}
	if factors.DType != F32 || factors.Rows()*factors.Cols() != a.Dims/2 {
		return b.fail("rope: factors are %v [%d,%d], want f32 with %d elements", factors.DType, factors.Rows(), factors.Cols(), a.Dims/2)
	}
	return b.rope(x, positions, factors, a)
}

func (b *Builder) rope(x, positions, factors Tensor, a RoPEArgs) Tensor {
	if b.bad(x, positions) {
		return Tensor{ID: -1}
	}
	if a.HeadDim <= 0 || x.Cols()%a.HeadDim != 0 || a.Dims <= 0 || a.Dims > a.HeadDim || a.Dims%2 != 0 {
		return b.fail("rope: bad head_dim %d / dims %d for row width %d", a.HeadDim, a.Dims, x.Cols())
	}
	if positions.Rows() != x.Rows() {
		return b.fail("rope: %d positions for %d rows", positions.Rows(), x.Rows())
	}
	args := []Tensor{x, positions}
	if factors.ID >= 0 {
		args = append(args, factors)
	}
	return b.push(Op{Kind: OpRoPE, Args: args, RoPE: a, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// Attention writes k and v ([T, KVHeads*HeadDim]) into the KV cache of layer
// a.Layer at each row's sequence slot, then computes causal softmax attention
// of q [T, Heads*HeadDim] over every cached position of the row's sequence up
// to and including its own position: [T, Heads*HeadDim]. Which sequence and
// position each row has comes from the step's bindings.
func (b *Builder) Attention(q, k, v Tensor, a AttentionArgs) Tensor {
	if b.bad(q, k, v) {
		return Tensor{ID: -1}
	}
	if a.KVHeads <= 0 || a.Heads%a.KVHeads != 0 {
		return b.fail("attention: %d heads not a multiple of %d kv heads", a.Heads, a.KVHeads)
	}
	if q.Cols() != a.Heads*a.HeadDim || k.Cols() != a.KVHeads*a.HeadDim || v.Cols() != k.Cols() {
		return b.fail("attention: q %v k %v v %v do not fit %d/%d heads of %d", q.Shape, k.Shape, v.Shape, a.Heads, a.KVHeads, a.HeadDim)
	}
	if q.Rows() != k.Rows() || k.Rows() != v.Rows() {
		return b.fail("attention: row counts differ: q %d k %d v %d", q.Rows(), k.Rows(), v.Rows())
	}
	return b.push(Op{Kind: OpAttention, Args: []Tensor{q, k, v}, Attn: a, Out: Tensor{Shape: q.Shape, DType: F32}})
}

// Add returns x + y, both [T, d].
func (b *Builder) Add(x, y Tensor) Tensor {
	if b.bad(x, y) {
		return Tensor{ID: -1}
	}
	if x.Shape != y.Shape {
		return b.fail("add: shapes %v and %v differ", x.Shape, y.Shape)
	}
	return b.push(Op{Kind: OpAdd, Args: []Tensor{x, y}, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// AddRow returns x [T, d] with the f32 weight w (d elements, a bias) added
// to every row.
func (b *Builder) AddRow(x, w Tensor) Tensor { return b.rowOp(OpAddRow, x, w) }

// rowOp records kind (add_row, mul_row) of x [T, d] and the f32 weight w of
// d elements, applied to every row.
func (b *Builder) rowOp(kind OpKind, x, w Tensor) Tensor {
	if b.bad(x, w) {
		return Tensor{ID: -1}
	}
	if w.DType != F32 || w.Rows()*w.Cols() != x.Cols() {
		return b.fail("%v: row is %v [%d,%d], want f32 with %d elements", kind, w.DType, w.Rows(), w.Cols(), x.Cols())
	}
	return b.push(Op{Kind: kind, Args: []Tensor{x, w}, Out: Tensor{Shape: x.Shape, DType: F32}})
}

// SwiGLU returns silu(gate) * up, both [T, d].
func (b *Builder) SwiGLU(gate, up Tensor) Tensor {
	if b.bad(gate, up) {
		return Tensor{ID: -1}
	}
	if gate.Shape != up.Shape {
		return b.fail("swiglu: shapes %v and %v differ", gate.Shape, up.Shape)
	}
	return b.push(Op{Kind: OpSwiGLU, Args: []Tensor{gate, up}, Out: Tensor{Shape: gate.Shape, DType: F32}})
}

// SelectRows gathers rows of x [T, d] by the row indexes in rows [R] (i32): [R, d].
func (b *Builder) SelectRows(x, rows Tensor) Tensor {
	if b.bad(x, rows) {
		return Tensor{ID: -1}
	}
	return b.push(Op{Kind: OpSelectRows, Args: []Tensor{x, rows}, Out: Tensor{Shape: [2]int{rows.Rows(), x.Cols()}, DType: F32}})
}

// Output names t as a graph output.
func (b *Builder) Output(name string, t Tensor) {
	if b.bad(t) {
		return
	}
	b.g.Outputs[name] = t
}

// Err returns the first recording error.
func (b *Builder) Err() error { return b.err }

// Finish returns the recorded graph, or the first recording error.
func (b *Builder) Finish() (*Graph, error) {
	if b.err != nil {
		return nil, b.err
	}
	g := b.g
	return &g, nil
}

// String lists the ops one a line, for debugging and golden tests.
func (g *Graph) String() string {
	var sb strings.Builder
	for _, op := range g.Ops {
		fmt.Fprintf(&sb, "%%%d = %v", op.Out.ID, op.Kind)
		if op.Name != "" {
			fmt.Fprintf(&sb, " %q", op.Name)
		}
		for _, a := range op.Args {
			fmt.Fprintf(&sb, " %%%d", a.ID)
		}
		fmt.Fprintf(&sb, " -> %v[%d,%d]\n", op.Out.DType, op.Out.Shape[0], op.Out.Shape[1])
	}
	return sb.String()
}
