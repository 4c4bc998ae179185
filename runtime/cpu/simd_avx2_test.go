package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// needAVX2Pair skips tests that compare the AVX2 kernels with the AVX-512
// ones when the CPU cannot run both.
func needAVX2Pair(t *testing.T) {
	t.Helper()
	if !hasAVX512() || !hasAVX2() {
		t.Skip("needs AVX-512 and AVX2 to compare the two kernel sets")
	}
}

// avx2Ks are the row lengths the AVX2 kernel tests take: every tail length
// of a 16-element chunk, with and without whole chunks before it, and long
// rows with and without a tail.
var avx2Ks = func() []int {
	var ks []int
	for k := 1; k <= 70; k++ {
		ks = append(ks, k)
	}
	return append(ks, 1024, 1031)
}()

// floatRows returns 4 rows of k elements of dtype dt (F32, F16 or BF16)
// with random values of random magnitudes (zeros and subnormals included),
// stride bytes apart, each followed by NaNs up to the next row: a kernel
// that lets any element past a row into its sums returns NaN.
func floatRows(r *rand.Rand, dt tensor.DType, k, pad int) (rows []byte, stride int) {
	es := 4
	if dt != tensor.F32 {
		es = 2
	}
	stride = (k + pad) * es
	rows = make([]byte, 4*stride)
	for i := 0; i < 4*(k+pad); i++ {
		v := float32(math.NaN())
		if i%(k+pad) < k {
			switch r.IntN(40) {
			case 0:
				v = 0
			case 1:
				v = float32(math.Copysign(0, -1))
			case 2:
				v = float32(r.NormFloat64() * 1e-39)
			default:
				v = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(20)-10))
			}
		}
		switch dt {
		case tensor.F32:
			binary.LittleEndian.PutUint32(rows[4*i:], math.Float32bits(v))
		case tensor.F16:
			binary.LittleEndian.PutUint16(rows[2*i:], tensor.F32ToF16(v))
		default:
			binary.LittleEndian.PutUint16(rows[2*i:], tensor.F32ToBF16(v))
		}
	}
	return rows, stride
}

// TestAVX2FloatKernels checks the AVX2 float kernels against the AVX-512
// ones bit for bit: the 4x1 kernels of each dtype, f32Dot4x4 (on float32
// rows and on f16/bf16 rows converted by each level's cvtF16/cvtBF16),
// and the conversions themselves, for every tail length.
func TestAVX2FloatKernels(t *testing.T) {
	needAVX2Pair(t)
	r := rand.New(rand.NewPCG(31, 32))
	type dot4 func(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)
	kernels := []struct {
		dt         tensor.DType
		avx2, avx5 dot4
	}{
		{tensor.F32, f32Dot4x1AVX2, f32Dot4x1},
		{tensor.F16, f16Dot4x1AVX2, f16Dot4x1},
		{tensor.BF16, bf16Dot4x1AVX2, bf16Dot4x1},
	}
	for _, kc := range kernels {
		for _, k := range avx2Ks {
			w, ws := floatRows(r, kc.dt, k, 1+r.IntN(17))
			x := make([]float32, 4*k+16)
			for i := range x {
				x[i] = float32(r.NormFloat64())
				if i >= 4*k {
					x[i] = float32(math.NaN())
				}
			}
			name := fmt.Sprintf("%v k=%d", kc.dt, k)
			var got, want [16]float32
			for _, stride := range []int{ws, 0} {
				kc.avx2(unsafe.Pointer(&w[0]), uintptr(stride), unsafe.Pointer(&x[0]), k, unsafe.Pointer(&got[0]), 8)
				kc.avx5(unsafe.Pointer(&w[0]), uintptr(stride), unsafe.Pointer(&x[0]), k, unsafe.Pointer(&want[0]), 8)
				sameBits(t, fmt.Sprintf("%s dot4x1 wstride=%d", name, stride), got[:], want[:])
			}

			// The 4x4 kernel on float32 rows: the rows themselves, or the
			// f16/bf16 rows converted, as runFloat tiles them.
			f32w, f32ws := w, ws
			if kc.dt != tensor.F32 {
				tiles := [2][]float32{make([]float32, 4*k), make([]float32, 4*k)}
				for i := 0; i < 4; i++ {
					src := w[i*ws : i*ws+2*k]
					for lv, tile := range tiles {
						restore := setLevel([]kernelLevel{levelAVX2, levelAVX512}[lv])
						convertRow(kc.dt, tile[i*k:(i+1)*k], src)
						restore()
					}
				}
				sameBits(t, name+" convertRow", tiles[0], tiles[1])
				f32w, f32ws = unsafe.Slice((*byte)(unsafe.Pointer(&tiles[0][0])), 16*k), 4*k
			}
			f32Dot4x4AVX2(unsafe.Pointer(&f32w[0]), uintptr(f32ws), unsafe.Pointer(&x[0]), uintptr(4*k), k, unsafe.Pointer(&got[0]), 16)
			f32Dot4x4(unsafe.Pointer(&f32w[0]), uintptr(f32ws), unsafe.Pointer(&x[0]), uintptr(4*k), k, unsafe.Pointer(&want[0]), 16)
			sameBits(t, name+" f32Dot4x4", got[:], want[:])
			// 4x4 and 4x1 agree lane for lane (runFloat mixes them).
			var one [16]float32
			for j := 0; j < 4; j++ {
				f32Dot4x1AVX2(unsafe.Pointer(&f32w[0]), uintptr(f32ws), unsafe.Pointer(&x[j*k]), k, unsafe.Pointer(&one[4*j]), 4)
			}
			sameBits(t, name+" f32Dot4x4 against f32Dot4x1", got[:], one[:])
		}
	}
}

