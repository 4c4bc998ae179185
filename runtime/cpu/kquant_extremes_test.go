package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// TestKQuantExtremes checks the fast Q4_K, Q5_K and Q6_K kernels of every
// level this CPU runs against the reference on the inputs where an int16
// pair sum or an int32 lane could overflow: every quant at its largest (or
// smallest) value, the largest sub-block scales and mins (Q6_K: -128, 127),
// against activations that all quantize to +127 or -127, or alternate. T =
// 5 takes the dot1x4 kernels (4 tokens) and dot4 (the last); 5 rows leave
// a partial quad.
func TestKQuantExtremes(t *testing.T) {
	const K, N = 512, 5
	type weightCase struct {
		name   string
		quants byte // every byte of the block but its fp16 fields and scales
		scales byte // every byte of the scales (Q4_K, Q5_K: 12 packed bytes; Q6_K: 16 int8)
	}
	weightCases := []weightCase{
		{"max quants, max scales", 0xff, 0xff},
		{"zero quants, max scales", 0x00, 0xff},
		{"max quants, scale 0x80", 0xff, 0x80},
		{"max quants, scale 0x7f", 0xff, 0x7f},
		{"alternating quants", 0xaa, 0xff},
	}
	xCases := []struct {
		name string
		x    func(i int) float32
	}{
		{"x=+1", func(int) float32 { return 1 }},
		{"x=-1", func(int) float32 { return -1 }},
		{"x=±1", func(i int) float32 { return float32(1 - 2*(i%2)) }},
		{"x=±1 by 4", func(i int) float32 { return float32(1 - 2*(i/4%2)) }},
	}
	scaleOff := map[tensor.DType][2]int{tensor.Q4_K: {4, 16}, tensor.Q5_K: {4, 16}, tensor.Q6_K: {192, 208}}
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		for _, wc := range weightCases {
			w := extremeWeight(dt, N, K, wc.quants, wc.scales, scaleOff[dt])
			for _, xc := range xCases {
				for _, T := range []int{1, 5} {
					x := make([]float32, T*K)
					for i := range x {
						x[i] = xc.x(i % K)
					}
					want := runMatMul(w, x, T, 1, false)
					for _, lv := range testLevels() {
						if lv == levelRef {
							continue
						}
						restore := setLevel(lv)
						got := runMatMul(w, x, T, 1, true)
						restore()
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v %s, %s, T=%d, level %v: out[%d] = %g (%#x), reference %g (%#x)",
									dt, wc.name, xc.name, T, lv, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
							}
						}
					}
				}
			}
		}
	}
}

// extremeWeight returns an [n, k] weight of dtype dt whose blocks are
// quants bytes, with scales bytes in [so[0], so[1]) and fp16 fields of 1/64
// (so that the outputs stay finite).
func extremeWeight(dt tensor.DType, n, k int, quants, scales byte, so [2]int) *weights.Tensor {
	rb, err := dt.RowBytes(k)
	if err != nil {
		panic(err)
	}
	data := make([]byte, n*rb)
	bb := dt.BlockBytes()
	for blk := 0; blk < len(data)/bb; blk++ {
		b := data[blk*bb : (blk+1)*bb]
		for i := range b {
			b[i] = quants
		}
		for i := so[0]; i < so[1]; i++ {
			b[i] = scales
		}
		for _, off := range blockF16s[dt] {
			binary.LittleEndian.PutUint16(b[off:], tensor.F32ToF16(1.0/64))
		}
	}
	return &weights.Tensor{Name: fmt.Sprintf("extreme %v", dt), DType: dt, Shape: []int{k, n}, Data: data}
}
