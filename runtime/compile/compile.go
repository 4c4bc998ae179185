// Package compile joins a parsed graph (runtime/graphdef) with the node
// registry (runtime/node) and lowers it to a plan (runtime/plan): it resolves
// ops, params and references, type-checks ports, finds cycles, orders the
// steps, builds the node instances, folds policy nodes and splits the steps
// into segments. Every problem is reported, each at its file:line:col, in one
// graphdef.ErrorList.
package compile

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// Inputs are the graph inputs every step provides, referenced as $in.NAME.
var Inputs = []node.Port{
	{Name: node.BindTokens, Type: node.Tokens, Doc: "the tokens this step feeds for the request"},
	{Name: node.BindPositions, Type: node.Positions, Doc: "the positions of those tokens"},
	{Name: node.BindHistory, Type: node.History, Doc: "the request's tokens so far"},
	{Name: node.BindImages, Type: node.Images, Doc: "which of those tokens are image tokens (their embeddings and M-RoPE positions come with them)"},
}

// Outputs are the graph outputs every graph must bind under out:. A graph may
// bind further outputs of any type.
var Outputs = []node.Port{
	{Name: "tokens", Type: node.Tokens, Doc: "the tokens the step accepts for the request"},
}

// Compile checks g against reg and lowers it to a plan. g is usually built by
// graphdef.Parse without errors; Compile repeats graphdef.Check so that a
// graph built in Go is held to the same rules. overrides replace graph param
// defaults by name (see Source). On any problem Compile returns a nil plan
// and a graphdef.ErrorList of every problem, sorted by position.
func Compile(g *graphdef.Graph, reg *node.Registry, overrides node.Params) (*plan.Plan, error) {
	errs := graphdef.Check(g)
	p, cerrs := compile(g, reg, overrides)
	return result(p, append(errs, cerrs...))
}

// Source parses src (named file in positions) and compiles it, reporting the
// parser's problems and the compiler's together: a graph with an unknown key
// and an unknown op gets both errors in one run.
//
// overrides replace graph param defaults, as `--set name=value` does on the
// command line. A value may be typed (int, int64, float64, bool, string) or,
// for any param, a string that is parsed by the param's type ("256",
// "0.7", "true"); a number or bool given for a string or enum param is taken
// as its text. Unknown names and values that fail the param's type, range
// or values are errors, reported at the param's declaration (or the graph's
// params: key for unknown names).
func Source(file string, src []byte, reg *node.Registry, overrides node.Params) (*plan.Plan, error) {
	g, err := graphdef.Parse(file, src)
	var errs graphdef.ErrorList
	if err != nil && !errors.As(err, &errs) {
		return nil, err
	}
	if g == nil {
		return nil, err
	}
	p, cerrs := compile(g, reg, overrides)
	return result(p, append(errs, cerrs...))
}

// File reads the graph file at path and compiles it like Source. A read
// failure is returned as is.
func File(path string, reg *node.Registry, overrides node.Params) (*plan.Plan, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Source(path, src, reg, overrides)
}

func result(p *plan.Plan, errs graphdef.ErrorList) (*plan.Plan, error) {
	if len(errs) > 0 {
		errs.Sort()
		return nil, errs
	}
	if p == nil {
		// compile skips only what graphdef reports, so this means the two
		// disagree about what makes a graph well-formed.
		return nil, fmt.Errorf("compile: internal error: graph was not compiled, but no problem was reported")
	}
	return p, nil
}

// complete reports whether every node resolved: compile skips, without
// reporting, what graphdef reports (empty ids or ops, duplicates), and must
// not build a plan from it.
func (c *compiler) complete() bool {
	for _, cn := range c.nodes {
		if cn.spec == nil || !cn.paramsOK || cn.n.ID == "" || c.byID[cn.n.ID] != cn {
			return false
		}
	}
	return true
}

