package cpu

import "unsafe"

// Attention kernels in attn_amd64.s; they need the features hasAVX512 checks.

//go:noescape
func attnScores(a *scoreArgs)

//go:noescape
func softmaxV(s *float32, n int)

//go:noescape
func attnValues4(a *valueArgs)

//go:noescape
func attnValues1(a *valueArgs)

//go:noescape
func attnReduce(acc, out *float32, nvec int, mask uint64)

//go:noescape
func swigluV16(out, gate, up *float32, n16 int)

//go:noescape
func roundF16(dst, src *float32, n int)

//go:noescape
func quantQ8(x *float32, nb int, xu *byte, d *float32)

//go:noescape
func quantQ8K(x *float32, nb int, qs *int8, d *float32, bsums *int16)

//go:noescape
func sumSquares(x *float32, n int) float64

//go:noescape
func scaleMul(dst, x, w *float32, n int, s float32)

//go:noescape
func attnValues4q(a *valueArgs)

//go:noescape
func attnValues2q(a *valueArgs)

//go:noescape
func kvTranspose16(dst *float32, src unsafe.Pointer, rowStride uintptr, n16, kind int)

//go:noescape
func attnScores4q(a *score4Args)
