package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// A draft loop is named by what its body runs: the target's own forward
// (self), a draft model's (its alias), or a head (its op's name).
func TestLoopBackendNames(t *testing.T) {
	got := map[string]string{}
	for _, g := range []string{"self", "draft", "mtp"} {
		p, err := loadPlan(g, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range p.Steps {
			if l, ok := st.Node.(*plan.Loop); ok {
				got[g] = loopBackend(l)
			}
		}
	}
	if diff := cmp.Diff(map[string]string{"self": "self", "draft": "draft", "mtp": "mtp"}, got); diff != "" {
		t.Errorf("loop backends (-want +got):\n%s", diff)
	}
}
