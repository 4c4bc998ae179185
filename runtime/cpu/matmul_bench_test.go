package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// benchTokens are BenchmarkMatMul's activation rows: decode batches of
// 1..16 rows and a prefill chunk of 64.
var benchTokens = []int{1, 2, 4, 8, 16, 64}

// BenchmarkMatMul times one matmul for each weight dtype, with the fast
// kernels and the reference ones side by side: decode batches (T <= 16) on
// a weight of 36864x1024, larger than the caches as a model's weights are,
// in the layout Backend.Load gives it at each level (loadedAt),
// and a prefill chunk (T=64) on the 0.6B-shape FFN size, 3072x1024. GB/s is
// weight bytes read per second (what bounds small T: a batch of T rows
// should cost little more than one while it stays near the machine's
// bandwidth), GMAC/s the multiply-adds (what bounds large T).
// NINFER_BENCH_SMALLW=1 runs the decode batches on the 3072x1024 weight
// too, which stays in cache: the kernels' compute rate without the weight
// stream.
// NINFER_BENCH_DTYPES limits the dtypes (see benchDTypes).
func BenchmarkMatMul(b *testing.B) {
	const k = 1024
	r := rand.New(rand.NewPCG(1, 1))
	for _, dt := range benchDTypes(b) {
		for _, T := range benchTokens {
			n := 3072
			if T <= 16 && os.Getenv("NINFER_BENCH_SMALLW") == "" {
				n = 36864
			}
			w := randWeight(r, dt, n, k)
			x := randActivations(r, T, k)
			for _, lv := range testLevels() {
				b.Run(fmt.Sprintf("%v/T=%d/%v", dt, T, lv), func(b *testing.B) {
					defer setLevel(lv)()
					benchMatMul(b, loadedAt(b, w, lv), x, T, lv != levelRef)
				})
			}
		}
	}
}

// benchDTypes returns the dtypes BenchmarkMatMul times: every dtype the
// backend multiplies, or those of NINFER_BENCH_DTYPES (comma-separated
// names, e.g. "q4_K,q6_K").
func benchDTypes(b *testing.B) []tensor.DType {
	if s := os.Getenv("NINFER_BENCH_DTYPES"); s != "" {
		var ds []tensor.DType
		for _, name := range strings.Split(s, ",") {
			d, err := tensor.ParseDType(name)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, d)
		}
		return ds
	}
	var ds []tensor.DType
	for _, d := range tensor.DTypes() {
		if kernelOf(d).kind != kindNone {
			ds = append(ds, d)
		}
	}
	return ds
}

func benchMatMul(b *testing.B, w *weights.Tensor, x []float32, T int, simd bool) {
	bk := &Backend{pool: newPool(runtime.GOMAXPROCS(0))}
	defer bk.pool.close()
	K, N := w.Shape[0], w.Rows()
	xt := tensor.Tensor{ID: 0, Shape: [2]int{T, K}, DType: tensor.F32}
	wt := tensor.Tensor{ID: 1, Shape: [2]int{N, K}, DType: w.DType}
	op := tensor.Op{Kind: tensor.OpMatMul, Args: []tensor.Tensor{xt, wt}, Out: tensor.Tensor{ID: 2, Shape: [2]int{T, N}, DType: tensor.F32}}
	p := &program{b: bk, f32: [][]float32{x, nil, make([]float32, T*N)}, w: []*weights.Tensor{nil, w, nil}}
	b.ResetTimer()
	cpu0 := processCPUSeconds()
	for range b.N {
		p.mm.q, p.mm.r, p.mm.a = actKey{}, actKey{}, actKey{} // prepare activations every time, as a new step would
		if simd && fastMatmul(w.DType) {
			p.matmulFast(p.f32[2], op)
		} else {
			p.matmulRef(p.f32[2], op)
		}
	}
	b.ReportMetric(float64(len(w.Data))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	b.ReportMetric(float64(T*K*N)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
	// Per CPU-second (the process's user and system time, every thread's):
	// on a shared host the rate of the cores this benchmark did get.
	if cpu := processCPUSeconds() - cpu0; cpu > 0 {
		b.ReportMetric(float64(T*K*N)*float64(b.N)/cpu/1e9, "cpu_GMAC/s")
	}
}

// loadedAt returns w in the layout Backend.Load gives it at level lv:
// Q8_0 in LayoutQ8x16 and Q4_0/IQ4_NL in LayoutQ4x16 at every level, the
// K-quants of kGroupOf in their group layouts at the levels with their
// kernels (kGroup.hasKernel), w
// itself otherwise.
func loadedAt(tb testing.TB, w *weights.Tensor, lv kernelLevel) *weights.Tensor {
	switch {
	case repackableQ8(w):
		return repacked(tb, w)
	case repackableQ4(w):
		return repackedQ4(tb, w)
	case groupableK(w) && kGroupOf(w.DType).hasKernel(lv):
		return repackedK(tb, w)
	}
	return w
}
