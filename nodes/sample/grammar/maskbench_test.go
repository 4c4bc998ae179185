package grammar

import (
	"fmt"
	"path/filepath"
	"testing"
)

// TestMaskBench runs MaskBench's instances (maskbench-tests.jsonl, 1,500
// schemas with valid and invalid instances) through every schema the
// compiler accepts: no invalid instance may pass the grammar to its end
// (the grammar admits only what validates), and every valid instance,
// written compactly in its own member order, passes to its end (the
// grammar leaves no valid document out). The full run
// (NINFER_SCHEMABENCH=full) also checks how many schemas compile.
func TestMaskBench(t *testing.T) {
	const wantCompiled = 1450 // of 1,500 (full run)
	schemas := readBench(t, filepath.Join(benchDir(t), "maskbench-tests.jsonl"))
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
				if !ok {
					t.Errorf("%s: valid instance %d is rejected: %s", s.ID, ti, text)
					continue
				}
				validAccepted++
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
}
