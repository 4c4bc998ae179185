package cpu

// Kernels in hybrid_amd64.s (see the Go references in hybrid_fast.go).

//go:noescape
func deltaDecayPred(s, k, pred *float32, dk, dv int, decay float32)

//go:noescape
func deltaUpdateOut(s, k, q, d, o *float32, dk, dv int, scale float32)

//go:noescape
func vecMatAcc(y, a, x *float32, m, n int)
