package main

import (
	"strings"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/suites/bench"
)

// specBackend names a plan's speculation: its proposers' ops without the
// family, a draft loop as "self" (over the target) or its model's alias
// ("ngram", "self", "ngram+draft"), or "none".
func specBackend(inst *instance.Instance) string {
	var names []string
	for _, st := range inst.Plan.Steps {
		if _, ok := st.Node.(exec.Proposer); !ok {
			continue
		}
		switch l, loop := st.Node.(*plan.Loop); {
		case loop && l.Model == exec.Target:
			names = append(names, "self")
		case loop:
			names = append(names, l.Model)
		default:
			names = append(names, strings.TrimPrefix(st.Op, "speculative."))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}

// specBlock is the speculative block (the bench report's fields) of a
// request's or a run's counts under inst's plan.
func specBlock(inst *instance.Instance, s engine.SpecStats) bench.Speculative {
	k := inst.Engine.DraftWindow()
	if k == 0 {
		return bench.Disabled()
	}
	out := bench.Speculative{Backend: specBackend(inst), Enabled: true, DraftWindow: k, Rounds: s.Rounds,
		DraftedTokens: s.Drafted, AcceptedTokens: s.Accepted, FallbackSteps: s.Fallback,
		AcceptedPerPosition: append([]int{}, s.AcceptedPerPosition...)}
	bench.SetRatios(&out)
	return out
}
