package cpu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestKGroupsAsmGenerated checks that each K-quant group kernel is what its
// generator (tools/kgroupsasm) writes, byte for byte: the .s files are
// edited through the generators only.
func TestKGroupsAsmGenerated(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run tools/kgroupsasm")
	}
	for _, c := range []struct{ generator, asm string }{
		{"q2k", "q2kgroups_amd64.s"}, {"q3k", "q3kgroups_amd64.s"}, {"q4k", "q4kgroups_amd64.s"},
		{"q5k", "q5kgroups_amd64.s"}, {"q6k", "q6kgroups_amd64.s"}, {"iq4xs", "iq4xsgroups_amd64.s"},
		{"q2k_avx2", "q2kgroups_avx2_amd64.s"}, {"q4k_avx2", "q4kgroups_avx2_amd64.s"},
		{"q41", "q41groups_amd64.s"}, {"q3k_narrow", "q3kgroups_narrow_amd64.s"},
	} {
		out := filepath.Join(t.TempDir(), c.asm)
		cmd := exec.Command(python, "-B", filepath.Join("..", "..", "tools", "kgroupsasm", c.generator+".py"), out) // -B: no __pycache__ beside the generators
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s.py: %v\n%s", c.generator, err, msg)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(c.asm)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what tools/kgroupsasm/%s.py writes: run it", c.asm, c.generator)
		}
	}
}
