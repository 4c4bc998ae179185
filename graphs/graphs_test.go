package graphs

import (
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
)

func TestNamesIncludePlain(t *testing.T) {
	if !slices.Contains(Names(), "plain") {
		t.Errorf("Names() = %q, want it to include plain", Names())
	}
}

func TestSource(t *testing.T) {
	for _, name := range []string{"plain", "plain.yaml"} {
		file, src, err := Source(name)
		if err != nil {
			t.Fatalf("Source(%q): %v", name, err)
		}
		if file != "graphs/plain.yaml" || !strings.Contains(string(src), "graph: plain") {
			t.Errorf("Source(%q) = %q, %q", name, file, src)
		}
	}
	for _, name := range []string{"nope", "../go.mod", ""} {
		if _, _, err := Source(name); err == nil {
			t.Errorf("Source(%q) succeeded", name)
		}
	}
}

// TestEmbeddedGraphsParse checks every embedded graph against the syntax;
// cmd/ninfer's tests compile them against the real node registry.
func TestEmbeddedGraphsParse(t *testing.T) {
	for _, name := range Names() {
		file, src, err := Source(name)
		if err != nil {
			t.Fatalf("Source(%q): %v", name, err)
		}
		g, err := graphdef.Parse(file, src)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if g.Name != name {
			t.Errorf("%s: graph name %q differs from the file name", file, g.Name)
		}
	}
}
