package cuda

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// arenaAlign is the alignment of every buffer in the activation arena: the
// driver's own allocation alignment, so vector loads are always aligned.
const arenaAlign = 256

// rowSource says which dimension of the step an op's rows follow, so that
// Output can report the rows of the unpadded batch.
type rowSource uint8

const (
	rowsNone   rowSource = iota // weights
	rowsTokens                  // one row per fed token
	rowsLogits                  // one row per sampled row (select_rows by logit_rows)
)

// bufferPlan places the graph's activations in one device arena: every op
// that computes an f32 [rows, cols] output gets a buffer, and every
// activation read by a Q8_0 or Q4_0 matmul gets a second one holding its
// Q8_0 blocks (rows * cols/32 blocks of 34 bytes), quantized once by the
// first such matmul; an MoE op gets a scratch buffer for its routing and
// expert activations (moeScratch), live only while it runs, and with a
// bf16 recurrent state (stage > 0) a stateful op gets one for the f32
// staging of stage slots of its state (stateStage). Buffers whose lifetimes (from the op that writes them
// to the last op that reads them; graph outputs to the end) do not overlap
// share memory.
type bufferPlan struct {
	Offset       []int64     // [op] byte offset of the op's f32 output; -1 for inputs and weights
	QuantOffset  []int64     // [op] byte offset of the Q8_0 blocks of the op's output; -1 when none
	QuantKOffset []int64     // [op] byte offset of the Q8_K blocks of the op's output; -1 when none
	QuantBefore  []bool      // [op] a matmul that quantizes its input (into the form its weight reads) first
	Scratch      []int64     // [op] byte offset of the op's scratch (MoE, staged state); -1 when none
	Rows         []rowSource // [op]
	Size         int64       // arena bytes
}

// quantized reports whether a matmul by a weight of dt reads its input
// quantized: as Q8_0 blocks, the weights whose ggml dot type is Q8_0 (Q8_0,
// Q4_0, Q5_0, IQ4_NL) or Q8_1 (Q4_1, Q5_1: the blocks and their sums), or
// as Q8_K blocks (kquant).
func quantized(dt tensor.DType) bool {
	return dt.Valid() && (dt.DotType() == tensor.Q8_0 || dt.DotType() == tensor.Q8_1 || kquant(dt))
}

// kquant reports whether a matmul by a weight of dt reads its input as Q8_K
// blocks (quantize_q8k): the K-quants and IQ4_XS.
func kquant(dt tensor.DType) bool {
	return dt.Valid() && dt.DotType() == tensor.Q8_K
}

// q8Bytes is the size of the quantized activations of a [rows, cols]
// activation (quantize_q8): its Q8_0 blocks, then from the next 16-byte
// boundary each block's Q8_1 sum as a float.
func q8Bytes(rows, cols int) int64 {
	blocks := int64(rows) * int64(cols/32)
	return alignUp(34*blocks, 16) + 4*blocks
}

// q8KBytes is the size of the Q8_K blocks of a [rows, cols] activation
// (quantize_q8k): 292 bytes per 256 values.
func q8KBytes(rows, cols int) int64 {
	return int64(rows) * int64(cols/tensor.QKK) * 292
}

// quantBytes is the size of the quantized activations a matmul by a weight
// of dt reads, for a [rows, cols] input.
func quantBytes(dt tensor.DType, rows, cols int) int64 {
	if kquant(dt) {
		return q8KBytes(rows, cols)
	}
	return q8Bytes(rows, cols)
}

