// Package graphdef reads graph files: YAML in, an AST with a position on every
// element out, and every problem it can see without knowing any node types,
// each with its file:line:col. The compiler (runtime/compile) joins the AST
// with the node registry. Print writes an AST back in canonical form.
package graphdef

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
	"gopkg.in/yaml.v3"
)

// Keys allowed in each kind of mapping, in canonical order.
var (
	graphKeys = []string{"graph", "doc", "params", "nodes", "out", "tests"}
	paramKeys = []string{"type", "default", "min", "max", "values", "doc"}
	nodeKeys  = []string{"id", "op", "with", "in"}
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
	bad map[Pos]bool
}

func (d *decoder) pos(n *yaml.Node) Pos { return Pos{File: d.file, Line: n.Line, Col: n.Column} }

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	d.errs.Addf(d.pos(n), format, args...)
}

// reject reports a problem with a value and remembers its position as bad.
func (d *decoder) reject(n *yaml.Node, format string, args ...any) {
	d.bad[d.pos(n)] = true
	d.errorf(n, format, args...)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes src into the root mapping node of its single document.
func (d *decoder) document(src []byte) (root *yaml.Node, ok bool) {
	defer func() {
		// yaml.v3 is not known to panic on input, but a parser must not
		// take the process down if it ever does.
		if r := recover(); r != nil {
			d.errs.Addf(Pos{File: d.file}, "yaml: internal error: %v", r)
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errs.Add(Pos{File: d.file, Line: 1, Col: 1}, "empty graph file")
		} else {
			d.yamlError(err)
		}
		return nil, false
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		d.errorf(&next, "a graph file holds one YAML document; found another")
	case !errors.Is(err, io.EOF):
		d.yamlError(err)
	}
	if len(doc.Content) != 1 {
		d.errs.Add(Pos{File: d.file, Line: 1, Col: 1}, "empty graph file")
		return nil, false
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		d.errs.Add(Pos{File: d.file, Line: 1, Col: 1}, "empty graph file")
		return nil, false
	}
	if !d.expect(root, yaml.MappingNode, "graph file") {
		return nil, false
	}
	return root, true
}

// parserProblems are the YAML parser's (as opposed to its scanner's) error
// messages. yaml.v3 reports their line 0-based, and leaves out line 0.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// yamlError turns a yaml.v3 syntax error into an Error with the (1-based)
// line it concerns. The library gives no column; errors it gives no line for
// (invalid UTF-8, unknown anchors) get a position without a line.
func (d *decoder) yamlError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		if parserProblems[m[2]] {
			line++
		}
		d.errs.Add(Pos{File: d.file, Line: line}, "yaml: "+m[2])
		return
	}
	if parserProblems[strings.TrimPrefix(msg, "yaml: ")] {
		d.errs.Add(Pos{File: d.file, Line: 1}, msg)
		return
	}
	d.errs.Add(Pos{File: d.file}, msg)
}

// describe names the YAML kind of n for messages: "a mapping", "an int" ...
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a sequence"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
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

var kindNames = map[yaml.Kind]string{yaml.MappingNode: "a mapping", yaml.SequenceNode: "a sequence", yaml.ScalarNode: "a scalar"}

