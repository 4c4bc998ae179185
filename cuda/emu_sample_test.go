//go:build cudaemu

package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer-go/nodes/sample"
)

// TestEmuArgmax checks argmax_rows against the CPU sampler's greedy pick
// (nodes/sample Argmax), id for id, on rows with many ties, NaNs, infinities
// and signed zeros, at the 0.6B-shape vocabulary and at widths that are not
// a multiple of the block.
func TestEmuArgmax(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		name       string
		rows, cols int
		gen        func(r *rand.Rand, row, col int) float32
	}{
		{"normal logits, vocab 151936", 3, 151936, func(r *rand.Rand, _, _ int) float32 { return float32(r.NormFloat64() * 4) }},
		{"four levels: ties everywhere", 9, 1000, func(r *rand.Rand, _, _ int) float32 { return float32(r.IntN(4)) }},
		{"one column", 4, 1, func(r *rand.Rand, _, _ int) float32 { return float32(r.NormFloat64()) }},
		{"special rows", 10, 300, func(r *rand.Rand, row, col int) float32 {
			switch row {
			case 0: // the first value NaN: the CPU keeps index 0
				if col == 0 || col == 17 {
					return nan
				}
				return float32(col)
			case 1: // NaNs after a real first value are skipped
				if col%3 == 0 && col > 0 {
					return nan
				}
				return float32(col % 7)
			case 2: // every value -Inf: index 0
				return -inf
			case 3: // signed zeros tie: the lowest index, whichever sign
				if col%2 == 0 {
					return float32(math.Copysign(0, -1))
				}
				return 0
			case 4: // +Inf twice, in different warps
				if col == 40 || col == 290 {
					return inf
				}
				return -1
			case 5: // the maximum in the last column
				if col == 299 {
					return 1
				}
				return float32(-col)
			case 6: // all NaN
				return nan
			case 7: // a tie of the maximum between lanes of the same warp
				if col == 33 || col == 1 {
					return 5
				}
				return 4
			}
			return float32(r.NormFloat64())
		}},
	} {
		parityCase(t, fmt.Sprintf("%s (%dx%d)", c.name, c.rows, c.cols), func(t *testing.T, e *emulator) {
			r := rand.New(rand.NewPCG(11, uint64(c.cols)))
			x := make([]float32, c.rows*c.cols)
			want := make([]int32, c.rows)
			for row := range c.rows {
				for col := range c.cols {
					x[row*c.cols+col] = c.gen(r, row, col)
				}
				want[row] = sample.Argmax(x[row*c.cols : (row+1)*c.cols])
			}
			var mem emuMem
			ids := mem.nanBuf(4 * c.rows)
			xb := mem.buf(f32Bytes(x), false)
			l, err := argmaxLaunch(ids.dev, xb.dev, c.rows, c.cols)
			e.launch(t, l, err, &mem)
			for row := range c.rows {
				got := int32(uint32(ids.data[4*row]) | uint32(ids.data[4*row+1])<<8 | uint32(ids.data[4*row+2])<<16 | uint32(ids.data[4*row+3])<<24)
				if got != want[row] {
					t.Errorf("row %d: argmax_rows %d, the CPU sampler %d", row, got, want[row])
				}
			}
		})
	}
}
