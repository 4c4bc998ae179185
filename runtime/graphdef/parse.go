// Package graphdef reads graph files: YAML in, an AST with a position on every
// element out, and every problem it can see without knowing any node types,
// each with its file:line:col. The compiler (runtime/compile) joins the AST
// with the node registry. Print writes an AST back in canonical form.
package graphdef

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
)

// Keys allowed in each kind of mapping, in canonical order.
var (
	graphKeys = []string{"graph", "doc", "params", "nodes", "out", "carry", "tests"}
	paramKeys = []string{"type", "default", "min", "max", "values", "doc"}
	nodeKeys  = []string{"id", "op", "with", "in", "repeat", "block", "nodes", "next", "out"}
	testKeys  = []string{"name", "prompt", "temperature", "max_tokens", "same_as"}
)

// Parse reads the graph in src; file names it in positions. It reports every
// problem it finds (YAML syntax, unknown or duplicate keys with suggestions,
// values of the wrong YAML kind, missing or malformed names and references,
// duplicate node ids, bad test cases) as an ErrorList sorted by position.
//
// Like go/parser, Parse returns the graph as far as it could be read even when
// it also returns errors, so that the compiler can report its own problems in
// the same run; the graph is nil only when the YAML could not be read at all.
// An element whose value was unusable is left at its zero value.
func Parse(file string, src []byte) (*Graph, error) {
	g, errs := parse(file, src)
	errs.Sort()
	return g, errs.Err()
}

// ParseFile reads and parses the graph file at path, which names it in
// positions. A read failure is returned as is, not as an ErrorList.
func ParseFile(path string) (*Graph, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

func parse(file string, src []byte) (g *Graph, errs ErrorList) {
	d := &decoder{file: file, bad: map[Pos]bool{}}
	root, ok := d.document(src)
	if !ok {
		return nil, d.errs
	}
	g = d.graph(root)
	errs = append(d.errs, check(g, d.bad)...)
	return g, errs
}

type decoder struct {
	file string
	errs ErrorList
	// bad holds the positions of values the decoder rejected, so that the
	// checks that follow do not report them again as missing or invalid.
	bad   map[Pos]bool
	nodes int // the nodes read so far, nested ones included
}

// Limits on a graph file, so that checking one costs time and memory in
// proportion to a graph's plausible size, never to what a file declares.
const (
	// MaxSourceBytes bounds a graph file's size (the bundled graphs are a
	// few KiB). The YAML library's lexer and parser take up to about 2 µs
	// and 600 bytes of allocations per byte of a dense file, so a file
	// this size is checked in about half a second and 160 MB.
	MaxSourceBytes = 256 << 10
	// MaxDepth bounds how deeply the file's YAML collections nest
	// (mappings and sequences, block or flow).
	MaxDepth = 64
	// MaxKeys bounds the keys of one mapping (a graph's largest, a node's
	// with, holds tens): the YAML library's work on a block mapping grows
	// with the square of its keys.
	MaxKeys = 256
	// MaxNodes bounds the nodes of a graph, those in loop bodies included.
	MaxNodes = 10000
)

func (d *decoder) pos(n *yamlNode) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

// parseYAMLFloat reads a YAML float: a decimal, or .inf, -.inf, .nan in any
// of their spellings.
func parseYAMLFloat(s string) (float64, error) {
	switch strings.ToLower(strings.TrimPrefix(s, "+")) {
	case ".inf":
		return math.Inf(1), nil
	case "-.inf":
		return math.Inf(-1), nil
	case ".nan":
		return math.NaN(), nil
	}
	return strconv.ParseFloat(s, 64)
}

func (d *decoder) errorf(n *yamlNode, format string, args ...any) {
	d.errs.Addf(d.pos(n), format, args...)
}

// reject reports a problem with a value and remembers its position as bad.
func (d *decoder) reject(n *yamlNode, format string, args ...any) {
	d.bad[d.pos(n)] = true
	d.errorf(n, format, args...)
}

// document parses src into the root mapping node of its single document.
func (d *decoder) document(src []byte) (root *yamlNode, ok bool) {
	defer func() {
		// The YAML library is not known to panic on input, but a parser
		// must not take the process down if it ever does.
		if r := recover(); r != nil {
			d.errs.Addf(Pos{File: d.file}, "yaml: internal error: %v", r)
			root, ok = nil, false
		}
	}()
	if len(src) > MaxSourceBytes {
		d.errs.Addf(Pos{File: d.file, Line: 1, Col: 1}, "the file has %d bytes: a graph file holds at most %d", len(src), MaxSourceBytes)
		return nil, false
	}
	docs, err := parseYAML(src)
	if err != nil {
		var se *yamlSyntaxError
		if errors.As(err, &se) {
			d.errs.Add(Pos{File: d.file, Line: se.Line, Col: se.Column}, "yaml: "+se.Message)
		} else {
			d.errs.Add(Pos{File: d.file}, "yaml: "+err.Error())
		}
		return nil, false
	}
	if len(docs) > 1 && docs[1] != nil {
		d.errorf(docs[1], "a graph file holds one YAML document; found another")
	}
	if len(docs) == 0 || docs[0] == nil || docs[0].Kind == scalarNode && docs[0].ShortTag() == "!!null" {
		d.errs.Add(Pos{File: d.file, Line: 1, Col: 1}, "empty graph file")
		return nil, false
	}
	root = docs[0]
	if !d.expect(root, mappingNode, "graph file") {
		return nil, false
	}
	return root, true
}

// describe names the YAML kind of n for messages: "a mapping", "an int" ...
func describe(n *yamlNode) string {
	switch n.Kind {
	case mappingNode:
		return "a mapping"
	case sequenceNode:
		return "a sequence"
	case aliasNode:
		return "an alias"
	case scalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!int":
			return "an int (" + n.Value + ")"
		case "!!float":
			return "a float (" + n.Value + ")"
		case "!!bool":
			return "a bool (" + n.Value + ")"
		case "!!str":
			return "a string"
		}
		return "a " + n.ShortTag() + " value"
	}
	return "nothing"
}

