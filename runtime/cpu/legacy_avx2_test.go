package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestLegacyAVX2Kernels calls the AVX2 kernels of the 32-element block
// dtypes directly and checks them bit for bit against the reference dot,
// for weight bytes random and at their extremes (every nibble and high bit
// set or clear) and activation quants over the whole int8 range, -128 and
// 127 included, at odd and even block counts.
func TestLegacyAVX2Kernels(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2: the AVX2 kernels cannot run on this CPU")
	}
	r := rand.New(rand.NewPCG(21, 22))
	weightFill := []struct {
		name string
		fill func(b []byte)
	}{
		{"random", func(b []byte) {
			for i := range b {
				b[i] = byte(r.Uint32())
			}
		}},
		{"ones", func(b []byte) {
			for i := range b {
				b[i] = 0xff
			}
		}},
		{"zeros", func(b []byte) { clear(b) }},
	}
	actFill := []struct {
		name string
		q    func() int8
	}{
		{"random", func() int8 { return int8(r.Uint32()) }},
		{"127", func() int8 { return 127 }},
		{"-128", func() int8 { return -128 }},
		{"extremes", func() int8 { return [...]int8{-128, -127, 127, 0}[r.IntN(4)] }},
	}
	for _, dt := range []tensor.DType{tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.IQ4_NL} {
		k := kernelOf(dt).avx2
		if k.dot4 == nil {
			t.Fatalf("%v: no avx2 dot4", dt)
		}
		for _, nb := range []int{1, 2, 3, 8} {
			K := 32 * nb
			rb, err := dt.RowBytes(K)
			if err != nil {
				t.Fatal(err)
			}
			for _, wf := range weightFill {
				for _, af := range actFill {
					w := make([]byte, 4*rb)
					wf.fill(w)
					for blk := 0; blk < 4*nb; blk++ {
						for _, off := range blockF16s[dt] {
							s := float32(math.Ldexp(0.5+r.Float64(), -r.IntN(12)))
							if r.IntN(2) == 0 {
								s = -s
							}
							binary.LittleEndian.PutUint16(w[blk*(rb/nb)+off:], tensor.F32ToF16(s))
						}
					}
					var a actQuant
					a.resize(dt.DotType(), 2, K)
					for i := range a.qs {
						a.qs[i] = af.q()
					}
					for i := range a.d {
						a.d[i] = tensor.F16ToF32(tensor.F32ToF16(float32(math.Ldexp(0.5+r.Float64(), -r.IntN(10)))))
					}
					for i := range a.s {
						a.s[i] = tensor.F16ToF32(tensor.F32ToF16(float32(r.NormFloat64())))
					}
					var want [4][2]float32
					for row := range 4 {
						for tok := range 2 {
							want[row][tok] = kernelOf(dt).dot(w[row*rb:(row+1)*rb], a.row(tok))
						}
					}
					check := func(kernel string, row, tok int, got float32) {
						t.Helper()
						if math.Float32bits(got) != math.Float32bits(want[row][tok]) {
							t.Errorf("%v %s nb=%d weights %s, quants %s: row %d token %d = %g (%#x), reference %g (%#x)",
								dt, kernel, nb, wf.name, af.name, row, tok, got, math.Float32bits(got), want[row][tok], math.Float32bits(want[row][tok]))
						}
					}
					for tok := range 2 {
						var out [8]float32 // row i at out[2*i]
						k.dot4(unsafe.Pointer(&w[0]), uintptr(rb), a.row(tok), unsafe.Pointer(&out[0]), 8)
						for row := range 4 {
							check("dot4", row, tok, out[2*row])
						}
						k.dot4(unsafe.Pointer(&w[3*rb]), 0, a.row(tok), unsafe.Pointer(&out[0]), 4)
						check("dot4 (stride 0)", 3, tok, out[0])
					}
					if k.dot2x2 != nil {
						var out [2][3]float32 // [token][row], rows 3 apart
						k.dot2x2(unsafe.Pointer(&w[rb]), uintptr(2*rb), a.row(0), a.row(1), unsafe.Pointer(&out[0][0]), 8, 12)
						for tok := range 2 {
							check("dot2x2", 1, tok, out[tok][0])
							check("dot2x2", 3, tok, out[tok][2])
						}
					}
				}
			}
		}
	}
}
