package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// runLoop runs draft loop l (plan step st) for the step's sampled
// sequences: each sequence with a lookahead and no prior draft gets
// min(l.Repeat, lookahead) passes. Pass 0 feeds its last token at its
// position; each later pass feeds the token l.Next["tokens"] picked, one
// position further. The passes run on the target's KV cache through each
// sequence's block table, which the scheduler reserved for the drafts.
// Each output of l collects the token its body output picked per pass.
func (e *Engine) runLoop(st *plan.Step, l *plan.Loop, hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	outs := map[string]exec.Drafts{}
	for name := range l.Out {
		outs[name] = make(exec.Drafts, len(hc.Rows))
	}
	var active []int // hc rows still drafting
	var prior exec.Drafts
	if v, wired := in["prior"]; wired {
		var ok bool
		if prior, ok = v.(exec.Drafts); !ok || len(prior) != len(hc.Rows) {
			return nil, fmt.Errorf("engine: loop %s: prior input is %T for %d sequences", st.ID, v, len(hc.Rows))
		}
	}
	for i, row := range hc.Rows {
		if prior != nil && len(prior[i]) > 0 {
			for name := range outs {
				outs[name][i] = prior[i][:min(len(prior[i]), row.Lookahead)]
			}
			continue
		}
		if row.Lookahead > 0 && len(row.History) > 0 {
			active = append(active, i)
		}
	}
	b := &exec.Batch{}
	for _, i := range active {
		h := hc.Rows[i].History
		b.Tokens = append(b.Tokens, h[len(h)-1])
		b.Positions = append(b.Positions, int32(len(h)-1))
	}
	for pass := 0; len(active) > 0; pass++ {
		n := len(active)
		b.RowSeq, b.LogitRows, b.Tables = make([]int32, n), make([]int32, n), make([][]int32, n)
		rows := make([]*exec.SeqState, n)
		for j, i := range active {
			b.RowSeq[j], b.LogitRows[j], b.Tables[j] = int32(j), int32(j), hc.Batch.SeqTable(i)
			rows[j] = hc.Rows[i]
		}
		phc := &exec.HostContext{Ctx: hc.Ctx, Rows: rows, Batch: b, Device: hc.Device}
		vals := map[plan.Ref]any{
			{Node: plan.LoopNode, Port: "tokens"}:    b.Tokens,
			{Node: plan.LoopNode, Port: "positions"}: b.Positions,
		}
		if err := e.runPass(st, l, phc, vals); err != nil {
			return nil, err
		}
		picked := func(ref plan.Ref) ([]int32, error) {
			t, ok := vals[ref].([]int32)
			if !ok || len(t) != n {
				return nil, fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
			}
			return t, nil
		}
		for name, ref := range l.Out {
			t, err := picked(ref)
			if err != nil {
				return nil, err
			}
			for j, i := range active {
				outs[name][i] = append(outs[name][i], t[j])
			}
		}
		fed, err := picked(l.Next["tokens"])
		if err != nil {
			return nil, err
		}
		next := &exec.Batch{}
		var still []int
		for j, i := range active {
			if pass+1 < min(l.Repeat, hc.Rows[i].Lookahead) {
				still = append(still, i)
				next.Tokens = append(next.Tokens, fed[j])
				next.Positions = append(next.Positions, b.Positions[j]+1)
			}
		}
		active, b = still, next
	}
	res := map[string]any{}
	for name, d := range outs {
		res[name] = d
	}
	return res, nil
}

// runPass runs one pass of loop l's body over phc.Batch, with vals holding
// the pass's inputs; it leaves the body's outputs in vals.
func (e *Engine) runPass(st *plan.Step, l *plan.Loop, phc *exec.HostContext, vals map[plan.Ref]any) error {
	for si, seg := range l.Segments {
		if seg.Placement == node.Host {
			for _, idx := range seg.Steps {
				if err := e.runHost(l.Steps[idx], phc, vals); err != nil {
					return err
				}
			}
			continue
		}
		key := newExecKey(e.backend, loopSegmentName(st.ID, si), phc.Batch)
		x, err := e.preparedSegment(l.Steps, seg, key)
		if err != nil {
			return err
		}
		if err := x.Run(phc.Ctx, phc.Batch); err != nil {
			return err
		}
		ax, reduces := x.(exec.ArgmaxOutputter)
		for _, idx := range seg.Steps {
			s := l.Steps[idx]
			for _, p := range s.Spec.Out {
				ref := plan.Ref{Node: s.ID, Port: p.Name}
				readers := hostReaders(l, ref)
				if len(readers) == 0 {
					continue // not read outside the segment
				}
				name := s.ID + "." + p.Name
				if reduces && p.Type == node.Logits && ax.HasArgmax(name) && !slices.ContainsFunc(readers, func(op string) bool { return op != "sample.argmax" }) {
					ids, err := ax.OutputArgmax(name) // ids, not [rows, vocab] floats, come back
					if err != nil {
						return err
					}
					vals[ref] = exec.Logits{Rows: len(ids), Argmax: ids}
					continue
				}
				data, rows, cols, err := x.Output(name)
				if err != nil {
					return fmt.Errorf("engine: loop %s: %w", st.ID, err)
				}
				vals[ref] = exec.Logits{Data: data, Rows: rows, Vocab: cols}
			}
		}
	}
	return nil
}

// hostReaders are the ops of loop l's host steps that read ref.
func hostReaders(l *plan.Loop, ref plan.Ref) []string {
	var ops []string
	for _, s := range l.Steps {
		if s.Placement == node.Host && slices.Contains(slices.Collect(maps.Values(s.In)), ref) {
			ops = append(ops, s.Op)
		}
	}
	return ops
}

// loopSegmentName names device segment si of loop id's body in exec
// keys: "draft.seg0", ...
func loopSegmentName(id string, si int) string { return id + "." + segmentName(si) }

// warmLoops prepares, like warmup, each loop body's device segments at
// every bucket a pass over 1 to maxRunning sequences can fall in.
func (e *Engine) warmLoops(bk exec.Bucketer) error {
	for _, st := range e.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok {
			continue
		}
		for _, s := range bucketShapes(bk, e.maxRunning) {
			for si, seg := range l.Segments {
				if seg.Placement != node.Device {
					continue
				}
				key := execKey{loopSegmentName(st.ID, si), s[0], s[1]}
				if _, err := e.preparedSegment(l.Steps, seg, key); err != nil {
					return fmt.Errorf("engine: warm-up %s: %w", key, err)
				}
			}
		}
	}
	return nil
}
