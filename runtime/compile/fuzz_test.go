package compile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer-go/graphs"
)

// FuzzCompile compiles arbitrary graph sources (seeded with the testdata
// and the embedded graphs, draft loops among them) against the test
// registry: it never panics, and a graph it accepts has a plan whose text
// hashes.
func FuzzCompile(f *testing.F) {
	for _, pat := range []string{"*.yaml", "errors/*.yaml"} {
		files, _ := filepath.Glob(filepath.Join("testdata", pat))
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	for _, name := range graphs.Names() {
		if _, src, err := graphs.Source(name); err == nil {
			f.Add(src)
		}
	}
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Source("fuzz.yaml", src, reg, nil)
		if err != nil {
			if p != nil {
				t.Fatal("a plan came back with errors")
			}
			return
		}
		if p.Hash() == "" || p.String() == "" {
			t.Fatal("an accepted graph has no plan text")
		}
	})
}
