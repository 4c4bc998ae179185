package executor

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// seqValues is what the plan carries for one sequence to its next sampled
// step: its carried values (Plan.Carry) by name, and what the plan's ahead
// loops drafted for it (Plan.Carry names them too): its drafts ([]int32)
// or their distributions ([]exec.DraftDist).
type seqValues struct {
	carry map[string]exec.Carried
	ahead map[string]any
}

// seq returns the carried values of sequence id, creating them empty.
func (x *Executor) seq(id uint64) *seqValues {
	s, ok := x.seqs[id]
	if !ok {
		s = &seqValues{carry: map[string]exec.Carried{}, ahead: map[string]any{}}
		x.seqs[id] = s
	}
	return s
}

// carryRows is a carried value as a step's device segment computed it:
// one row per row of the feed it ran over.
type carryRows struct {
	data  []float32 // [len(feed.Tokens), width]
	width int
	feed  *exec.Batch
}

// carried is one value the plan carries (Plan.Carry) as takeCarry hands
// it out, worked out once when the executor is made.
type carried struct {
	name string
	// ahead: an ahead loop's drafts (probs: their distributions, a
	// draft_probs output); entered: the in.hidden of an ahead loop, which
	// takes it when it runs rather than at the step's start.
	ahead, probs, entered bool
}

// carriedValues are p's carried values in name order.
func (x *Executor) carriedValues() []carried {
	var out []carried
	for _, name := range slices.Sorted(maps.Keys(x.plan.Carry)) {
		ref := x.plan.Carry[name]
		c := carried{name: name, entered: x.enteredAhead(ref)}
		if st := x.aheadLoop(ref); st != nil {
			out := st.Spec.Output(ref.Port)
			c.ahead, c.probs = true, out != nil && out.Type == node.DraftProbs
		}
		out = append(out, c)
	}
	return out
}

// takeCarry hands each sampled sequence (rows) its carried values
// ($prev.NAME, one exec.Carried per row, or an ahead loop's drafts) and
// clears them: the host nodes that read them keep what they need. The rows
// an ahead loop enters stay until it runs.
func (x *Executor) takeCarry(rows []*node.SeqState, values map[plan.Ref]any) {
	for _, c := range x.carried {
		ref := plan.Ref{Node: plan.PrevNode, Port: c.name}
		switch {
		case c.ahead:
			values[ref] = x.takeAhead(c.name, c.probs, rows)
			continue
		case c.entered:
			continue
		}
		v := make([]exec.Carried, len(rows))
		for i, row := range rows {
			if s, ok := x.seqs[row.ID]; ok {
				v[i] = s.carry[c.name]
				delete(s.carry, c.name)
			}
		}
		values[ref] = v
	}
}

// recordCarry keeps, after the device segment that computed ref ran over
// feed, the rows the carry of name needs.
func (x *Executor) recordCarry(ex exec.Executable, ref plan.Ref, feed *exec.Batch) error {
	for name, cref := range x.plan.Carry {
		if cref != ref {
			continue
		}
		data, rows, cols, err := ex.Output(ref.Node + "." + ref.Port)
		if err != nil {
			return fmt.Errorf("engine: carry %s: %w", name, err)
		}
		if rows != len(feed.Tokens) {
			return fmt.Errorf("engine: carry %s: %s has %d rows for a step of %d tokens: a carried value needs every row", name, ref, rows, len(feed.Tokens))
		}
		x.stepCarry[name] = carryRows{data: data, width: cols, feed: feed}
	}
	return nil
}

// Kept says which rows of one work item of the last step its sequence
// kept: the first Rows fed rows (0: every one). ID 0 keeps nothing.
type Kept struct {
	ID   uint64
	Rows int
}

