package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestF32Gemm4x4P checks the packed 4x4 kernel (gemmQuads: rows of more
// than packedChunk chunks split along k, the accumulators carried between
// calls) against f32Dot4x4 bit for bit, on rows packed from every float
// dtype (packQuad's assembly and Go chunks alike), token quads with
// missing tokens, and K with and without a partial last chunk.
func TestF32Gemm4x4P(t *testing.T) {
	if !hasAVX512() {
		t.Skip("no AVX-512")
	}
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, k := range []int{1, 15, 16, 17, 100, 1024, 1000, 1040, 2100} {
			for _, rows := range []int{4, 3} {
				name := fmt.Sprintf("%v k=%d rows=%d", dt, k, rows)
				w := randWeight(r, dt, 4, k)
				const T = 11 // two whole token quads and one of 3 tokens
				x := randActivations(r, T, k)
				var f32w [4][]float32 // the rows as float32, the missing ones zero
				for i := range 4 {
					f32w[i] = make([]float32, k)
					if i < rows {
						for j := range k {
							f32w[i][j] = floatAt(dt, unsafe.Pointer(&w.Row(i)[0]), j)
						}
					}
				}
				wp := make([]float32, packedQuadLen(k))
				packQuad(wp, dt, unsafe.Pointer(&w.Data[0]), uintptr(w.RowBytes()), k, rows)
				xp := make([]float32, 3*packedQuadLen(k))
				packTokens(xp, x, k, T, 0, T)
				got := make([]float32, 12*4)
				acc := make([]float32, 3*256)
				gemmQuads(unsafe.Pointer(&wp[0]), unsafe.Pointer(&xp[0]), chunks16(k), 3, uintptr(4*packedQuadLen(k)), unsafe.Pointer(&acc[0]), unsafe.Pointer(&got[0]), 16)
				want := make([]float32, 12*4)
				wflat := make([]float32, 4*k)
				for i := range 4 {
					copy(wflat[i*k:], f32w[i])
				}
				xpad := make([]float32, 12*k)
				copy(xpad, x)
				for q := range 3 {
					f32Dot4x4(unsafe.Pointer(&wflat[0]), uintptr(4*k), unsafe.Pointer(&xpad[4*q*k]), uintptr(4*k), k, unsafe.Pointer(&want[16*q]), 16)
				}
				sameBits(t, name, got, want)
			}
		}
	}
}

// TestPackedFloatMatMul runs the packed float GEMM through its panels
// (more token quads than a block, a panel of weight rows and rows beyond
// the last quad), its k chunks and its partial token quad: every token's
// outputs equal the token's computed alone (the decode kernels), bit for
// bit, at any thread count, and the avx2 level's (unpacked) results.
func TestPackedFloatMatMul(t *testing.T) {
	requireSIMD(t)
	r := rand.New(rand.NewPCG(43, 44))
	const n = 30
	for _, c := range []struct {
		k  int
		Ts []int
	}{
		{4100, []int{4, 7, 31}}, // blocks of 3 quads, 5 chunks of k, panels of 12 rows
		{2100, []int{101}},      // blocks of 7 quads, 3 chunks of k, panels of 28 rows
		{1024, []int{70}},       // one chunk, blocks of 16 quads, panels of 64 rows (all 30)
	} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			t.Run(fmt.Sprintf("%v k=%d", dt, c.k), func(t *testing.T) {
				k := c.k
				w := randWeight(r, dt, n, k)
				for _, T := range c.Ts {
					x := randActivations(r, T, k)
					got := runMatMul(w, x, T, 2, true)
					for tok := range T {
						alone := runMatMul(w, x[tok*k:(tok+1)*k], 1, 1, true)
						sameBits(t, fmt.Sprintf("T=%d token %d alone", T, tok), got[tok*n:(tok+1)*n], alone)
					}
					for _, threads := range []int{1, 3} {
						sameBits(t, fmt.Sprintf("T=%d threads=%d", T, threads), runMatMul(w, x, T, threads, true), got)
					}
					if hasAVX2() {
						restore := setLevel(levelAVX2)
						avx2 := runMatMul(w, x, T, 2, true)
						restore()
						sameBits(t, fmt.Sprintf("T=%d avx2", T), avx2, got)
					}
				}
			})
		}
	}
}
