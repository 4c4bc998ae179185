package golden

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A batch-variant reference allows a high-margin position to differ only
// where it names that case and position and only to the argmax it names:
// an unlisted position, or another argmax at a listed one, still fails.
func TestScoreAllowsOnlyTheMeasuredArgmax(t *testing.T) {
	allowed := batchVariantReferences["kq-qwen3-q4_k_m.gguf"].allowed
	const golden = 1197
	tests := []struct {
		name           string
		caseID         string
		pos            int
		argmax         int32
		margin         float64
		allowed, wrong []int // positions
	}{
		{"the measured argmax at code_python:52", "code_python", 52, 1098, 0.817, []int{52}, nil},
		{"the measured argmax at long_story:35", "long_story", 35, 1925, 0.635, []int{35}, nil},
		{"another argmax at code_python:52", "code_python", 52, 1925, 0.817, nil, []int{52}},
		{"the measured argmax at an unlisted position", "code_python", 51, 1098, 0.817, nil, []int{51}},
		{"a listed position of another case", "long_story", 52, 1098, 0.817, nil, []int{52}},
		{"a low-margin difference anywhere", "code_python", 10, 7, ForcedMargin / 2, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 64
			c := &Case{ID: tt.caseID, GeneratedTokens: make([]int32, n), Margins: make([]float64, n)}
			argmax := make([]int32, n)
			for i := range n {
				c.GeneratedTokens[i], argmax[i], c.Margins[i] = golden, golden, 1
			}
			argmax[tt.pos], c.Margins[tt.pos] = tt.argmax, tt.margin
			var r ForcedResult
			r.score(c, argmax, allowed)
			positions := func(ms []Mismatch) []int {
				var out []int
				for _, m := range ms {
					out = append(out, m.Position)
				}
				return out
			}
			if diff := cmp.Diff(tt.allowed, positions(r.Allowed)); diff != "" {
				t.Errorf("allowed positions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wrong, positions(r.Mismatches)); diff != "" {
				t.Errorf("mismatched positions (-want +got):\n%s", diff)
			}
			if r.Positions != n || r.Agree != n-1 {
				t.Errorf("%d/%d positions agree, want %d/%d", r.Agree, r.Positions, n-1, n)
			}
		})
	}
}