var kindNames = map[yamlKind]string{mappingNode: "a mapping", sequenceNode: "a sequence", scalarNode: "a scalar"}

// expect reports n unless it has the given kind. Aliases are never accepted:
// positions inside an aliased value would point somewhere else.
func (d *decoder) expect(n *yamlNode, kind yamlKind, what string) bool {
	if n.Kind == aliasNode {
		d.reject(n, "%s: YAML aliases are not supported in graph files", what)
		return false
	}
	if n.Kind != kind {
		d.reject(n, "%s: want %s, got %s", what, kindNames[kind], describe(n))
		return false
	}
	return true
}

// entries walks a mapping, reporting keys that are not plain strings and
// duplicate keys (the first one wins), and calls fn for each usable entry.
func (d *decoder) entries(n *yamlNode, what string, fn func(key string, k, v *yamlNode)) {
	first := map[string]*yamlNode{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != scalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool" && k.ShortTag() != "!!float") {
			d.errorf(k, "%s: a key must be a name, got %s", what, describe(k))
			continue
		}
		if f, dup := first[k.Value]; dup {
			d.errorf(k, "%s: duplicate key %q (first at %s)", what, k.Value, d.pos(f).lineCol())
			continue
		}
		first[k.Value] = k
		fn(k.Value, k, v)
	}
}

// fields is entries for a mapping with a fixed set of keys; others are
// reported with the closest known key.
func (d *decoder) fields(n *yamlNode, what string, known []string, fn func(key string, k, v *yamlNode)) {
	d.entries(n, what, func(key string, k, v *yamlNode) {
		for _, kk := range known {
			if kk == key {
				fn(key, k, v)
				return
			}
		}
		msg := fmt.Sprintf("unknown key %q in %s", key, what)
		if c := hint.Closest(key, known); c != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", c)
		}
		d.errs.Add(d.pos(k), msg)
	})
}

// str reads a string value. Only YAML strings are accepted; a number or bool
// where a string belongs is reported with a hint to quote it.
func (d *decoder) str(n *yamlNode, what string) (string, bool) {
	if !d.expect(n, scalarNode, what) {
		return "", false
	}
	switch n.ShortTag() {
	case "!!str":
		return n.Value, true
	case "!!int", "!!float", "!!bool", "!!timestamp":
		d.reject(n, "%s: want a string, got %s; quote it to make it one", what, describe(n))
	default:
		d.reject(n, "%s: want a string, got %s", what, describe(n))
	}
	return "", false
}

