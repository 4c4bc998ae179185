package cpu

import "unsafe"

// Kernels in simd_amd64.s; they need the features hasAVX512 checks.

func cpuid(eax, ecx uint32) (a, b, c, d uint32)
func xgetbv0() (eax uint32)

//go:noescape
func f32Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func f16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func bf16Dot4x1(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func f32Dot4x4(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q8Dot4x1(w unsafe.Pointer, wstride uintptr, xq unsafe.Pointer, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr)

// hasAVX512 reports whether the CPU and OS support the AVX-512 subsets the
// kernels use (F, BW, VL, VNNI, with F16C, FMA, AVX2 and BMI2).
func hasAVX512() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const fma, osxsave, avx, f16c = 1 << 12, 1 << 27, 1 << 28, 1 << 29
	if c1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	// XCR0: SSE, AVX, opmask, ZMM_Hi256 and Hi16_ZMM state enabled by the OS.
	if xgetbv0()&0xe6 != 0xe6 {
		return false
	}
	_, b7, c7, _ := cpuid(7, 0)
	const avx2, bmi2, avx512f, avx512bw, avx512vl = 1 << 5, 1 << 8, 1 << 16, 1 << 30, 1 << 31
	const vnni = 1 << 11
	want := uint32(avx2 | bmi2 | avx512f | avx512bw | avx512vl)
	return b7&want == want && c7&vnni != 0
}

// hasAVX2 reports whether the CPU and OS support the kernels of levelAVX2:
// AVX2 with FMA, F16C and BMI2.
func hasAVX2() bool {
	maxID, _, _, _ := cpuid(0, 0)
	if maxID < 7 {
		return false
	}
	_, _, c1, _ := cpuid(1, 0)
	const fma, osxsave, avx, f16c = 1 << 12, 1 << 27, 1 << 28, 1 << 29
	if c1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	// XCR0: SSE and AVX state enabled by the OS.
	if xgetbv0()&0x6 != 0x6 {
		return false
	}
	_, b7, _, _ := cpuid(7, 0)
	const avx2, bmi2 = 1 << 5, 1 << 8
	return b7&(avx2|bmi2) == avx2|bmi2
}

//go:noescape
func cvtF16(dst *float32, src unsafe.Pointer, n int)

//go:noescape
func cvtBF16(dst *float32, src unsafe.Pointer, n int)

//go:noescape
func q8PairToken(xu *byte, xd *float32, nb int, dst *byte)

//go:noescape
func q8Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q4Gemm4x8(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q8Gemm4x4(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func q8Gemm4x2(w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func ropeNeox16(head, cos, sin *float32, half, n16 int)

// geluF16V writes geluF16 of src[i] into dst[i] for i < n rounded down to
// a multiple of 16, looking the values up in table (geluTable).
//
//go:noescape
func geluF16V(dst, src *float32, n int, table *float32)

//go:noescape
func f32Gemm4x4P(w unsafe.Pointer, x unsafe.Pointer, n16 int, quads int, xquad uintptr, acc unsafe.Pointer, flags int, out unsafe.Pointer, ostride uintptr)

//go:noescape
func pack4x16(dst *float32, src unsafe.Pointer, stride uintptr, n16 int, kind int)

//go:noescape
func sumSquaresGroups(x *float32, stride uintptr, n16, groups int, out *float64)

//go:noescape
func addV(out, x, y *float32, n int)
