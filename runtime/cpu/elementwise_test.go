package cpu

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNormGroups checks rmsNormGroups against rmsNorm bit for bit,
// group by group, 16 and 8 at a time, for the group widths of a 0.6B
// shape's norms (q/k heads, rows) and a few more, with magnitudes spread
// widely enough that each group's float64 sum rounds, a zero group and dst
// aliasing x.
func TestRMSNormGroups(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(23, 24))
	for _, c := range [][2]int{{16, 16}, {16, 48}, {16, 128}, {16, 1024}, {16, 3072}, {8, 128}, {8, 1024}} {
		n, group := c[0], c[1]
		for _, inPlace := range []bool{false, true} {
			x, w := make([]float32, n*group), make([]float32, group)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64())
			}
			clear(x[5*group : 6*group])
			want := make([]float32, len(x))
			for g := range n {
				rmsNorm(want[g*group:(g+1)*group], x[g*group:(g+1)*group], w, 1e-6)
			}
			got := make([]float32, len(x))
			if inPlace {
				got = x
			}
			rmsNormGroups(got, x, w, n, group, 1e-6)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%d groups of %d in place %v: out[%d] = %v, want %v", n, group, inPlace, i, got[i], want[i])
				}
			}
		}
	}
}

// TestAddV checks addV against the Go loop bit for bit on lengths around
// its 64s and 16s, NaNs and infinities included, writing nothing past n.
func TestAddV(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(25, 26))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), math.MaxFloat32}
	for n := 0; n <= 200; n++ {
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
			y[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
			if rng.IntN(10) == 0 {
				y[i] = special[rng.IntN(len(special))]
			}
		}
		got := make([]float32, n+16)
		for i := range got {
			got[i] = 7
		}
		if n > 0 {
			addV(&got[0], &x[0], &y[0], n)
		}
		for i := range got {
			want := float32(7)
			if i < n {
				want = x[i] + y[i]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d: out[%d] = %v, want %v", n, i, got[i], want)
			}
		}
	}
}