// scalar reads an int64, float64, string or bool value.
func (d *decoder) scalar(n *yamlNode, what string) (any, bool) {
	if !d.expect(n, scalarNode, what) {
		return nil, false
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, true
	case "!!bool":
		b, err := strconv.ParseBool(strings.ToLower(n.Value))
		if err != nil {
			d.reject(n, "%s: invalid bool %q", what, n.Value)
			return nil, false
		}
		return b, true
	case "!!int":
		i, err := strconv.ParseInt(n.Value, 0, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				d.reject(n, "%s: integer %s does not fit in 64 bits", what, n.Value)
			} else {
				d.reject(n, "%s: invalid int %q", what, n.Value)
			}
			return nil, false
		}
		return i, true
	case "!!float":
		f, err := parseYAMLFloat(n.Value)
		if err != nil {
			d.reject(n, "%s: invalid float %q", what, n.Value)
			return nil, false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			d.reject(n, "%s: want a finite number, got %s", what, n.Value)
			return nil, false
		}
		return f, true
	case "!!null":
		d.reject(n, "%s: want a value, got null", what)
	default:
		d.reject(n, "%s: unsupported YAML tag %s", what, n.ShortTag())
	}
	return nil, false
}

// number reads an int or float as a float64.
func (d *decoder) number(n *yamlNode, what string) (float64, bool) {
	v, ok := d.scalar(n, what)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	d.reject(n, "%s: want a number, got %s", what, describe(n))
	return 0, false
}

// integer reads an int.
func (d *decoder) integer(n *yamlNode, what string) (int64, bool) {
	v, ok := d.scalar(n, what)
	if !ok {
		return 0, false
	}
	if i, isInt := v.(int64); isInt {
		return i, true
	}
	d.reject(n, "%s: want an int, got %s", what, describe(n))
	return 0, false
}

func (d *decoder) graph(root *yamlNode) *Graph {
	g := &Graph{File: d.file, Pos: d.pos(root)}
	d.fields(root, "graph", graphKeys, func(key string, k, v *yamlNode) {
		switch key {
		case "graph":
			g.NamePos = d.pos(v)
			g.Name, _ = d.str(v, "graph")
		case "doc":
			g.DocPos = d.pos(v)
			g.Doc, _ = d.str(v, "doc")
		case "params":
			g.ParamsPos = d.pos(k)
			if d.expect(v, mappingNode, "params") {
				d.entries(v, "params", func(name string, k, v *yamlNode) {
					g.Params = append(g.Params, d.param(name, k, v))
				})
			}
		case "nodes":
			g.NodesPos = d.pos(k)
			if !d.expect(v, sequenceNode, "nodes") {
				d.bad[g.NodesPos] = true
			} else {
				g.Nodes = d.nodeItems(v, "nodes entry")
			}
		case "out":
			g.OutPos = d.pos(k)
			if d.expect(v, mappingNode, "out") {
				g.Out = d.bindings(v, "out")
			}
		case "carry":
			g.CarryPos = d.pos(k)
			if d.expect(v, mappingNode, "carry") {
				g.Carry = d.bindings(v, "carry")
			}
		case "tests":
			g.TestsPos = d.pos(k)
			if d.expect(v, sequenceNode, "tests") {
				for _, item := range v.Content {
					if d.expect(item, mappingNode, "tests entry") {
						g.Tests = append(g.Tests, d.test(item))
					}
				}
			}
		}
	})
	return g
}

func (d *decoder) param(name string, k, v *yamlNode) *ParamDecl {
	p := &ParamDecl{Name: name, Pos: d.pos(k)}
	what := "param " + name
	if !d.expect(v, mappingNode, what) {
		// Count the declaration's type and default as reported, so the
		// checks do not add "missing" errors for them.
		p.TypePos, p.DefaultPos = d.pos(v), d.pos(v)
		return p
	}
	d.fields(v, what, paramKeys, func(key string, k, v *yamlNode) {
		at := d.pos(v)
		switch key {
		case "type":
			p.TypePos = at
			p.Type, _ = d.str(v, what+": type")
		case "default":
			p.DefaultPos = at
			p.Default, _ = d.scalar(v, what+": default")
		case "min":
			p.MinPos = at
			if f, ok := d.number(v, what+": min"); ok {
				p.Min = &f
			}
		case "max":
			p.MaxPos = at
			if f, ok := d.number(v, what+": max"); ok {
				p.Max = &f
			}
		case "values":
			p.ValuesPos = at
			if d.expect(v, sequenceNode, what+": values") {
				p.Values = []string{}
				for _, item := range v.Content {
					if s, ok := d.str(item, what+": values entry"); ok {
						p.Values = append(p.Values, s)
					}
				}
			}
		case "doc":
			p.DocPos = at
			p.Doc, _ = d.str(v, what+": doc")
		}
	})
	return p
}

