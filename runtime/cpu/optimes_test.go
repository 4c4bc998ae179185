package cpu

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestOpTimes runs a prompt and decode steps with op timing on and checks
// the table: every op kind of the plain graph at one row, the KV write on
// its own, as many calls per step of each layer op as the model has layers,
// and the steps counted.
func TestOpTimes(t *testing.T) {
	model := sharedModel(t, "stories260K.gguf")
	var be *Backend
	e := startEngine(t, model, "plain", func(b *Backend) {
		b.opTimes = &opTimes{ops: map[opTimeKey]*opTimeSum{}, steps: map[int]int{}}
		be = b
	})
	generate(t, e)
	o := be.opTimes
	steps := o.steps[1]
	if steps < 20 {
		t.Fatalf("%d one-row steps recorded, want the 23 decode steps", steps)
	}
	calls := map[string]int{}
	for k, s := range o.ops {
		if k.rows == 1 {
			calls[k.label] = s.calls / steps
		}
	}
	layers := calls["attention"]
	if layers < 1 {
		t.Fatalf("no attention calls at one row: %v", calls)
	}
	for _, label := range []string{"attention.kv_write", "rms_norm", "rope", "swiglu", "add"} {
		if calls[label] == 0 {
			t.Errorf("no %q calls at one row: %v", label, calls)
		}
	}
	if diff := cmp.Diff(layers, calls["attention.kv_write"]); diff != "" {
		t.Errorf("kv writes per step vs attention calls (-want +got):\n%s", diff)
	}

	var out bytes.Buffer
	o.write(&out)
	be.opTimes = nil // the engine is idle: Close need not print the table
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasPrefix(lines[0], "cpu op times (NINFER_CPU_OPTIMES)") || len(lines) != len(o.ops)+1 {
		t.Fatalf("table:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 7 {
			t.Fatalf("short line %q", l)
		}
		if _, err := strconv.Atoi(f[0]); err != nil {
			t.Errorf("rows of %q: %v", l, err)
		}
	}
}
