package graphdef_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/graphs"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/graphdef/graphdeftest"
)

// TestErrors parses every testdata file and checks the errors against the
// "# ERROR" annotations in it; a file without annotations must parse cleanly.
func TestErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			_, perr := graphdef.Parse(file, src)
			graphdeftest.Check(t, file, src, perr)
		})
	}
}

func pos(line, col int) graphdef.Pos { return graphdef.Pos{File: "g.yaml", Line: line, Col: col} }

func TestParseRecordsPositions(t *testing.T) {
	src := `graph: plain
doc: Forward and pick.
params:
  chunk: {type: int, default: 512, min: 1, max: 65536, doc: chunk size}
  mode: {type: enum, default: a, values: [a, b]}
nodes:
  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}
  - id: fwd
    op: model.forward
    in: {tokens: $in.tokens}
out: {tokens: fwd.logits}
tests:
  - {name: t1, prompt: "Once", temperature: 0.5, max_tokens: 3, same_as: plain}
`
	g, err := graphdef.Parse("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	one, big := 1.0, 65536.0
	want := &graphdef.Graph{
		File: "g.yaml", Pos: pos(1, 1),
		Name: "plain", NamePos: pos(1, 8),
		Doc: "Forward and pick.", DocPos: pos(2, 6),
		ParamsPos: pos(3, 1),
		Params: []*graphdef.ParamDecl{
			{Name: "chunk", Pos: pos(4, 3), Type: "int", TypePos: pos(4, 17), Default: int64(512), DefaultPos: pos(4, 31),
				Min: &one, MinPos: pos(4, 41), Max: &big, MaxPos: pos(4, 49), Doc: "chunk size", DocPos: pos(4, 61)},
			{Name: "mode", Pos: pos(5, 3), Type: "enum", TypePos: pos(5, 16), Default: "a", DefaultPos: pos(5, 31),
				Values: []string{"a", "b"}, ValuesPos: pos(5, 42)},
		},
		NodesPos: pos(6, 1),
		Nodes: []*graphdef.Node{
			{Pos: pos(7, 5), ID: "chunking", IDPos: pos(7, 10), Op: "prefill.chunk", OpPos: pos(7, 24), WithPos: pos(7, 39),
				With: []*graphdef.Arg{{Name: "size", NamePos: pos(7, 46), Value: "$params.chunk", ValuePos: pos(7, 52)}}},
			{Pos: pos(8, 5), ID: "fwd", IDPos: pos(8, 9), Op: "model.forward", OpPos: pos(9, 9), InPos: pos(10, 5),
				In: []*graphdef.Binding{{Name: "tokens", NamePos: pos(10, 10), Ref: "$in.tokens", RefPos: pos(10, 18)}}},
		},
		OutPos:   pos(11, 1),
		Out:      []*graphdef.Binding{{Name: "tokens", NamePos: pos(11, 7), Ref: "fwd.logits", RefPos: pos(11, 15)}},
		TestsPos: pos(12, 1),
		Tests: []*graphdef.Test{{Pos: pos(13, 5), Name: "t1", NamePos: pos(13, 12), Prompt: "Once", PromptPos: pos(13, 24),
			Temperature: 0.5, TemperaturePos: pos(13, 45), MaxTokens: 3, MaxTokensPos: pos(13, 62), SameAs: "plain", SameAsPos: pos(13, 74)}},
	}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if name, ok := g.Nodes[0].With[0].ParamRef(); !ok || name != "chunk" {
		t.Errorf("ParamRef = %q, %v; want chunk, true", name, ok)
	}
	if node, port, ok := g.Nodes[1].In[0].Target(); !ok || node != graphdef.InputNode || port != "tokens" {
		t.Errorf("Target = %q, %q, %v; want $in, tokens, true", node, port, ok)
	}
}

func TestErrorPositions(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "an unknown key points at the key",
			src:  "graph: a\nnodes:\n  - {id: x, op: a.b, wiht: {}}\n",
			want: []string{`g.yaml:3:22: unknown key "wiht" in node (did you mean "with"?)`},
		},
		{
			name: "a bad reference points at the value",
			src:  "graph: a\nnodes:\n  - id: x\n    op: a.b\n    in:\n      tokens:   fwd\n",
			want: []string{`g.yaml:6:17: in tokens: invalid reference "fwd": want NODE.PORT, $in.NAME or $prev.NAME`},
		},
		{
			name: "a missing id points at the node",
			src:  "graph: a\nnodes:\n  -   op: a.b\n",
			want: []string{`g.yaml:3:7: node without an id (id: NAME)`},
		},
		{
			name: "a syntax error has its line and column",
			src:  "graph: a\n  nodes: x\n",
			want: []string{`g.yaml:2:8: yaml: mapping value is not allowed in this context`},
		},
		{
			name: "an indentation error is reported at the line it is on",
			src:  "graph: g\nnodes:\n  - id: fwd\n    op: model.forward\n    in:\n      tokens: $in.tokens\n     positions: $in.positions\n",
			want: []string{`g.yaml:7:6: yaml: value is not allowed in this context`},
		},
		{
			name: "flow collections nested 100,000 deep are refused at the first level too deep",
			src:  "graph: a\ndoc: " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n",
			want: []string{`g.yaml:2:69: yaml: collections nested more than 64 deep`},
		},
		{
			name: "block collections nested too deep are refused",
			src:  "graph: a\ndoc:\n" + blockNest(70),
			want: []string{`g.yaml:66:65: yaml: collections nested more than 64 deep`},
		},
		{
			name: "a file over the size limit is refused before it is parsed",
			src:  "graph: a\ndoc: " + strings.Repeat("x", graphdef.MaxSourceBytes) + "\n",
			want: []string{fmt.Sprintf(`g.yaml:1:1: the file has %d bytes: a graph file holds at most %d`, graphdef.MaxSourceBytes+15, graphdef.MaxSourceBytes)},
		},
		{
			name: "a block mapping with more keys than the limit is refused at the first key over",
			src:  "graph: a\nnodes:\n- id: x\n  op: a.b\n  with:\n" + keyLines("    k%d: v\n", graphdef.MaxKeys+10),
			want: []string{fmt.Sprintf(`g.yaml:%d:5: yaml: a mapping with more than %d keys`, 5+graphdef.MaxKeys+1, graphdef.MaxKeys)},
		},
		{
			name: "keys whose values are sequences at their column count as keys of one mapping",
			src:  "graph: a\n" + keyLines("k%d:\n- a\n", graphdef.MaxKeys+10),
			want: []string{fmt.Sprintf(`g.yaml:%d:1: yaml: a mapping with more than %d keys`, 2*graphdef.MaxKeys, graphdef.MaxKeys)},
		},
		{
			name: "a flow mapping with more keys than the limit is refused at the first key over",
			src:  "graph: a\ndoc: {" + keyLines("k%d: v, ", graphdef.MaxKeys+10) + "}\n",
			want: []string{fmt.Sprintf(`g.yaml:2:%d: yaml: a mapping with more than %d keys`, len("doc: {"+keyLines("k%d: v, ", graphdef.MaxKeys))+1, graphdef.MaxKeys)},
		},
		{
			name: "nodes past the limit are refused at the first one over",
			src:  "graph: a\nnodes:\n" + nodeList(graphdef.MaxNodes+5),
			want: []string{fmt.Sprintf(`g.yaml:%d:5: more than 10000 nodes: a graph file holds at most 10000`, graphdef.MaxNodes+3)},
		},
		{
			name: "errors come sorted by position",
			src:  "nodes: [{id: B, op: a.b}]\ngraph: Z\n",
			want: []string{`g.yaml:1:14: invalid node id "B": want a lower-case name matching ^[a-z][a-z0-9_]*$`,
				`g.yaml:2:8: invalid graph name "Z": want a lower-case name matching ^[a-z][a-z0-9_-]*$`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := graphdef.Parse("g.yaml", []byte(tt.src))
			var list graphdef.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v is not an ErrorList", err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// blockNest is a block mapping nested depth deep, one key per line.
func blockNest(depth int) string {
	var b strings.Builder
	for i := range depth {
		fmt.Fprintf(&b, "%sk:\n", strings.Repeat(" ", i+1))
	}
	return b.String()
}

// keyLines is format filled with 0 to n-1, concatenated.
func keyLines(format string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i)
	}
	return b.String()
}

// The densest files within the limits cost what a file of that size
// should: checking each allocates less than 300 MB in all (so its peak
// memory is less), where a file of the same shape once cost gigabytes or
// a time quadratic in its keys.
func TestDensestFilesWithinTheLimitsAreCheap(t *testing.T) {
	fill := func(head, unit, tail string) string {
		n := (graphdef.MaxSourceBytes - len(head) - len(tail)) / len(unit)
		return head + strings.Repeat(unit, n) + tail
	}
	var withs strings.Builder
	for i := 0; withs.Len() < graphdef.MaxSourceBytes-16<<10; i++ {
		fmt.Fprintf(&withs, "- id: n%d\n  op: a.b\n  with:\n%s", i, keyLines("    k%d: v\n", graphdef.MaxKeys))
	}
	for _, tc := range []struct{ name, src string }{
		{"nodes", fill("graph: a\nnodes:\n", "- {id: n, op: a.b}\n", "")},
		{"a flow sequence of scalars", fill("graph: a\ndoc: [", "a,", "]\n")},
		{"a block sequence of scalars", fill("graph: a\nvalues:\n", "- a\n", "")},
		{"flow mappings of one key", fill("graph: a\ndoc: [", "{a: b},", "]\n")},
		{"nodes with mappings of the most keys", "graph: a\nnodes:\n" + withs.String()},
		{"comments", fill("graph: a\n", "#\n", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			graphdef.Parse("g.yaml", []byte(tc.src))
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 300<<20 {
				t.Errorf("checking %d bytes allocated %d MB", len(tc.src), grew>>20)
			} else {
				t.Logf("checking %d bytes allocated %d MB", len(tc.src), grew>>20)
			}
		})
	}
}

// nodeList is n nodes of a block sequence, one per line, with distinct ids.
func nodeList(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {id: n%d, op: a.b}\n", i)
	}
	return b.String()
}