// nodeItems reads the node mappings of the sequence seq (what names an
// entry in messages), up to MaxNodes in the whole file. It never returns nil.
func (d *decoder) nodeItems(seq *yamlNode, what string) []*Node {
	nodes := []*Node{}
	for _, item := range seq.Content {
		if d.nodes == MaxNodes {
			d.reject(item, "more than %d nodes: a graph file holds at most %d", MaxNodes, MaxNodes)
			d.nodes++
		}
		if d.nodes > MaxNodes {
			break
		}
		if d.expect(item, mappingNode, what) {
			d.nodes++
			nodes = append(nodes, d.node(item))
		}
	}
	return nodes
}

func (d *decoder) node(n *yamlNode) *Node {
	nd := &Node{Pos: d.pos(n)}
	d.fields(n, "node", nodeKeys, func(key string, k, v *yamlNode) {
		switch key {
		case "id":
			nd.IDPos = d.pos(v)
			nd.ID, _ = d.str(v, "id")
		case "op":
			nd.OpPos = d.pos(v)
			nd.Op, _ = d.str(v, "op")
		case "with":
			nd.WithPos = d.pos(k)
			if d.expect(v, mappingNode, "with") {
				d.entries(v, "with", func(name string, k, v *yamlNode) {
					a := &Arg{Name: name, NamePos: d.pos(k), ValuePos: d.pos(v)}
					a.Value, _ = d.scalar(v, "with "+name)
					nd.With = append(nd.With, a)
				})
			}
		case "in":
			nd.InPos = d.pos(k)
			if d.expect(v, mappingNode, "in") {
				nd.In = d.bindings(v, "in")
			}
		case "repeat", "block":
			if nd.Repeat != nil {
				d.errorf(k, "a loop takes repeat: (passes of one row per sequence) or block: (one pass of a block per sequence), not both")
				return
			}
			nd.RepeatPos, nd.Block = d.pos(k), key == "block"
			a := &Arg{Name: key, NamePos: d.pos(k), ValuePos: d.pos(v)}
			a.Value, _ = d.scalar(v, key)
			nd.Repeat = a
		case "nodes":
			nd.BodyPos = d.pos(k)
			if !d.expect(v, sequenceNode, "loop nodes") {
				d.bad[nd.BodyPos] = true
				return
			}
			nd.Body = d.nodeItems(v, "loop nodes entry")
		case "next":
			nd.NextPos = d.pos(k)
			if d.expect(v, mappingNode, "next") {
				nd.Next = d.bindings(v, "next")
			}
		case "out":
			nd.OutPos = d.pos(k)
			if d.expect(v, mappingNode, "loop out") {
				nd.Out = d.bindings(v, "loop out")
			}
		}
	})
	return nd
}

func (d *decoder) bindings(n *yamlNode, what string) []*Binding {
	var out []*Binding
	d.entries(n, what, func(name string, k, v *yamlNode) {
		b := &Binding{Name: name, NamePos: d.pos(k), RefPos: d.pos(v)}
		b.Ref, _ = d.str(v, what+" "+name)
		out = append(out, b)
	})
	return out
}

func (d *decoder) test(n *yamlNode) *Test {
	t := &Test{Pos: d.pos(n)}
	d.fields(n, "test", testKeys, func(key string, k, v *yamlNode) {
		at := d.pos(v)
		switch key {
		case "name":
			t.NamePos = at
			t.Name, _ = d.str(v, "name")
		case "prompt":
			t.PromptPos = at
			t.Prompt, _ = d.str(v, "prompt")
		case "temperature":
			t.TemperaturePos = at
			t.Temperature, _ = d.number(v, "temperature")
		case "max_tokens":
			t.MaxTokensPos = at
			if i, ok := d.integer(v, "max_tokens"); ok {
				if i > math.MaxInt32 || i < math.MinInt32 {
					d.reject(v, "max_tokens: %d is too large", i)
				} else {
					t.MaxTokens = int(i)
				}
			}
		case "same_as":
			t.SameAsPos = at
			t.SameAs, _ = d.str(v, "same_as")
		}
	})
	return t
}
