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

// repackedK returns a copy of w (a dtype of kGroupOf) in its group layout, as
// Backend.Load lays it out at the AVX-512 level.
func repackedK(t testing.TB, w *weights.Tensor) *weights.Tensor {
	return repackedBy(t, w, groupableK, repackK)
}

// kGroupDTypes are the dtypes with a group layout (kGroupOf).
var kGroupDTypes = []tensor.DType{tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.IQ4_XS}

// TestKGroupsRepack checks that repacking keeps every row: fileRow gives
// back the file's bytes, get_rows the file's values, and the accessors of
// the file's layout refuse the tensor.
func TestKGroupsRepack(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range kGroupDTypes {
		for _, c := range []struct{ n, k int }{{16, 256}, {48, 512}, {32, 1024}} {
			testKGroupsRepack(t, dt, randWeight(r, dt, c.n, c.k))
		}
	}
}

func testKGroupsRepack(t *testing.T, dt tensor.DType, w *weights.Tensor) {
	c := struct{ n, k int }{w.Rows(), w.RowLen()}
	g := repackedK(t, w)
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
		if err := tensor.DequantizeRow(dt, w.Row(int(id)), want[j*c.k:(j+1)*c.k]); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%v: get_rows of the repacked table differs from the file's rows", c)
	}
}

// checkKGroups checks the matmul of x [T, K] by the grouped copy of w at
// every level (token tiles, workers) bit for bit against the reference dot
// of the file's rows (dotQ4K: the single-token order; dotQ6K).
func checkKGroups(t *testing.T, name string, w *weights.Tensor, x []float32, T int) {
	t.Helper()
	k, n := w.Shape[0], w.Rows()
	g := repackedK(t, w)
	var a actQuant
	a.resize(tensor.Q8_K, T, k)
	a.quantizeRows(x, 0, T)
	want := make([]float32, T*n)
	for tok := range T {
		for i := range n {
			want[tok*n+i] = kernelOf(w.DType).dot(w.Row(i), a.row(tok))
		}
	}
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		for _, threads := range []int{1, 3} {
			got := runMatMul(g, x, T, threads, lv != levelRef)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					restore()
					t.Fatalf("%s %v T=%d threads=%d: out[%d] = %g (%#x), reference %g (%#x)",
						name, lv, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
		restore()
	}
}

// TestKGroupsMatMulBitExact checks the grouped matmuls on random weights
// for token counts around the kernels' tiles (kGroup.tile).
func TestKGroupsMatMulBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, dt := range kGroupDTypes {
		for _, c := range []struct{ n, k int }{{16, 256}, {48, 512}, {32, 1024}, {16, 3072}} {
			w := randWeight(r, dt, c.n, c.k)
			for _, T := range []int{1, 2, 3, 4, 5, 8, 13, 31, 32, 33, 63, 64, 65, 130} {
				if c.k*T > 1024*65 {
					continue
				}
				checkKGroups(t, fmt.Sprint(dt, c), w, randActivations(r, T, c.k), T)
			}
		}
	}
}

// TestKGroupsExtremes checks the grouped kernels where an int32 sum could
// overflow: every quant at its largest, the largest scales and mins (Q6_K:
// -128, 127), against activations that all quantize to +127 or -127, or
// alternate.
func TestKGroupsExtremes(t *testing.T) {
	const K, N = 512, 32
	scaleOff := map[tensor.DType][2]int{tensor.Q2_K: {0, 16}, tensor.Q3_K: {96, 108}, tensor.Q4_K: {4, 16}, tensor.Q5_K: {4, 16}, tensor.Q6_K: {192, 208}, tensor.IQ4_XS: {2, 8}}
	for _, dt := range kGroupDTypes {
		testKGroupsExtremes(t, dt, K, N, scaleOff[dt])
	}
}

func testKGroupsExtremes(t *testing.T, dt tensor.DType, K, N int, so [2]int) {
	for _, quants := range []byte{0xff, 0x00, 0xaa} {
		for _, scales := range []byte{0xff, 0x80, 0x7f, 0x3f} {
			w := extremeWeight(dt, N, K, quants, scales, so)
			for xi, xf := range []func(i int) float32{
				func(int) float32 { return 1 },
				func(int) float32 { return -1 },
				func(i int) float32 { return float32(1 - 2*(i%2)) },
				func(i int) float32 { return float32(1 - 2*(i/32%2)) },
			} {
				for _, T := range []int{5, 9} { // Q3_K: its narrow and wide kernels
					if T > 5 && dt != tensor.Q3_K {
						continue
					}
					x := make([]float32, T*K)
					for i := range x {
						x[i] = xf(i % K)
					}
					checkKGroups(t, fmt.Sprintf("%v quants %#x scales %#x x%d T=%d", dt, quants, scales, xi, T), w, x, T)
				}
			}
		}
	}
}

// TestKGroupsTokenAlone checks at every level that each token of a batch
// alone gets bit for bit its result in the batch from a grouped weight.
func TestKGroupsTokenAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	const k, n = 512, 32
	for _, dt := range kGroupDTypes {
		testKGroupsTokenAlone(t, r, repackedK(t, randWeight(r, dt, n, k)), k, n)
	}
}

func testKGroupsTokenAlone(t *testing.T, r *rand.Rand, g *weights.Tensor, k, n int) {
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		for _, T := range []int{3, 8, 70} {
			x := randActivations(r, T, k)
			all := runMatMul(g, x, T, 2, lv != levelRef)
			for tok := range T {
				alone := runMatMul(g, x[tok*k:(tok+1)*k], 1, 2, lv != levelRef)
				if !slices.Equal(alone, all[tok*n:(tok+1)*n]) {
					restore()
					t.Fatalf("%v %v T=%d: token %d alone differs from the batch", g.DType, lv, T, tok)
				}
			}
		}
		restore()
	}
}

// TestKGroupsMoE checks the fast MoE on grouped expert weights (3-D
// tensors, each expert's rows in groups) bit for bit against the reference
// MoE, over steps of 1, 5 and 37 rows.
func TestKGroupsMoE(t *testing.T) {
	if level != levelAVX512 {
		t.Skip("the K-quant groups are read by the AVX-512 kernels")
	}
	const E, X, F, K = 256, 4, 256, 2
	r := rand.New(rand.NewPCG(47, 48))
	for _, dt := range kGroupDTypes {
		b := &Backend{pool: newPool(2)}
		expert := func(name string, rows, rowLen int) *weights.Tensor {
			w := randWeight(r, dt, rows*X, rowLen)
			w.Name, w.Shape = name, []int{rowLen, rows, X}
			return repackedK(t, w)
		}
		ws := []*weights.Tensor{nil, nil, expert("gate", F, E), expert("up", F, E), expert("down", E, F)}
		for _, T := range []int{1, 5, 37} {
			h, router := randVec(r, T*E), randVec(r, T*X)
			p, op := moeProgram(b, ws, h, router, T, E, X, F, K)
			want, got := make([]float32, T*E), make([]float32, T*E)
			p.moeRef(want, op)
			p.moeFast(got, op)
			bitsEqual(t, fmt.Sprintf("%v T=%d", dt, T), want, got)
		}
		b.pool.close()
	}
}