// gparam is a declared graph param with its resolved value. ok is false when
// the declaration itself is broken (already reported), so that its uses are
// not reported again.
type gparam struct {
	decl  *graphdef.ParamDecl
	param node.Param
	value any
	ok    bool
}

// cnode is a graph node being compiled.
type cnode struct {
	n      *graphdef.Node
	index  int
	spec   *node.Spec
	params node.Params
	// paramsOK is false when a param problem was reported; the node is then
	// not instantiated.
	paramsOK bool
	in       map[string]plan.Ref
	// deps are the nodes this node reads from, with the position of the
	// reference, in file order.
	deps []edge
	// inst is the step's instance: a node.DeviceNode, node.HostNode or
	// node.PolicyNode its spec built, or a loop's *plan.Loop. policy and
	// loop are the same instance as a policy node's PolicyNode and a
	// compiled loop's body.
	inst   any
	policy node.PolicyNode
	loop   *plan.Loop
}

type edge struct {
	from int
	at   graphdef.Pos
}

type compiler struct {
	g      *graphdef.Graph
	reg    *node.Registry
	errs   graphdef.ErrorList
	params map[string]*gparam
	pnames []string
	nodes  []*cnode
	byID   map[string]*cnode
	ids    []string
	// carry holds the resolved carry: bindings (see resolveCarry).
	carry map[string]carried
	// loop and outer are set on the compiler of a loop's body: the loop
	// node and the graph's compiler.
	loop  *graphdef.Node
	outer *compiler
}

// carried is one value of carry:, read in the next step as $prev.NAME.
type carried struct {
	ref   plan.Ref
	typ   node.PortType
	known bool
}

func (c *compiler) errorf(pos graphdef.Pos, format string, args ...any) {
	if !pos.IsValid() {
		pos = c.at(pos)
	}
	c.errs.Addf(pos, format, args...)
}

// at picks the first valid position, falling back to the graph's.
func (c *compiler) at(ps ...graphdef.Pos) graphdef.Pos {
	for _, p := range ps {
		if p.IsValid() {
			return p
		}
	}
	if c.g.Pos.IsValid() {
		return c.g.Pos
	}
	return graphdef.Pos{File: c.g.File}
}

func didYouMean(name string, candidates []string, format string) string {
	if c := hint.Closest(name, candidates); c != "" {
		return fmt.Sprintf(" (did you mean "+format+"?)", c)
	}
	return ""
}

// compile does the semantic work on a graph whose structural problems (see
// graphdef.Check) have been reported elsewhere: it skips what those leave
// unusable (empty names, later duplicates, malformed references, nil values)
// rather than reporting it again.
func compile(g *graphdef.Graph, reg *node.Registry, overrides node.Params) (*plan.Plan, graphdef.ErrorList) {
	c := &compiler{g: g, reg: reg, params: map[string]*gparam{}, byID: map[string]*cnode{}}
	c.graphParams()
	c.overrides(overrides)
	for i, n := range g.Nodes {
		cn := &cnode{n: n, index: i, params: node.Params{}, paramsOK: true, in: map[string]plan.Ref{}}
		c.nodes = append(c.nodes, cn)
		if n.ID != "" && c.byID[n.ID] == nil {
			c.byID[n.ID] = cn
			c.ids = append(c.ids, n.ID)
		}
	}
	for _, cn := range c.nodes {
		if cn.n.IsLoop() {
			c.compileLoop(cn)
			continue
		}
		c.resolveOp(cn)
		c.resolveParams(cn)
	}
	c.resolveCarry()
	for _, cn := range c.nodes {
		c.resolveInputs(cn)
	}
	out := c.resolveOut()
	order, acyclic := c.order()
	c.instantiate()
	c.checkAhead()
	for _, cn := range c.nodes {
		if cn.inst != nil && cn.spec.Info.BlockDrafter { // a node that was built
			c.errorf(c.at(cn.n.OpPos, cn.n.Pos), "node %s (%s) drafts a block of mask tokens in one pass: it runs in a block loop's body (block: N)", cn.n.ID, cn.spec.Op)
		}
	}
	policy := c.fold()
	if len(c.errs) > 0 || !acyclic || !c.complete() {
		return nil, c.errs
	}
	p := &plan.Plan{
		Name: g.Name, File: g.File,
		Params: node.Params{},
		Policy: policy,
		Out:    out,
		Tests:  g.Tests,
	}
	for name, cv := range c.carry {
		if p.Carry == nil {
			p.Carry = map[string]plan.Ref{}
		}
		p.Carry[name] = cv.ref
	}
	for _, cn := range c.nodes {
		if cn.loop != nil && cn.loop.Ahead {
			if ref, ok := cn.in["hidden"]; ok && ref.Node != plan.PrevNode {
				p.Carry[ref.String()] = ref // carry: holds the loop's outputs, so it is not nil
			}
		}
	}
	for _, name := range c.pnames {
		p.Params[name] = c.params[name].value
	}
	for _, cn := range order {
		p.Steps = append(p.Steps, &plan.Step{
			ID: cn.n.ID, Op: cn.spec.Op, Placement: cn.spec.Placement,
			Params: cn.params, In: cn.in, Node: cn.inst, Spec: cn.spec,
		})
	}
	p.Segments = segments(p.Steps)
	if c.dataflow(p, order); len(c.errs) > 0 {
		return nil, c.errs
	}
	return p, nil
}

