package cpu

import "unsafe"

// The weightKernel wrappers of the AVX2 K-quant kernels
// (kquant_avx2_amd64.s), for the avx2 kernel sets of weightKernels.

// q4KDot4AVX2 is the avx2 weightKernel.dot4 of Q4_K (q4KDot4x1AVX2).
func q4KDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q4KDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q4KDot14nAVX2 is the avx2 weightKernel.dot1x4n of Q4_K (q4KDot1x4AVX2).
func q4KDot14nAVX2(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4n(q4KDot1x4AVX2, w, a, t, n, out, otok)
}

// q6KDot4AVX2 is the avx2 weightKernel.dot4 of Q6_K (q6KDot4x1AVX2).
func q6KDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q6KDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q6KDot14nAVX2 is the avx2 weightKernel.dot1x4n of Q6_K (q6KDot1x4AVX2).
func q6KDot14nAVX2(w unsafe.Pointer, a *actQuant, t, n int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4n(q6KDot1x4AVX2, w, a, t, n, out, otok)
}

// q5KDot4AVX2 is the avx2 weightKernel.dot4 of Q5_K (q5KDot4x1AVX2).
func q5KDot4AVX2(w unsafe.Pointer, wstride uintptr, x actRow, out unsafe.Pointer, ostride uintptr) {
	q5KDot4x1AVX2(w, wstride, unsafe.Pointer(&x.qs[0]), unsafe.Pointer(&x.d[0]), unsafe.Pointer(&x.bsums[0]), len(x.d), out, ostride)
}

// q5KDot14AVX2 is the avx2 weightKernel.dot1x4 of Q5_K (q5KDot1x4AVX2).
func q5KDot14AVX2(w unsafe.Pointer, a *actQuant, t int, out unsafe.Pointer, otok uintptr) {
	kquantDot1x4(q5KDot1x4AVX2, w, a, t, out, otok)
}
