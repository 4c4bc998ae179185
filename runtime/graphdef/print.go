package graphdef

import (
	"regexp"
	"strconv"
	"strings"
)

// Print writes g in canonical form: keys in a fixed order (graph, doc,
// params, nodes, out, tests), one flow mapping per param, node and test,
// empty sections and unset optional fields left out, strings quoted only
// where YAML needs it (prompts always), floats with a decimal point or an
// exponent. Comments are not kept. For any graph that Parse accepts,
// Parse(Print(g)) yields the same graph up to positions.
func Print(g *Graph) string {
	var b strings.Builder
	b.WriteString("graph: " + str(g.Name) + "\n")
	if g.Doc != "" {
		b.WriteString("doc: " + str(g.Doc) + "\n")
	}
	if len(g.Params) > 0 {
		b.WriteString("params:\n")
		for _, p := range g.Params {
			var f flow
			f.add("type", str(p.Type))
			if p.Default != nil {
				f.add("default", value(p.Default))
			}
			if p.Min != nil {
				f.add("min", strconv.FormatFloat(*p.Min, 'g', -1, 64))
			}
			if p.Max != nil {
				f.add("max", strconv.FormatFloat(*p.Max, 'g', -1, 64))
			}
			if p.Values != nil {
				vs := make([]string, len(p.Values))
				for i, v := range p.Values {
					vs[i] = str(v)
				}
				f.add("values", "["+strings.Join(vs, ", ")+"]")
			}
			if p.Doc != "" {
				f.add("doc", str(p.Doc))
			}
			b.WriteString("  " + str(p.Name) + ": " + f.String() + "\n")
		}
	}
	if len(g.Nodes) > 0 {
		b.WriteString("nodes:\n")
		for _, n := range g.Nodes {
			b.WriteString("  - " + printNode(n) + "\n")
		}
	}
	if len(g.Out) > 0 {
		b.WriteString("out: " + bindings(g.Out) + "\n")
	}
	if len(g.Carry) > 0 {
		b.WriteString("carry: " + bindings(g.Carry) + "\n")
	}
	if len(g.Tests) > 0 {
		b.WriteString("tests:\n")
		for _, t := range g.Tests {
			var f flow
			f.add("name", str(t.Name))
			f.add("prompt", strconv.Quote(t.Prompt))
			f.add("temperature", strconv.FormatFloat(t.Temperature, 'g', -1, 64))
			f.add("max_tokens", strconv.Itoa(t.MaxTokens))
			if t.SameAs != "" {
				f.add("same_as", str(t.SameAs))
			}
			b.WriteString("  - " + f.String() + "\n")
		}
	}
	return b.String()
}

// printNode formats n as one flow mapping; a loop's body nodes are a flow
// sequence of them.
func printNode(n *Node) string {
	var f flow
	f.add("id", str(n.ID))
	if !n.IsLoop() {
		f.add("op", str(n.Op))
	}
	if len(n.With) > 0 {
		var w flow
		for _, a := range n.With {
			w.add(a.Name, value(a.Value))
		}
		f.add("with", w.String())
	}
	if len(n.In) > 0 {
		f.add("in", bindings(n.In))
	}
	if !n.IsLoop() {
		return f.String()
	}
	if n.Repeat != nil {
		f.add(n.Repeat.Name, value(n.Repeat.Value))
	}
	body := make([]string, len(n.Body))
	for i, bn := range n.Body {
		body[i] = printNode(bn)
	}
	f.add("nodes", "["+strings.Join(body, ", ")+"]")
	if len(n.Next) > 0 {
		f.add("next", bindings(n.Next))
	}
	if len(n.Out) > 0 {
		f.add("out", bindings(n.Out))
	}
	return f.String()
}

// flow builds a YAML flow mapping "{k: v, ...}" from already-formatted values.
type flow []string

func (f *flow) add(key, val string) { *f = append(*f, str(key)+": "+val) }

// String returns the mapping in flow style.
func (f flow) String() string { return "{" + strings.Join(f, ", ") + "}" }

func bindings(bs []*Binding) string {
	var f flow
	for _, b := range bs {
		f.add(b.Name, str(b.Ref))
	}
	return f.String()
}

func value(v any) string {
	switch x := v.(type) {
	case string:
		return str(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return float(x)
	case bool:
		return strconv.FormatBool(x)
	}
	return "null"
}

// float formats f so that YAML reads it back as the same float, never as an
// int.
func float(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// plainString matches strings that are safe unquoted both in block and in
// flow context: no indicator characters, no leading "-", no ": " or " #".
var plainString = regexp.MustCompile(`^[A-Za-z0-9_$(/][A-Za-z0-9_$./()' +-]*$`)

// str formats s as a YAML string: plain when that reads back as the same
// string, double-quoted otherwise.
func str(s string) string {
	if plainString.MatchString(s) && !strings.HasSuffix(s, " ") {
		if resolve(s) == "!!str" {
			return s
		}
	}
	return strconv.Quote(s)
}
