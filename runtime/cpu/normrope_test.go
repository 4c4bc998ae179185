package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestNormRoPEFusedMatchesOps checks that an rms_norm of heads run with the
// rope that reads it (fuseNormRoPE) gives bit for bit the two ops apart,
// at every level, for Q- and K-shaped rows (16 and 8 heads: 16 and 8 norm
// groups a row), partial rotary dims with frequency factors, and head
// widths the grouped norm kernel does not take.
func TestNormRoPEFusedMatchesOps(t *testing.T) {
	for _, lv := range testLevels() {
		for _, c := range []struct {
			heads, hd, dims int
			factors         bool
		}{{16, 128, 128, false}, {8, 128, 128, true}, {4, 64, 16, true}, {3, 24, 24, false}} {
			t.Run(fmt.Sprintf("%v/%dx%d_dims%d", lv, c.heads, c.hd, c.dims), func(t *testing.T) {
				defer setLevel(lv)()
				const T = 37
				r := rand.New(rand.NewPCG(27, uint64(c.hd)))
				w := c.heads * c.hd
				be := New(exec.Options{Threads: 3})
				defer be.Close()
				// Op ids: 0 x [T,w], 1 norm weight [hd], 2 norm out, 3 positions, 4 factors, 5 rope out.
				factors := make([]float32, c.dims/2)
				for i := range factors {
					factors[i] = 1 + float32(r.IntN(4))
				}
				p := &program{b: be, f32: [][]float32{randActivations(r, T, w), randActivations(r, 1, c.hd), make([]float32, T*w), nil, factors,
					make([]float32, T*w)}, i32: make([][]int32, 6)}
				for i := range T {
					p.i32[3] = append(p.i32[3], int32(3*i+r.IntN(3)))
				}
				ten := func(id, rows, cols int) tensor.Tensor { return tensor.Tensor{ID: id, Shape: [2]int{rows, cols}} }
				norm := tensor.Op{Kind: tensor.OpRMSNorm, Args: []tensor.Tensor{ten(0, T, w), ten(1, 1, c.hd)}, Group: c.hd, Eps: 1e-6, Out: ten(2, T, w)}
				rope := tensor.Op{Kind: tensor.OpRoPE, Args: []tensor.Tensor{ten(2, T, w), ten(3, T, 1)}, Out: ten(5, T, w),
					RoPE: tensor.RoPEArgs{HeadDim: c.hd, Dims: c.dims, Base: 1e6, Mode: tensor.RoPENeox}}
				if c.factors {
					rope.Args = append(rope.Args, ten(4, 1, c.dims/2))
				}
				p.elementwise(p.f32[2], norm)
				p.rope(p.f32[5], rope, nil)
				want := append([]float32(nil), p.f32[5]...)
				clear(p.f32[5])
				p.ropeTab.valid = false
				p.rope(p.f32[5], rope, &norm)
				for i, v := range want {
					if got := p.f32[5][i]; math.Float32bits(got) != math.Float32bits(v) {
						t.Fatalf("out[%d] = %v, want %v", i, got, v)
					}
				}
			})
		}
	}
}
