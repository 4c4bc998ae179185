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
	for _, name := range []string{"q2k", "q3k", "q4k", "q5k", "q6k"} {
		out := filepath.Join(t.TempDir(), name+".s")
		cmd := exec.Command(python, "-B", filepath.Join("..", "..", "tools", "kgroupsasm", name+".py"), out) // -B: no __pycache__ beside the generators
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s.py: %v\n%s", name, err, msg)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(name + "groups_amd64.s")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%sgroups_amd64.s differs from what tools/kgroupsasm/%s.py writes: run it", name, name)
		}
	}
}
