package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestQ8KQuantsAboveMinus128 checks the bound the IQ4_XS kernels' sign
// trick needs (VPSIGNB in kquant2_avx2_amd64.s, VPSUBB from zero in
// kquant2_amd64.s): the Q8_K quantizer never yields -128, whose negation
// wraps, even where many elements share the largest magnitude or sit one
// ulp below it.
func TestQ8KQuantsAboveMinus128(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, 256)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	cases := []struct {
		name string
		x    []float32
	}{
		{"alternating ±m, m first", fill(func(i int) float32 { return float32(1-2*(i%2)) * 0.7 })},
		{"alternating ∓m, -m first", fill(func(i int) float32 { return float32(2*(i%2)-1) * 0.7 })},
		{"-m and one ulp below", fill(func(i int) float32 {
			m := float32(-3.1e7)
			if i%3 == 0 {
				return m
			}
			return -math.Nextafter32(-m, 0)
		})},
		{"+m and -(m one ulp below)", fill(func(i int) float32 {
			m := float32(1e-30)
			if i == 17 {
				return m
			}
			return -math.Nextafter32(m, 0)
		})},
		{"random magnitudes", fill(func(i int) float32 {
			return float32(r.NormFloat64() * math.Ldexp(1, r.IntN(60)-30))
		})},
	}
	for _, c := range cases {
		var a actQuant
		a.resize(tensor.Q8_K, 1, 256)
		quantizeQ8K(c.x, a.row(0))
		for i, q := range a.qs {
			if q < -127 {
				t.Errorf("%s: quant %d = %d (x = %g, d = %g), want -127..127", c.name, i, q, c.x[i], a.d[0])
			}
		}
	}
}

// TestKQuant2Extremes runs the fast Q2_K, Q3_K and IQ4_XS kernels of every
// level the CPU has on the largest products their int16 pair sums can
// hold: activations of ±127 against weights whose quant and scale bytes
// are all 0x00 or all 0xff (IQ4_XS level -127, Q3_K's w+4 = 7, Q2_K's 3
// with scale 15) as well as random ones, and checks dot4 against dot and
// dot1x4 against the gemm order, bit for bit.
func TestKQuant2Extremes(t *testing.T) {
	if chooseLevel("") == levelRef {
		t.Skip("no fast kernels on this CPU")
	}
	r := rand.New(rand.NewPCG(23, 24))
	const K, T = 512, 4
	acts := []struct {
		name string
		q    func(i int) int8
	}{
		{"x=127", func(int) int8 { return 127 }},
		{"x=-127", func(int) int8 { return -127 }},
		{"x=±127", func(int) int8 { return int8(127 - 254*r.IntN(2)) }},
	}
	for _, dt := range []tensor.DType{tensor.Q2_K, tensor.Q3_K, tensor.IQ4_XS} {
		k := kernelOf(dt)
		rb, _ := dt.RowBytes(K)
		bb := dt.BlockBytes()
		for _, fillByte := range []int{-1, 0x00, 0xff} {
			w := randWeight(r, dt, 4, K)
			if fillByte >= 0 {
				// Every byte but the fp16 fields.
				keep := map[int]bool{}
				for _, off := range blockF16s[dt] {
					keep[off], keep[off+1] = true, true
				}
				for i := range w.Data {
					if !keep[i%bb] {
						w.Data[i] = byte(fillByte)
					}
				}
			}
			for _, act := range acts {
				var a actQuant
				a.resize(tensor.Q8_K, T, K)
				for i := range a.qs {
					a.qs[i] = act.q(i)
				}
				for i := range a.d {
					a.d[i] = float32(0.5 + r.Float64())
				}
				for i := range a.bsums {
					var s int16
					for _, q := range a.qs[16*i : 16*i+16] {
						s += int16(q)
					}
					a.bsums[i] = s
				}
				for _, lv := range testLevels() {
					if lv == levelRef {
						continue
					}
					restore := setLevel(lv)
					f := k.fast()
					name := fmt.Sprintf("%v %v weights=%d %s", dt, lv, fillByte, act.name)
					if f.dot4 != nil {
						var out [4]float32
						f.dot4(unsafe.Pointer(&w.Data[0]), uintptr(rb), a.row(0), unsafe.Pointer(&out[0]), 4)
						for i := range 4 {
							want := k.dot(w.Data[i*rb:(i+1)*rb], a.row(0))
							if math.Float32bits(out[i]) != math.Float32bits(want) {
								t.Errorf("%s: dot4 row %d = %g, reference %g", name, i, out[i], want)
							}
						}
					}
					if f.hasQuad() {
						var out [4]float32
						f.quad(unsafe.Pointer(&w.Data[0]), &a, 0, unsafe.Pointer(&out[0]), 4)
						for tt := range T {
							want := k.dot(w.Data[:rb], a.row(tt))
							if math.Float32bits(out[tt]) != math.Float32bits(want) {
								t.Errorf("%s: dot1x4 token %d = %g, reference %g", name, tt, out[tt], want)
							}
						}
					}
					restore()
				}
			}
		}
	}
}
