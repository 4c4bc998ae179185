package vec

import (
	"math"
	"math/rand/v2"
	"testing"
)

// logSumExpRef is LogSumExp in float64 with math.Exp throughout.
func logSumExpRef(row []float32) float64 {
	m := math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	if math.IsInf(m, -1) {
		return m
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - m)
	}
	return m + math.Log(sum)
}

func TestLogSumExp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rows := map[string][]float32{
		"empty":   {},
		"one":     {3.5},
		"tail":    make([]float32, 37),
		"vocab":   make([]float32, 151936),
		"spread":  make([]float32, 4099),
		"peaked":  make([]float32, 32000),
		"masked":  make([]float32, 1000),
		"allinf":  {float32(math.Inf(-1)), float32(math.Inf(-1))},
		"huge":    make([]float32, 64),
		"uniform": make([]float32, 512),
	}
	for i := range rows["tail"] {
		rows["tail"][i] = float32(r.NormFloat64())
	}
	for i := range rows["vocab"] {
		rows["vocab"][i] = float32(r.NormFloat64() * 3)
	}
	for i := range rows["spread"] {
		rows["spread"][i] = float32(r.NormFloat64() * 60) // many entries past the -87 clamp
	}
	for i := range rows["peaked"] {
		rows["peaked"][i] = float32(r.NormFloat64())
	}
	rows["peaked"][777] = 40
	for i := range rows["masked"] {
		rows["masked"][i] = float32(math.Inf(-1)) // a grammar's mask
		if i%97 == 0 {
			rows["masked"][i] = float32(r.NormFloat64())
		}
	}
	for i := range rows["huge"] {
		rows["huge"][i] = 1e30 + float32(i)*1e24
	}
	for i := range rows["uniform"] {
		rows["uniform"][i] = -2.5
	}
	for name, row := range rows {
		got, want := LogSumExp(row), logSumExpRef(row)
		if math.IsInf(want, -1) {
			if !math.IsInf(float64(got), -1) {
				t.Errorf("%s: LogSumExp = %g, want -Inf", name, got)
			}
			continue
		}
		if d := math.Abs(float64(got) - want); d > 1e-6*max(1, math.Abs(want)) {
			t.Errorf("%s: LogSumExp = %.9g, reference %.9g (off by %g)", name, got, want, d)
		}
		wantMax := float32(math.Inf(-1))
		for _, v := range row {
			wantMax = max(wantMax, v)
		}
		if m := Max(row); m != wantMax {
			t.Errorf("%s: Max = %g, want %g", name, m, wantMax)
		}
	}
}

// TestSumExpMatchesDefinition checks the SIMD sum of exponentials lane by
// lane against sumExpGo over every offset of a 16-lane window, so that
// each lane position sees values across the reduction's whole range.
func TestSumExpMatchesDefinition(t *testing.T) {
	row := make([]float32, 16*64)
	for i := range row {
		row[i] = -float32(i) * 0.09 // 0 down to -92: through the clamp
	}
	for off := range 16 {
		x := row[off : off+16*60]
		done, got := sumExp(x, 0.25)
		if done == 0 {
			t.Skip("no SIMD kernels on this machine")
		}
		_, want := sumExpGo(x[:done], 0.25)
		if math.Abs(got-want) > 1e-7*want {
			t.Errorf("offset %d: sum %.12g, definition %.12g", off, got, want)
		}
	}
}

func BenchmarkLogSumExp(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	row := make([]float32, 151936)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3)
	}
	b.Run("vec", func(b *testing.B) {
		for range b.N {
			LogSumExp(row)
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for range b.N {
			logSumExpRef(row)
		}
	})
}
