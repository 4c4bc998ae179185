package cuda

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ptxEntry is a kernel of cuda/ninfer.ptx: its parameter types (".u64",
// ".u32", ".f32") and its __launch_bounds__ (0 without).
type ptxEntry struct {
	params    []string
	maxThread int
}

var ptxOnce = sync.OnceValues(func() (map[string]ptxEntry, error) {
	f, err := os.Open("ninfer.ptx")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries := map[string]ptxEntry{}
	var name string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, ".visible .entry "):
			name = strings.TrimSuffix(strings.TrimPrefix(line, ".visible .entry "), "(")
			entries[name] = ptxEntry{}
		case name != "" && strings.HasPrefix(line, ".param "):
			e := entries[name]
			e.params = append(e.params, strings.Fields(line)[1])
			entries[name] = e
		case name != "" && strings.HasPrefix(line, ".maxntid "):
			e := entries[name]
			n := 1
			for _, f := range strings.Split(strings.TrimPrefix(line, ".maxntid "), ",") {
				v, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return nil, err
				}
				n *= v
			}
			e.maxThread = n
			entries[name] = e
		case line == "{":
			name = ""
		}
	}
	return entries, sc.Err()
})

// ptxEntries returns the kernels of cuda/ninfer.ptx by name.
func ptxEntries(t *testing.T) map[string]ptxEntry {
	t.Helper()
	e, err := ptxOnce()
	if err != nil {
		t.Fatalf("read ninfer.ptx: %v", err)
	}
	return e
}

// checkLaunchAgainstPTX reports a launch the driver would refuse or
// misread: a kernel the module lacks, a parameter count or size that differs
// from the kernel's, or more threads than its __launch_bounds__.
func checkLaunchAgainstPTX(t *testing.T, l launchSpec, kinds string) {
	t.Helper()
	e, ok := ptxEntries(t)[l.kernel]
	if !ok {
		t.Fatalf("%s: no such kernel in ninfer.ptx", l.kernel)
	}
	if len(e.params) != len(l.args) {
		t.Fatalf("%s: launched with %d parameters, the kernel takes %d", l.kernel, len(l.args), len(e.params))
	}
	if kinds != "" {
		for i, p := range e.params {
			if want := ptxParamType(kinds[i]); p != want {
				t.Fatalf("%s: parameter %d is %s in ninfer.ptx but %s (%c) in the emulated kernel", l.kernel, i, p, want, kinds[i])
			}
		}
	}
	if e.maxThread > 0 && l.dims.threads() > e.maxThread {
		t.Fatalf("%s: %d threads per block, over its __launch_bounds__(%d)", l.kernel, l.dims.threads(), e.maxThread)
	}
}

// ptxParamType is the PTX type of an emulator signature letter.
func ptxParamType(kind byte) string {
	switch kind {
	case 'p', 'l':
		return ".u64"
	case 'i':
		return ".u32"
	case 'f':
		return ".f32"
	}
	return "?"
}

func TestKernelNamesMatchPTX(t *testing.T) {
	names, err := kernelNames()
	if err != nil {
		t.Fatal(err)
	}
	var ptx []string
	for name := range ptxEntries(t) {
		ptx = append(ptx, name)
	}
	slices.Sort(names)
	slices.Sort(ptx)
	if !slices.Equal(names, ptx) {
		t.Errorf("kernels the launches use: %v\nkernels of ninfer.ptx: %v", names, ptx)
	}
}