var kinds = []node.ParamKind{node.Int, node.Float, node.String, node.Bool, node.Enum}

func kindNamed(name string) (node.ParamKind, bool) {
	for _, k := range kinds {
		if k.String() == name {
			return k, true
		}
	}
	return 0, false
}

func (c *compiler) graphParams() {
	for _, d := range c.g.Params {
		if !node.ValidName(d.Name) || c.params[d.Name] != nil {
			continue // reported by graphdef.Check
		}
		gp := &gparam{decl: d}
		c.params[d.Name] = gp
		c.pnames = append(c.pnames, d.Name)
		if d.Type == "" {
			continue
		}
		kind, ok := kindNamed(d.Type)
		if !ok {
			names := make([]string, len(kinds))
			for i, k := range kinds {
				names[i] = k.String()
			}
			c.errorf(c.at(d.TypePos, d.Pos), "param %s: unknown type %q: want int, float, string, bool or enum%s",
				d.Name, d.Type, didYouMean(d.Type, names, "%s"))
			continue
		}
		gp.param = node.Param{Name: d.Name, Kind: kind, Min: d.Min, Max: d.Max, Enum: d.Values, Doc: d.Doc}
		if err := gp.param.Validate(); err != nil {
			c.errorf(c.at(d.Pos), "%v", err)
			continue
		}
		if d.Default == nil {
			continue // missing or unusable: reported by graphdef
		}
		v, err := gp.param.Convert(d.Default)
		if err != nil {
			c.errorf(c.at(d.DefaultPos, d.Pos), "param %s: default: %v", d.Name, err)
			continue
		}
		gp.param.Default, gp.value, gp.ok = v, v, true
	}
}

func (c *compiler) overrides(ov node.Params) {
	names := make([]string, 0, len(ov))
	for k := range ov {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		v := ov[name]
		gp := c.params[name]
		if gp == nil {
			c.errorf(c.at(c.g.ParamsPos, c.g.NamePos), "override %s: the graph has no param %q%s",
				name, name, didYouMean(name, c.pnames, "%s"))
			continue
		}
		if gp.param.Kind == 0 {
			continue // broken declaration, reported
		}
		var err error
		if s, isString := v.(string); isString {
			v, err = gp.param.Parse(s)
		} else if k := gp.param.Kind; k == node.String || k == node.Enum {
			// A flag parser that guessed a number or bool for text.
			v, err = gp.param.Parse(fmt.Sprint(v))
		} else {
			v, err = gp.param.Convert(v)
		}
		if err != nil {
			c.errorf(c.at(gp.decl.Pos), "override %s=%v: %v", name, ov[name], err)
			continue
		}
		gp.value = v
	}
}

