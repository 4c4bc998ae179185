package executor

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// feed is the batch a device segment computes over: batch itself, or, when
// a step of the segment wires an input of type draft, batch with those
// drafts inserted (its per-row inputs bound by hc.bindRows). Each
// sequence's drafts must fit the KV the scheduler reserved for it
// (SeqState.Lookahead).
func (x *Executor) feed(seg plan.Segment, hc *hostStep, values map[plan.Ref]any) (*exec.Batch, error) {
	var drafts exec.Drafts
	var from plan.Ref
	for _, idx := range seg.Steps {
		st := x.plan.Steps[idx]
		for port, ref := range st.In {
			if p := st.Spec.Input(port); p == nil || p.Type != node.Draft {
				continue
			}
			d, ok := values[ref].(exec.Drafts)
			if !ok || len(d) != len(hc.Rows) {
				return nil, fmt.Errorf("engine: step %s: draft input %s is %T for %d sequences", st.ID, ref, values[ref], len(hc.Rows))
			}
			if drafts != nil && ref != from {
				return nil, fmt.Errorf("engine: one device segment verifies both %s and %s", from, ref)
			}
			drafts, from = d, ref
		}
	}
	if drafts == nil {
		return hc.Batch, nil
	}
	for i, d := range drafts {
		if len(d) > hc.Rows[i].Lookahead {
			return nil, fmt.Errorf("engine: %s drafted %d tokens for a sequence with room for %d", from, len(d), hc.Rows[i].Lookahead)
		}
	}
	feed, err := hc.Batch.WithDrafts(drafts)
	if err != nil || feed == hc.Batch || hc.bindRows == nil {
		return feed, err
	}
	hc.bindRows(feed)
	return feed, nil
}

// verifiedDrafts is the draft input of the step that produced out.tokens,
// or n empty drafts when the plan does not speculate.
func (x *Executor) verifiedDrafts(values map[plan.Ref]any, n int) exec.Drafts {
	if st := x.plan.Step(x.plan.Out[node.BindTokens].Node); st != nil {
		if ref, ok := st.In["draft"]; ok {
			if d, ok := values[ref].(exec.Drafts); ok && len(d) == n {
				return d
			}
		}
	}
	return make(exec.Drafts, n)
}

// stepTokens normalises the plan's out.tokens: one token per sampled
// sequence ([]int32, sample.token) or one or more ([][]int32, verify).
func stepTokens(v any, n int) ([][]int32, error) {
	switch t := v.(type) {
	case []int32:
		if len(t) == n {
			out := make([][]int32, n)
			for i := range t {
				out[i] = t[i : i+1]
			}
			return out, nil
		}
	case [][]int32:
		if len(t) == n && !slices.ContainsFunc(t, func(s []int32) bool { return len(s) == 0 }) {
			return t, nil
		}
	}
	return nil, fmt.Errorf("engine: plan produced %T of %v for %d sequences", v, v, n)
}
