package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// repackedQ4K returns a copy of w (Q4_K) in weights.LayoutQ4Kx16, as
// Backend.Load lays it out at the AVX-512 level.
func repackedQ4K(t testing.TB, w *weights.Tensor) *weights.Tensor {
	c := &weights.Tensor{Name: w.Name, Shape: slices.Clone(w.Shape), DType: w.DType, Data: slices.Clone(w.Data)}
	if !groupableQ4K(c) {
		t.Fatalf("%v %v: not groupable", c.DType, c.Shape)
	}
	p := newPool(2)
	defer p.close()
	scratch := [][]byte{make([]byte, q8GroupRows*c.RowBytes()), make([]byte, q8GroupRows*c.RowBytes())}
	repackQ4K(p, c, scratch)
	return c
}

// TestQ4KGroupsRepack checks that repacking keeps every row: fileRow gives
// back the file's bytes, get_rows the file's values, and the accessors of
// the file's layout refuse the tensor.
func TestQ4KGroupsRepack(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct{ n, k int }{{16, 256}, {48, 512}, {32, 1024}} {
		w := randWeight(r, tensor.Q4_K, c.n, c.k)
		g := repackedQ4K(t, w)
		if bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%v: repacking changed nothing", c)
		}
		row := make([]byte, w.RowBytes())
		for i := range c.n {
			if got := fileRow(g, i, row); !bytes.Equal(got, w.Row(i)) {
				t.Fatalf("%v: row %d differs after repacking", c, i)
			}
		}
		if _, err := g.Float32s(); err == nil {
			t.Errorf("%v: Float32s of a repacked tensor: no error", c)
		}
		ids := []int32{int32(c.n - 1), 0, 5}
		p := &program{b: &Backend{}, w: []*weights.Tensor{g, nil}, i32: [][]int32{nil, ids}}
		op := tensor.Op{Kind: tensor.OpGetRows, Args: []tensor.Tensor{{ID: 0}, {ID: 1}}, Out: tensor.Tensor{ID: 2, Shape: [2]int{len(ids), c.k}}}
		got := make([]float32, len(ids)*c.k)
		if err := p.getRows(got, op); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(ids)*c.k)
		for j, id := range ids {
			if err := tensor.DequantizeRow(tensor.Q4_K, w.Row(int(id)), want[j*c.k:(j+1)*c.k]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: get_rows of the repacked table differs from the file's rows", c)
		}
	}
}

// checkQ4KGroups checks the matmul of x [T, K] by the LayoutQ4Kx16 copy of
// w at every level (token tiles, workers) bit for bit against dotQ4K of
// the file's rows: the single-token order of every row of every token.
func checkQ4KGroups(t *testing.T, name string, w *weights.Tensor, x []float32, T int) {
	t.Helper()
	k, n := w.Shape[0], w.Rows()
	g := repackedQ4K(t, w)
	var a actQuant
	a.resize(tensor.Q8_K, T, k)
	a.quantizeRows(x, 0, T)
	want := make([]float32, T*n)
	for tok := range T {
		for i := range n {
			want[tok*n+i] = dotQ4K(w.Row(i), a.row(tok))
		}
	}
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		for _, threads := range []int{1, 3} {
			got := runMatMul(g, x, T, threads, lv != levelRef)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					restore()
					t.Fatalf("%s %v T=%d threads=%d: out[%d] = %g (%#x), dotQ4K %g (%#x)",
						name, lv, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
		restore()
	}
}

// TestQ4KGroupsMatMulBitExact checks the LayoutQ4Kx16 matmul on random
// weights for token counts around the kernel's tile (q4KTokenTile).
func TestQ4KGroupsMatMulBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, c := range []struct{ n, k int }{{16, 256}, {48, 512}, {32, 1024}, {16, 3072}} {
		w := randWeight(r, tensor.Q4_K, c.n, c.k)
		for _, T := range []int{1, 2, 3, 4, 5, 8, 13, 63, 64, 65, 130} {
			if c.k*T > 1024*65 {
				continue
			}
			checkQ4KGroups(t, fmt.Sprint(c), w, randActivations(r, T, c.k), T)
		}
	}
}

// TestQ4KGroupsExtremes checks the LayoutQ4Kx16 kernel where an int32 sum
// could overflow: every quant 15, the largest scales and mins, against
// activations that all quantize to +127 or -127, or alternate.
func TestQ4KGroupsExtremes(t *testing.T) {
	const K, N = 512, 32
	for _, quants := range []byte{0xff, 0x00, 0xaa} {
		for _, scales := range []byte{0xff, 0x80, 0x7f, 0x3f} {
			w := extremeWeight(tensor.Q4_K, N, K, quants, scales, [2]int{4, 16})
			for xi, xf := range []func(i int) float32{
				func(int) float32 { return 1 },
				func(int) float32 { return -1 },
				func(i int) float32 { return float32(1 - 2*(i%2)) },
				func(i int) float32 { return float32(1 - 2*(i/32%2)) },
			} {
				const T = 5
				x := make([]float32, T*K)
				for i := range x {
					x[i] = xf(i % K)
				}
				checkQ4KGroups(t, fmt.Sprintf("quants %#x scales %#x x%d", quants, scales, xi), w, x, T)
			}
		}
	}
}

// TestQ4KGroupsTokenAlone checks at every level that each token of a batch
// alone gets bit for bit its result in the batch from a LayoutQ4Kx16
// weight.
func TestQ4KGroupsTokenAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	const k, n = 512, 32
	g := repackedQ4K(t, randWeight(r, tensor.Q4_K, n, k))
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		for _, T := range []int{3, 8, 70} {
			x := randActivations(r, T, k)
			all := runMatMul(g, x, T, 2, lv != levelRef)
			for tok := range T {
				alone := runMatMul(g, x[tok*k:(tok+1)*k], 1, 2, lv != levelRef)
				if !slices.Equal(alone, all[tok*n:(tok+1)*n]) {
					restore()
					t.Fatalf("%v T=%d: token %d alone differs from the batch", lv, T, tok)
				}
			}
		}
		restore()
	}
}
