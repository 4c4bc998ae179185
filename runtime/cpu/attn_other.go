//go:build !amd64

package cpu

// Without amd64 assembly the attention kernels are never selected; these
// stubs only satisfy the compiler.

func attnScores4(a *scoreArgs)   { panic("cpu: no simd kernels") }
func attnScores1(a *scoreArgs)   { panic("cpu: no simd kernels") }
func attnValues4x4(a *valueArgs) { panic("cpu: no simd kernels") }
func attnValues1x4(a *valueArgs) { panic("cpu: no simd kernels") }
func attnValues4x1(a *valueArgs) { panic("cpu: no simd kernels") }
func attnValues1x1(a *valueArgs) { panic("cpu: no simd kernels") }

func softmaxExp(s *float32, n int, m float32, sum *float64) int { panic("cpu: no simd kernels") }
func maxF32(s *float32, n int) float32                          { panic("cpu: no simd kernels") }
func mulF32(s *float32, n int, c float32)                       { panic("cpu: no simd kernels") }
func swigluV16(out, gate, up *float32, n16 int)                 { panic("cpu: no simd kernels") }
func roundF16(dst, src *float32, n int)                         { panic("cpu: no simd kernels") }
func quantQ8(x *float32, nb int, xu *byte, d *float32)          { panic("cpu: no simd kernels") }

func sumSquares(x *float32, n int) float64          { panic("cpu: no simd kernels") }
func scaleMul(dst, x, w *float32, n int, s float32) { panic("cpu: no simd kernels") }
