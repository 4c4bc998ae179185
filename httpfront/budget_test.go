package httpfront

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// pieces is a toy vocabulary for the budget tests: 100 "<think>", 101
// "</think>", 102 "\n\n", 103 "\n", 104 "<th", 105 "ink>", 106 "</th",
// and every other id one letter.
func pieces(ids []int32) string {
	text := map[int32]string{100: "<think>", 101: "</think>", 102: "\n\n", 103: "\n", 104: "<th", 105: "ink>", 106: "</th"}
	var b strings.Builder
	for _, id := range ids {
		if s, ok := text[id]; ok {
			b.WriteString(s)
		} else {
			b.WriteByte('a' + byte(id%26))
		}
	}
	return b.String()
}

// The budget forces "</think>\n\n" (here 101 102) once the reasoning holds
// budget tokens, one token at a time, unless the model closed the block
// itself within the budget (its text holds "</think>", however spelled in
// tokens); a tagged reply's reasoning starts after its own <think>, which
// may follow blanks, as the splitter reads it (thinkOpening).
func TestReasoningBudgetForces(t *testing.T) {
	open := &reasoningBudget{budget: 3, open: true, decode: pieces, closing: []int32{101, 102}}
	tagged := &reasoningBudget{budget: 3, decode: pieces, closing: []int32{101, 102}}
	for _, tc := range []struct {
		name      string
		b         *reasoningBudget
		generated []int32
		want      int32
	}{
		{"nothing yet", open, nil, -1},
		{"within the budget", open, []int32{1, 2}, -1},
		{"at the budget: the close", open, []int32{1, 2, 3}, 101},
		{"then the newlines", open, []int32{1, 2, 3, 101}, 102},
		{"closed: the model goes on", open, []int32{1, 2, 3, 101, 102}, -1},
		{"and on", open, []int32{1, 2, 3, 101, 102, 7, 8}, -1},
		{"the model closed the block itself", open, []int32{1, 101, 2}, -1},
		{"the model closed it at the last budget token", open, []int32{1, 2, 101}, -1},
		{"the model closed it in two tokens", open, []int32{106, 105, 1}, -1},
		{"after its own close, text that starts like the closing", open, []int32{1, 101, 2, 101}, -1},
		{"a tagged reply before its budget", tagged, []int32{100, 1, 2}, -1},
		{"a tagged reply at its budget", tagged, []int32{100, 1, 2, 3}, 101},
		{"a tagged reply opening after a newline", tagged, []int32{103, 100, 1, 2, 3}, 101},
		{"a tagged reply opening after blanks, before its budget", tagged, []int32{103, 103, 100, 1, 2}, -1},
		{"a tagged reply whose <think> takes two tokens", tagged, []int32{104, 105, 1, 2, 3}, 101},
		{"a reply that opens no block", tagged, []int32{5, 1, 2, 3}, -1},
		{"a reply whose <think> follows text", tagged, []int32{5, 100, 1, 2, 3}, -1},
		{"an empty tagged reply", tagged, nil, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.forced(tc.generated); got != tc.want {
				t.Errorf("forced(%v) = %d, want %d", tc.generated, got, tc.want)
			}
		})
	}
}

// The mask leaves the forced token its logit and every other -Inf; with
// nothing forced, or the forced token refused by another mask (a
// grammar), it changes nothing.
func TestReasoningBudgetMask(t *testing.T) {
	b := &reasoningBudget{budget: 1, open: true, decode: pieces, closing: []int32{1, 2}}
	inf := float32(math.Inf(-1))
	for _, tc := range []struct {
		name         string
		generated    []int32
		logits, want []float32
	}{
		{"nothing forced", nil, []float32{1, 2, 3, 4}, []float32{1, 2, 3, 4}},
		{"the close forced", []int32{0}, []float32{1, 2, 3, 4}, []float32{inf, 2, inf, inf}},
		{"a forced token another mask refused", []int32{0, 1}, []float32{1, 2, inf, 4}, []float32{1, 2, inf, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.mask(tc.generated, tc.logits)
			if d := cmp.Diff(tc.want, tc.logits); d != "" {
				t.Errorf("logits (-want +got):\n%s", d)
			}
		})
	}
}

func TestMasksApplyEachInOrder(t *testing.T) {
	if masks(nil, nil) != nil {
		t.Error("masks of none is not nil")
	}
	var order []string
	a := func([]int32, []float32) { order = append(order, "a") }
	c := func([]int32, []float32) { order = append(order, "c") }
	masks(a, nil, c)(nil, nil)
	if d := cmp.Diff([]string{"a", "c"}, order); d != "" {
		t.Errorf("order (-want +got):\n%s", d)
	}
}
