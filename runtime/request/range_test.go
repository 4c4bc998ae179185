package request

import (
	"math"
	"testing"
)

func TestRangeContainsItsEndsAsDocumented(t *testing.T) {
	for _, tt := range []struct {
		r    Range
		v    float64
		want bool
	}{
		{Temperature, 0, true},
		{Temperature, 2, true},
		{Temperature, 2.01, false},
		{Temperature, -0.1, false},
		{Temperature, math.NaN(), false},
		{TopP, 0, false},
		{TopP, 1, true},
		{MinP, 0, true},
		{PresencePenalty, -2, true},
		{RepetitionPenalty, 0, false},
		{RepetitionPenalty, 10, true},
	} {
		if got := tt.r.Contains(tt.v); got != tt.want {
			t.Errorf("%s %s contains %g = %v, want %v", tt.r.Name, tt.r, tt.v, got, tt.want)
		}
	}
}

func TestRangeString(t *testing.T) {
	for r, want := range map[Range]string{Temperature: "[0, 2]", TopP: "(0, 1]", PresencePenalty: "[-2, 2]"} {
		if got := r.String(); got != want {
			t.Errorf("%s: %q, want %q", r.Name, got, want)
		}
	}
}
