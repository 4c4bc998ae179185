package graphdef

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	identPattern   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	graphPattern   = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	refPattern     = regexp.MustCompile(`^(\$in|[a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*$`)
	inRefPattern   = regexp.MustCompile(`^(\$in|\$prev|[a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*$`)
	nodeRefPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$`)
	bodyRefPattern = regexp.MustCompile(`^(\$loop|[a-z][a-z0-9_]*)\.[a-z][a-z0-9_]*$`)
)

// Check reports the problems in g that need no node registry: names and ids
// that are missing or malformed (ids, port, param and output names match
// ^[a-z][a-z0-9_]*$; graph names may also contain "-"), duplicate node ids and
// test names, malformed references ("NODE.PORT" or "$in.NAME" in in: and
// out:, "$params.NAME" as the only reference form in with:), a graph with no
// nodes, and test cases without a prompt, with max_tokens below 1 or a
// negative temperature. Parse runs it; the compiler runs it on graphs that
// were built in Go rather than parsed.
func Check(g *Graph) ErrorList {
	errs := check(g, nil)
	errs.Sort()
	return errs
}

type checker struct {
	g    *Graph
	errs ErrorList
	bad  map[Pos]bool
}

// at picks the first valid position, so that problems in hand-built graphs
// still point somewhere useful.
func (c *checker) at(ps ...Pos) Pos {
	for _, p := range ps {
		if p.IsValid() {
			return p
		}
	}
	return Pos{File: c.g.File}
}

func (c *checker) errorf(pos Pos, format string, args ...any) {
	c.errs.Addf(pos, format, args...)
}

// field checks a required string field: it reports it missing when it has no
// position, and otherwise validates it unless the decoder already rejected
// its value.
func (c *checker) field(value string, pos, owner Pos, missing string, valid func(string) string) {
	if value == "" && !pos.IsValid() {
		c.errorf(c.at(owner), "%s", missing)
		return
	}
	if c.bad[pos] {
		return
	}
	if msg := valid(value); msg != "" {
		c.errorf(c.at(pos, owner), "%s", msg)
	}
}

func nameRule(what string) func(string) string {
	return func(s string) string {
		if identPattern.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("invalid %s %q: want a lower-case name matching ^[a-z][a-z0-9_]*$", what, s)
	}
}

func check(g *Graph, bad map[Pos]bool) ErrorList {
	c := &checker{g: g, bad: bad}
	c.field(g.Name, g.NamePos, g.Pos, "missing graph name (graph: NAME)", func(s string) string {
		if graphPattern.MatchString(s) {
			return ""
		}
		return fmt.Sprintf("invalid graph name %q: want a lower-case name matching ^[a-z][a-z0-9_-]*$", s)
	})
	seenParam := map[string]*ParamDecl{}
	for _, p := range g.Params {
		c.param(p, seenParam)
	}
	if len(g.Nodes) == 0 && !c.bad[c.at(g.NodesPos)] {
		if g.NodesPos.IsValid() {
			c.errorf(g.NodesPos, "nodes: a graph needs at least one node")
		} else {
			c.errorf(c.at(g.Pos), "missing nodes: a graph needs at least one node")
		}
	}
	ids := map[string]*Node{}
	for _, n := range g.Nodes {
		c.node(n, ids, false)
	}
	c.bindings(g.Out, "out", g.OutPos, "output name")
	c.bindings(g.Carry, "carry", g.CarryPos, "carried value")
	tests := map[string]*Test{}
	for _, t := range g.Tests {
		c.test(t, tests)
	}
	return c.errs
}

func (c *checker) param(p *ParamDecl, seen map[string]*ParamDecl) {
	c.field(p.Name, p.Pos, p.Pos, "param without a name", nameRule("param name"))
	if first, dup := seen[p.Name]; dup && p.Name != "" {
		c.errorf(c.at(p.Pos), "duplicate param %q%s", p.Name, firstAt(first.Pos))
	} else {
		seen[p.Name] = p
	}
	label := "param " + p.Name
	c.field(p.Type, p.TypePos, p.Pos, label+": missing type (int, float, string, bool or enum)", func(s string) string {
		if s == "" {
			return label + ": empty type"
		}
		return ""
	})
	if p.Default == nil && !c.bad[p.DefaultPos] {
		c.errorf(c.at(p.DefaultPos, p.Pos), "%s: missing default", label)
	}
	if s, ok := p.Default.(string); ok && strings.HasPrefix(s, "$") {
		c.errorf(c.at(p.DefaultPos, p.Pos), "%s: a default cannot be a reference (%q)", label, s)
	}
}

// node checks n; body is true for the nodes of a loop's body.
func (c *checker) node(n *Node, ids map[string]*Node, body bool) {
	c.field(n.ID, n.IDPos, n.Pos, "node without an id (id: NAME)", nameRule("node id"))
	if n.ID != "" {
		if first, dup := ids[n.ID]; dup {
			c.errorf(c.at(n.IDPos, n.Pos), "duplicate node id %q%s", n.ID, firstAt(first.IDPos, first.Pos))
		} else {
			ids[n.ID] = n
		}
	}
	label := "node"
	if n.ID != "" {
		label = "node " + n.ID
	}
	if n.IsLoop() {
		c.loop(n, label, ids, body)
		return
	}
	for _, k := range []struct {
		pos  Pos
		name string
	}{{n.NextPos, "next"}, {n.OutPos, "out"}} {
		if k.pos.IsValid() {
			c.errorf(k.pos, "%s: %s: belongs to a loop node (repeat: or block:, and nodes:)", label, k.name)
		}
	}
	c.field(n.Op, n.OpPos, n.Pos, label+" has no op (op: FAMILY.NAME)", func(s string) string {
		if s == "" {
			return label + ": empty op"
		}
		return ""
	})
	seen := map[string]*Arg{}
	for _, a := range n.With {
		c.field(a.Name, a.NamePos, n.WithPos, "with: entry without a name", nameRule("param name"))
		if first, dup := seen[a.Name]; dup {
			c.errorf(c.at(a.NamePos, n.WithPos), "with: duplicate param %q%s", a.Name, firstAt(first.NamePos))
		}
		seen[a.Name] = a
		if a.Value == nil {
			if !c.bad[a.ValuePos] {
				c.errorf(c.at(a.ValuePos, a.NamePos, n.Pos), "with %s: missing value", a.Name)
			}
			continue
		}
		if s, ok := a.Value.(string); ok && strings.HasPrefix(s, "$") {
			if name, isRef := a.ParamRef(); !isRef || !identPattern.MatchString(name) {
				c.errorf(c.at(a.ValuePos, a.NamePos), "with %s: invalid reference %q: want $params.NAME", a.Name, s)
			}
		}
	}
	if body {
		c.bindings(n.In, "body in", n.InPos, "input port")
	} else {
		c.bindings(n.In, "in", n.InPos, "input port")
	}
}

// loop checks a loop node: no op or with:, a repeat or block count (an
// int of at least 1 or $params.NAME), a body of plain nodes (loops do
// not nest), and next: (none in a block loop) and out: bindings of body
// outputs.
func (c *checker) loop(n *Node, label string, ids map[string]*Node, body bool) {
	if body {
		c.errorf(c.at(n.RepeatPos, n.BodyPos, n.Pos), "%s: loops do not nest: a loop's nodes are plain nodes", label)
		return
	}
	if n.OpPos.IsValid() {
		c.errorf(n.OpPos, "%s: a loop node (repeat: or block:, and nodes:) has no op", label)
	}
	if n.WithPos.IsValid() {
		c.errorf(n.WithPos, "%s: a loop node takes no with: params; its body's nodes do", label)
	}
	switch a := n.Repeat; {
	case a == nil:
		c.errorf(c.at(n.BodyPos, n.Pos), "%s: a loop needs repeat: N or block: N (an int of at least 1 or $params.NAME)", label)
	case a.Value == nil:
	default:
		switch v := a.Value.(type) {
		case int64:
			if v < 1 {
				c.errorf(c.at(a.ValuePos, a.NamePos), "%s: %s %d is less than 1", label, a.Name, v)
			}
		case string:
			if name, ok := a.ParamRef(); !ok || !identPattern.MatchString(name) {
				c.errorf(c.at(a.ValuePos, a.NamePos), "%s: %s: invalid value %q: want an int or $params.NAME", label, a.Name, v)
			}
		default:
			c.errorf(c.at(a.ValuePos, a.NamePos), "%s: %s: want an int or $params.NAME, got %v", label, a.Name, v)
		}
	}
	if len(n.Body) == 0 && !c.bad[n.BodyPos] {
		c.errorf(c.at(n.BodyPos, n.Pos), "%s: a loop needs nodes: (its body, at least one node)", label)
	}
	for _, b := range n.Body {
		c.node(b, ids, true)
	}
	c.bindings(n.In, "in", n.InPos, "input port")
	if n.Block && n.NextPos.IsValid() {
		c.errorf(n.NextPos, "%s: a block loop (block:) drafts in one pass: it has no next:", label)
	}
	c.bindings(n.Next, "next", n.NextPos, "loop input")
	if len(n.Out) == 0 && !c.bad[c.at(n.OutPos)] {
		c.errorf(c.at(n.OutPos, n.Pos), "%s: a loop needs out: (what it collects from each pass)", label)
	}
	c.bindings(n.Out, "loop out", n.OutPos, "output name")
}

// bindings checks the bindings of section what: "in", "out", "carry",
// "next", "loop out", or "body in" (a loop body node's in:).
func (c *checker) bindings(bs []*Binding, what string, owner Pos, nameWhat string) {
	seen := map[string]*Binding{}
	section := strings.TrimPrefix(what, "body ")
	for _, b := range bs {
		c.field(b.Name, b.NamePos, owner, section+": entry without a name", nameRule(nameWhat))
		if first, dup := seen[b.Name]; dup {
			c.errorf(c.at(b.NamePos, owner), "%s: duplicate %s %q%s", section, nameWhat, b.Name, firstAt(first.NamePos))
		}
		seen[b.Name] = b
		c.field(b.Ref, b.RefPos, b.NamePos, fmt.Sprintf("%s %s: missing reference", section, b.Name), func(s string) string {
			switch {
			case what == "in" && inRefPattern.MatchString(s), what == "body in" && bodyRefPattern.MatchString(s),
				(what == "carry" || what == "next" || what == "loop out") && nodeRefPattern.MatchString(s),
				what == "out" && refPattern.MatchString(s):
				return ""
			case what == "body in":
				return fmt.Sprintf("in %s: invalid reference %q: a loop's nodes read NODE.PORT of the loop's nodes or $loop.NAME", b.Name, s)
			case what == "in":
				return fmt.Sprintf("%s %s: invalid reference %q: want NODE.PORT, $in.NAME or $prev.NAME", what, b.Name, s)
			case what == "carry", what == "next", what == "loop out":
				return fmt.Sprintf("%s %s: invalid reference %q: want NODE.PORT", what, b.Name, s)
			}
			return fmt.Sprintf("%s %s: invalid reference %q: want NODE.PORT or $in.NAME", what, b.Name, s)
		})
	}
}

func (c *checker) test(t *Test, seen map[string]*Test) {
	label := "test"
	if t.Name != "" {
		label = fmt.Sprintf("test %q", t.Name)
	}
	c.field(t.Name, t.NamePos, t.Pos, "test without a name (name: ...)", func(s string) string {
		if strings.TrimSpace(s) == "" {
			return "test name is empty"
		}
		return ""
	})
	if t.Name != "" {
		if first, dup := seen[t.Name]; dup {
			c.errorf(c.at(t.NamePos, t.Pos), "duplicate test name %q%s", t.Name, firstAt(first.NamePos, first.Pos))
		} else {
			seen[t.Name] = t
		}
	}
	if !t.PromptPos.IsValid() {
		c.errorf(c.at(t.Pos), "%s: missing prompt", label)
	}
	if !c.bad[t.TemperaturePos] && t.Temperature < 0 {
		c.errorf(c.at(t.TemperaturePos, t.Pos), "%s: temperature %g is negative", label, t.Temperature)
	}
	switch {
	case !t.MaxTokensPos.IsValid():
		c.errorf(c.at(t.Pos), "%s: missing max_tokens", label)
	case !c.bad[t.MaxTokensPos] && t.MaxTokens < 1:
		c.errorf(t.MaxTokensPos, "%s: max_tokens %d is less than 1", label, t.MaxTokens)
	}
	if t.SameAs != "" && !c.bad[t.SameAsPos] && !graphPattern.MatchString(t.SameAs) {
		c.errorf(c.at(t.SameAsPos, t.Pos), "%s: same_as %q is not a graph name", label, t.SameAs)
	}
}

// firstAt points a duplicate at the first occurrence: " (first at L:C)" for
// the first valid position, "" when none is known.
func firstAt(ps ...Pos) string {
	for _, p := range ps {
		if p.IsValid() {
			return " (first at " + p.lineCol() + ")"
		}
	}
	return ""
}
