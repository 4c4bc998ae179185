//go:build !amd64

package cpu

// Without amd64 assembly the levelAVX2 attention kernels are never
// selected; these stubs only satisfy the compiler.

func attnScoresAVX2(a *scoreArgs)    { panic("cpu: no simd kernels") }
func softmaxVAVX2(s *float32, n int) { panic("cpu: no simd kernels") }
func attnValues4AVX2(a *valueArgs)   { panic("cpu: no simd kernels") }
func attnValues1AVX2(a *valueArgs)   { panic("cpu: no simd kernels") }
func attnValues4qAVX2(a *valueArgs)  { panic("cpu: no simd kernels") }
func attnValues2qAVX2(a *valueArgs)  { panic("cpu: no simd kernels") }
func attnReduceAVX2(acc, out *float32, nvec int, mask uint64) {
	panic("cpu: no simd kernels")
}

func swigluV16AVX2(out, gate, up *float32, n16 int) { panic("cpu: no simd kernels") }

func quantQ8KAVX2(x *float32, nb int, qs *int8, d *float32, bsums *int16) {
	panic("cpu: no simd kernels")
}