// TestAVX2FloatMatMul runs F32, F16 and BF16 matmuls at levelAVX2 and
// levelAVX512 and checks that they agree bit for bit, over row counts that
// leave partial quads and batches that take the 4x4 and 4x1 kernels.
func TestAVX2FloatMatMul(t *testing.T) {
	needAVX2Pair(t)
	r := rand.New(rand.NewPCG(33, 34))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, k := range []int{1, 15, 16, 33, 70, 1031} {
			for _, n := range []int{1, 3, 4, 5, 7, 13} {
				w := randWeight(r, dt, n, k)
				for _, T := range []int{1, 2, 3, 4, 5, 8, 11} {
					x := randActivations(r, T, k)
					var outs [2][]float32
					for i, lv := range []kernelLevel{levelAVX2, levelAVX512} {
						restore := setLevel(lv)
						outs[i] = runMatMul(w, x, T, 2, true)
						restore()
					}
					sameBits(t, fmt.Sprintf("%v k=%d n=%d T=%d", dt, k, n, T), outs[0], outs[1])
				}
			}
		}
	}
}

// TestAVX2QuantKernels checks the AVX2 Q8_0 and Q4_0 kernels (4x1 on each
// of two tokens, 4x2 on both) against dotQ8/dotQ4 bit for bit on extreme
// quants, where VPMADDUBSW would
// saturate without the sign handling: weights -128 and 127 (Q8_0) or 0 and
// 15 (Q4_0 nibbles) against activations -127 and 127, then random blocks.
func TestAVX2QuantKernels(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewPCG(35, 36))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		bb, dot, kernel, kernel2 := 34, dotQ8, q8Dot4x1AVX2, q8Dot4x2AVX2
		if dt == tensor.Q4_0 {
			bb, dot, kernel, kernel2 = 18, dotQ4, q4Dot4x1AVX2, q4Dot4x2AVX2
		}
		for _, nb := range []int{1, 2, 3, 8, 33} {
			for pattern := range 5 {
				w := make([]byte, 4*nb*bb)
				var x q8Blocks // both tokens, one after the other
				x.resize(2 * 32 * nb)
				for b := 0; b < 4*nb; b++ {
					binary.LittleEndian.PutUint16(w[b*bb:], tensor.F32ToF16(float32(math.Ldexp(0.5+r.Float64(), -r.IntN(8)))))
					for i := 2; i < bb; i++ {
						switch pattern {
						case 0:
							w[b*bb+i] = 0x80 // Q8_0 -128; Q4_0 nibbles 0 and 8
						case 1:
							w[b*bb+i] = 0x7f // Q8_0 127; Q4_0 nibbles 15 and 7
						case 2:
							w[b*bb+i] = []byte{0x80, 0x7f, 0x0f, 0xf0}[r.IntN(4)]
						default:
							w[b*bb+i] = byte(r.IntN(256))
						}
					}
				}
				for i := range x.qs {
					switch pattern {
					case 0, 1, 2:
						x.qs[i] = []int8{-127, 127}[r.IntN(2)]
					default:
						x.qs[i] = int8(r.IntN(255) - 127)
					}
				}
				for b := range x.d {
					x.d[b] = tensor.F16ToF32(tensor.F32ToF16(float32(r.Float64())))
				}
				xu := make([]byte, len(x.qs))
				for i, v := range x.qs {
					xu[i] = byte(v) ^ 0x80
				}
				// want[4*tok+i] = dot(row i, token tok).
				var want, got, got2 [8]float32
				for tok := range 2 {
					xt := q8Blocks{d: x.d[tok*nb : (tok+1)*nb], qs: x.qs[tok*32*nb : (tok+1)*32*nb]}
					for i := range 4 {
						want[4*tok+i] = dot(w[i*nb*bb:(i+1)*nb*bb], &xt)
					}
					kernel(unsafe.Pointer(&w[0]), uintptr(nb*bb), unsafe.Pointer(&xu[tok*32*nb]), unsafe.Pointer(&x.d[tok*nb]), nb, unsafe.Pointer(&got[4*tok]), 4)
				}
				kernel2(unsafe.Pointer(&w[0]), uintptr(nb*bb), unsafe.Pointer(&xu[0]), unsafe.Pointer(&x.d[0]), nb, unsafe.Pointer(&got2[0]), 4, 16)
				name := fmt.Sprintf("%v nb=%d pattern %d", dt, nb, pattern)
				sameBits(t, name+" 4x1", got[:], want[:])
				sameBits(t, name+" 4x2", got2[:], want[:])
			}
		}
	}
}

