package compile

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// dataflow checks the rules the engine relies on to run a plan, so that a
// graph that compiles runs:
//
//   - A device node reads $in.tokens, $in.positions and the outputs of the
//     device nodes before it in its segment; drafts (a draft input) are the
//     one host value it takes, as extra rows of its batch.
//   - One device segment verifies one set of drafts.
//   - At most one node verifies drafts (a host node with a draft and a
//     logits input), and its logits come from the forward that was fed the
//     same drafts; the draft distributions it reads, if any, are the same
//     proposer's.
//   - A graph with a proposer (a node with a draft output) outputs its
//     verifier's tokens: drafts that no verifier accepts or rejects would
//     never be checked against the target.
func (c *compiler) dataflow(p *plan.Plan, order []*cnode) {
	byStep := map[string]*cnode{}
	for _, cn := range order {
		byStep[cn.n.ID] = cn
	}
	segOf := map[string]int{}
	for si, seg := range p.Segments {
		for _, idx := range seg.Steps {
			segOf[p.Steps[idx].ID] = si
		}
	}
	for si, seg := range p.Segments {
		if seg.Placement == node.Device {
			c.deviceInputs(p, si, byStep, segOf)
		}
	}
	for _, st := range p.Steps {
		if alias := plan.StepModel(st); st.Placement == node.Device && alias != node.Target {
			c.errorf(c.paramPos(byStep[st.ID], "model"), "node %s (%s) runs model %q: the step's own forward runs the target; another model runs only in a draft loop's body",
				st.ID, st.Op, alias)
		}
	}
	var verifier, proposer *plan.Step
	for _, st := range p.Steps {
		if proposer == nil && slices.ContainsFunc(st.Spec.Out, func(o node.Port) bool { return o.Type == node.Draft }) {
			proposer = st
		}
		draftIn, logitsIn := portOfType(st.In, st.Spec, node.Draft), portOfType(st.In, st.Spec, node.Logits)
		if st.Placement != node.Host || draftIn == "" || logitsIn == "" {
			continue
		}
		at := c.inputPos(byStep[st.ID], draftIn)
		if verifier != nil {
			vp := byStep[verifier.ID].n.Pos
			c.errorf(at, "node %s verifies drafts, but so does %s (at %d:%d): a step has one verifier", st.ID, verifier.ID, vp.Line, vp.Col)
			continue
		}
		verifier = st
		lref, dref := st.In[logitsIn], st.In[draftIn]
		if probsIn := portOfType(st.In, st.Spec, node.DraftProbs); probsIn != "" && p.Source(st.In[probsIn]).Node != p.Source(dref).Node {
			c.errorf(c.inputPos(byStep[st.ID], probsIn), "node %s verifies %s with the distributions %s of another node: wire the probs of %s",
				st.ID, dref, st.In[probsIn], dref.Node)
		}
		fwd := byStep[lref.Node]
		if fwd == nil || fwd.spec.Placement != node.Device {
			continue
		}
		fed, ok := fwd.in[portOfType(fwd.in, fwd.spec, node.Draft)]
		switch {
		case !ok:
			c.errorf(at, "node %s verifies %s against %s, but %s was fed no drafts: wire its draft input to %s",
				st.ID, dref, lref, lref.Node, dref)
		case fed != dref:
			c.errorf(at, "node %s verifies %s, but its logits %s are %s's, computed for %s: verify the drafts the forward was fed",
				st.ID, dref, lref, lref.Node, fed)
		}
	}
	c.aheadVerified(p, verifier)
	if proposer == nil {
		return
	}
	tokens := p.Out["tokens"]
	if verifier != nil && tokens.Node == verifier.ID {
		return
	}
	at := c.at(c.g.OutPos, c.g.NamePos)
	for _, b := range c.g.Out {
		if b.Name == "tokens" {
			at = c.at(b.RefPos, b.NamePos, c.g.OutPos)
		}
	}
	pp := byStep[proposer.ID].n.Pos
	if verifier == nil {
		c.errorf(at, "the graph drafts tokens (node %s at %d:%d) but no node verifies them: add a verify node (a draft and a logits input) and output its tokens",
			proposer.ID, pp.Line, pp.Col)
	} else {
		c.errorf(at, "out.tokens reads %s, but the graph drafts tokens (node %s at %d:%d): output the tokens of its verifier %s",
			tokens, proposer.ID, pp.Line, pp.Col, verifier.ID)
	}
}

// deviceInputs checks the inputs of the steps of device segment si: drafts
// (one set per segment), $in.tokens, $in.positions (see hostValue), or
// device outputs of the same segment.
func (c *compiler) deviceInputs(p *plan.Plan, si int, byStep map[string]*cnode, segOf map[string]int) {
	var draft plan.Ref
	var drafted *plan.Step
	for _, idx := range p.Segments[si].Steps {
		st := p.Steps[idx]
		for _, port := range sortedPorts(st.In) {
			ref, in := st.In[port], st.Spec.Input(port)
			if in == nil {
				continue
			}
			at := c.inputPos(byStep[st.ID], port)
			switch {
			case in.Type == node.Draft:
				if drafted != nil && ref != draft {
					c.errorf(at, "node %s verifies %s, but %s in the same device segment verifies %s: one forward pass verifies one set of drafts",
						st.ID, ref, drafted.ID, draft)
				}
				draft, drafted = ref, st
			case hostValue(ref, in, byStep[ref.Node]) != "":
				c.errorf(at, "node %s (%s) runs on the device, but its input %s reads %s", st.ID, st.Op, port, hostValue(ref, in, byStep[ref.Node]))
			case byStep[ref.Node] == nil:
				// A step input, or a reference the compiler could not
				// resolve (reported).
			case segOf[ref.Node] != si:
				c.errorf(at, "node %s (%s) reads %s across a host step: device values do not outlive their segment, so %s must run with the nodes it reads",
					st.ID, st.Op, ref, st.ID)
			}
		}
	}
}

