package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestKVWriteChunksMatchRows checks that writeKV with the AVX-512 kernels
// (16 consecutive positions' K at a time by kvTranspose16) leaves direct
// f32 pages bit for bit as the row-by-row loop does, for 16-token blocks
// (transposed into the page) and longer ones (through a tile), runs that
// start off a block's first position, sequences cut mid-chunk, and rows
// that share a slot with a chunk's row before and after it (a padded
// bucket's), where the later row must win.
func TestKVWriteChunksMatchRows(t *testing.T) {
	needSIMD(t)
	for _, c := range []attnCase{
		{heads: 4, kvHeads: 2, hd: 128, bt: 16, seqs: [][2]int{{0, 40}, {5, 37}, {32, 16}}},
		{heads: 4, kvHeads: 2, hd: 64, bt: 32, seqs: [][2]int{{3, 50}, {0, 70}, {48, 16}}},
		{heads: 2, kvHeads: 1, hd: 32, bt: 64, seqs: [][2]int{{16, 100}}},
	} {
		t.Run(fmt.Sprintf("bt%d_hd%d", c.bt, c.hd), func(t *testing.T) {
			write := func(simd bool) kvPages {
				defer func(u bool) { useSIMD = u }(useSIMD)
				useSIMD = simd
				p, op, b, _ := setupAttention(t, c, 2)
				defer p.b.pool.close()
				padded(p, &op, b, 3)
				p.writeKV(op, b)
				return p.b.cache
			}
			want, got := write(false), write(true)
			for l := range want.k {
				for _, pg := range []struct {
					name      string
					want, got []float32
				}{{"K", want.k[l], got.k[l]}, {"V", want.v[l], got.v[l]}} {
					for i := range pg.want {
						if math.Float32bits(pg.got[i]) != math.Float32bits(pg.want[i]) {
							t.Fatalf("layer %d %s page[%d] = %v, want %v", l, pg.name, i, pg.got[i], pg.want[i])
						}
					}
				}
			}
		})
	}
}

// padded adds to the step of op and b a row before the first and after the
// last with row r's sequence and position (other K and V values), as a
// padded bucket shares slots.
func padded(p *program, op *tensor.Op, b *exec.Batch, r int) {
	rng := rand.New(rand.NewPCG(9, 10))
	kvd := op.Args[1].Cols()
	row := func() []float32 {
		v := make([]float32, kvd)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	pos, seq := b.Positions[r], b.RowSeq[r]
	b.Positions = append(append([]int32{pos}, b.Positions...), pos)
	b.RowSeq = append(append([]int32{seq}, b.RowSeq...), seq)
	b.Tokens = append(append([]int32{0}, b.Tokens...), 0)
	for _, id := range []int{1, 2} {
		p.f32[id] = slices.Concat(row(), p.f32[id], row())
	}
	op.Out.Shape[0] += 2
}