// planBuffers lays out g's activations, with stage staging slots for each
// stateful op of a bf16 state (0 for an f32 state). It fails on graphs the
// kernels cannot run: an arg that is not computed before its use, a
// quantized matmul whose row width is not a multiple of 32.
func planBuffers(g *tensor.Graph, stage int) (bufferPlan, error) {
	n := len(g.Ops)
	p := bufferPlan{Offset: make([]int64, n), QuantOffset: make([]int64, n), QuantKOffset: make([]int64, n), QuantBefore: make([]bool, n),
		Scratch: make([]int64, n), Rows: make([]rowSource, n)}
	type interval struct {
		op, from, to int
		size         int64
		kind         int // 0 the op's output, 1 its Q8_0 blocks, 2 its Q8_K blocks, 3 its scratch
	}
	lastUse := make([]int, n)
	var quantFrom, quantTo [2][]int // [Q8_0, Q8_K][op]: the first and last matmul reading the blocks
	for f := range quantFrom {
		quantFrom[f], quantTo[f] = make([]int, n), make([]int, n)
	}
	for i := range n {
		lastUse[i] = i
		quantFrom[0][i], quantTo[0][i], quantFrom[1][i], quantTo[1][i] = -1, -1, -1, -1
		p.Offset[i], p.QuantOffset[i], p.QuantKOffset[i], p.Scratch[i] = -1, -1, -1, -1
	}
	for i, op := range g.Ops {
		if op.Out.ID != i {
			return bufferPlan{}, fmt.Errorf("cuda: op %d records id %d", i, op.Out.ID)
		}
		for _, a := range op.Args {
			if a.ID < 0 || a.ID >= i {
				return bufferPlan{}, fmt.Errorf("cuda: op %d (%v) reads %%%d before it is computed", i, op.Kind, a.ID)
			}
			lastUse[a.ID] = i
		}
		switch op.Kind {
		case tensor.OpWeight:
			p.Rows[i] = rowsNone
		case tensor.OpInput:
			p.Rows[i] = rowsTokens
			if op.Name == node.BindLogitRows {
				p.Rows[i] = rowsLogits
			}
		case tensor.OpGetRows, tensor.OpSelectRows:
			p.Rows[i] = p.Rows[op.Args[1].ID]
		default:
			p.Rows[i] = p.Rows[op.Args[0].ID]
		}
		if op.Kind == tensor.OpMatMul && quantized(op.Args[1].DType) {
			x, dt := op.Args[0], op.Args[1].DType
			if x.Cols()%dt.BlockSize() != 0 {
				return bufferPlan{}, fmt.Errorf("cuda: matmul %d: %v weight needs a row width that is a multiple of %d, got %d", i, dt, dt.BlockSize(), x.Cols())
			}
			f := 0
			if kquant(dt) {
				f = 1
			}
			if quantFrom[f][x.ID] < 0 {
				quantFrom[f][x.ID] = i
				p.QuantBefore[i] = true
			}
			quantTo[f][x.ID] = i
		}
	}
	for _, t := range g.Outputs {
		if t.ID >= 0 && t.ID < n {
			lastUse[t.ID] = n
		}
	}
	var ivs []interval
	for i, op := range g.Ops {
		// Inputs live in the step buffer (and weights in their own memory);
		// a float input's Q8_0 blocks still need the arena.
		if op.Kind != tensor.OpInput && op.Kind != tensor.OpWeight {
			ivs = append(ivs, interval{op: i, from: i, to: lastUse[i], size: 4 * int64(op.Out.Rows()) * int64(op.Out.Cols())})
		}
		if quantFrom[0][i] >= 0 {
			ivs = append(ivs, interval{op: i, from: quantFrom[0][i], to: quantTo[0][i], size: q8Bytes(op.Out.Rows(), op.Out.Cols()), kind: 1})
		}
		if quantFrom[1][i] >= 0 {
			ivs = append(ivs, interval{op: i, from: quantFrom[1][i], to: quantTo[1][i], size: q8KBytes(op.Out.Rows(), op.Out.Cols()), kind: 2})
		}
		switch {
		case op.Kind == tensor.OpMoE:
			ivs = append(ivs, interval{op: i, from: i, to: i, size: newMoEScratch(op.Out.Rows(), op.Out.Cols(), op.MoE, moeDTypes(op)).size, kind: 3})
		case stage > 0 && (op.Kind == tensor.OpShortConv || op.Kind == tensor.OpDeltaRule):
			ivs = append(ivs, interval{op: i, from: i, to: i, size: 4 * int64(stage) * int64(stateFloats(op)), kind: 3})
		}
	}
	// First fit in order of start: each buffer takes the lowest aligned
	// offset clear of every buffer still live when it starts.
	slices.SortStableFunc(ivs, func(a, b interval) int { return a.from - b.from })
	type placed struct {
		to        int
		off, size int64
	}
	var live []placed
	for _, iv := range ivs {
		live = slices.DeleteFunc(live, func(q placed) bool { return q.to < iv.from })
		slices.SortFunc(live, func(a, b placed) int { return int(a.off - b.off) })
		size := alignUp(iv.size, arenaAlign)
		off := int64(0)
		for _, q := range live {
			if off+size <= q.off {
				break
			}
			off = max(off, q.off+alignUp(q.size, arenaAlign))
		}
		live = append(live, placed{to: iv.to, off: off, size: iv.size})
		p.Size = max(p.Size, off+size)
		[...][]int64{p.Offset, p.QuantOffset, p.QuantKOffset, p.Scratch}[iv.kind][iv.op] = off
	}
	return p, nil
}

// stateFloats is a stateful op's state per slot, in values.
func stateFloats(op tensor.Op) int {
	if op.Kind == tensor.OpShortConv {
		return op.State.ConvStateFloats(op.Out.Cols())
	}
	return op.State.DeltaStateFloats()
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// moeScratch places an MoE op's intermediates in its scratch buffer (byte
// offsets, each arenaAlign-aligned) for rows rows of width cols: the
// routing (ids, wts [rows, TopK]), the experts' gate and up outputs [rows
// * TopK, FFN] and their down outputs [rows * TopK, cols]; for quantized
// experts (-1 when none) the input h quantized for gate and up (hq: as
// Q8_0 blocks, hqK: as Q8_K blocks) and the swiglu of gate and up
// quantized for down (gq).
type moeScratch struct {
	ids, wts, gate, up, res, size int64
	hq, hqK, gq                   int64
}

// newMoEScratch lays out the scratch of an MoE op whose gate, up and down
// experts have dtypes w.
func newMoEScratch(rows, cols int, a tensor.MoEArgs, w [3]tensor.DType) moeScratch {
	slots := int64(rows) * int64(a.TopK)
	s := moeScratch{hq: -1, hqK: -1, gq: -1}
	at := func(bytes int64) int64 {
		off := s.size
		s.size += alignUp(bytes, arenaAlign)
		return off
	}
	s.ids, s.wts = at(4*slots), at(4*slots)
	s.gate, s.up = at(4*slots*int64(a.FFN)), at(4*slots*int64(a.FFN))
	s.res = at(4 * slots * int64(cols))
	for _, dt := range w[:2] {
		switch {
		case kquant(dt) && s.hqK < 0:
			s.hqK = at(q8KBytes(rows, cols))
		case quantized(dt) && !kquant(dt) && s.hq < 0:
			s.hq = at(q8Bytes(rows, cols))
		}
	}
	if quantized(w[2]) {
		s.gq = at(quantBytes(w[2], int(slots), a.FFN))
	}
	return s
}

// moeDTypes are the dtypes of an MoE op's gate, up and down experts.
func moeDTypes(op tensor.Op) [3]tensor.DType {
	return [3]tensor.DType{op.Args[2].DType, op.Args[3].DType, op.Args[4].DType}
}
