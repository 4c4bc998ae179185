package cpu

// Attention kernels in attn_amd64.s; they need the features hasAVX512 checks.

//go:noescape
func attnScores4(a *scoreArgs)

//go:noescape
func attnScores1(a *scoreArgs)

//go:noescape
func attnValues4x4(a *valueArgs)

//go:noescape
func attnValues1x4(a *valueArgs)

//go:noescape
func attnValues4x1(a *valueArgs)

//go:noescape
func attnValues1x1(a *valueArgs)

//go:noescape
func softmaxExp(s *float32, n int, m float32, sum *float64) int

//go:noescape
func maxF32(s *float32, n int) float32

//go:noescape
func mulF32(s *float32, n int, c float32)

//go:noescape
func swigluV16(out, gate, up *float32, n16 int)

//go:noescape
func roundF16(dst, src *float32, n int)

//go:noescape
func quantQ8(x *float32, nb int, xu *byte, d *float32)

//go:noescape
func sumSquares(x *float32, n int) float64

//go:noescape
func scaleMul(dst, x, w *float32, n int, s float32)
