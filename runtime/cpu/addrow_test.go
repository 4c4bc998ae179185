package cpu

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

func TestAddRowAddsTheRowToEveryRow(t *testing.T) {
	const T, d = 3, 4
	x := []float32{1, 2, 3, 4, 10, 20, 30, 40, -1, -2, -3, -4}
	row := []float32{0.5, -1, 2, 0}
	p := &program{f32: [][]float32{x, row, make([]float32, T*d)}}
	op := tensor.Op{Kind: tensor.OpAddRow, Args: []tensor.Tensor{{ID: 0, Shape: [2]int{T, d}}, {ID: 1, Shape: [2]int{1, d}}},
		Out: tensor.Tensor{ID: 2, Shape: [2]int{T, d}}}
	p.addRow(p.f32[2], op)
	want := []float32{1.5, 1, 5, 4, 10.5, 19, 32, 40, -0.5, -3, -1, -4}
	if diff := cmp.Diff(want, p.f32[2]); diff != "" {
		t.Errorf("add_row (-want +got):\n%s", diff)
	}
}

// TestRoPEFactors checks that frequency factors divide each pair's angle,
// and that factors of 1 change nothing.
func TestRoPEFactors(t *testing.T) {
	const hd, pos = 8, 5
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	factors := []float32{1, 2, 8, 32}
	for _, mode := range []tensor.RoPEMode{tensor.RoPENorm, tensor.RoPENeox} {
		a := tensor.RoPEArgs{HeadDim: hd, Dims: hd, Base: 10000, Mode: mode}
		trig := make([]float32, hd)
		plain := append([]float32(nil), x...)
		ropeRow(plain, pos, a, nil, trig[:hd/2], trig[hd/2:])
		ones := append([]float32(nil), x...)
		ropeRow(ones, pos, a, []float32{1, 1, 1, 1}, trig[:hd/2], trig[hd/2:])
		if diff := cmp.Diff(plain, ones); diff != "" {
			t.Errorf("mode %d: factors of 1 change the result (-none +ones):\n%s", mode, diff)
		}
		got := append([]float32(nil), x...)
		ropeRow(got, pos, a, factors, trig[:hd/2], trig[hd/2:])
		want := make([]float32, hd)
		for i := 0; i < hd/2; i++ {
			th := pos * math.Pow(10000, -2*float64(i)/hd) / float64(factors[i])
			i0, i1 := 2*i, 2*i+1
			if mode == tensor.RoPENeox {
				i0, i1 = i, i+hd/2
			}
			want[i0] = float32(float64(x[i0])*math.Cos(th) - float64(x[i1])*math.Sin(th))
			want[i1] = float32(float64(x[i0])*math.Sin(th) + float64(x[i1])*math.Cos(th))
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-5 })); diff != "" {
			t.Errorf("mode %d (-want +got):\n%s", mode, diff)
		}
	}
}
