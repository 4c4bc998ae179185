package executor

import (
	"context"
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// aheadLoop is the ahead loop step (plan.Loop.Ahead) whose output ref
// names, or nil.
func (x *Executor) aheadLoop(ref plan.Ref) *plan.Step {
	if st := x.plan.Step(ref.Node); st != nil {
		if l, ok := st.Node.(*plan.Loop); ok && l.Ahead {
			return st
		}
	}
	return nil
}

// enteredAhead reports whether carried value ref is the in.hidden of an
// ahead loop, which takes it when it runs (draftAhead), not the step's
// start.
func (x *Executor) enteredAhead(ref plan.Ref) bool {
	for _, st := range x.plan.Steps {
		if l, ok := st.Node.(*plan.Loop); ok && l.Ahead && st.In["hidden"] == ref {
			return true
		}
	}
	return false
}

// takeAhead hands each sampled sequence (rows) the drafts (or, for a
// carried draft_probs output, their distributions) that an ahead loop made
// for it at the end of its last sampled step and carried as name, cut to
// its lookahead this step, and clears them. A sequence with none verifies
// no drafts.
func (x *Executor) takeAhead(name string, isProbs bool, rows []*node.SeqState) any {
	drafts, probs := make(exec.Drafts, len(rows)), make(exec.DraftProbs, len(rows))
	for i, row := range rows {
		s, ok := x.seqs[row.ID]
		if !ok {
			continue
		}
		switch v := s.ahead[name].(type) {
		case []int32:
			drafts[i] = v[:min(len(v), row.Lookahead)]
		case []exec.DraftDist:
			probs[i] = v[:min(len(v), row.Lookahead)]
		}
		delete(s.ahead, name)
	}
	if isProbs {
		return probs
	}
	return drafts
}

// AheadSeq is a sampled sequence that goes on after a step, for DraftAhead.
type AheadSeq struct {
	State   *node.SeqState
	History []int32 // its tokens, the step's accepted ones appended
	// Room is how many drafts its next step may verify, as far as the
	// engine knows (none while it backs off): the scheduler may grant
	// fewer, and the extra drafts are then dropped.
	Room int
	KV   *kv.Seq // its blocks in the target's cache
}

// TargetKV is the target's KV cache, which a loop over the target writes
// its entries to (kv.Manager).
type TargetKV interface {
	CanGrow(s *kv.Seq, n int) bool
	Grow(s *kv.Seq, n int) error
}

// DraftAhead runs the plan's ahead loops once a step's tokens are accepted:
// each drafts for the next step of every sequence in seqs from its history
// now and the rows its steps kept since the loop last ran for it (the
// loop's in.hidden), and keeps its outputs as the sequence's ahead drafts,
// which the next step's $prev values take. A loop over the target's cache
// writes its entries through the sequence's block table, grown here (in
// target) to hold them; a sequence whose entries do not fit keeps its rows
// for the next run and gets no drafts.
func (x *Executor) DraftAhead(ctx context.Context, seqs []AheadSeq, target TargetKV) error {
	for _, st := range x.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok || !l.Ahead {
			continue
		}
		hc, rows, in := x.aheadRows(st, seqs, target)
		hc.Ctx = ctx
		if len(rows) == 0 {
			continue
		}
		res, err := x.runLoop(st, l, hc, in)
		if err != nil {
			return err
		}
		if err := x.keepAhead(st, rows, res); err != nil {
			return err
		}
	}
	return nil
}

// aheadRows builds the host context of ahead loop st's run over seqs: a
// row per sequence that the loop drafts for (rows), and the loop's inputs.
func (x *Executor) aheadRows(st *plan.Step, seqs []AheadSeq, target TargetKV) (*hostStep, []*node.SeqState, map[string]any) {
	onTarget := x.modelLoops[st.ID] == nil
	href, entersHidden := st.In[node.BindHidden]
	hc := &hostStep{HostContext: &node.HostContext{}, Batch: &exec.Batch{}}
	var hidden []exec.Carried
	for _, sq := range seqs {
		h, room := sq.History, sq.Room
		if onTarget {
			// Pass 0 enters up to the last token, at its position; pass p
			// drafts at position len(h)-1+p.
			for room > 0 && !target.CanGrow(sq.KV, len(h)+room-1) {
				room--
			}
			if target.Grow(sq.KV, len(h)+max(room-1, 0)) != nil {
				continue
			}
		}
		sq.State.History, sq.State.Lookahead = h, room
		hc.Rows = append(hc.Rows, sq.State)
		n := int32(len(hc.Batch.Tables))
		hc.Batch.Tables = append(hc.Batch.Tables, sq.KV.Blocks)
		hc.Batch.RowSeq, hc.Batch.LogitRows = append(hc.Batch.RowSeq, n), append(hc.Batch.LogitRows, n)
		if entersHidden {
			s := x.seq(sq.State.ID)
			hidden = append(hidden, s.carry[href.String()])
			delete(s.carry, href.String())
		}
	}
	in := map[string]any{}
	if entersHidden {
		in[node.BindHidden] = hidden
	}
	return hc, hc.Rows, in
}

// keepAhead keeps ahead loop st's outputs res as the ahead drafts of its
// rows' sequences, under the names the plan carries them as.
func (x *Executor) keepAhead(st *plan.Step, rows []*node.SeqState, res map[string]any) error {
	for name, ref := range x.plan.Carry {
		if ref.Node != st.ID {
			continue
		}
		for i, row := range rows {
			s := x.seq(row.ID)
			switch v := res[ref.Port].(type) {
			case exec.Drafts:
				s.ahead[name] = v[i]
			case exec.DraftProbs:
				s.ahead[name] = v[i]
			default:
				return fmt.Errorf("engine: loop %s: output %s is %T", st.ID, ref.Port, res[ref.Port])
			}
		}
	}
	return nil
}