// KeepCarry appends to each sequence's carried values the rows of the
// tokens the last step kept (kept is by the batch's RowSeq index): every
// fed row, but for a sequence that verified drafts only its last token's
// and its accepted drafts'.
func (x *Executor) KeepCarry(kept []Kept) {
	for name, cr := range x.stepCarry {
		seqRows := make([][]int, len(kept)) // feed rows of each work item, in order
		for row, s := range cr.feed.RowSeq {
			seqRows[s] = append(seqRows[s], row)
		}
		for si, k := range kept {
			rows := seqRows[si]
			if k.ID == 0 || len(rows) == 0 {
				continue
			}
			if k.Rows > 0 {
				rows = rows[:min(len(rows), k.Rows)]
			}
			c := exec.Carried{Pos: int(cr.feed.Positions[rows[0]]), Width: cr.width, Data: make([]float32, 0, len(rows)*cr.width)}
			for _, row := range rows {
				c.Data = append(c.Data, cr.data[row*cr.width:(row+1)*cr.width]...)
			}
			s := x.seq(k.ID)
			s.carry[name] = s.carry[name].Append(c)
		}
	}
	clear(x.stepCarry)
}

// DropCarry forgets the carried values of sequence id, which holds no KV
// (waiting, or preempted to be recomputed: its next rows start over) or
// ended.
func (x *Executor) DropCarry(id uint64) { delete(x.seqs, id) }

// targetHidden is the name under which sequences carry the hidden rows
// that a loop over the target's cache enters (its in.hidden: "NAME" for
// $prev.NAME, the mtp graph's; the producing output, "fwd.hidden", for
// an ahead loop), or "" when no loop does.
func (x *Executor) targetHidden() string {
	for _, st := range x.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		href, enters := st.In[node.BindHidden]
		switch {
		case !ok || !enters || x.modelLoops[st.ID] != nil:
		case href.Node == plan.PrevNode:
			return href.Port
		case l.Ahead:
			return href.String()
		}
	}
	return ""
}

// EntersTargetHidden reports whether a loop over the target's cache
// enters carried hidden rows (the mtp graph): its K/V entries of a token
// are written a step or more after the target's (EnteredHidden).
func (x *Executor) EntersTargetHidden() bool { return x.targetHidden() != "" }

// ResumesFromHidden reports whether a sequence resumed from a prefix
// cache hit needs at most the target's hidden state before its first
// position to go on as if it had computed the prefix: every value the
// plan carries is an ahead loop's drafts or the hidden rows a loop over
// the target's cache enters (whose entries of the prefix are in the
// target's KV blocks). A plan that carries nothing reports true.
func (x *Executor) ResumesFromHidden() bool {
	key := x.targetHidden()
	for _, c := range x.carried {
		if !c.ahead && (key == "" || c.name != key) {
			return false
		}
	}
	return true
}

// EnteredHidden is what a loop over the target's cache entered for
// sequence ID: the token at each position q, Rows.Pos < q <= Last, with
// the hidden state at q-1 (Rows' row q-1-Rows.Pos, [E]).
type EnteredHidden struct {
	ID   uint64
	Rows exec.Carried
	Last int
}

// noteEntered records that pass 0 of a loop over the target's cache
// entered, for each hc row active, its carried rows c (up to its last
// known token).
func (x *Executor) noteEntered(hc *hostStep, c []exec.Carried, active []int) {
	for _, i := range active {
		row := hc.Rows[i]
		x.entered = append(x.entered, EnteredHidden{ID: row.ID, Rows: c[i], Last: min(c[i].Pos+c[i].Rows(), len(row.History)-1)})
	}
}

// TakeEnteredHidden returns what loops over the target's cache entered
// since the last call (EnteredHidden), in order.
func (x *Executor) TakeEnteredHidden() []EnteredHidden {
	e := x.entered
	x.entered = nil
	return e
}

// ResumeHidden gives sequence id, resumed from a prefix cache hit at
// position pos, the target's hidden state at pos-1 (hidden, [E]), which
// the loop entering the target's hidden rows pairs with the token at pos.
// Call it before the sequence's first step.
func (x *Executor) ResumeHidden(id uint64, pos int, hidden []float32) {
	if key := x.targetHidden(); key != "" && pos > 0 {
		x.seq(id).carry[key] = exec.Carried{Pos: pos - 1, Width: len(hidden), Data: slices.Clone(hidden)}
	}
}
