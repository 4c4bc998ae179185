// Package plan is the compiled form of a graph: its steps in execution order,
// the segments the engine runs them in, the folded policy and the graph's
// outputs. The compiler (runtime/compile) builds plans; the engine executes
// one every step. A Plan is immutable once built.
package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// Ref names a value in the step: output Port of step Node, or graph input
// Port when Node is InputNode ("$in").
type Ref struct {
	Node string
	Port string
}

// InputNode is the Ref.Node of graph inputs.
const InputNode = graphdef.InputNode

// PrevNode is the Ref.Node of values carried from a sequence's previous
// step ($prev.NAME, see Plan.Carry).
const PrevNode = graphdef.PrevNode

// String returns "node.port" ("$in.tokens" for inputs).
func (r Ref) String() string { return r.Node + "." + r.Port }

// Step is one node of the graph, ready to run.
type Step struct {
	// ID is the node's id in the graph.
	ID string
	// Op is the node's registered op.
	Op string
	// Placement is copied from the spec.
	Placement node.Placement
	// Params holds every declared param of the op, resolved: graph params
	// substituted, defaults filled in.
	Params node.Params
	// In maps each wired input port to its source; unwired optional ports
	// are absent.
	In map[string]Ref
	// Node is the instance built by Spec.New from Params. For policy steps
	// it implements node.PolicyNode and has already been folded into the
	// plan's Policy.
	Node any
	// Spec is the registered spec of Op.
	Spec *node.Spec
}

// Segment is a maximal run of consecutive non-policy steps (policy steps are
// skipped over) that share a placement; the engine runs a device segment as
// one recorded op list and a host segment as Go code.
type Segment struct {
	Placement node.Placement
	// Steps are indexes into Plan.Steps, ascending.
	Steps []int
}

// Plan is a compiled graph.
type Plan struct {
	// Name and File identify the graph it was compiled from.
	Name, File string
	// Rewritten says how the loader changed the graph as written before
	// compiling it ("" when it did not); String's header shows it.
	Rewritten string
	// Params are the graph's params after overrides, by name.
	Params node.Params
	// Policy is node.DefaultPolicy with every policy step folded in, in step
	// order.
	Policy node.PlanPolicy
	// Steps are the graph's nodes in a topological order: every step comes
	// after the steps it reads from, and ties keep file order.
	Steps []*Step
	// Segments partition the non-policy steps; see Segment.
	Segments []Segment
	// Out maps each graph output ("tokens", ...) to its source.
	Out map[string]Ref
	// Carry maps each carried value NAME (read as $prev.NAME) to the
	// value the engine keeps per sequence for its next sampled step: a
	// device output's rows of the tokens the steps accepted, or the drafts
	// of an ahead loop (Loop.Ahead). The device rows an ahead loop's
	// in.hidden reads are carried under that ref's name ("fwd.hidden").
	// Nil when the graph carries nothing.
	Carry map[string]Ref
	// Tests are the graph's inline test cases, as parsed.
	Tests []*graphdef.Test
}

// Source is the value ref names: for $prev.NAME the one Carry keeps.
func (p *Plan) Source(ref Ref) Ref {
	if c, ok := p.Carry[ref.Port]; ok && ref.Node == PrevNode {
		return c
	}
	return ref
}

