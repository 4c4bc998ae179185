package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// SpecStats count one request's (or, summed, a run's) speculative
// decoding, with the definitions of the serving-performance method: a
// round is a decode step that verified at least one draft token.
type SpecStats struct {
	Rounds   int // decode steps that verified drafts
	Drafted  int // draft tokens verified
	Accepted int // draft tokens accepted
	// Fallback counts decode steps that could have drafted (the request had
	// room for another token after this one) but verified no draft: the
	// proposer found nothing, or more sequences ran than the graph's
	// max_batch.
	Fallback int
	// AcceptedPerPosition[i] counts the rounds whose draft token i was
	// accepted; its length is the plan's draft window k.
	AcceptedPerPosition []int
}

// AcceptanceRate is Accepted / Drafted; false when nothing was drafted.
func (s SpecStats) AcceptanceRate() (float64, bool) {
	if s.Drafted == 0 {
		return 0, false
	}
	return float64(s.Accepted) / float64(s.Drafted), true
}

// TokensPerRound is 1 + Accepted / Rounds; false without rounds.
func (s SpecStats) TokensPerRound() (float64, bool) {
	if s.Rounds == 0 {
		return 0, false
	}
	return 1 + float64(s.Accepted)/float64(s.Rounds), true
}

// Add returns the sum of s and o (accepted per position added element-wise).
func (s SpecStats) Add(o SpecStats) SpecStats {
	out := SpecStats{Rounds: s.Rounds + o.Rounds, Drafted: s.Drafted + o.Drafted, Accepted: s.Accepted + o.Accepted,
		Fallback: s.Fallback + o.Fallback}
	out.AcceptedPerPosition = make([]int, max(len(s.AcceptedPerPosition), len(o.AcceptedPerPosition)))
	for i := range out.AcceptedPerPosition {
		if i < len(s.AcceptedPerPosition) {
			out.AcceptedPerPosition[i] += s.AcceptedPerPosition[i]
		}
		if i < len(o.AcceptedPerPosition) {
			out.AcceptedPerPosition[i] += o.AcceptedPerPosition[i]
		}
	}
	return out
}

// count records one decode step that verified draft, of which accepted
// were accepted; room is how many drafts the request could still use.
func (s *SpecStats) count(draft []int32, accepted, room int) {
	switch {
	case len(draft) > 0:
		s.Rounds++
		s.Drafted += len(draft)
		s.Accepted += accepted
		for i := range accepted {
			s.AcceptedPerPosition[i]++
		}
	case room > 0:
		s.Fallback++
	}
}

// backoff is one request's adaptive speculation state (the verifier's
// MinAcceptance): ema averages its rounds' acceptance, skip counts the
// steps it still decodes without drafts, next is the skip after the next
// failing probe.
type backoff struct {
	ema        float64
	skip, next int
}

// lookahead is how many drafts a request with room for room gets this
// step: none while it backs off.
func (e *Engine) lookahead(r *inflight, room int) int {
	if room == 0 || !e.backingOff(r) {
		return room
	}
	r.backoff.skip--
	return 0
}

// backingOff reports whether r skips drafting in its next decode step
// (min_acceptance's backoff).
func (e *Engine) backingOff(r *inflight) bool { return e.minAccept > 0 && r.backoff.skip > 0 }

// observeRound updates r's backoff after a round that verified drafted
// tokens, accepted of them: below the verifier's MinAcceptance it backs
// off for next steps (1, 2, 4, ... 64 while its probes keep failing).
//
// The engine keeps the state the latest round left (specPrior), and a new
// request starts from it (startBackoff): after rounds that kept failing it
// first decodes without drafts, so a stream of short requests does not pay
// a fresh run of failing probes each.
func (e *Engine) observeRound(r *inflight, drafted, accepted int) {
	b := &r.backoff
	if e.minAccept <= 0 || drafted == 0 {
		return
	}
	defer func() { e.specPrior = *b }()
	acc := float64(accepted) / float64(drafted)
	b.ema = 0.5*b.ema + 0.5*acc
	switch {
	case b.ema < e.minAccept:
		b.skip = max(1, b.next)
		b.next = min(2*b.skip, 64)
		b.ema = e.minAccept // the probe after the pause decides afresh
	case acc >= e.minAccept:
		b.next = 1
	}
}