// TestQuantQ8AVX2 checks quantQ8AVX2 against quantizeQ8 (quants plus 128)
// bit for bit on the blocks TestQuantQ8 takes, and against the AVX-512
// quantQ8 also on blocks with infinities and NaNs, which quantizeQ8 does not
// define.
func TestQuantQ8AVX2(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	const nb = 4096
	x := make([]float32, nb*32)
	for b := range nb {
		scale := math.Ldexp(1, rng.IntN(60)-40)
		for i := range 32 {
			switch {
			case b%7 == 0:
				x[b*32+i] = 0
			case b%11 == 0 && i == 5:
				x[b*32+i] = float32(math.Copysign(0, -1))
			default:
				x[b*32+i] = float32(rng.NormFloat64() * scale)
			}
		}
		if b%13 == 0 {
			x[b*32+rng.IntN(32)] = float32(rng.NormFloat64()) * 1e-40
		}
	}
	xu, d := make([]byte, len(x)), make([]float32, nb)
	quantQ8AVX2(&x[0], nb, &xu[0], &d[0])
	var q q8Blocks
	quantizeQ8(x, &q)
	for b := range nb {
		if math.Float32bits(d[b]) != math.Float32bits(q.d[b]) {
			t.Fatalf("block %d: d = %v, want %v", b, d[b], q.d[b])
		}
	}
	for i := range x {
		if xu[i] != byte(q.qs[i])^0x80 {
			t.Fatalf("x[%d] = %v: quant %d, want %d", i, x[i], int8(xu[i]^0x80), q.qs[i])
		}
	}
	if !hasAVX512() {
		return
	}
	specials := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32}
	for b := 0; b < nb; b += 5 {
		x[b*32+rng.IntN(32)] = specials[rng.IntN(len(specials))]
	}
	xu5, d5 := make([]byte, len(x)), make([]float32, nb)
	quantQ8AVX2(&x[0], nb, &xu[0], &d[0])
	quantQ8(&x[0], nb, &xu5[0], &d5[0])
	sameBits(t, "quantQ8 scales with specials", d, d5)
	for i := range xu {
		if xu[i] != xu5[i] {
			t.Fatalf("x[%d] = %v (block %v): AVX2 quant %d, AVX-512 %d", i, x[i], x[i/32*32:i/32*32+32], int8(xu[i]^0x80), int8(xu5[i]^0x80))
		}
	}
}

// TestRoundF16AVX2 checks roundF16AVX2 against tensor.F32ToF16 on a sweep
// of float32 bit patterns (NaNs need only stay NaNs), and against the
// AVX-512 roundF16 bit for bit.
func TestRoundF16AVX2(t *testing.T) {
	if !hasAVX2() {
		t.Skip("no AVX2")
	}
	src := make([]float32, 0, 1<<20)
	for b := uint64(0); b < 1<<32; b += 4093 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for len(src)%16 != 0 {
		src = append(src, 1)
	}
	dst := make([]float32, len(src))
	roundF16AVX2(&dst[0], &src[0], len(src))
	for i, v := range src {
		want := tensor.F16ToF32(tensor.F32ToF16(v))
		if math.Float32bits(dst[i]) != math.Float32bits(want) && !(v != v && dst[i] != dst[i]) {
			t.Fatalf("round %v (%#x) = %v, want %v", v, math.Float32bits(v), dst[i], want)
		}
	}
	if hasAVX512() {
		d5 := make([]float32, len(src))
		roundF16(&d5[0], &src[0], len(src))
		sameBits(t, "roundF16", dst, d5)
	}
}

// sameBits fails t unless got and want hold the same float32 bits.
func sameBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", name, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: out[%d] = %g (%#x), want %g (%#x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}