// A file that starts with a UTF-8 byte order mark parses as without it.
func TestParseSkipsAByteOrderMark(t *testing.T) {
	src := "graph: a\nnodes:\n  - {id: x, op: a.b}\n"
	want, err := graphdef.Parse("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	got, err := graphdef.Parse("g.yaml", []byte("\ufeff"+src))
	if err != nil {
		t.Fatalf("with a byte order mark: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("graph (-without +with a byte order mark):\n%s", diff)
	}
}

func TestParseKeepsPartialGraph(t *testing.T) {
	g, err := graphdef.Parse("g.yaml", []byte("graph: a\nnodes:\n  - {id: x, op: a.b, bogus: 1}\n  - {id: y, op: [c]}\n"))
	if err == nil {
		t.Fatal("no error")
	}
	if g == nil || len(g.Nodes) != 2 || g.Nodes[0].Op != "a.b" || g.Nodes[1].Op != "" {
		t.Fatalf("partial graph not kept: %+v", g)
	}
	if g, _ := graphdef.Parse("g.yaml", []byte("graph: [")); g != nil {
		t.Error("a YAML syntax error still returned a graph")
	}
}

// TestPrintRoundTrip prints every graph that parses cleanly (testdata and the
// embedded graphs), parses the result and compares the two graphs, ignoring
// positions; printing again must give the same text.
func TestPrintRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	srcs := map[string][]byte{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = src
	}
	for _, name := range graphs.Names() {
		file, src, err := graphs.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		srcs[file] = src
	}
	n := 0
	for file, src := range srcs {
		g, err := graphdef.Parse(file, src)
		if err != nil {
			continue
		}
		n++
		t.Run(file, func(t *testing.T) {
			out := graphdef.Print(g)
			g2, err := graphdef.Parse(file, []byte(out))
			if err != nil {
				t.Fatalf("printed graph does not parse: %v\n%s", err, out)
			}
			if diff := cmp.Diff(g, g2, cmpopts.IgnoreTypes(graphdef.Pos{})); diff != "" {
				t.Errorf("round trip changed the graph (-before +after):\n%s\nprinted:\n%s", diff, out)
			}
			if out2 := graphdef.Print(g2); out2 != out {
				t.Errorf("printing is not stable:\n%s\nthen:\n%s", out, out2)
			}
		})
	}
	if n < 2 {
		t.Errorf("only %d clean graphs to round-trip", n)
	}
}

func TestPrintCanonical(t *testing.T) {
	src := `
graph: plain
nodes:
  - id: pick
    in: {logits: fwd.logits}
    op: sample.token
    with: {temperature: 1.0, top_k: 40, greedy: false, seed: "7", note: "a: b", tag: 'null'}
doc: "Forward the model over the step's tokens and pick the next token."
out: {tokens: pick.tokens}
params:
  chunk: {max: 65536, min: 1, default: 512, type: int, doc: prefill chunk size in tokens}
tests:
  - {same_as: plain, max_tokens: 32, temperature: 0, prompt: Once upon a time, name: greedy story}
`
	want := `graph: plain
doc: Forward the model over the step's tokens and pick the next token.
params:
  chunk: {type: int, default: 512, min: 1, max: 65536, doc: prefill chunk size in tokens}
nodes:
  - {id: pick, op: sample.token, with: {temperature: 1.0, top_k: 40, greedy: false, seed: "7", note: "a: b", tag: "null"}, in: {logits: fwd.logits}}
out: {tokens: pick.tokens}
tests:
  - {name: greedy story, prompt: "Once upon a time", temperature: 0, max_tokens: 32, same_as: plain}
`
	g, err := graphdef.Parse("g.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, graphdef.Print(g)); diff != "" {
		t.Errorf("Print (-want +got):\n%s", diff)
	}
}

func TestCheckHandBuiltGraph(t *testing.T) {
	g := &graphdef.Graph{
		File: "mem",
		Nodes: []*graphdef.Node{
			{ID: "a", Op: "x.y", In: []*graphdef.Binding{{Name: "t", Ref: "nowhere"}}},
			{ID: "a"},
		},
		Tests: []*graphdef.Test{{Name: "t"}},
	}
	var got []string
	for _, e := range graphdef.Check(g) {
		got = append(got, e.Error())
	}
	want := []string{
		"mem: duplicate node id \"a\"",
		"mem: in t: invalid reference \"nowhere\": want NODE.PORT, $in.NAME or $prev.NAME",
		"mem: missing graph name (graph: NAME)",
		"mem: node a has no op (op: FAMILY.NAME)",
		"mem: test \"t\": missing max_tokens",
		"mem: test \"t\": missing prompt",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check (-want +got):\n%s", diff)
	}
}

func TestErrorList(t *testing.T) {
	var l graphdef.ErrorList
	if l.Err() != nil {
		t.Error("empty list is an error")
	}
	l.Add(pos(3, 1), "b")
	l.Addf(pos(1, 9), "a %d", 1)
	l.Add(graphdef.Pos{File: "a.yaml", Line: 9, Col: 9}, "other file")
	l.Add(pos(3, 1), "a")
	l.Sort()
	want := "a.yaml:9:9: other file\ng.yaml:1:9: a 1\ng.yaml:3:1: a\ng.yaml:3:1: b"
	if got := l.Err().Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var back graphdef.ErrorList
	if !errors.As(l.Err(), &back) || len(back) != 4 {
		t.Error("Err() does not unwrap to the list")
	}
}

func TestPosString(t *testing.T) {
	tests := []struct {
		p    graphdef.Pos
		want string
	}{
		{graphdef.Pos{File: "f", Line: 2, Col: 3}, "f:2:3"},
		{graphdef.Pos{File: "f", Line: 2}, "f:2"},
		{graphdef.Pos{File: "f"}, "f"},
		{graphdef.Pos{Line: 2, Col: 3}, "2:3"},
		{graphdef.Pos{}, "-"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestParseFile(t *testing.T) {
	if _, err := graphdef.ParseFile(filepath.Join("testdata", "valid.yaml")); err != nil {
		t.Errorf("valid.yaml: %v", err)
	}
	_, err := graphdef.ParseFile(filepath.Join("testdata", "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v, want a not-exist error", err)
	}
}

func TestWantsRejectsBadAnnotations(t *testing.T) {
	for _, src := range []string{"a: 1 # ERROR", "a: 1 # ERROR \"x", "a: 1 # ERROR \"(\""} {
		if _, err := graphdeftest.Wants([]byte(src)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("Wants(%q) error = %v, want a line-1 error", src, err)
		}
	}
}
