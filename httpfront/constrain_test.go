package httpfront

import (
	"testing"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
)

// With a thinking template the constraint starts after the </think>
// block: required when the prompt opened it, optional otherwise.
func TestConstraintAfterThinking(t *testing.T) {
	src := "root ::= \"{\" item* \"}\"\nitem ::= \"root\" | [a-z]\n" // "root" in a string must stay
	for _, tc := range []struct {
		mode Reasoning
		yes  []string
		no   []string
	}{
		{ReasoningOff, []string{"{}", "{root}"}, []string{"<think>x</think>{}"}},
		{ReasoningTagged, []string{"{}", "<think>\nplan <b>\n</think>\n\n{ab}", "{root}"}, []string{"<think>x{}", "x{}"}},
		{ReasoningOpen, []string{"plan</think>\n\n{}", "</think>{root}"}, []string{"{}", "plan{}"}},
	} {
		wrapped := withThinking(src, tc.mode)
		g, err := grammar.Parse(wrapped)
		if err != nil {
			t.Fatalf("mode %d: %v\n%s", tc.mode, err, wrapped)
		}
		for _, s := range tc.yes {
			if st := g.Start().AdvanceBytes([]byte(s)); st == nil || !st.Accepting() {
				t.Errorf("mode %d: %q rejected", tc.mode, s)
			}
		}
		for _, s := range tc.no {
			if st := g.Start().AdvanceBytes([]byte(s)); st != nil && st.Accepting() {
				t.Errorf("mode %d: %q accepted", tc.mode, s)
			}
		}
	}
}
