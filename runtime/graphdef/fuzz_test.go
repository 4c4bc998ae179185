package graphdef_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
)

// FuzzParse checks that Parse never panics, that every error it reports has a
// file and a message, and that every graph it accepts survives a trip through
// Print unchanged.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		if src, err := os.ReadFile(file); err == nil {
			f.Add(src)
		}
	}
	f.Add([]byte("graph: a\nnodes: [{id: b, op: c.d, with: {x: 1e3, y: \"\\u00e9\"}}]\n"))
	f.Add([]byte("\ufeffgraph: a\nnodes: []\n"))
	f.Add([]byte("graph: a\ndoc: [[[[{a: [[{b: c}]]}]]]]\nnodes:\n  - id: x\n    op: a.b\n    with:\n      k:\n        - - - v\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		g, err := graphdef.Parse("f.yaml", src)
		if err != nil {
			list, ok := err.(graphdef.ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error %T is not a non-empty ErrorList: %v", err, err)
			}
			for _, e := range list {
				if e.Pos.File != "f.yaml" || e.Msg == "" {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		out := graphdef.Print(g)
		g2, err := graphdef.Parse("f.yaml", []byte(out))
		if err != nil {
			t.Fatalf("printed graph does not parse: %v\nsource:\n%q\nprinted:\n%s", err, src, out)
		}
		if diff := cmp.Diff(g, g2, cmpopts.IgnoreTypes(graphdef.Pos{}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip changed the graph (-before +after):\n%s\nsource:\n%q\nprinted:\n%s", diff, src, out)
		}
	})
}
