package main

import (
	"strings"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/suites/bench"
)

// specBackend names a plan's speculation: its proposers' ops without the
// family, a draft loop by loopBackend ("ngram", "self", "ngram+draft"), or
// "none".
func specBackend(inst *instance.Instance) string {
	var names []string
	for _, st := range inst.Plan.Steps {
		if _, ok := st.Node.(exec.Proposer); !ok {
			continue
		}
		if l, loop := st.Node.(*plan.Loop); loop {
			names = append(names, loopBackend(l))
		} else {
			names = append(names, strings.TrimPrefix(st.Op, "speculative."))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "+")
}

// loopBackend names draft loop l by the device op its body runs: a
// forward of the target is "self", of another model that model's alias;
// another op is its name without the family (model.mtp: "mtp").
func loopBackend(l *plan.Loop) string {
	for _, st := range l.Steps {
		switch {
		case st.Placement != node.Device:
		case st.Op == "model.forward" && l.Model == node.Target:
			return "self"
		case st.Op == "model.forward":
			return l.Model
		default:
			return st.Op[strings.IndexByte(st.Op, '.')+1:]
		}
	}
	return "loop"
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
