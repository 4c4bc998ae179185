package compile

import (
	"maps"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// maxRepeat bounds a loop's repeat: the engine reserves KV for that many
// drafts per sequence and step.
const maxRepeat = 64

// loopIn are the inputs of a loop step: an earlier proposer's drafts, and
// a carried value (hidden states) that pass 0 enters.
var loopIn = []node.Port{
	{Name: "prior", Type: node.Draft, Optional: true,
		Doc: "an earlier proposer's drafts: a sequence that has one keeps it and is not drafted for again"},
	{Name: "hidden", Type: node.Hidden, Optional: true,
		Doc: "a value carried from earlier steps ($prev.NAME, rows of the target's hidden states; in a loop that drafts for the next step, this step's forward output): pass 0 enters every sequence's positions it covers ($loop.hidden: the row of the position before each token), also for sequences that do not draft"},
}

// carriesFrom reports whether carry: reads an output of node id (a loop
// that drafts for the next step, plan.Loop.Ahead).
func (c *compiler) carriesFrom(id string) bool {
	return slices.ContainsFunc(c.g.Carry, func(b *graphdef.Binding) bool {
		from, _, _ := strings.Cut(b.Ref, ".")
		return id != "" && from == id
	})
}

// hasIn reports whether loop node n wires its input name.
func hasIn(n *graphdef.Node, name string) bool {
	return slices.ContainsFunc(n.In, func(b *graphdef.Binding) bool { return b.Name == name && b.Ref != "" })
}

// compileLoop compiles the body of loop node cn into a plan.Loop and gives
// cn the spec of a host step with the loop's outputs (type draft, one
// collected token per pass) and its optional prior input. The body is
// compiled by a compiler of its own that shares the graph's params and
// reports into c: its nodes read $loop.tokens, $loop.positions and each
// other's outputs, nothing outside the loop.
func (c *compiler) compileLoop(cn *cnode) {
	n := cn.n
	sub := &compiler{g: &graphdef.Graph{File: c.g.File, Pos: c.g.Pos, Nodes: n.Body}, reg: c.reg,
		params: c.params, pnames: c.pnames, byID: map[string]*cnode{}, loop: n, outer: c}
	for i, bn := range n.Body {
		bc := &cnode{n: bn, index: i, params: node.Params{}, paramsOK: true, in: map[string]plan.Ref{}}
		sub.nodes = append(sub.nodes, bc)
		if bn.ID != "" && sub.byID[bn.ID] == nil && !bn.IsLoop() {
			sub.byID[bn.ID] = bc
			sub.ids = append(sub.ids, bn.ID)
		}
	}
	for _, bc := range sub.nodes {
		if bc.n.IsLoop() {
			bc.paramsOK = false // reported by graphdef.Check
			continue
		}
		sub.resolveOp(bc)
		sub.resolveParams(bc)
		if bc.spec != nil && bc.spec.Placement == node.Policy {
			sub.errorf(sub.at(bc.n.OpPos, bc.n.Pos), "node %s (%s) is a policy node: policy nodes belong to the graph, not to loop %s",
				bc.n.ID, bc.spec.Op, n.ID)
			bc.paramsOK = false
		}
	}
	for _, bc := range sub.nodes {
		sub.resolveInputs(bc)
	}
	l := &plan.Loop{Repeat: c.repeat(n), Block: n.Block, Ahead: c.carriesFrom(n.ID), Next: map[string]plan.Ref{}, Out: map[string]plan.Ref{}}
	nextTypes := map[string]node.PortType{"tokens": node.Tokens}
	if hasIn(n, "hidden") {
		nextTypes["hidden"] = node.Hidden
	}
	if n.Block {
		clear(nextTypes) // one pass: a next: is graphdef's error
	}
	for _, b := range n.Next {
		if b.Name == "" || b.Ref == "" || n.Block {
			continue // reported by graphdef
		}
		at := c.at(b.RefPos, b.NamePos, n.NextPos)
		want, ok := nextTypes[b.Name]
		if !ok {
			why := "a loop feeds back next.tokens, and next.hidden with in.hidden ($loop.positions advance by one each pass)"
			c.errorf(c.at(b.NamePos, n.NextPos), "loop %s: next %s: %s%s", n.ID, b.Name, why, didYouMean(b.Name, slices.Sorted(maps.Keys(nextTypes)), "next.%s"))
			continue
		}
		ref, typ, known, _ := sub.source(b.Ref, at)
		l.Next[b.Name] = ref
		if known && typ != want {
			c.errorf(at, "type mismatch: %s is %s, but next.%s wants %s (one per row)", b.Ref, typ, b.Name, want)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(nextTypes)) {
		if _, ok := l.Next[name]; !ok && len(n.Body) > 0 {
			c.errorf(c.at(n.NextPos, n.BodyPos, n.Pos), "loop %s: missing next.%s: the body output (one %s per row) that the following pass feeds", n.ID, name, nextTypes[name])
		}
	}
	for _, b := range n.In {
		if b.Ref == "" {
			continue
		}
		at, prev := c.at(b.RefPos, b.NamePos, n.InPos), strings.HasPrefix(b.Ref, plan.PrevNode+".")
		switch {
		case b.Name == "hidden" && !l.Ahead && !prev:
			c.errorf(at, "loop %s: in.hidden reads %s: it enters each sequence's rows carried from earlier steps, a $prev.NAME value (or carry the loop's drafts to draft for the next step from this step's rows)", n.ID, b.Ref)
		case b.Name == "hidden" && l.Ahead && prev:
			c.errorf(at, "loop %s drafts for the next step (carry: reads its output), so it runs once this step's tokens are accepted: in.hidden reads this step's rows (a forward's hidden output, such as fwd.hidden), not %s", n.ID, b.Ref)
		case b.Name == "prior" && l.Ahead:
			c.errorf(at, "loop %s drafts for the next step (carry: reads its output): in.prior %s holds drafts made for this step", n.ID, b.Ref)
		}
	}
	var outs []node.Port
	for _, b := range n.Out {
		if b.Name == "" || b.Ref == "" || l.Out[b.Name] != (plan.Ref{}) {
			continue // reported by graphdef
		}
		at := c.at(b.RefPos, b.NamePos, n.OutPos)
		ref, typ, known, _ := sub.source(b.Ref, at)
		l.Out[b.Name] = ref
		switch {
		case known && typ == node.DraftProbs:
			outs = append(outs, node.Port{Name: b.Name, Type: node.DraftProbs, Doc: "the distributions " + b.Ref + " drew from, one per pass"})
			continue
		case known && typ != node.Tokens:
			c.errorf(at, "type mismatch: %s is %s, but a loop's out collects %s (one token per row and pass) into a draft, or %s",
				b.Ref, typ, node.Tokens, node.DraftProbs)
		}
		outs = append(outs, node.Port{Name: b.Name, Type: node.Draft, Doc: "the tokens " + b.Ref + " picked, one per pass"})
	}
	order, acyclic := sub.order()
	sub.instantiate()
	cn.spec = &node.Spec{Op: plan.LoopOp, Placement: node.Host, In: loopIn, Out: outs,
		Summary: "a loop of draft passes"}
	c.errs = append(c.errs, sub.errs...)
	if !acyclic || !sub.complete() || l.Repeat == 0 {
		cn.paramsOK = false
		return
	}
	for _, bc := range order {
		l.Steps = append(l.Steps, &plan.Step{ID: bc.n.ID, Op: bc.spec.Op, Placement: bc.spec.Placement,
			Params: bc.params, In: bc.in, Node: bc.inst, Spec: bc.spec})
	}
	l.Segments = segments(l.Steps)
	byStep := map[string]*cnode{}
	for _, bc := range order {
		byStep[bc.n.ID] = bc
	}
	l.Model = node.Target
	var runs *cnode // the first body device step
	for _, st := range l.Steps {
		if st.Placement != node.Device {
			continue
		}
		alias, bc := plan.StepModel(st), byStep[st.ID]
		if runs == nil {
			l.Model, runs = alias, bc
			continue
		}
		if alias != l.Model {
			c.errorf(c.paramPos(bc, "model"), "node %s (%s) in loop %s runs model %q, but %s (at %d:%d) runs %q: a loop's passes run one model",
				st.ID, st.Op, n.ID, alias, runs.n.ID, runs.n.Pos.Line, runs.n.Pos.Col, l.Model)
		}
	}
	body := &plan.Plan{Steps: l.Steps, Segments: l.Segments}
	segOf := map[string]int{}
	for si, seg := range body.Segments {
		for _, idx := range seg.Steps {
			segOf[body.Steps[idx].ID] = si
		}
	}
	for si, seg := range body.Segments {
		if seg.Placement == node.Device {
			c.deviceInputs(body, si, byStep, segOf)
		}
	}
	for _, st := range l.Steps {
		for port, ref := range st.In {
			if p := st.Spec.Input(port); p != nil && p.Type == node.Draft {
				c.errorf(c.inputPos(byStep[st.ID], port), "node %s (%s) in loop %s reads drafts (%s): a draft loop's passes verify nothing; the graph's forward verifies the loop's output",
					st.ID, st.Op, n.ID, ref)
			}
			if ref == (plan.Ref{Node: plan.LoopNode, Port: "hidden"}) && st.Placement != node.Device {
				c.errorf(c.inputPos(byStep[st.ID], port), "node %s (%s) in loop %s reads $loop.hidden, rows the pass feeds the device: only a device node reads them",
					st.ID, st.Op, n.ID)
			}
		}
	}
	c.checkBlock(n, l, byStep)
	cn.inst, cn.loop = l, l
}

// checkBlock checks where loop n's block drafters (exec.BlockDrafter) are:
// a block loop runs exactly one, its only device node, and enters a
// carried in.hidden; a repeat loop runs none.
func (c *compiler) checkBlock(n *graphdef.Node, l *plan.Loop, byStep map[string]*cnode) {
	var blocks []*plan.Step
	for _, st := range l.Steps {
		if st.Node != nil && st.Spec.Info.BlockDrafter {
			blocks = append(blocks, st)
		}
	}
	switch {
	case !l.Block:
		for _, st := range blocks {
			c.errorf(c.at(byStep[st.ID].n.OpPos, byStep[st.ID].n.Pos), "node %s (%s) in loop %s drafts a block of mask tokens in one pass: it runs in a block loop (block: N instead of repeat: N)",
				st.ID, st.Op, n.ID)
		}
	case len(blocks) == 0:
		c.errorf(c.at(n.RepeatPos, n.Pos), "loop %s: a block loop (block:) needs a body node that drafts a block of mask tokens in one pass (speculative.dflash)", n.ID)
	default:
		for _, st := range l.Steps {
			if st.Placement == node.Device && st != blocks[0] {
				bn := byStep[st.ID].n
				c.errorf(c.at(bn.OpPos, bn.Pos), "node %s (%s) in loop %s: a block loop's one device node is its block drafter, %s",
					st.ID, st.Op, n.ID, blocks[0].ID)
			}
		}
		if !hasIn(n, "hidden") {
			c.errorf(c.at(n.InPos, n.RepeatPos, n.Pos), "loop %s: a block loop's pass 0 enters the target's carried hidden states: add in: {hidden: $prev.NAME}", n.ID)
		}
	}
}

// repeat resolves a loop's repeat: an int or an int graph param, 1 to
// maxRepeat; 0 when it is unusable (reported).
func (c *compiler) repeat(n *graphdef.Node) int {
	a := n.Repeat
	if a == nil || a.Value == nil {
		return 0 // reported by graphdef
	}
	at := c.at(a.ValuePos, a.NamePos, n.Pos)
	var v int64
	switch x := a.Value.(type) {
	case int64:
		v = x
	case string:
		name, ok := a.ParamRef()
		if !ok {
			return 0 // reported by graphdef
		}
		gp := c.params[name]
		if gp == nil {
			if node.ValidName(name) {
				c.errorf(at, "undefined graph param $params.%s%s", name, didYouMean(name, c.pnames, "$params.%s"))
			}
			return 0
		}
		if !gp.ok {
			return 0
		}
		i, isInt := gp.value.(int64)
		if !isInt {
			c.errorf(at, "loop %s: repeat: $params.%s is %s, want an int", n.ID, name, gp.param.Kind)
			return 0
		}
		v = i
	default:
		return 0 // reported by graphdef
	}
	if v < 1 || v > maxRepeat {
		if _, isRef := a.ParamRef(); isRef || v > maxRepeat { // a literal below 1 is graphdef's
			c.errorf(at, "loop %s: repeat %d out of range [1, %d]", n.ID, v, maxRepeat)
		}
		return 0
	}
	return int(v)
}

// loopSource resolves a reference made inside a loop body (sub is the
// body's compiler) that names no body node: $loop.NAME, or an error for
// $in, $prev and the graph's other nodes, which a pass cannot read.
func (sub *compiler) loopSource(nodeID, port string, at graphdef.Pos) (typ node.PortType, known bool) {
	loopID := sub.loop.ID
	switch {
	case nodeID == plan.LoopNode:
		names := make([]string, len(plan.LoopInputs))
		for i, in := range plan.LoopInputs {
			if in.Name == port {
				if port == "hidden" && !hasIn(sub.loop, "hidden") {
					sub.errorf(at, "$loop.hidden is the rows of loop %s's in.hidden, which it does not wire: add in: {hidden: $prev.NAME}", loopID)
					return "", false
				}
				return in.Type, true
			}
			names[i] = in.Name
		}
		sub.errorf(at, "unknown loop input $loop.%s (have $loop.%s)%s", port, strings.Join(names, ", $loop."), didYouMean(port, names, "$loop.%s"))
	case nodeID == plan.InputNode || nodeID == plan.PrevNode:
		sub.errorf(at, "a node of loop %s reads %s.%s: a pass reads $loop.tokens, $loop.positions and the outputs of the loop's nodes", loopID, nodeID, port)
	case sub.outer.byID[nodeID] != nil:
		sub.errorf(at, "a node of loop %s reads %s.%s, a node outside the loop: a pass reads $loop.tokens, $loop.positions and the outputs of the loop's nodes", loopID, nodeID, port)
	default:
		sub.errorf(at, "unknown node %q in %s.%s%s", nodeID, nodeID, port, didYouMean(nodeID, sub.ids, "%q"))
	}
	return "", false
}

// bodyNode names the loop whose body holds node id, or "".
func (c *compiler) bodyNode(id string) string {
	for _, cn := range c.nodes {
		if cn.n.IsLoop() && slices.ContainsFunc(cn.n.Body, func(b *graphdef.Node) bool { return b.ID == id }) {
			return cn.n.ID
		}
	}
	return ""
}
