package grammar

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// knownRejected reads testdata/maskbench-rejected.txt: the valid
// instances ("id index") the grammars still reject, and why.
func knownRejected(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join("testdata", "maskbench-rejected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		out[f[0]+" "+f[1]] = true
	}
	return out
}

// TestMaskBench runs MaskBench's instances (maskbench-tests.jsonl, 1,500
// schemas with valid and invalid instances) through every schema the
// compiler accepts: no invalid instance may pass the grammar to its end
// (the grammar admits only what validates), and every valid instance,
// written compactly in its own member order, is accepted but those
// testdata/maskbench-rejected.txt lists (a listed one accepted fails too:
// the list stays exact). The full run (NINFER_SCHEMABENCH=full) also
// checks how many schemas compile.
func TestMaskBench(t *testing.T) {
	const wantCompiled = 1452 // of 1,500 (full run)
	schemas := readBench(t, filepath.Join(benchDir(t), "maskbench-tests.jsonl"))
	known := knownRejected(t)
	var compiled, valid, validAccepted, invalid, invalidRejected int
	every := 8
	if fullBench() {
		every = 1
	}
	for s, g := range sampleGrammars(t, schemas, every, 0) {
		compiled++
		c := g.NewCache()
		for ti, tc := range s.Tests {
			v, err := decodeOrdered(tc.Data)
			if err != nil {
				t.Fatalf("%s: %v", s.ID, err)
			}
			text, err := canonical(v)
			if err != nil {
				t.Fatal(err)
			}
			st := c.Start().AdvanceBytes(text)
			ok := st != nil && st.Accepting()
			if tc.Valid {
				valid++
				key := fmt.Sprintf("%s %d", s.ID, ti)
				switch {
				case ok && known[key]:
					t.Errorf("%s: valid instance %d is accepted now: remove it from testdata/maskbench-rejected.txt", s.ID, ti)
				case ok:
					validAccepted++
				case !known[key]:
					t.Errorf("%s: valid instance %d is rejected: %s", s.ID, ti, text)
				default:
					delete(known, key)
				}
				continue
			}
			invalid++
			if !ok {
				invalidRejected++
				continue
			}
			t.Errorf("%s: an invalid instance passes the grammar: %s", s.ID, text)
		}
	}
	t.Log(fmt.Sprintf("\n%d schemas compiled; valid instances accepted %d/%d (%.3f); invalid rejected %d/%d",
		compiled, validAccepted, valid, float64(validAccepted)/float64(max(valid, 1)), invalidRejected, invalid))
	if fullBench() && compiled < wantCompiled {
		t.Errorf("%d schemas compiled, want %d", compiled, wantCompiled)
	}
	if fullBench() && len(known) > 0 {
		t.Errorf("testdata/maskbench-rejected.txt lists instances no longer rejected (or not valid ones of compiled schemas): %v", slices.Sorted(maps.Keys(known)))
	}
}