func (c *compiler) resolveOp(cn *cnode) {
	n := cn.n
	if n.Op == "" {
		return // reported by graphdef.Check
	}
	spec, ok := c.reg.Lookup(n.Op)
	if !ok {
		msg := fmt.Sprintf("unknown op %q", n.Op)
		if s := c.reg.Suggest(n.Op); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.errorf(c.at(n.OpPos, n.Pos), "%s", msg)
		return
	}
	cn.spec = spec
}

// compatible reports whether a graph param of kind from may set a node
// param of kind to; its value is then checked by the node param.
func compatible(from, to node.ParamKind) bool {
	switch {
	case from == to:
		return true
	case from == node.Int && to == node.Float:
		return true
	case (from == node.String || from == node.Enum) && (to == node.String || to == node.Enum):
		return true
	}
	return false
}

func (c *compiler) resolveParams(cn *cnode) {
	n, spec := cn.n, cn.spec
	set := map[string]bool{}
	for _, a := range n.With {
		if a.Name == "" || a.Value == nil || set[a.Name] {
			continue // reported by graphdef
		}
		set[a.Name] = true
		ref, isRef := a.ParamRef()
		var gp *gparam
		if isRef {
			gp = c.params[ref]
			if gp == nil && node.ValidName(ref) {
				c.errorf(c.at(a.ValuePos, a.NamePos), "undefined graph param $params.%s%s", ref, didYouMean(ref, c.pnames, "$params.%s"))
			}
		}
		if spec == nil {
			continue
		}
		sp := spec.Param(a.Name)
		if sp == nil {
			names := make([]string, len(spec.Params))
			for i, p := range spec.Params {
				names[i] = p.Name
			}
			c.errorf(c.at(a.NamePos, n.Pos), "%s has no param %q%s", spec.Op, a.Name, didYouMean(a.Name, names, "%q"))
			cn.paramsOK = false
			continue
		}
		what := fmt.Sprintf("param %s of %s", sp.Name, spec.Op)
		if isRef {
			if gp == nil || !gp.ok {
				cn.paramsOK = false
				continue
			}
			if !compatible(gp.param.Kind, sp.Kind) {
				c.errorf(c.at(a.ValuePos, a.NamePos), "$params.%s is %s, but %s wants %s", ref, gp.param.Kind, what, sp.Kind)
				cn.paramsOK = false
				continue
			}
			v, err := sp.Convert(gp.value)
			if err != nil {
				c.errorf(c.at(a.ValuePos, a.NamePos), "%s: $params.%s: %v", what, ref, err)
				cn.paramsOK = false
				continue
			}
			cn.params[sp.Name] = v
			continue
		}
		if s, ok := a.Value.(string); ok && strings.HasPrefix(s, "$") {
			cn.paramsOK = false
			continue // malformed reference, reported by graphdef.Check
		}
		v, err := sp.Convert(a.Value)
		if err != nil {
			c.errorf(c.at(a.ValuePos, a.NamePos), "%s: %v", what, err)
			cn.paramsOK = false
			continue
		}
		cn.params[sp.Name] = v
	}
	if spec == nil {
		return
	}
	for _, sp := range spec.Params {
		if _, ok := cn.params[sp.Name]; ok || set[sp.Name] {
			continue
		}
		if sp.Default == nil {
			c.errorf(c.at(n.WithPos, n.Pos), "node %s: missing required param %s of %s (%s)", n.ID, sp.Name, spec.Op, sp.Kind)
			cn.paramsOK = false
			continue
		}
		cn.params[sp.Name] = sp.Default
	}
}

