package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// runInputs records build over float and int inputs named "x" [rows,
// cols], "y" (the same) and the int inputs, runs it on the CPU backend
// and returns the output "out".
func runInputs(t *testing.T, rows, cols int, floats map[string][]float32, ints map[string][]int32, build func(b *tensor.Builder, x, y tensor.Tensor) tensor.Tensor) []float32 {
	t.Helper()
	be := New(exec.Options{Threads: 2})
	t.Cleanup(func() { be.Close() })
	if err := be.Load(&weights.File{}); err != nil {
		t.Fatal(err)
	}
	b := tensor.NewBuilder(func(string) (tensor.DType, int, int, bool) { return 0, 0, 0, false })
	b.Output("out", build(b, b.InputF32("x", rows, cols), b.InputF32("y", rows, cols)))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	x, err := be.Prepare(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Run(context.Background(), &exec.Batch{Floats: floats, Ints: ints}); err != nil {
		t.Fatal(err)
	}
	out, _, _, err := x.Output("out")
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), out...)
}

// TestMRoPEWithEqualComponentsIsRoPE: a text row's three M-RoPE
// components are its position, and it must turn exactly as RoPE turns it
// (so a prompt without images computes what the plain text path does),
// while an image row's h and w components move the pairs of their
// sections.
func TestMRoPEWithEqualComponentsIsRoPE(t *testing.T) {
	const rows, cols = 3, 64 // 2 heads of 32, 8 rotated dims, as tiny-qwen35
	a := tensor.RoPEArgs{HeadDim: 32, Dims: 8, Base: 100, Mode: tensor.RoPENeox, Sections: [4]int{2, 1, 1, 0}}
	xs := make([]float32, rows*cols)
	for i := range xs {
		xs[i] = float32(i%17) - 8.5
	}
	pos := []int32{0, 7, 1234}
	floats := map[string][]float32{"x": xs, "y": xs}
	ints := map[string][]int32{"p": pos, "t": pos, "h": pos, "w": pos}
	rope := runInputs(t, rows, cols, floats, ints, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
		return b.RoPE(x, b.Input("p", rows), a)
	})
	mrope := runInputs(t, rows, cols, floats, ints, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
		return b.MRoPE(x, b.Input("t", rows), b.Input("h", rows), b.Input("w", rows), a)
	})
	if diff := cmp.Diff(rope, mrope); diff != "" {
		t.Errorf("mrope with t = h = w (-rope +mrope):\n%s", diff)
	}
	ints["h"] = []int32{0, 8, 1234}
	moved := runInputs(t, rows, cols, floats, ints, func(b *tensor.Builder, x, _ tensor.Tensor) tensor.Tensor {
		return b.MRoPE(x, b.Input("t", rows), b.Input("h", rows), b.Input("w", rows), a)
	})
	for c := range cols {
		// Row 1's h component moved: pair 1 (elements 1 and 5 of each head) turns differently.
		changed := moved[cols+c] != rope[cols+c]
		if want := c%32 == 1 || c%32 == 5; changed != want {
			t.Errorf("row 1 element %d: changed %v, want %v", c, changed, want)
		}
	}
}

func TestMixRowsTakesMaskedRowsFromY(t *testing.T) {
	x, y := []float32{1, 2, 3, 4, 5, 6}, []float32{-1, -2, -3, -4, -5, -6}
	got := runInputs(t, 3, 2, map[string][]float32{"x": x, "y": y}, map[string][]int32{"m": {0, 1, 0}},
		func(b *tensor.Builder, x, y tensor.Tensor) tensor.Tensor { return b.MixRows(x, y, b.Input("m", 3)) })
	if diff := cmp.Diff([]float32{1, 2, -3, -4, 5, 6}, got); diff != "" {
		t.Errorf("mix_rows (-want +got):\n%s", diff)
	}
}

