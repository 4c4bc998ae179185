//go:build amd64

package r16proto

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"
)

func randQ8(r *rand.Rand, N, K int) []byte {
	nb := K / 32
	w := make([]byte, N*nb*34)
	for i := 0; i < N*nb; i++ {
		binary.LittleEndian.PutUint16(w[34*i:], 0x2000+uint16(r.IntN(0x1000)))
		for j := 0; j < 32; j++ {
			w[34*i+2+j] = byte(int8(r.IntN(255) - 127))
		}
	}
	return w
}

func randAct(r *rand.Rand, T, K int) ([]int8, []float32) {
	qs := make([]int8, T*K)
	d := make([]float32, T*K/32)
	for i := range qs {
		qs[i] = int8(r.IntN(255) - 127)
	}
	for i := range d {
		d[i] = r.Float32() * 0.01
	}
	return qs, d
}

func gemm(wr []byte, xl []byte, out []float32, T, K, N, lo, hi int) {
	nb := K / 32
	gb := nb * 544
	for g := lo / 16; g < hi/16; g++ {
		t := 0
		for ; t+8 <= T; t += 8 {
			r16Gemm16x8(unsafe.Pointer(&wr[g*gb]), nb, unsafe.Pointer(&xl[t*nb*40]), uintptr(nb*40), unsafe.Pointer(&out[t*N+16*g]), uintptr(4*N))
		}
		for ; t < T; t++ {
			r16Gemv16x1(unsafe.Pointer(&wr[g*gb]), nb, unsafe.Pointer(&xl[t*nb*40]), unsafe.Pointer(&out[t*N+16*g]))
		}
	}
}

func TestBitExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ T, K, N int }{{1, 64, 16}, {9, 1024, 48}, {17, 256, 32}} {
		w := randQ8(r, c.N, c.K)
		qs, d := randAct(r, c.T, c.K)
		wr := repack(w, c.N, c.K)
		xl := actLayout(qs, d, c.T, c.K)
		out := make([]float32, c.T*c.N)
		gemm(wr, xl, out, c.T, c.K, c.N, 0, c.N)
		nb := c.K / 32
		for tt := 0; tt < c.T; tt++ {
			for n := 0; n < c.N; n++ {
				want := refDot(w[n*nb*34:(n+1)*nb*34], qs[tt*c.K:(tt+1)*c.K], d[tt*nb:(tt+1)*nb])
				if math.Float32bits(want) != math.Float32bits(out[tt*c.N+n]) {
					t.Fatalf("%v t=%d n=%d: %g want %g", c, tt, n, out[tt*c.N+n], want)
				}
			}
		}
	}
}

func BenchmarkR16(b *testing.B) {
	const K, N = 1024, 3072
	r := rand.New(rand.NewPCG(3, 3))
	w := repack(randQ8(r, N, K), N, K)
	for _, T := range []int{1, 64, 512} {
		qs, d := randAct(r, T, K)
		xl := actLayout(qs, d, T, K)
		out := make([]float32, T*N)
		b.Run(fmt.Sprintf("T=%d", T), func(b *testing.B) {
			for range b.N {
				var wg sync.WaitGroup
				for p := 0; p < 2; p++ {
					wg.Add(1)
					go func(p int) {
						defer wg.Done()
						// token blocks of 64 for cache reuse of activations
						for t0 := 0; t0 < T; t0 += 64 {
							t1 := min(t0+64, T)
							gemm(w, xl[t0*(K/32)*40:], out[t0*N:], t1-t0, K, N, p*N/2, (p+1)*N/2)
						}
					}(p)
				}
				wg.Wait()
			}
			b.ReportMetric(float64(T*K*N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}