// expect reports n unless it has the given kind. Aliases are never accepted:
// positions inside an aliased value would point somewhere else.
func (d *decoder) expect(n *yaml.Node, kind yaml.Kind, what string) bool {
	if n.Kind == yaml.AliasNode {
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
func (d *decoder) entries(n *yaml.Node, what string, fn func(key string, k, v *yaml.Node)) {
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool" && k.ShortTag() != "!!float") {
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
func (d *decoder) fields(n *yaml.Node, what string, known []string, fn func(key string, k, v *yaml.Node)) {
	d.entries(n, what, func(key string, k, v *yaml.Node) {
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
func (d *decoder) str(n *yaml.Node, what string) (string, bool) {
	if !d.expect(n, yaml.ScalarNode, what) {
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
func (d *decoder) scalar(n *yaml.Node, what string) (any, bool) {
	if !d.expect(n, yaml.ScalarNode, what) {
		return nil, false
	}
	switch n.ShortTag() {
	case "!!str", "!!timestamp":
		return n.Value, true
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			d.reject(n, "%s: invalid bool %q", what, n.Value)
			return nil, false
		}
		return b, true
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			d.reject(n, "%s: integer %s does not fit in 64 bits", what, n.Value)
			return nil, false
		}
		return i, true
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
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
func (d *decoder) number(n *yaml.Node, what string) (float64, bool) {
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
func (d *decoder) integer(n *yaml.Node, what string) (int64, bool) {
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

func (d *decoder) graph(root *yaml.Node) *Graph {
	g := &Graph{File: d.file, Pos: d.pos(root)}
	d.fields(root, "graph", graphKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "graph":
			g.NamePos = d.pos(v)
			g.Name, _ = d.str(v, "graph")
		case "doc":
			g.DocPos = d.pos(v)
			g.Doc, _ = d.str(v, "doc")
		case "params":
			g.ParamsPos = d.pos(k)
			if d.expect(v, yaml.MappingNode, "params") {
				d.entries(v, "params", func(name string, k, v *yaml.Node) {
					g.Params = append(g.Params, d.param(name, k, v))
				})
			}
		case "nodes":
			g.NodesPos = d.pos(k)
			if !d.expect(v, yaml.SequenceNode, "nodes") {
				d.bad[g.NodesPos] = true
			} else {
				for _, item := range v.Content {
					if d.expect(item, yaml.MappingNode, "nodes entry") {
						g.Nodes = append(g.Nodes, d.node(item))
					}
				}
			}
		case "out":
			g.OutPos = d.pos(k)
			if d.expect(v, yaml.MappingNode, "out") {
				g.Out = d.bindings(v, "out")
			}
		case "tests":
			g.TestsPos = d.pos(k)
			if d.expect(v, yaml.SequenceNode, "tests") {
				for _, item := range v.Content {
					if d.expect(item, yaml.MappingNode, "tests entry") {
						g.Tests = append(g.Tests, d.test(item))
					}
				}
			}
		}
	})
	return g
}

func (d *decoder) param(name string, k, v *yaml.Node) *ParamDecl {
	p := &ParamDecl{Name: name, Pos: d.pos(k)}
	what := "param " + name
	if !d.expect(v, yaml.MappingNode, what) {
		// Count the declaration's type and default as reported, so the
		// checks do not add "missing" errors for them.
		p.TypePos, p.DefaultPos = d.pos(v), d.pos(v)
		return p
	}
	d.fields(v, what, paramKeys, func(key string, k, v *yaml.Node) {
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
			if d.expect(v, yaml.SequenceNode, what+": values") {
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

func (d *decoder) node(n *yaml.Node) *Node {
	nd := &Node{Pos: d.pos(n)}
	d.fields(n, "node", nodeKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "id":
			nd.IDPos = d.pos(v)
			nd.ID, _ = d.str(v, "id")
		case "op":
			nd.OpPos = d.pos(v)
			nd.Op, _ = d.str(v, "op")
		case "with":
			nd.WithPos = d.pos(k)
			if d.expect(v, yaml.MappingNode, "with") {
				d.entries(v, "with", func(name string, k, v *yaml.Node) {
					a := &Arg{Name: name, NamePos: d.pos(k), ValuePos: d.pos(v)}
					a.Value, _ = d.scalar(v, "with "+name)
					nd.With = append(nd.With, a)
				})
			}
		case "in":
			nd.InPos = d.pos(k)
			if d.expect(v, yaml.MappingNode, "in") {
				nd.In = d.bindings(v, "in")
			}
		}
	})
	return nd
}

func (d *decoder) bindings(n *yaml.Node, what string) []*Binding {
	var out []*Binding
	d.entries(n, what, func(name string, k, v *yaml.Node) {
		b := &Binding{Name: name, NamePos: d.pos(k), RefPos: d.pos(v)}
		b.Ref, _ = d.str(v, what+" "+name)
		out = append(out, b)
	})
	return out
}

func (d *decoder) test(n *yaml.Node) *Test {
	t := &Test{Pos: d.pos(n)}
	d.fields(n, "test", testKeys, func(key string, k, v *yaml.Node) {
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
