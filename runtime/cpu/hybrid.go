package cpu

import (
	"fmt"
	"math"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The hybrid ops (tensor/hybrid.go): reference loops. The stateful ones
// (short_conv, delta_rule) walk the batch's rows in order and keep each
// sequence's state in its slot of the reserved state memory.

// stateMemory is the reserved recurrent state: per state layer, Slots
// slots of Conv[l] (or Delta[l]) values. Slots from bf16From on are stored
// as bf16 in conv16/delta16 (all of them with a bf16 layout, the checkpoint
// pool's with bf16 checkpoints), the others as f32 in conv/delta. The ops
// read and write conv and delta as f32; while one op whose batch touches a
// bf16 slot runs, those hold only the slots the batch touches (staged, see
// stage).
type stateMemory struct {
	layout   exec.StateLayout
	bf16From int
	conv     [][]float32 // [layer][slot*Conv[l] ...], slots [0, bf16From)
	delta    [][]float32 // [layer][slot*Delta[l] ...], slots [0, bf16From)
	// bf16 storage of slots [bf16From, Slots) and the f32 staging area of
	// the op running.
	conv16, delta16 [][]uint16
	staging         []float32
}

func newStateMemory(l exec.StateLayout) (stateMemory, error) {
	okDType := func(d string) bool { return d == "" || d == "f32" || d == "bf16" }
	if l.Slots < 0 || l.Checkpoints < 0 || l.Checkpoints > l.Slots || !okDType(l.DType) || !okDType(l.CheckpointDType) {
		return stateMemory{}, fmt.Errorf("cpu: bad state layout %+v (dtype f32 or bf16)", l)
	}
	m := stateMemory{layout: l, bf16From: l.Slots}
	switch {
	case l.DType == "bf16":
		m.bf16From = 0
	case l.PoolDType() == "bf16":
		m.bf16From = l.Slots - l.Checkpoints
	}
	alloc32 := func(sizes []int) [][]float32 {
		out := make([][]float32, len(sizes))
		for i, n := range sizes {
			if m.bf16From > 0 {
				out[i] = make([]float32, m.bf16From*n)
			}
		}
		return out
	}
	alloc16 := func(sizes []int) [][]uint16 {
		out := make([][]uint16, len(sizes))
		for i, n := range sizes {
			out[i] = make([]uint16, (l.Slots-m.bf16From)*n)
		}
		return out
	}
	m.conv, m.delta = alloc32(l.Conv), alloc32(l.Delta)
	m.conv16, m.delta16 = alloc16(l.Conv), alloc16(l.Delta)
	return m, nil
}

// stage prepares a stateful op whose batch reads or writes a bf16 slot, or
// rounds an f32 one (exec.Batch.StateRound):
// the slots the batch's rows read or write are copied (f32) or widened
// (bf16) into a staging area that the op sees as the layer's memory, with
// the rows' slots renumbered into it; the returned func copies or rounds
// the written slots back and restores the numbering. When every slot the
// batch touches is f32 it does nothing.
func (p *program) stage(op tensor.Op, batch *exec.Batch) (unstage func()) {
	m := &p.b.state
	read, write := p.stateRead, p.stateWrite
	var round map[int32]bool // f32 slots rounded to bf16 at the end (exec.Batch.StateRound)
	for s, r := range batch.StateRound {
		if r && m.bf16From < m.layout.Slots {
			if round == nil {
				round = map[int32]bool{}
			}
			round[batch.StateSlots[s]] = true
		}
	}
	if len(round) == 0 && !slices.ContainsFunc(read, m.isBF16) && !slices.ContainsFunc(write, m.isBF16) {
		return func() {}
	}
	l := op.State.Layer
	store, view, per := m.delta16[l], &m.delta[l], m.layout.Delta[l]
	if op.Kind == tensor.OpShortConv {
		store, view, per = m.conv16[l], &m.conv[l], m.layout.Conv[l]
	}
	mem32 := *view
	base := m.bf16From
	index := map[int32]int32{}
	var slots []int32
	renumber := func(s []int32) []int32 {
		out := make([]int32, len(s))
		for i, slot := range s {
			j, ok := index[slot]
			if !ok {
				j = int32(len(slots))
				index[slot] = j
				slots = append(slots, slot)
			}
			out[i] = j
		}
		return out
	}
	p.stateRead, p.stateWrite = renumber(read), renumber(write)
	m.staging = grow(m.staging, len(slots)*per)
	stage := m.staging
	for j, slot := range slots {
		dst := stage[j*per:][:per]
		if int(slot) < base {
			copy(dst, mem32[int(slot)*per:][:per])
			continue
		}
		for i, h := range store[(int(slot)-base)*per:][:per] {
			dst[i] = tensor.BF16ToF32(h)
		}
	}
	*view = stage
	return func() {
		written := map[int32]bool{}
		for _, slot := range write {
			written[slot] = true
		}
		for j, slot := range slots {
			if !written[slot] {
				continue
			}
			src := stage[j*per:][:per]
			if int(slot) < base {
				dst := mem32[int(slot)*per:][:per]
				copy(dst, src)
				if round[slot] {
					for i, f := range dst {
						dst[i] = tensor.BF16ToF32(tensor.F32ToBF16(f))
					}
				}
				continue
			}
			dst := store[(int(slot)-base)*per:][:per]
			for i, f := range src {
				dst[i] = tensor.F32ToBF16(f)
			}
		}
		*view = mem32
		p.stateRead, p.stateWrite = read, write
	}
}

// isBF16 reports whether slot is stored as bf16.
func (m *stateMemory) isBF16(slot int32) bool { return int(slot) >= m.bf16From }

// StateBytes is the memory Reserve allocated for recurrent state.
func (b *Backend) StateBytes() int64 {
	return b.state.layout.Bytes()
}

// checkState reports whether op's state fits the reserved layout.
func (b *Backend) checkState(op tensor.Op) error {
	l, lay := op.State.Layer, b.state.layout
	switch op.Kind {
	case tensor.OpShortConv:
		if l >= len(lay.Conv) || lay.Conv[l] != op.State.ConvStateFloats(op.Out.Cols()) {
			return fmt.Errorf("cpu: short_conv of state layer %d needs %d floats per slot, the reserved layout has %v", l, op.State.ConvStateFloats(op.Out.Cols()), lay.Conv)
		}
	case tensor.OpDeltaRule:
		if l >= len(lay.Delta) || lay.Delta[l] != op.State.DeltaStateFloats() {
			return fmt.Errorf("cpu: delta_rule of state layer %d needs %d floats per slot, the reserved layout has %v", l, op.State.DeltaStateFloats(), lay.Delta)
		}
	}
	if lay.Slots == 0 {
		return fmt.Errorf("cpu: %v needs reserved state slots", op.Kind)
	}
	return nil
}

// bindStateRows checks b's state slots and records the slot each row
// reads and writes (exec.Batch.StateRows) for the stateful ops.
func (p *program) bindStateRows(b *exec.Batch) error {
	n := p.b.state.layout.Slots
	if len(b.StateSlots) != len(b.Tables) {
		return fmt.Errorf("cpu: %d state slots for %d sequences", len(b.StateSlots), len(b.Tables))
	}
	inRange := func(s int, slot int32) error {
		if slot < 0 || int(slot) >= n {
			return fmt.Errorf("cpu: sequence %d: state slot %d out of range [0,%d)", s, slot, n)
		}
		return nil
	}
	rows := make([]int, len(b.Tables))
	for _, s := range b.RowSeq {
		rows[s]++
	}
	for s, slot := range b.StateSlots {
		if err := inRange(s, slot); err != nil {
			return err
		}
		if s < len(b.StateFrom) && b.StateFrom[s] >= 0 {
			if err := inRange(s, b.StateFrom[s]); err != nil {
				return err
			}
		}
		if s < len(b.StateSnapshots) && b.StateSnapshots[s] != nil {
			if len(b.StateSnapshots[s]) < rows[s] {
				return fmt.Errorf("cpu: sequence %d: %d state snapshots for %d rows", s, len(b.StateSnapshots[s]), rows[s])
			}
			for _, snap := range b.StateSnapshots[s] {
				if err := inRange(s, snap); err != nil {
					return err
				}
			}
		}
	}
	p.stateRead, p.stateWrite = b.StateRows()
	return nil
}

// rowState returns row r's state of per floats in mem, in the slot the row
// writes: zero at position 0, else a copy of the slot the row reads.
func (p *program) rowState(mem []float32, per, r int, pos int32) []float32 {
	src, dst := int(p.stateRead[r]), int(p.stateWrite[r])
	st := mem[dst*per : (dst+1)*per]
	switch {
	case pos == 0:
		clear(st)
	case src != dst:
		copy(st, mem[src*per:(src+1)*per])
	}
	return st
}

// runHybrid computes the hybrid ops; ok is false for any other op.
func (p *program) runHybrid(out []float32, op tensor.Op, batch *exec.Batch) (ok bool) {
	switch op.Kind {
	case tensor.OpColumns:
		x, d := p.f32[op.Args[0].ID], op.Args[0].Cols()
		groups := d / op.Group
		for r := range op.Out.Rows() {
			xr, o := x[r*d:(r+1)*d], out[r*op.Out.Cols():(r+1)*op.Out.Cols()]
			for g := range groups {
				copy(o[g*op.Width:(g+1)*op.Width], xr[g*op.Group+op.Offset:g*op.Group+op.Offset+op.Width])
			}
		}
	case tensor.OpConcat:
		x, y := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID]
		a, c, w := op.Args[0].Cols(), op.Args[1].Cols(), op.Out.Cols()
		for r := range op.Out.Rows() {
			copy(out[r*w:r*w+a], x[r*a:(r+1)*a])
			copy(out[r*w+a:(r+1)*w], y[r*c:(r+1)*c])
		}
	case tensor.OpUnary, tensor.OpMul, tensor.OpMulRow, tensor.OpL2Norm:
		p.elementwiseHybrid(out, op)
	case tensor.OpMoE:
		p.moe(out, op)
	case tensor.OpShortConv:
		unstage := p.stage(op, batch)
		p.shortConv(out, op, batch)
		unstage()
	case tensor.OpDeltaRule:
		unstage := p.stage(op, batch)
		p.deltaRule(out, op, batch)
		unstage()
	default:
		return false
	}
	return true
}

