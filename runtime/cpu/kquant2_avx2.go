package cpu

import "unsafe"

// The weightKernel wrappers of the levelAVX2 kernels of
// kquant2_avx2_amd64.s (Q2_K, Q3_K, IQ4_XS).

// q2KDot4AVX2 is the weightKernel.dot4 of Q2_K at levelAVX2 (q2KDot4x1AVX2).
func q2KDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q2KDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q2KDot14AVX2 is the weightKernel.dot1x4 of Q2_K at levelAVX2
// (q2KDot1x4AVX2).
func q2KDot14AVX2(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(q2KDot1x4AVX2, w, a, t, out, otok)
}

// q3KDot4AVX2 is the weightKernel.dot4 of Q3_K at levelAVX2 (q3KDot4x1AVX2).
func q3KDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q3KDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// q3KDot14AVX2 is the weightKernel.dot1x4 of Q3_K at levelAVX2
// (q3KDot1x4AVX2).
func q3KDot14AVX2(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(q3KDot1x4AVX2, w, a, t, out, otok)
}

// iq4XSDot4AVX2 is the weightKernel.dot4 of IQ4_XS at levelAVX2
// (iq4XSDot4x1AVX2).
func iq4XSDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	iq4XSDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), len(x.d), out, ostride)
}

// iq4XSDot14AVX2 is the weightKernel.dot1x4 of IQ4_XS at levelAVX2
// (iq4XSDot1x4AVX2).
func iq4XSDot14AVX2(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(iq4XSDot1x4AVX2, w, a, t, out, otok)
}
