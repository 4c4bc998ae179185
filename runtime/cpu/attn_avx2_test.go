package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// TestSoftmaxAVX2 checks softmaxVAVX2 against softmaxInPlace bit for bit
// on lengths around whole 16s, spreads out to where expfV underflows, and
// rows with ties, zeros and -Inf.
func TestSoftmaxAVX2(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 63, 64, 65, 100, 300, 1000, 4097} {
		for _, spread := range []float32{0, 0.1, 5, 30, 120, 1e4} {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(rng.NormFloat64()) * spread
				if spread == 0 {
					switch rng.IntN(4) {
					case 0:
						s[i] = float32(math.Inf(-1))
					case 1:
						s[i] = float32(math.Copysign(0, -1))
					case 2:
						s[i] = -87 - rng.Float32()*20
					}
				}
			}
			if spread == 0 {
				s[rng.IntN(n)] = 0
			}
			want := slices.Clone(s)
			softmaxInPlace(want)
			softmaxVAVX2(&s[0], n)
			for i := range s {
				if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d spread=%v: [%d] = %v, want %v", n, spread, i, s[i], want[i])
				}
			}
		}
	}
}

// TestAttnKernelsAVX2MatchAVX512 runs each AVX2 attention kernel and its
// AVX-512 twin on the same arguments and compares their outputs bit for
// bit: scores (both pair layouts), the value kernels for 1..4 query vectors
// (16 position classes), their masked tails, and the reduction, over head
// dims 16..256 and positions 1..300.
func TestAttnKernelsAVX2MatchAVX512(t *testing.T) {
	if !hasAVX512() || !hasAVX2() {
		t.Skip("needs AVX-512 and AVX2")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	hds := []int{16, 20, 33, 48, 64, 72, 100, 128, 136, 200, 256}
	ns := []int{1, 2, 7, 15, 16, 17, 31, 63, 64, 65, 100, 129, 191, 257, 300}
	for _, hd := range hds {
		for _, n := range ns {
			name := fmt.Sprintf("hd=%d n=%d", hd, n)
			nc := (n + attnChunk - 1) / attnChunk
			ncPad := (nc + 3) &^ 3
			stride := ncPad * attnChunk
			k, v := rnd(ncPad*attnChunk*hd), rnd(ncPad*attnChunk*hd)
			offs := make([]int, ncPad)
			for c := range offs {
				offs[c] = c * attnChunk * hd
			}
			q := rnd(2 * hd)
			// Scores, both pair layouts.
			for _, cstep := range []int{2, 4} {
				run := func(f func(*scoreArgs)) []float32 {
					out := make([]float32, 2*stride)
					sc0, sc1 := unsafe.Pointer(&out[0]), unsafe.Pointer(&out[stride])
					sa := scoreArgs{q: [2]unsafe.Pointer{unsafe.Pointer(&q[0]), unsafe.Pointer(&q[hd])}, k: unsafe.Pointer(&k[0]),
						koffs: &offs[0], nc: ncPad, cstep: cstep, kstride: 4 * attnChunk, steps: hd / 64, rest: hd % 64, scale: 0.3}
					if cstep == 2 {
						sa.out, sa.pchunk = [4]unsafe.Pointer{sc0, sc0, sc1, sc1}, [4]int{0, 1, 0, 1}
					} else {
						sa.q[1] = sa.q[0]
						sa.out, sa.pchunk = [4]unsafe.Pointer{sc0, sc0, sc0, sc0}, [4]int{0, 1, 2, 3}
					}
					f(&sa)
					return out
				}
				if d := firstDiff(run(attnScoresAVX2), run(attnScores)); d >= 0 {
					t.Fatalf("%s cstep=%d: attnScoresAVX2 differs from attnScores at %d", name, cstep, d)
				}
			}
			// Values and reduction.
			nvec := (hd + 15) / 16
			w := rnd(4 * stride)
			const classes = 16
			accN := nvec * classes * 16
			for m := 1; m <= 4; m++ {
				var ns4 [4]int
				for u := range 4 {
					ns4[u] = max(1, n-rng.IntN(3))
				}
				ns4[0] = n
				run := func(avx2 bool) []float32 {
					acc := make([]float32, 4*accN)
					t := attnTask{avx2: avx2}
					va := valueArgs{voffs: &offs[0], vrow: uintptr(4 * hd), accStride: uintptr(64 * classes), nmin: ns4[0]}
					for u := range 4 {
						x := min(u, m-1)
						va.w[u], va.n[u] = unsafe.Pointer(&w[x*stride]), ns4[x]
						va.nmin, va.nmax = min(va.nmin, ns4[x]), max(va.nmax, ns4[x])
					}
					for d0 := 0; d0 < hd; {
						va.v = unsafe.Pointer(&v[d0])
						for u := range 4 {
							va.acc[u] = unsafe.Pointer(&acc[min(u, m-1)*accN+d0*classes])
						}
						if hd-d0 >= 64 {
							t.values(&va, m)
							d0 += 64
							continue
						}
						va.mask = 1<<min(16, hd-d0) - 1
						for u := range m {
							one := va
							one.w[0], one.acc[0], one.n[0] = va.w[u], va.acc[u], va.n[u]
							t.values1(&one)
						}
						d0 += 16
					}
					out := make([]float32, 4*hd+1)
					for u := range m {
						t.reduce(&acc[u*accN], &out[u*hd], nvec, 1<<(hd-16*(nvec-1))-1)
					}
					return append(acc, out...)
				}
				if d := firstDiff(run(true), run(false)); d >= 0 {
					t.Fatalf("%s m=%d: AVX2 values/reduce differ from AVX-512 at %d", name, m, d)
				}
			}
		}
	}
}

// firstDiff returns the first index where a and b differ in bits, or -1.
func firstDiff(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}