// source resolves a reference to its type. known is false when the reference
// is unusable for type checks (an error was reported, or the source node's op
// is unknown); from is the index of the source node, or -1.
func (c *compiler) source(ref string, at graphdef.Pos) (r plan.Ref, typ node.PortType, known bool, from int) {
	b := graphdef.Binding{Ref: ref}
	nodeID, port, ok := b.Target()
	if !ok || nodeID == "" || port == "" {
		return r, "", false, -1 // malformed, reported by graphdef.Check
	}
	r = plan.Ref{Node: nodeID, Port: port}
	if c.loop != nil && c.byID[nodeID] == nil {
		typ, known := c.loopSource(nodeID, port, at)
		return r, typ, known, -1
	}
	if nodeID == plan.InputNode {
		names := make([]string, len(Inputs))
		for i, in := range Inputs {
			if in.Name == port {
				return r, in.Type, true, -1
			}
			names[i] = in.Name
		}
		c.errorf(at, "unknown graph input $in.%s (have $in.%s)%s", port, strings.Join(names, ", $in."), didYouMean(port, names, "$in.%s"))
		return r, "", false, -1
	}
	if nodeID == plan.PrevNode {
		cv, ok := c.carry[port]
		if !ok {
			names := slices.Sorted(maps.Keys(c.carry))
			have := "the graph carries nothing: declare carry: {" + port + ": NODE.PORT}"
			if len(names) > 0 {
				have = "have $prev." + strings.Join(names, ", $prev.")
			}
			c.errorf(at, "unknown carried value $prev.%s (%s)%s", port, have, didYouMean(port, names, "$prev.%s"))
			return r, "", false, -1
		}
		return r, cv.typ, cv.known, -1 // the previous step's value: no dependency
	}
	src := c.byID[nodeID]
	if src == nil {
		if strings.HasPrefix(nodeID, "$") {
			return r, "", false, -1 // reported by graphdef.Check
		}
		if l := c.bodyNode(nodeID); l != "" {
			c.errorf(at, "%s reads node %s inside loop %s: outside the loop, read the loop's outputs (%s.PORT)", ref, nodeID, l, l)
			return r, "", false, -1
		}
		c.errorf(at, "unknown node %q in %s%s", nodeID, ref, didYouMean(nodeID, c.ids, "%q"))
		return r, "", false, -1
	}
	if src.spec == nil {
		return r, "", false, src.index
	}
	if src.spec.Placement == node.Policy {
		c.errorf(at, "node %s (%s) is a policy node and has no outputs", nodeID, src.spec.Op)
		return r, "", false, -1
	}
	out := src.spec.Output(port)
	if out == nil {
		names := make([]string, len(src.spec.Out))
		for i, p := range src.spec.Out {
			names[i] = p.Name
		}
		c.errorf(at, "node %s (%s) has no output %q%s", nodeID, src.spec.Op, port, didYouMean(port, names, "%q"))
		return r, "", false, src.index
	}
	return r, out.Type, true, src.index
}

func (c *compiler) resolveInputs(cn *cnode) {
	n, spec := cn.n, cn.spec
	if spec != nil && spec.Placement == node.Policy && (len(n.In) > 0 || n.InPos.IsValid()) {
		c.errorf(c.at(n.InPos, n.Pos), "policy node %s (%s) cannot have inputs: it is folded into the plan at compile time", n.ID, spec.Op)
		return
	}
	for _, b := range n.In {
		if b.Name == "" || b.Ref == "" {
			continue // reported by graphdef
		}
		if _, dup := cn.in[b.Name]; dup {
			continue // reported by graphdef
		}
		at := c.at(b.RefPos, b.NamePos, n.Pos)
		ref, typ, known, from := c.source(b.Ref, at)
		if from >= 0 {
			cn.deps = append(cn.deps, edge{from: from, at: at})
		}
		if spec == nil {
			continue
		}
		dst := spec.Input(b.Name)
		if dst == nil {
			names := make([]string, len(spec.In))
			for i, p := range spec.In {
				names[i] = p.Name
			}
			c.errorf(c.at(b.NamePos, n.Pos), "%s has no input port %q%s", spec.Op, b.Name, didYouMean(b.Name, names, "%q"))
			continue
		}
		cn.in[b.Name] = ref
		if !known || spec.Placement == node.Device && hostValue(ref, dst, c.byID[ref.Node]) != "" {
			// A device node reading a host value is a placement error
			// (deviceInputs), whatever the value's type.
			continue
		}
		if typ != dst.Type {
			c.errorf(at, "type mismatch: %s is %s, but input %s of %s wants %s%s", b.Ref, typ, b.Name, spec.Op, dst.Type, kindHint(typ, dst.Type))
		}
	}
	if spec == nil {
		return
	}
	bound := map[string]bool{}
	for _, b := range n.In {
		bound[b.Name] = true
	}
	for _, p := range spec.In {
		if !p.Optional && !bound[p.Name] {
			c.errorf(c.at(n.InPos, n.Pos), "node %s: missing input %s (%s) of %s", n.ID, p.Name, p.Type, spec.Op)
		}
	}
}

