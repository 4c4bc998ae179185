package cpu

// Kernels in hybrid_amd64.s (see the Go references in hybrid_fast.go).

//go:noescape
func deltaDecayPred(s, k, pred *float32, dk, dv int, decay float32)

//go:noescape
func deltaUpdateOut(s, k, q, d, o *float32, dk, dv int, scale float32)

// gemmF32 is gemmF32Go for n a multiple of 16 (AVX-512).
//
//go:noescape
func gemmF32(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32)

// gemmF32AVX2 is gemmF32 at levelAVX2, with the same bits.
//
//go:noescape
func gemmF32AVX2(c, a, b *float32, m, k, n, lda, ldb, ldc int, beta float32)

// convRow is convRowGo for n a multiple of 16 (AVX-512).
//
//go:noescape
func convRow(o, win, x, taps *float32, n, c, k int)

// convRowAVX2 is convRow at levelAVX2, with the same bits.
//
//go:noescape
func convRowAVX2(o, win, x, taps *float32, n, c, k int)