// Step returns the step with the given id, or nil.
func (p *Plan) Step(id string) *Step {
	for _, s := range p.Steps {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// Hash identifies the plan: the hex SHA-256 of String, so two plans with
// the same steps, params and policy hash alike. Backends key the graphs
// they capture by it (with the step's shape).
func (p *Plan) Hash() string {
	sum := sha256.Sum256([]byte(p.String()))
	return hex.EncodeToString(sum[:])
}

// String renders the plan as stable, human-readable text for golden tests and
// `ninfer graph plan`: maps sorted by key, values formatted with
// node.FormatValue, no pointers or instances.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s (%s)\n", p.Name, p.File)
	if p.Rewritten != "" {
		fmt.Fprintf(&b, "rewritten: %s\n", p.Rewritten)
	}
	if len(p.Params) > 0 {
		b.WriteString("params:\n")
		for _, k := range slices.Sorted(maps.Keys(p.Params)) {
			fmt.Fprintf(&b, "  %s = %s\n", k, node.FormatValue(p.Params[k]))
		}
	}
	fmt.Fprintf(&b, "policy: prefill_chunk=%d kv_dtype=%s kv_block_tokens=%d", p.Policy.PrefillChunk, p.Policy.KVDType, p.Policy.KVBlockTokens)
	if d := p.Policy.StateDType; d != "" && d != "f32" {
		fmt.Fprintf(&b, " state_dtype=%s", d)
	}
	b.WriteString("\n")
	writeSteps(&b, "", p.Steps, p.Segments)
	b.WriteString("out:\n")
	for _, k := range slices.Sorted(maps.Keys(p.Out)) {
		fmt.Fprintf(&b, "  %s <- %s\n", k, p.Out[k])
	}
	if len(p.Carry) > 0 {
		b.WriteString("carry:\n")
		for _, k := range slices.Sorted(maps.Keys(p.Carry)) {
			fmt.Fprintf(&b, "  %s <- %s\n", k, p.Carry[k])
		}
	}
	if len(p.Tests) > 0 {
		b.WriteString("tests:\n")
		for _, t := range p.Tests {
			fmt.Fprintf(&b, "  %q: prompt=%q temperature=%g max_tokens=%d", t.Name, t.Prompt, t.Temperature, t.MaxTokens)
			if t.SameAs != "" {
				fmt.Fprintf(&b, " same_as=%s", t.SameAs)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// writeSteps writes steps and their segments, each line indented by
// indent; a loop step is followed by its body, indented further.
func writeSteps(b *strings.Builder, indent string, steps []*Step, segs []Segment) {
	b.WriteString(indent + "steps:\n")
	for i, s := range steps {
		fmt.Fprintf(b, "%s  %d %s: %s [%s]\n", indent, i, s.ID, s.Op, s.Placement)
		for _, k := range slices.Sorted(maps.Keys(s.In)) {
			fmt.Fprintf(b, "%s      in  %s <- %s\n", indent, k, s.In[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			fmt.Fprintf(b, "%s      with %s = %s\n", indent, k, node.FormatValue(s.Params[k]))
		}
		l, ok := s.Node.(*Loop)
		if !ok {
			continue
		}
		if l.Block {
			fmt.Fprintf(b, "%s      block %d\n", indent, l.Repeat)
		} else {
			fmt.Fprintf(b, "%s      repeat %d\n", indent, l.Repeat)
		}
		if l.Model != node.Target {
			fmt.Fprintf(b, "%s      model %s\n", indent, l.Model)
		}
		if l.Ahead {
			fmt.Fprintf(b, "%s      ahead (drafts for the next step)\n", indent)
		}
		writeSteps(b, indent+"      ", l.Steps, l.Segments)
		for _, k := range slices.Sorted(maps.Keys(l.Next)) {
			fmt.Fprintf(b, "%s      next %s <- %s\n", indent, k, l.Next[k])
		}
		for _, k := range slices.Sorted(maps.Keys(l.Out)) {
			fmt.Fprintf(b, "%s      out  %s <- %s\n", indent, k, l.Out[k])
		}
	}
	b.WriteString(indent + "segments:\n")
	for i, seg := range segs {
		ids := make([]string, len(seg.Steps))
		for j, k := range seg.Steps {
			ids[j] = steps[k].ID
		}
		fmt.Fprintf(b, "%s  %d %s: %s\n", indent, i, seg.Placement, strings.Join(ids, " "))
	}
}

// LoopOp is the Op of a loop step: its Node is a *Loop.
const LoopOp = "loop"

// LoopNode is the Ref.Node of a loop body's per-pass inputs ($loop.NAME,
// see LoopInputs).
const LoopNode = graphdef.LoopNode

// LoopInputs are the per-pass inputs of a loop body: pass 0 feeds each
// drafting sequence's last token at its position (a loop with in.hidden:
// the positions its carried rows cover); each later pass feeds the body
// outputs Next names, one position further. A block loop's drafting pass
// feeds each drafting sequence's last token and Repeat mask tokens at the
// positions that follow, and no $loop.hidden.
var LoopInputs = []node.Port{
	{Name: node.BindTokens, Type: node.Tokens, Doc: "one token per drafting sequence: its last token, then the previous pass's pick"},
	{Name: node.BindPositions, Type: node.Positions, Doc: "the position of each of those tokens"},
	{Name: node.BindHidden, Type: node.Hidden, Doc: "with the loop's in.hidden (a carried value): pass 0's tokens are each sequence's positions that value covers, each with the carried row of the position before (zeros at 0); a later pass's is the row next.hidden gave"},
}

// Loop is the compiled body of a loop step (a draft loop): the sub-plan
// the engine runs up to Repeat times per step, each pass over one row per
// sequence that still drafts, on the target's KV cache. Its steps and
// segments are indexed like a Plan's; the engine prepares its device
// segments per batch shape like the plan's own.
type Loop struct {
	// Repeat is the most passes per step: each drafting sequence gets
	// min(Repeat, its lookahead) drafts. In a block loop (Block) the
	// drafts come from one pass over a block per drafting sequence: its
	// last token and Repeat mask tokens (exec.BlockDrafter), the body's
	// outputs giving one token per mask row; Next is empty.
	Repeat int
	Block  bool
	// Ahead is set on a loop whose outputs are carried (carry: NAME:
	// LOOP.PORT, read next step as $prev.NAME): it drafts for the next
	// step, running once this step's tokens are accepted, over the
	// sampled sequences that go on (vLLM's order). Its in.hidden reads
	// this step's device rows, kept like a carried value's.
	Ahead    bool
	Steps    []*Step
	Segments []Segment
	// Next maps each loop input the body feeds back ("tokens", and with a
	// carried in.hidden "hidden") to the body output of the pass before.
	Next map[string]Ref
	// Out maps each output of the loop step to the body output it collects
	// from every pass: tokens (one per row) into a draft, or draft_probs.
	Out map[string]Ref
	// Model is the alias of the model the body's device steps run
	// (StepModel): node.Target, whose KV cache and block tables the
	// passes share, or a draft model with a cache of its own, which each
	// step's first pass catches up on the tokens it has not seen.
	Model string
}

// StepModel is the alias of the model step s runs: a loop's Model, or
// what its spec's Info.ModelAlias says of its params; node.Target when
// neither names another.
func StepModel(s *Step) string {
	if l, ok := s.Node.(*Loop); ok {
		return l.Model
	}
	if s.Spec != nil && s.Spec.Info.ModelAlias != nil {
		if alias := s.Spec.Info.ModelAlias(s.Params); alias != "" {
			return alias
		}
	}
	return node.Target
}

// DraftTokens is the loop's draft window, Repeat (exec.Proposer).
func (l *Loop) DraftTokens() int { return l.Repeat }

// DraftsWithTargetState reports whether the body runs a device step that
// runs the target's own layers (node.Info.RecurrentState: model.forward
// over the target), which on a model with recurrent state would advance it
// (executor.BindTarget refuses such a plan there). A head with layers of
// its own (model.mtp) and a draft model leave it alone.
func (l *Loop) DraftsWithTargetState() bool {
	return l.Model == node.Target && slices.ContainsFunc(l.Steps, func(s *Step) bool {
		return s.Placement == node.Device && s.Node != nil && s.Spec.Info.RecurrentState
	})
}

// Reads reports whether a step of p (or of one of its loops) reads ref.
func (p *Plan) Reads(ref Ref) bool {
	for _, st := range p.AllSteps() {
		for _, r := range st.In {
			if r == ref {
				return true
			}
		}
	}
	return false
}

// AllSteps returns the plan's steps followed by the body steps of each of
// its loops, in plan order: every node the engine binds.
func (p *Plan) AllSteps() []*Step {
	out := slices.Clone(p.Steps)
	for _, s := range p.Steps {
		if l, ok := s.Node.(*Loop); ok {
			out = append(out, l.Steps...)
		}
	}
	return out
}
