package cpu

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// q4Types returns the dtypes Backend.Load repacks into LayoutQ4x16 at the
// running level: Q4_0 and IQ4_NL, and Q5_0, Q4_1 and Q5_1 at AVX-512.
func q4Types() []tensor.DType {
	if level == levelAVX512 {
		return []tensor.DType{tensor.Q4_0, tensor.IQ4_NL, tensor.Q5_0, tensor.Q4_1, tensor.Q5_1}
	}
	return []tensor.DType{tensor.Q4_0, tensor.IQ4_NL}
}

// repackedQ4 returns a copy of w (q4Types) repacked into LayoutQ4x16.
func repackedQ4(t testing.TB, w *weights.Tensor) *weights.Tensor {
	return repackedBy(t, w, repackableQ4, repackQ4)
}

// TestQ4GroupsRepack checks that repacking keeps every row: q4GroupRow gives
// back the file's bytes, get_rows the file's values, and the accessors of
// the file's layout refuse the tensor.
func TestQ4GroupsRepack(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct {
		dt   tensor.DType
		n, k int
	}{{tensor.Q4_0, 16, 32}, {tensor.Q4_0, 48, 96}, {tensor.Q4_0, 32, 1024}, {tensor.IQ4_NL, 48, 96}, {tensor.Q5_0, 16, 32}, {tensor.Q5_0, 48, 96}, {tensor.Q4_1, 16, 32}, {tensor.Q4_1, 48, 96}, {tensor.Q5_1, 16, 32}, {tensor.Q5_1, 48, 96}} {
		if !slices.Contains(q4Types(), c.dt) {
			continue
		}
		w := randWeight(r, c.dt, c.n, c.k)
		g := repackedQ4(t, w)
		if g.Layout != weights.LayoutQ4x16 || bytes.Equal(g.Data, w.Data) {
			t.Fatalf("%v: repacking changed nothing", c)
		}
		row := make([]byte, w.RowBytes())
		for i := range c.n {
			q4GroupRow(g, i, row)
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
			if err := tensor.DequantizeRow(c.dt, w.Row(int(id)), want[j*c.k:(j+1)*c.k]); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v: get_rows of the repacked table differs from the file's rows", c)
		}
	}
}

// TestQ4GroupsMatMulBitExact checks the LayoutQ4x16 matmul at every level
// (each tile shape, token blocks, workers) bit for bit against dotQ4Group
// (Q4_1, Q5_1: dotQ8_1Group), and that against the exact dot product of the dequantized values,
// for random quants and for every quant byte (Q5_0, Q5_1: high bits too;
// not the mins) 0x00, 0x0f or 0xff (the extremes of the kernels' 16-bit and 32-bit sums).
func TestQ4GroupsMatMulBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	for _, dt := range q4Types() {
		bb, quants := dt.BlockBytes(), 2 // the block's bytes, the offset of its quants
		if q4HasMins(dt) {
			quants = 4
		}
		for _, c := range []struct {
			n, k int
			fill int // every quant byte, or -1: random quants
		}{{16, 32, -1}, {48, 96, -1}, {32, 1024, -1}, {80, 64, -1}, {144, 256, -1}, {32, 128, 0xff}, {16, 64, 0x00}, {16, 64, 0x0f}} {
			w := randWeight(r, dt, c.n, c.k)
			if c.fill >= 0 {
				for i := range w.Rows() {
					row := w.Row(i)
					for b := 0; b < len(row); b += bb {
						for j := quants; j < bb; j++ {
							row[b+j] = byte(c.fill)
						}
					}
				}
			}
			g := repackedQ4(t, w)
			nb, row := c.k/32, make([]byte, w.RowBytes())
			for _, T := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 17, 100} {
				x := randActivations(r, T, c.k)
				want := make([]float32, T*c.n)
				for tok := range T {
					var q q8Blocks
					quantizeQ8(x[tok*c.k:(tok+1)*c.k], &q)
					sums := q8_1Sums(x[tok*c.k:(tok+1)*c.k], &q)
					for i := range c.n {
						if q4HasMins(dt) {
							want[tok*c.n+i] = dotQ8_1Group(g, i, row, &q, sums)
						} else {
							want[tok*c.n+i] = dotQ4Group(g.Data, dt, nb, i, &q)
						}
						exact, scale := exactDotQ4(t, dt, w.Row(i), &q, sums)
						if d := math.Abs(float64(want[tok*c.n+i]) - exact); d > 1e-5*scale {
							t.Fatalf("%v %v T=%d: dotQ4Group row %d token %d = %g, exact %g", dt, c, T, i, tok, want[tok*c.n+i], exact)
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
								t.Fatalf("%v %v %v T=%d threads=%d: out[%d] = %g (%#x), reference %g (%#x)",
									dt, lv, c, T, threads, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
					restore()
				}
			}
		}
	}
}

// exactDotQ4 returns the dot product of a row of dtype dt (q4Types) in
// the file's layout and x in float64 (Q4_1, Q5_1: its mins times x's Q8_1
// block sums), and the sum of the magnitudes of its products.
func exactDotQ4(t *testing.T, dt tensor.DType, row []byte, x *q8Blocks, sums []float32) (dot, scale float64) {
	w := make([]float32, len(x.qs))
	bb := dt.BlockBytes()
	if q4HasMins(dt) { // the levels alone: the scale and the min go below
		one := make([]byte, bb)
		binary.LittleEndian.PutUint16(one, tensor.F32ToF16(1))
		for b := range x.d {
			copy(one[4:], row[bb*b+4:bb*b+bb])
			if err := tensor.DequantizeRow(dt, one, w[32*b:32*b+32]); err != nil {
				t.Fatal(err)
			}
		}
	} else if err := tensor.DequantizeRow(dt, row, w); err != nil {
		t.Fatal(err)
	}
	for b := range x.d {
		var s, mag float64
		for j := range 32 {
			s += float64(w[32*b+j]) * float64(x.qs[32*b+j])
			mag += math.Abs(float64(w[32*b+j]) * float64(x.qs[32*b+j]))
		}
		term, mag := s*float64(x.d[b]), mag*math.Abs(float64(x.d[b]))
		if q4HasMins(dt) {
			d, m := float64(f16tab[binary.LittleEndian.Uint16(row[bb*b:])]), float64(f16tab[binary.LittleEndian.Uint16(row[bb*b+2:])])
			term, mag = term*d+m*float64(sums[b]), mag*math.Abs(d)+math.Abs(m*float64(sums[b]))
		}
		dot += term
		scale += mag
	}
	return dot, scale
}

// TestQ4GroupsTokenAlone checks at every level that each token of a batch
// alone gets bit for bit its result in the batch from a LayoutQ4x16 weight.
func TestQ4GroupsTokenAlone(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	const k, n = 256, 32
	for _, dt := range q4Types() {
		g := repackedQ4(t, randWeight(r, dt, n, k))
		for _, lv := range testLevels() {
			restore := setLevel(lv)
			for _, T := range []int{3, 8, 13} {
				x := randActivations(r, T, k)
				all := runMatMul(g, x, T, 2, lv != levelRef)
				for tok := range T {
					alone := runMatMul(g, x[tok*k:(tok+1)*k], 1, 2, lv != levelRef)
					if !slices.Equal(alone, all[tok*n:(tok+1)*n]) {
						restore()
						t.Fatalf("%v %v T=%d: token %d alone differs from the batch", dt, lv, T, tok)
					}
				}
			}
			restore()
		}
	}
}
