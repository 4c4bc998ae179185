// Package graphs holds the decoding graphs that ship inside the ninfer binary.
// The files are YAML only (syntax: README.md); this package just embeds them.
package graphs

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// FS holds every *.yaml graph in this directory.
//
//go:embed *.yaml
var FS embed.FS

// Names returns the names of the embedded graphs ("plain", ...): their file
// names without ".yaml", sorted.
func Names() []string {
	entries, err := fs.ReadDir(FS, ".")
	if err != nil {
		panic(fmt.Sprintf("graphs: read embedded directory: %v", err))
	}
	var names []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// Source returns the embedded graph called name ("plain" or "plain.yaml"):
// the file name to use in positions ("graphs/plain.yaml", its path in the
// repository) and its contents. It fails, suggesting the known names, when
// there is no such graph.
func Source(name string) (file string, src []byte, err error) {
	base := strings.TrimSuffix(name, ".yaml")
	if !slices.Contains(Names(), base) {
		return "", nil, fmt.Errorf("no embedded graph %q (have %s)", name, strings.Join(Names(), ", "))
	}
	src, err = FS.ReadFile(base + ".yaml")
	if err != nil {
		return "", nil, err
	}
	return "graphs/" + base + ".yaml", src, nil
}
