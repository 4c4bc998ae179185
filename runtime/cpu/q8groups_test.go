package cpu

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// repacked returns a copy of w (Q8_0) repacked into LayoutQ8x16.
func repacked(t testing.TB, w *weights.Tensor) *weights.Tensor {
	return repackedBy(t, w, repackableQ8, repackQ8)
}

// repackedBy returns a copy of w rewritten in place by repack, as
// Backend.Load does; it fails t unless ok accepts w.
func repackedBy(t testing.TB, w *weights.Tensor, ok func(*weights.Tensor) bool, repack func(*pool, *weights.Tensor, [][]byte)) *weights.Tensor {
	c := &weights.Tensor{Name: w.Name, Shape: slices.Clone(w.Shape), DType: w.DType, Data: slices.Clone(w.Data)}
	if !ok(c) {
		t.Fatalf("%v %v: not repackable", c.DType, c.Shape)
	}
	p := newPool(2)
	defer p.close()
	scratch := [][]byte{make([]byte, q8GroupRows*c.RowBytes()), make([]byte, q8GroupRows*c.RowBytes())}
	repack(p, c, scratch)
	return c
}

// TestQ8GroupsRepack checks that repacking keeps every row: q8GroupRow gives
// back the file's bytes, get_rows the file's values, and the accessors of
// the file's layout refuse the tensor.
func TestQ8GroupsRepack(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct{ n, k int }{{16, 32}, {48, 96}, {32, 1024}} {
		w := randWeight(r, tensor.Q8_0, c.n, c.k)
		g := repacked(t, w)
		if bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%v: repacking changed nothing", c)
		}
		row := make([]byte, w.RowBytes())
		for i := range c.n {
			q8GroupRow(g, i, row)
			if !bytes.Equal(row, w.Row(i)) {
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
			if err := tensor.DequantizeRow(tensor.Q8_0, w.Row(int(id)), want[j*c.k:(j+1)*c.k]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: get_rows of the repacked table differs from the file's rows", c)
		}
	}
}

// TestQ8GroupsMatMulBitExact checks the LayoutQ8x16 matmul at every level
// (each tile shape, token blocks, workers) bit for bit against dotQ8Group,
// and dotQ8Group against the exact dot product of the dequantized values.
func TestQ8GroupsMatMulBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	for _, c := range []struct{ n, k int }{{16, 32}, {48, 96}, {32, 1024}, {80, 64}, {144, 256}} {
		w := randWeight(r, tensor.Q8_0, c.n, c.k)
		g := repacked(t, w)
		nb := c.k / 32
		for _, T := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 31, 33, 100} {
			x := randActivations(r, T, c.k)
			want := make([]float32, T*c.n)
			for tok := range T {
				var q q8Blocks
				quantizeQ8(x[tok*c.k:(tok+1)*c.k], &q)
				for i := range c.n {
					want[tok*c.n+i] = dotQ8Group(g.Data, nb, i, &q)
					exact, scale := exactDotQ8(w.Row(i), &q)
					if d := math.Abs(float64(want[tok*c.n+i]) - exact); d > 1e-5*scale {
						t.Fatalf("%v T=%d: dotQ8Group row %d token %d = %g, exact %g", c, T, i, tok, want[tok*c.n+i], exact)
					}
				}
			}
			for _, lv := range testLevels() {
				restore := setLevel(lv)
				for _, threads := range []int{1, 3} {
					got := runMatMul(g, x, T, threads, lv != levelRef)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							restore()
							t.Fatalf("%v %v T=%d threads=%d: out[%d] = %g (%#x), reference %g (%#x)",
								lv, c, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
				restore()
			}
		}
	}
}

// exactDotQ8 returns the dot product of a Q8_0 row in the file's layout and
// x in float64, and the sum of the magnitudes of its block terms.
func exactDotQ8(row []byte, x *q8Blocks) (dot, scale float64) {
	for b := range x.d {
		var s int64
		for j := range 32 {
			s += int64(int8(row[34*b+2+j])) * int64(x.qs[32*b+j])
		}
		term := float64(f16tab[uint16(row[34*b])|uint16(row[34*b+1])<<8]) * float64(x.d[b]) * float64(s)
		dot += term
		scale += math.Abs(term)
	}
	return dot, scale
}

// TestQ8GroupsTokenAlone checks at every level that each token of a batch
// alone gets bit for bit its result in the batch from a LayoutQ8x16 weight.
func TestQ8GroupsTokenAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	const k, n = 256, 32
	g := repacked(t, randWeight(r, tensor.Q8_0, n, k))
	for _, lv := range testLevels() {
		restore := setLevel(lv)
		for _, T := range []int{3, 8, 13, 16, 19} {
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

// BenchmarkQ8GroupTile times the LayoutQ8x16 kernels alone on one thread,
// by tile (tokens per call), at each fast level: four groups of 16 rows of
// K = 1024 (68 KiB, from L2) against activations hot in L1. It reports
// GMAC/s and, at avx512, pct_peak of one thread's VPDPBUSD peak (Peak): the
// kernels' ceiling, which BenchmarkGEMM's whole matmuls approach.
func BenchmarkQ8GroupTile(b *testing.B) {
	const nb, groups = 32, 4
	r := rand.New(rand.NewPCG(27, 28))
	g := repacked(b, randWeight(r, tensor.Q8_0, groups*q8GroupRows, 32*nb))
	x := randActivations(r, q8TileTokens, 32*nb)
	qx, qd := make([]int8, len(x)), make([]float32, len(x)/32)
	for tok := range q8TileTokens {
		q := q8Blocks{d: qd[tok*nb : (tok+1)*nb], qs: qx[tok*32*nb : (tok+1)*32*nb]}
		quantizeQ8(x[tok*32*nb:(tok+1)*32*nb], &q)
		for i, v := range q.qs {
			q.qs[i] = v ^ -0x80
		}
	}
	qz := make([]byte, q8TileTokens*nb*q8ActBlock)
	q8GroupActs(qz, qx, qd, 0, q8TileTokens, 32*nb)
	out := make([]float32, q8TileTokens*groups*q8GroupRows)
	xs, os := uintptr(nb*q8ActBlock), uintptr(4*groups*q8GroupRows)
	for _, lv := range testLevels() {
		if lv == levelRef {
			continue
		}
		for _, n := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%v/tokens=%d", lv, n), func(b *testing.B) {
				defer setLevel(lv)()
				peak := Peak(PeakInt8, 1, 50*time.Millisecond)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ResetTimer()
				for i := range b.N {
					k := i % groups
					q8GroupTile(unsafe.Pointer(&g.Data[k*nb*q8GroupBlock]), nb, unsafe.Pointer(&qz[0]), xs, unsafe.Pointer(&out[k*q8GroupRows]), os, n)
				}
				gmacs := float64(n*q8GroupRows*32*nb) * float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(gmacs/1e9, "GMAC/s")
				if peak > 0 {
					b.ReportMetric(100*gmacs/peak, "pct_peak")
				}
			})
		}
	}
}