// TestSelfAttentionMatchesFloat64 checks self_attention against softmax
// attention in float64, at shapes that take the 4-query blocks and the
// single-query rows and leave key and dimension remainders: softmax(q k^T
// scale) v per head over every row.
func TestSelfAttentionMatchesFloat64(t *testing.T) {
	for _, tc := range []struct{ n, heads, hd int }{{36, 2, 16}, {13, 3, 12}, {6, 2, 10}, {1, 1, 8}, {784, 1, 64}} {
		width := tc.heads * tc.hd
		rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.hd)))
		gen := func() []float32 {
			v := make([]float32, tc.n*width)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		q, k, v := gen(), gen(), gen()
		scale := 1 / float32(math.Sqrt(float64(tc.hd)))
		got := runInputs(t, tc.n, width, map[string][]float32{"x": q, "y": k, "v": v}, nil, func(b *tensor.Builder, x, y tensor.Tensor) tensor.Tensor {
			return b.SelfAttention(x, y, b.InputF32("v", tc.n, width), tensor.AttentionArgs{Heads: tc.heads, KVHeads: tc.heads, HeadDim: tc.hd, Scale: scale})
		})
		for h := range tc.heads {
			for i := range tc.n {
				w := make([]float64, tc.n)
				var m, sum float64 = math.Inf(-1), 0
				for j := range tc.n {
					for d := range tc.hd {
						w[j] += float64(q[i*width+h*tc.hd+d]) * float64(k[j*width+h*tc.hd+d])
					}
					w[j] *= float64(scale)
					m = max(m, w[j])
				}
				for j := range w {
					w[j] = math.Exp(w[j] - m)
					sum += w[j]
				}
				for d := range tc.hd {
					var want float64
					for j := range tc.n {
						want += w[j] / sum * float64(v[j*width+h*tc.hd+d])
					}
					if g := got[i*width+h*tc.hd+d]; math.Abs(float64(g)-want) > 1e-5*max(1, math.Abs(want)) {
						t.Fatalf("n %d heads %d hd %d: head %d row %d dim %d: %g, want %g", tc.n, tc.heads, tc.hd, h, i, d, g, want)
					}
				}
			}
		}
	}
}

// TestGELUWithinFp16OfTanhGELU: the table GELU is the tanh GELU in float64
// within its two fp16 roundings (input and output), 0 below -10 and x
// above 10.
func TestGELUWithinFp16OfTanhGELU(t *testing.T) {
	for x := float32(-12); x <= 12; x += 0.001 {
		xf := float64(x)
		want := 0.5 * xf * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(xf+0.044715*xf*xf*xf)))
		switch {
		case x <= -10:
			want = 0
		case x >= 10:
			want = xf
		}
		if got := float64(geluF16(x)); math.Abs(got-want) > 2e-3*max(1, math.Abs(xf)) {
			t.Fatalf("gelu(%g) = %g, want %g", x, got, want)
		}
	}
}

// TestGELUKernels: geluRange at every kernel level gives geluF16 bit for
// bit (NaN for NaN) on the limits ±10 and their neighbours, fp16 ties,
// subnormals, infinities, signed zeros and random values of every scale,
// over lengths that leave tails.
func TestGELUKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	special := []float32{-10, 10, math.Nextafter32(-10, 0), math.Nextafter32(-10, -11), math.Nextafter32(10, 0), math.Nextafter32(10, 11),
		0, float32(math.Copysign(0, -1)), 1e-8, -1e-8, 6e-5, 1 + 1.0/2048, 1 + 3.0/2048, 65504, 65520, -65520, 1e30,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	x := make([]float32, 4099)
	for i := range x {
		switch {
		case i < len(special):
			x[i] = special[i]
		default:
			x[i] = float32(math.Ldexp(r.NormFloat64(), r.IntN(40)-24))
		}
	}
	want := make([]float32, len(x))
	for i, v := range x {
		want[i] = geluF16(v)
	}
	for _, lv := range testLevels() {
		defer setLevel(lv)()
		for _, n := range []int{len(x), 16, 33} {
			got := make([]float32, n)
			geluRange(got, x[:n])
			for i := range got {
				if g, w := got[i], want[i]; math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
					t.Fatalf("%v: gelu(%g) = %g (%#x), want %g (%#x)", lv, x[i], g, math.Float32bits(g), w, math.Float32bits(w))
				}
			}
		}
	}
}