func unaryFn(fn tensor.UnaryFn) func(float32) float32 {
	switch fn {
	case tensor.Sigmoid:
		return sigmoid
	case tensor.SiLU:
		return nil // unaryTask: siluV and siluTail by rows
	case tensor.Softplus:
		return softplus
	}
	panic(fmt.Sprintf("cpu: unary function %v", fn)) // the builder admits only the three
}

// sigmoid and softplus are ggml's float32 formulas.
func sigmoid(x float32) float32 { return 1 / (1 + float32(math.Exp(float64(-x)))) }

func softplus(x float32) float32 {
	if x > 20 {
		return x
	}
	return float32(math.Log(float64(1 + float32(math.Exp(float64(x))))))
}

// l2Norm writes x / max(|x|, eps) to dst; the sum of squares is float64.
func l2Norm(dst, x []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	scale := 1 / max(float32(math.Sqrt(sum)), eps)
	for i, v := range x {
		dst[i] = v * scale
	}
}

// shortConvRef is short_conv's reference loop (shortConv in
// hybrid_fast.go is the fast path): the causal depthwise conv row by row; each sequence's
// window (its last K-1 inputs, oldest first) lives in its state slot.
func (p *program) shortConvRef(out []float32, op tensor.Op, batch *exec.Batch) {
	x, w := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID] // [T, C], [C, K]
	c, k := op.Out.Cols(), op.State.Kernel
	per := (k - 1) * c
	mem := p.b.state.conv[op.State.Layer]
	for r := range op.Out.Rows() {
		win := p.rowState(mem, per, r, batch.Positions[r]) // [K-1, C]
		xr, o := x[r*c:(r+1)*c], out[r*c:(r+1)*c]
		for ch := range c {
			taps := w[ch*k : (ch+1)*k]
			var sum float32
			for j := 0; j < k-1; j++ {
				sum += win[j*c+ch] * taps[j]
			}
			o[ch] = sum + xr[ch]*taps[k-1]
		}
		if k > 1 {
			copy(win, win[c:])
			copy(win[(k-2)*c:], xr)
		}
	}
}