// startBackoff is a new request's backoff state: the latest round's
// (specPrior), or drafting from the first step before any round.
func (e *Engine) startBackoff() backoff {
	if e.specPrior.next == 0 {
		return backoff{ema: 1, next: 1}
	}
	return e.specPrior
}

// DraftWindow is the most draft tokens a sequence verifies per step (the
// plan's k); 0 when the plan does not speculate.
func (e *Engine) DraftWindow() int { return e.draftK }

// speculation reads the plan's proposers (exec.Proposer: the draft window
// is their largest k) and verifier (exec.Verifier: the batch size above
// which speculation is off) and checks that a speculating plan's tokens
// come from its verifier.
func (e *Engine) speculation() (maxBatch int, err error) {
	var verifier *plan.Step
	for _, st := range e.plan.Steps {
		if p, ok := st.Node.(exec.Proposer); ok {
			e.draftK = max(e.draftK, p.DraftTokens())
		}
		if v, ok := st.Node.(exec.Verifier); ok {
			if verifier != nil {
				return 0, fmt.Errorf("engine: steps %s and %s both verify drafts", verifier.ID, st.ID)
			}
			verifier, maxBatch = st, v.MaxBatch()
			if av, ok := v.(exec.AdaptiveVerifier); ok {
				e.minAccept = av.MinAcceptance()
			}
		}
	}
	if e.draftK > 0 && (verifier == nil || e.plan.Out[node.BindTokens].Node != verifier.ID) {
		return 0, errors.New("engine: a plan that drafts tokens must output the tokens of its verify step (out.tokens)")
	}
	return maxBatch, e.checkTaps()
}

// checkTaps checks that a drafter that reads target layers (an EAGLE-3
// drafter's target_layers, known once its model is bound) is fed the taps
// of those layers: the hidden states it reads must be the ones the
// forward taps.
func (e *Engine) checkTaps() error {
	type tapper interface{ Taps() []int }
	type tapReader interface{ TargetLayers() []int }
	for _, st := range e.plan.Steps {
		r, ok := st.Node.(tapReader)
		in := st.In
		if l, loop := st.Node.(*plan.Loop); loop {
			// A body node that reads target layers reads them through
			// $loop.hidden: the loop's in.hidden.
			for _, bs := range l.Steps {
				if br, reads := bs.Node.(tapReader); reads && slices.Contains(slices.Collect(maps.Values(bs.In)), plan.Ref{Node: plan.LoopNode, Port: "hidden"}) {
					r, ok, in = br, true, map[string]plan.Ref{"hidden": st.In["hidden"]}
				}
			}
		}
		if !ok {
			continue
		}
		for port, ref := range in {
			src := e.plan.Source(ref) // a $prev value's, or this step's rows an ahead loop enters
			if l, _ := st.Node.(*plan.Loop); ref.Node != plan.PrevNode && (l == nil || !l.Ahead) {
				continue
			}
			fw, ok := e.plan.Step(src.Node).Node.(tapper)
			if !ok || src.Port != "taps" {
				return fmt.Errorf("engine: step %s (%s): input %s reads %s, carried from %s, which are not a forward's taps of layers %v",
					st.ID, st.Op, port, ref, src, r.TargetLayers())
			}
			if !slices.Equal(fw.Taps(), r.TargetLayers()) {
				return fmt.Errorf("engine: step %s (%s) reads the target's layer inputs %v (its model's target_layers), but %s taps %v: set taps: \"%s\" on %s",
					st.ID, st.Op, r.TargetLayers(), src.Node, fw.Taps(), joinInts(r.TargetLayers()), src.Node)
			}
		}
	}
	return nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}