// resolveCarry resolves carry: (values kept per sequence for the next
// step). The engine carries device rows, one per token the step accepted,
// or the drafts a loop made for the next step, so a carried value is a
// device node's hidden output or a loop's output.
func (c *compiler) resolveCarry() {
	c.carry = map[string]carried{}
	for _, b := range c.g.Carry {
		if b.Name == "" || b.Ref == "" {
			continue // reported by graphdef
		}
		if _, dup := c.carry[b.Name]; dup {
			continue // reported by graphdef
		}
		at := c.at(b.RefPos, b.NamePos, c.g.CarryPos)
		ref, typ, known, from := c.source(b.Ref, at)
		c.carry[b.Name] = carried{ref: ref, typ: typ, known: known}
		if !known || from < 0 {
			continue
		}
		if src := c.nodes[from]; src.spec != nil && src.spec.Op == plan.LoopOp {
			continue // a loop's drafts (type draft or draft_probs, all a loop outputs)
		}
		c.checkCarriedRows(at, "carry "+b.Name, b.Ref, ref, typ, c.nodes[from])
	}
}

// checkCarriedRows checks that what (a carry: binding, or an ahead loop's
// in.hidden) can keep the rows of refText (ref, of type typ, from node
// src): a device node's hidden output with a row per fed token.
func (c *compiler) checkCarriedRows(at graphdef.Pos, what, refText string, ref plan.Ref, typ node.PortType, src *cnode) {
	switch {
	case src.spec == nil:
	case src.spec.Placement != node.Device || typ != node.Hidden:
		c.errorf(at, "%s: %s is %s (%s, %s): the engine carries a device node's hidden rows, one per accepted token, or a loop's drafts",
			what, refText, typ, src.spec.Op, src.spec.Placement)
	case ref.Port == "hidden" && src.spec.Param("hidden_rows") != nil && src.params["hidden_rows"] != "all":
		c.errorf(at, "%s: %s has only the sampled rows (hidden_rows: %v): a carried value needs every row, set hidden_rows: all on node %s",
			what, refText, src.params["hidden_rows"], src.n.ID)
	}
}