// deltaRuleRef is delta_rule's reference loop (deltaRule in
// hybrid_fast.go is the fast path): the gated delta rule row by row; each sequence's
// per-head KeyDim x ValueDim matrices live in its state slot.
func (p *program) deltaRuleRef(out []float32, op tensor.Op, batch *exec.Batch) {
	a := op.State
	q, k, v := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	g, beta := p.f32[op.Args[3].ID], p.f32[op.Args[4].ID]
	kd, vd, dk, dv := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim, a.KeyDim, a.ValueDim
	per := a.DeltaStateFloats()
	mem := p.b.state.delta[a.Layer]
	pred := make([]float32, dv)
	for r := range op.Out.Rows() {
		st := p.rowState(mem, per, r, batch.Positions[r])
		for h := range a.ValueHeads {
			kh := h % a.KeyHeads
			s := st[h*dk*dv : (h+1)*dk*dv] // [dk, dv]
			qh, kr := q[r*kd+kh*dk:r*kd+(kh+1)*dk], k[r*kd+kh*dk:r*kd+(kh+1)*dk]
			vh, o := v[r*vd+h*dv:r*vd+(h+1)*dv], out[r*vd+h*dv:r*vd+(h+1)*dv]
			decay := float32(math.Exp(float64(g[r*a.ValueHeads+h])))
			b := beta[r*a.ValueHeads+h]
			for i := range s {
				s[i] *= decay
			}
			clear(pred)
			for i := range dk { // pred = S^T k
				ki, row := kr[i], s[i*dv:(i+1)*dv]
				for j := range dv {
					pred[j] += float32(row[j] * ki)
				}
			}
			for j := range dv {
				pred[j] = b * (vh[j] - pred[j])
			}
			clear(o)
			for i := range dk { // S += k delta^T; o = S^T (scale q)
				ki, qi, row := kr[i], qh[i]*a.Scale, s[i*dv:(i+1)*dv]
				for j := range dv {
					row[j] += float32(ki * pred[j])
					o[j] += float32(row[j] * qi)
				}
			}
		}
	}
}
