//go:build !amd64

package cpu

// Without amd64 assembly the hybrid kernels are never selected; these
// stubs only satisfy the compiler.

func deltaDecayPred(s, k, pred *float32, dk, dv int, decay float32)    { panic("cpu: no simd kernels") }
func deltaUpdateOut(s, k, q, d, o *float32, dk, dv int, scale float32) { panic("cpu: no simd kernels") }
func vecMatAcc(y, a, x *float32, m, n int)                             { panic("cpu: no simd kernels") }
