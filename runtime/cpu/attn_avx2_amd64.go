package cpu

// The levelAVX2 attention kernels, in attn_avx2_amd64.s; they need the
// features hasAVX2 checks. Each has the arguments and contract of its
// AVX-512 counterpart in attn_amd64.go (the name without AVX2) and gives
// the same bits.

// attnScoresAVX2 is attnScores: for chunks c = 0, a.cstep, ... below a.nc
// and the 4 pairs p, a.out[p][16(c+a.pchunk[p]) + l] = dotVecF32(K lane l,
// a.q[p/2]) * a.scale.
//
//go:noescape
func attnScoresAVX2(a *scoreArgs)

// softmaxVAVX2 is softmaxV: softmaxInPlace(s[:n]) for n >= 1.
//
//go:noescape
func softmaxVAVX2(s *float32, n int)

// attnValues4AVX2 is attnValues4: the class fma chains of query vector 0
// for the 64 dims at a.v.
//
//go:noescape
func attnValues4AVX2(a *valueArgs)

// attnValues1AVX2 is attnValues1: attnValues4AVX2 for the 16 dims at a.v
// whose lanes a.mask selects (the others' accumulators are 0).
//
//go:noescape
func attnValues1AVX2(a *valueArgs)

// attnValues4qAVX2 is attnValues4q: attnValues4AVX2 for 4 query vectors.
//
//go:noescape
func attnValues4qAVX2(a *valueArgs)

// attnValues2qAVX2 is attnValues2q: attnValues4AVX2 for 2 query vectors.
//
//go:noescape
func attnValues2qAVX2(a *valueArgs)

// attnReduceAVX2 is attnReduce: out[16k:16k+16] = the reduce16 of dim
// vector k's 16 class accumulators, for k < nvec, the last vector's lanes
// by mask.
//
//go:noescape
func attnReduceAVX2(acc, out *float32, nvec int, mask uint64)

// swigluV16AVX2 is swigluV16 at levelAVX2.
//
//go:noescape
func swigluV16AVX2(out, gate, up *float32, n16 int)

// quantQ8KAVX2 is quantQ8K at levelAVX2.
//
//go:noescape
func quantQ8KAVX2(x *float32, nb int, qs *int8, d *float32, bsums *int16)
