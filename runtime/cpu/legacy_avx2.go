package cpu

import "unsafe"

// The weightKernel wrappers of the AVX2 kernels of legacy_avx2_amd64.s.

// q4_1Dot4AVX2 is the avx2 weightKernel.dot4 of Q4_1 (q4_1Dot4x1AVX2).
func q4_1Dot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q4_1Dot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.s[0]), len(x.d), out, ostride)
}

// q5_1Dot4AVX2 is the avx2 weightKernel.dot4 of Q5_1 (q5_1Dot4x1AVX2).
func q5_1Dot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q5_1Dot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.s[0]), len(x.d), out, ostride)
}

// q5_0Dot4AVX2 is the avx2 weightKernel.dot4 of Q5_0 (q5_0Dot4x1AVX2).
func q5_0Dot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q5_0Dot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// iq4NLDot4AVX2 is the avx2 weightKernel.dot4 of IQ4_NL (iq4NLDot4x1AVX2).
func iq4NLDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	iq4NLDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// q5_0Dot22AVX2 is the avx2 weightKernel.dot2x2 of Q5_0 (q5_0Dot2x2AVX2).
func q5_0Dot22AVX2(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q5_0Dot2x2AVX2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), len(a.d), out, ostride, otok)
}

// iq4NLDot22AVX2 is the avx2 weightKernel.dot2x2 of IQ4_NL (iq4NLDot2x2AVX2).
func iq4NLDot22AVX2(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	iq4NLDot2x2AVX2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), len(a.d), out, ostride, otok)
}

// q4_1Dot22AVX2 is the avx2 weightKernel.dot2x2 of Q4_1 (q4_1Dot2x2AVX2).
func q4_1Dot22AVX2(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q4_1Dot2x2AVX2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.s[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), unsafe.Pointer(&b.s[0]), len(a.d), out, ostride, otok)
}

// q5_1Dot22AVX2 is the avx2 weightKernel.dot2x2 of Q5_1 (q5_1Dot2x2AVX2).
func q5_1Dot22AVX2(w unsafe.Pointer, wstride uintptr, a, b actRow, out unsafe.Pointer, ostride, otok uintptr) {
	q5_1Dot2x2AVX2(w, wstride, unsafe.Pointer(&a.qs[0]), unsafe.Pointer(&a.d[0]), unsafe.Pointer(&a.s[0]),
		unsafe.Pointer(&b.qs[0]), unsafe.Pointer(&b.d[0]), unsafe.Pointer(&b.s[0]), len(a.d), out, ostride, otok)
}
