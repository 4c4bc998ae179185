package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

func dot64(x, y []float32) float64 {
	var s float64
	for i := range x {
		s += float64(x[i]) * float64(y[i])
	}
	return s
}

func TestDotF32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 64, 1000} {
		x, y := randVec(r, n), randVec(r, n)
		got, want := float64(dotF32(x, y)), dot64(x, y)
		if math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("n=%d: dotF32 = %g, float64 reference %g", n, got, want)
		}
	}
}

func TestQuantizeQ8(t *testing.T) {
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3] = 2.54, -1.27, 0.005, 0.015 // scale 0.02: 127, -63.5 (even -> -64), 0.25 -> 0, 0.75 -> 1
	var q q8Blocks
	quantizeQ8(x, &q)
	if got, want := q.d[0], tensor.F16ToF32(tensor.F32ToF16(2.54/127)); got != want {
		t.Errorf("scale = %g, want %g", got, want)
	}
	if diff := cmp.Diff([]int8{127, -64, 0, 1}, q.qs[:4]); diff != "" {
		t.Errorf("quants (-want +got):\n%s", diff)
	}
	zero := make([]float32, 32)
	quantizeQ8(zero, &q)
	if q.d[0] != 0 || q.qs[5] != 0 {
		t.Errorf("zero block: d=%g q=%v", q.d[0], q.qs)
	}
}

// q8Row quantizes w into a Q8_0 weight row (the GGUF layout).
func q8Row(w []float32) []byte {
	var q q8Blocks
	quantizeQ8(w, &q)
	row := make([]byte, len(w)/32*34)
	for b := range q.d {
		binary.LittleEndian.PutUint16(row[b*34:], tensor.F32ToF16(q.d[b]))
		for i := 0; i < 32; i++ {
			row[b*34+2+i] = byte(q.qs[b*32+i])
		}
	}
	return row
}

func TestDotQ8MatchesDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{32, 64, 1024} {
		w, x := randVec(r, n), randVec(r, n)
		row := q8Row(w)
		wd := make([]float32, n)
		if err := tensor.DequantizeRow(tensor.Q8_0, row, wd); err != nil {
			t.Fatal(err)
		}
		var xq q8Blocks
		quantizeQ8(x, &xq)
		xd := make([]float32, n)
		for i := range xd {
			xd[i] = float32(xq.qs[i]) * xq.d[i/32]
		}
		got, want := float64(dotQ8(row, &xq)), dot64(wd, xd)
		if math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
			t.Errorf("n=%d: dotQ8 = %g, dequantized reference %g", n, got, want)
		}
	}
}

func TestDotQ4MatchesDequantized(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	n := 64
	row := make([]byte, n/32*18)
	for b := 0; b < n/32; b++ {
		binary.LittleEndian.PutUint16(row[b*18:], tensor.F32ToF16(0.125))
		for i := 2; i < 18; i++ {
			row[b*18+i] = byte(r.IntN(256))
		}
	}
	wd := make([]float32, n)
	if err := tensor.DequantizeRow(tensor.Q4_0, row, wd); err != nil {
		t.Fatal(err)
	}
	x := randVec(r, n)
	var xq q8Blocks
	quantizeQ8(x, &xq)
	xd := make([]float32, n)
	for i := range xd {
		xd[i] = float32(xq.qs[i]) * xq.d[i/32]
	}
	if got, want := float64(dotQ4(row, &xq)), dot64(wd, xd); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
		t.Errorf("dotQ4 = %g, dequantized reference %g", got, want)
	}
}

func TestRoPE(t *testing.T) {
	const hd = 8
	x := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	for _, mode := range []tensor.RoPEMode{tensor.RoPENorm, tensor.RoPENeox} {
		got := append([]float32(nil), x...)
		a := tensor.RoPEArgs{HeadDim: hd, Dims: hd, Base: 10000, Mode: mode}
		trig := make([]float32, hd)
		ropeRow(got, 3, a, nil, trig[:hd/2], trig[hd/2:])
		want := make([]float32, hd)
		for i := 0; i < hd/2; i++ {
			th := 3 * math.Pow(10000, -2*float64(i)/hd)
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

func TestRMSNorm(t *testing.T) {
	x := []float32{3, 4}
	w := []float32{1, 2}
	got := make([]float32, 2)
	rmsNorm(got, x, w, 0)
	s := math.Sqrt((9 + 16) / 2.0)
	want := []float32{float32(3 / s), float32(2 * 4 / s)}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float32) bool { return math.Abs(float64(a-b)) < 1e-6 })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestPoolCoversRangeOnce(t *testing.T) {
	p := newPool(3)
	defer p.close()
	for _, n := range []int{1, 5, 16, 17, 100} {
		seen := make([]int, n)
		p.parallel(n, 4, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i]++
			}
		})
		for i, c := range seen {
			if c != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, c)
			}
		}
	}
}

// ropeRow rotates the heads of one row in place as ggml does: by the
// angles of ropeAngles, the rotation x0' = fma(x0, cos, -(x1*sin)),
// x1' = fma(x0, sin, x1*cos), the contraction GCC makes of ggml's
// rotate_pairs. cos and sin are scratch of Dims/2.
func ropeRow(x []float32, pos int32, a tensor.RoPEArgs, factors, cos, sin []float32) {
	ropeAngles(pos, a, factors, cos, sin)
	rotateHeads(x, a, cos, sin)
}
