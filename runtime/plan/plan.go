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
	// device output the engine keeps per sequence: the rows of the tokens
	// a step accepted, handed to the sequence's next sampled step; nil
	// when the graph carries nothing.
	Carry map[string]Ref
	// Tests are the graph's inline test cases, as parsed.
	Tests []*graphdef.Test
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
	b.WriteString("steps:\n")
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "  %d %s: %s [%s]\n", i, s.ID, s.Op, s.Placement)
		for _, k := range slices.Sorted(maps.Keys(s.In)) {
			fmt.Fprintf(&b, "      in  %s <- %s\n", k, s.In[k])
		}
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			fmt.Fprintf(&b, "      with %s = %s\n", k, node.FormatValue(s.Params[k]))
		}
	}
	b.WriteString("segments:\n")
	for i, seg := range p.Segments {
		ids := make([]string, len(seg.Steps))
		for j, k := range seg.Steps {
			ids[j] = p.Steps[k].ID
		}
		fmt.Fprintf(&b, "  %d %s: %s\n", i, seg.Placement, strings.Join(ids, " "))
	}
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