// hostValue says why a device node's input dst cannot read ref, a value
// only the host has ("$in.history, which only host nodes can read"), or ""
// when it can: $in.tokens, $in.positions, $loop.tokens, $loop.positions,
// $loop.hidden and device outputs, and drafts on a draft input (fed as
// extra rows of the batch). src is ref's source node, nil for a step input
// or an unresolved reference. It is checked before the input's type: no
// type makes a host value readable on the device.
func hostValue(ref plan.Ref, dst *node.Port, src *cnode) string {
	switch {
	case dst.Type == node.Draft:
	case (ref.Node == plan.InputNode || ref.Node == plan.LoopNode) && (ref.Port == node.BindTokens || ref.Port == node.BindPositions):
	case ref.Node == plan.InputNode && ref.Port == node.BindImages:
	case ref.Node == plan.LoopNode && ref.Port == node.BindHidden:
	case ref.Node == plan.InputNode:
		return fmt.Sprintf("$in.%s, which only host nodes can read", ref.Port)
	case ref.Node == plan.PrevNode:
		return fmt.Sprintf("$prev.%s, a value carried on the host, which only host nodes can read", ref.Port)
	case src != nil && src.spec != nil && src.spec.Placement != node.Device:
		return fmt.Sprintf("%s, a host value (%s): device nodes read $in.tokens, $in.positions and device outputs of their segment",
			ref, src.spec.Op)
	}
	return ""
}

// kindHint explains a type mismatch between one value per row and a
// sequence's history, or between the image rows and their embeddings, or
// is "".
func kindHint(have, want node.PortType) string {
	switch {
	case have == node.Images && want == node.ImageEmbeddings:
		return " ($in.images only marks the image rows: their embeddings come from the vision tower, a vision.encode node's embeddings)"
	case want == node.History:
		return fmt.Sprintf(" (a %s input reads each sequence's tokens so far, $in.history, not one token per row)", node.History)
	case have == node.History:
		return fmt.Sprintf(" (%s is each sequence's tokens so far, not one token per row)", node.History)
	}
	return ""
}

// portOfType is the first (by name) of the wired inputs in of a node of
// spec whose type is typ, or "".
func portOfType(in map[string]plan.Ref, spec *node.Spec, typ node.PortType) string {
	for _, port := range sortedPorts(in) {
		if p := spec.Input(port); p != nil && p.Type == typ {
			return port
		}
	}
	return ""
}

// inputPos is the position of cn's binding of input port.
func (c *compiler) inputPos(cn *cnode, port string) graphdef.Pos {
	for _, b := range cn.n.In {
		if b.Name == port {
			return c.at(b.RefPos, b.NamePos, cn.n.Pos)
		}
	}
	return c.at(cn.n.InPos, cn.n.Pos)
}

// paramPos is the position of cn's setting of param name (its node's
// when the param is not set).
func (c *compiler) paramPos(cn *cnode, name string) graphdef.Pos {
	for _, a := range cn.n.With {
		if a.Name == name {
			return c.at(a.ValuePos, a.NamePos, cn.n.Pos)
		}
	}
	return c.at(cn.n.WithPos, cn.n.Pos)
}

// sortedPorts returns the keys of in in a fixed order, so that errors come
// out the same every time.
func sortedPorts(in map[string]plan.Ref) []string {
	ports := make([]string, 0, len(in))
	for p := range in {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports
}

// aheadVerified checks that the drafts each ahead loop (plan.Loop.Ahead)
// makes for the next step are what that step's verifier verifies: carried
// as $prev.NAME and wired to verifier's draft input.
func (c *compiler) aheadVerified(p *plan.Plan, verifier *plan.Step) {
	var verified plan.Ref
	if verifier != nil {
		verified = verifier.In[portOfType(verifier.In, verifier.Spec, node.Draft)]
	}
	for _, b := range c.g.Carry {
		ref, ok := p.Carry[b.Name]
		st := p.Step(ref.Node)
		if !ok || st == nil || st.Op != plan.LoopOp || st.Spec.Output(ref.Port) == nil || st.Spec.Output(ref.Port).Type != node.Draft {
			continue
		}
		at := c.at(b.RefPos, b.NamePos, c.g.CarryPos)
		switch prev := (plan.Ref{Node: plan.PrevNode, Port: b.Name}); {
		case verifier == nil:
			c.errorf(at, "carry %s: loop %s drafts for the next step, but no node verifies drafts: verify $prev.%s", b.Name, ref.Node, b.Name)
		case verified != prev:
			c.errorf(at, "carry %s: loop %s drafts for the next step, but %s verifies %s: verify $prev.%s", b.Name, ref.Node, verifier.ID, verified, b.Name)
		}
	}
}