// checkAhead checks the graph's uses of the loops that draft for the next
// step (plan.Loop.Ahead): each one's in.hidden keeps device rows like a
// carried value, and its outputs are read only as $prev values.
func (c *compiler) checkAhead() {
	for _, cn := range c.nodes {
		if cn.loop == nil || !cn.loop.Ahead {
			continue
		}
		for _, b := range cn.n.In {
			if b.Name != "hidden" || b.Ref == "" || strings.HasPrefix(b.Ref, plan.PrevNode+".") {
				continue
			}
			at := c.at(b.RefPos, b.NamePos, cn.n.InPos)
			ref := cn.in["hidden"]
			if src := c.byID[ref.Node]; src != nil && src.spec != nil && src.spec.Output(ref.Port) != nil {
				c.checkCarriedRows(at, "loop "+cn.n.ID+": in.hidden", b.Ref, ref, src.spec.Output(ref.Port).Type, src)
			}
		}
		for _, reader := range c.nodes {
			for _, b := range reader.n.In {
				if reader.in[b.Name].Node == cn.n.ID {
					c.errorf(c.at(b.RefPos, b.NamePos, reader.n.Pos), "node %s reads %s, drafts loop %s makes for the next step: read them there as $prev.NAME (carry: {NAME: %s})",
						reader.n.ID, b.Ref, cn.n.ID, b.Ref)
				}
			}
		}
		for _, b := range c.g.Out {
			if from, _, _ := strings.Cut(b.Ref, "."); from == cn.n.ID {
				c.errorf(c.at(b.RefPos, b.NamePos, c.g.OutPos), "out.%s reads %s, drafts loop %s makes for the next step", b.Name, b.Ref, cn.n.ID)
			}
		}
	}
}

func (c *compiler) resolveOut() map[string]plan.Ref {
	out := map[string]plan.Ref{}
	var names []string
	for _, b := range c.g.Out {
		if b.Name == "" || b.Ref == "" {
			continue
		}
		if _, dup := out[b.Name]; dup {
			continue
		}
		names = append(names, b.Name)
		at := c.at(b.RefPos, b.NamePos, c.g.OutPos)
		ref, typ, known, from := c.source(b.Ref, at)
		out[b.Name] = ref
		for _, want := range Outputs {
			switch {
			case want.Name != b.Name || !known:
			case typ != want.Type:
				c.errorf(at, "type mismatch: %s is %s, but out.%s wants %s%s", b.Ref, typ, b.Name, want.Type, kindHint(typ, want.Type))
			case from < 0:
				c.errorf(at, "out.%s reads %s, a step input: a graph outputs the %s a node picks (a sampler's, or a verifier's)", b.Name, b.Ref, want.Type)
			}
		}
	}
	for _, want := range Outputs {
		if _, ok := out[want.Name]; !ok {
			c.errorf(c.at(c.g.OutPos, c.g.NamePos), "missing out.%s: a graph must output its %s (%s)%s",
				want.Name, want.Name, want.Type, didYouMean(want.Name, names, "out.%s"))
		}
	}
	return out
}

// order sorts the nodes topologically, breaking ties by file order. When the
// dependencies have cycles it reports each one and returns false.
func (c *compiler) order() ([]*cnode, bool) {
	n := len(c.nodes)
	indeg := make([]int, n)
	feeds := make([][]int, n)
	for _, cn := range c.nodes {
		for _, e := range cn.deps {
			indeg[cn.index]++
			feeds[e.from] = append(feeds[e.from], cn.index)
		}
	}
	done := make([]bool, n)
	var order []*cnode
	for len(order) < n {
		next := -1
		for i := range n {
			if !done[i] && indeg[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			c.reportCycles(done, feeds)
			return nil, false
		}
		done[next] = true
		order = append(order, c.nodes[next])
		for _, to := range feeds[next] {
			indeg[to]--
		}
	}
	return order, true
}

// reportCycles reports one cycle per strongly connected component among the
// nodes left unsorted, as the shortest loop through the component's first
// node in file order, at the reference that closes it.
func (c *compiler) reportCycles(done []bool, feeds [][]int) {
	comp := sccs(len(c.nodes), feeds, done)
	for _, members := range comp {
		start := slices.Min(members)
		in := map[int]bool{}
		for _, m := range members {
			in[m] = true
		}
		if len(members) == 1 && !slices.Contains(feeds[start], start) {
			continue // a node downstream of a cycle, not on one
		}
		// Breadth-first search along "feeds" edges from start back to start.
		parent := map[int]int{}
		queue := []int{start}
		last := -1
		for len(queue) > 0 && last < 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, nx := range feeds[cur] {
				if !in[nx] {
					continue
				}
				if nx == start {
					last = cur
					break
				}
				if _, seen := parent[nx]; !seen {
					parent[nx] = cur
					queue = append(queue, nx)
				}
			}
		}
		path := []int{last}
		for at := last; at != start; {
			at = parent[at]
			path = append(path, at)
		}
		slices.Reverse(path)
		ids := make([]string, 0, len(path)+1)
		for _, i := range path {
			ids = append(ids, c.nodes[i].n.ID)
		}
		ids = append(ids, c.nodes[start].n.ID)
		var at graphdef.Pos
		for _, e := range c.nodes[start].deps {
			if e.from == last {
				at = e.at
				break
			}
		}
		c.errorf(c.at(at, c.nodes[start].n.Pos), "cycle: %s", strings.Join(ids, " -> "))
	}
}

