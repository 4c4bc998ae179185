package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/sched"
)

// carryRows is a carried value as a step's device segment computed it:
// one row per row of the feed it ran over.
type carryRows struct {
	data  []float32 // [len(feed.Tokens), width]
	width int
	feed  *exec.Batch
}

// takeCarry hands each sampled sequence its carried values ($prev.NAME,
// one exec.Carried per HostContext row, or an ahead loop's drafts) and
// clears them: the host nodes that read them keep what they need. The rows
// an ahead loop enters stay until it runs.
func (e *Engine) takeCarry(sampled []*request, values map[plan.Ref]any) {
	for _, name := range slices.Sorted(maps.Keys(e.plan.Carry)) {
		ref := e.plan.Carry[name]
		if st := e.aheadLoop(ref); st != nil {
			out := st.Spec.Output(ref.Port)
			values[plan.Ref{Node: plan.PrevNode, Port: name}] = takeAhead(name, out != nil && out.Type == node.DraftProbs, sampled)
			continue
		}
		if e.enteredAhead(ref) {
			continue
		}
		v := make([]exec.Carried, len(sampled))
		for i, r := range sampled {
			v[i] = r.carry[name]
			delete(r.carry, name)
		}
		values[plan.Ref{Node: plan.PrevNode, Port: name}] = v
	}
}

// recordCarry keeps, after the device segment that computed ref ran over
// feed, the rows the carry of name needs.
func (e *Engine) recordCarry(x exec.Executable, ref plan.Ref, feed *exec.Batch) error {
	for name, cref := range e.plan.Carry {
		if cref != ref {
			continue
		}
		data, rows, cols, err := x.Output(ref.Node + "." + ref.Port)
		if err != nil {
			return fmt.Errorf("engine: carry %s: %w", name, err)
		}
		if rows != len(feed.Tokens) {
			return fmt.Errorf("engine: carry %s: %s has %d rows for a step of %d tokens: a carried value needs every row", name, ref, rows, len(feed.Tokens))
		}
		e.stepCarry[name] = carryRows{data: data, width: cols, feed: feed}
	}
	return nil
}

// keepCarry appends to each sequence's carried values the rows of the
// tokens this step kept: every fed row, but for a sequence that verified
// drafts only its last token's and its accepted drafts'. res is by work
// index.
func (e *Engine) keepCarry(work []sched.Work, res []sched.Result) {
	for name, cr := range e.stepCarry {
		seqRows := make([][]int, len(work)) // feed rows of each work item, in order
		for row, s := range cr.feed.RowSeq {
			seqRows[s] = append(seqRows[s], row)
		}
		for si, w := range work {
			r := e.reqs[w.Seq]
			rows := seqRows[si]
			if r == nil || len(rows) == 0 {
				continue
			}
			if w.Draft > 0 && w.Sample {
				rows = rows[:min(len(rows), 1+res[si].Accepted)]
			}
			c := exec.Carried{Pos: int(cr.feed.Positions[rows[0]]), Width: cr.width, Data: make([]float32, 0, len(rows)*cr.width)}
			for _, row := range rows {
				c.Data = append(c.Data, cr.data[row*cr.width:(row+1)*cr.width]...)
			}
			if r.carry == nil {
				r.carry = map[string]exec.Carried{}
			}
			r.carry[name] = r.carry[name].Append(c)
		}
	}
	clear(e.stepCarry)
}

// dropCarry forgets the carried values of the sequences that hold no KV
// (waiting, or preempted to be recomputed): their next rows start over.
func (e *Engine) dropCarry() {
	for _, r := range e.reqs {
		if len(r.seq.KV.Blocks) == 0 {
			r.carry, r.ahead = nil, nil
		}
	}
}
