package engine

import (
	"context"
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/sched"
)

// aheadLoop is the ahead loop step (plan.Loop.Ahead) whose output ref
// names, or nil.
func (e *Engine) aheadLoop(ref plan.Ref) *plan.Step {
	if st := e.plan.Step(ref.Node); st != nil {
		if l, ok := st.Node.(*plan.Loop); ok && l.Ahead {
			return st
		}
	}
	return nil
}

// enteredAhead reports whether carried value ref is the in.hidden of an
// ahead loop, which takes it when it runs (draftAhead), not the step's
// start.
func (e *Engine) enteredAhead(ref plan.Ref) bool {
	for _, st := range e.plan.Steps {
		if l, ok := st.Node.(*plan.Loop); ok && l.Ahead && st.In["hidden"] == ref {
			return true
		}
	}
	return false
}

// takeAhead hands each sampled sequence the drafts (or, for a carried
// draft_probs output, their distributions) that an ahead loop made for it
// at the end of its last sampled step and carried as name, cut to its
// lookahead this step, and clears them. A sequence with none verifies no
// drafts.
func takeAhead(name string, isProbs bool, sampled []*request) any {
	drafts, probs := make(exec.Drafts, len(sampled)), make(exec.DraftProbs, len(sampled))
	for i, r := range sampled {
		switch v := r.ahead[name].(type) {
		case []int32:
			drafts[i] = v[:min(len(v), r.state.Lookahead)]
		case []exec.DraftDist:
			probs[i] = v[:min(len(v), r.state.Lookahead)]
		}
		delete(r.ahead, name)
	}
	if isProbs {
		return probs
	}
	return drafts
}

// aheadRoom is how many drafts r's next step may verify, as far as the
// engine knows at the end of this one (sched.NextDrafts, none while r
// backs off): the scheduler may grant fewer (its budget, free blocks),
// and the extra drafts are then dropped.
func (e *Engine) aheadRoom(r *request) int {
	if e.backingOff(r) {
		return 0
	}
	return e.sched.NextDrafts(r.seq)
}

// draftAhead runs the plan's ahead loops once the step's tokens are
// accepted (sched.Update has appended them): each drafts for the next step
// of every sampled sequence that goes on, from its history now and the
// rows its steps kept since the loop last ran for it (the loop's
// in.hidden), and leaves its outputs in the sequence's ahead drafts. A
// loop over the target's cache writes its entries through the sequence's
// block table, grown here to hold them; a sequence whose entries do not
// fit keeps its rows for the next run and gets no drafts.
func (e *Engine) draftAhead(ctx context.Context, sampled []*request, outcomes []sched.Outcome) error {
	for _, st := range e.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok || !l.Ahead {
			continue
		}
		onTarget := e.modelLoops[st.ID] == nil
		href, entersHidden := st.In["hidden"]
		hc := &exec.HostContext{Ctx: ctx, Batch: &exec.Batch{}}
		var rows []*request
		var hidden []exec.Carried
		for i, o := range outcomes {
			r := sampled[i]
			if o.Finish != sched.Running || r.Embed {
				continue
			}
			h := r.seq.Tokens
			room := e.aheadRoom(r)
			if onTarget {
				// Pass 0 enters up to the last token, at its position; pass p
				// drafts at position len(h)-1+p.
				for room > 0 && !e.kv.CanGrow(&r.seq.KV, len(h)+room-1) {
					room--
				}
				if e.kv.Grow(&r.seq.KV, len(h)+max(room-1, 0)) != nil {
					continue
				}
			}
			r.state.History, r.state.Lookahead = h, room
			hc.Rows = append(hc.Rows, &r.state)
			n := int32(len(hc.Batch.Tables))
			hc.Batch.Tables = append(hc.Batch.Tables, r.seq.KV.Blocks)
			hc.Batch.RowSeq, hc.Batch.LogitRows = append(hc.Batch.RowSeq, n), append(hc.Batch.LogitRows, n)
			if entersHidden {
				hidden = append(hidden, r.carry[href.String()])
				delete(r.carry, href.String())
			}
			rows = append(rows, r)
		}
		if len(rows) == 0 {
			continue
		}
		in := map[string]any{}
		if entersHidden {
			in["hidden"] = hidden
		}
		res, err := e.runLoop(st, l, hc, in)
		if err != nil {
			return err
		}
		for name, ref := range e.plan.Carry {
			if ref.Node != st.ID {
				continue
			}
			for i, r := range rows {
				if r.ahead == nil {
					r.ahead = map[string]any{}
				}
				switch v := res[ref.Port].(type) {
				case exec.Drafts:
					r.ahead[name] = v[i]
				case exec.DraftProbs:
					r.ahead[name] = v[i]
				default:
					return fmt.Errorf("engine: loop %s: output %s is %T", st.ID, ref.Port, res[ref.Port])
				}
			}
		}
	}
	return nil
}