// sccs returns the strongly connected components (Tarjan) of the graph of
// nodes not marked done, each as its member indexes, in discovery order.
func sccs(n int, edges [][]int, done []bool) [][]int {
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var out [][]int
	next := 0
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range edges[v] {
			if done[w] {
				continue
			}
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []int
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			out = append(out, comp)
		}
	}
	for v := range n {
		if !done[v] && index[v] < 0 {
			visit(v)
		}
	}
	return out
}

// instantiate builds every node whose op and params resolved.
func (c *compiler) instantiate() {
	for _, cn := range c.nodes {
		if cn.spec == nil || !cn.paramsOK || cn.n.IsLoop() {
			continue // a loop's instance is its compiled body
		}
		var err error
		switch cn.spec.Placement {
		case node.Device:
			var d node.DeviceNode
			d, err = cn.spec.NewDevice(cn.params)
			cn.inst = d
		case node.Host:
			var h node.HostNode
			h, err = cn.spec.NewHost(cn.params)
			cn.inst = h
		case node.Policy:
			cn.policy, err = cn.spec.NewPolicy(cn.params)
			cn.inst = cn.policy
		}
		if err != nil {
			c.errorf(c.at(cn.n.OpPos, cn.n.Pos), "node %s (%s): %v", cn.n.ID, cn.spec.Op, err)
			cn.paramsOK = false
			cn.inst, cn.policy = nil, nil
		}
	}
}

// fold applies the policy nodes, in file order (which is also their plan
// order: they have no inputs), to the default policy. Two nodes of the same
// policy op are an error, since one would silently override the other.
func (c *compiler) fold() node.PlanPolicy {
	policy := node.DefaultPolicy()
	first := map[string]*cnode{}
	for _, cn := range c.nodes {
		if cn.spec == nil || cn.spec.Placement != node.Policy {
			continue
		}
		at := c.at(cn.n.OpPos, cn.n.Pos)
		if f := first[cn.spec.Op]; f != nil {
			fp := c.at(f.n.OpPos, f.n.Pos)
			c.errorf(at, "node %s repeats policy %s, already set by node %s at %d:%d", cn.n.ID, cn.spec.Op, f.n.ID, fp.Line, fp.Col)
			continue
		}
		first[cn.spec.Op] = cn
		if !cn.paramsOK {
			continue
		}
		if cn.policy == nil {
			c.errorf(at, "node %s (%s): NewPolicy returned no policy", cn.n.ID, cn.spec.Op)
			continue
		}
		if err := cn.policy.Fold(&policy); err != nil {
			c.errorf(at, "node %s (%s): %v", cn.n.ID, cn.spec.Op, err)
		}
	}
	return policy
}

// segments groups the non-policy steps into maximal runs of one placement.
func segments(steps []*plan.Step) []plan.Segment {
	var segs []plan.Segment
	for i, s := range steps {
		if s.Placement == node.Policy {
			continue
		}
		if len(segs) > 0 && segs[len(segs)-1].Placement == s.Placement {
			segs[len(segs)-1].Steps = append(segs[len(segs)-1].Steps, i)
			continue
		}
		segs = append(segs, plan.Segment{Placement: s.Placement, Steps: []int{i}})
	}
	return segs
}
