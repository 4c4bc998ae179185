package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPeak reports the machine's peak multiply-add rates (Peak) at
// each fast level on GOMAXPROCS threads: int8 (VPDPBUSD; at avx2
// VPMADDUBSW) and f32 FMA in GMAC/s, the ceilings BenchmarkGEMM's figures
// are measured against.
func BenchmarkPeak(b *testing.B) {
	for _, lv := range testLevels() {
		for _, op := range []PeakOp{PeakInt8, PeakF32} {
			b.Run(fmt.Sprintf("%v/%v", op, lv), func(b *testing.B) {
				defer setLevel(lv)()
				if run, _ := peakLoop(op); run == nil {
					b.Skipf("no %v loop at level %v", op, lv)
				}
				var rate float64
				for range b.N {
					rate = Peak(op, runtime.GOMAXPROCS(0), 50*time.Millisecond)
				}
				b.ReportMetric(rate/1e9, "GMAC/s")
			})
		}
	}
}

// peaks caches Peak per level and op for BenchmarkGEMM.
var peaks = map[[2]int]float64{}

func cachedPeak(op PeakOp) float64 {
	key := [2]int{int(level), int(op)}
	if v, ok := peaks[key]; ok {
		return v
	}
	v := Peak(op, runtime.GOMAXPROCS(0), 100*time.Millisecond)
	peaks[key] = v
	return v
}

// BenchmarkGEMM times the compute-bound matmuls of prefill and batched
// decode: T = 64 and 512 tokens against the 0.6B-shape FFN weight
// (3072x1024, which stays in L3), every weight dtype (NINFER_BENCH_DTYPES
// limits them), at each fast level on GOMAXPROCS threads. It reports
// GMAC/s and pct_peak: the share of the level's measured peak (Peak:
// PeakInt8 for quantized dtypes, PeakF32 for F32/F16/BF16; at avx2, with
// no VNNI, the int8 peak is VPMADDUBSW's). Q8_0
// and Q4_0 weights are in weights.LayoutQ8x16 and LayoutQ4x16 and the
// K-quants of kGroupOf in their group layouts at the levels with their
// kernels (kGroup.hasKernel), as Backend.Load lays them out (loadedAt).
// NINFER_BENCH_DOWN=1 times the FFN's down projection instead (1024x3072:
// rows of K = 3072, which the float GEMM splits along k). cpu_GMAC/s
// (benchMatMul) counts the process's CPU time instead of the wall clock:
// on a busy host run it with -test.cpu 1 against one thread's peak.
func BenchmarkGEMM(b *testing.B) {
	k, n := 1024, 3072
	if os.Getenv("NINFER_BENCH_DOWN") != "" {
		k, n = n, k
	}
	r := rand.New(rand.NewPCG(3, 3))
	for _, dt := range benchDTypes(b) {
		w := randWeight(r, dt, n, k)
		op := PeakInt8
		if kernelOf(dt).kind == kindFloat {
			op = PeakF32
		}
		for _, T := range []int{64, 512} {
			x := randActivations(r, T, k)
			for _, lv := range testLevels() {
				if lv == levelRef {
					continue
				}
				b.Run(fmt.Sprintf("%v/T=%d/%v", dt, T, lv), func(b *testing.B) {
					defer setLevel(lv)()
					peak := cachedPeak(op)
					benchMatMul(b, loadedAt(b, w, lv), x, T, true)
					if peak > 0 {
						gmacs := float64(T*k*n) * float64(b.N) / b.Elapsed().Seconds()
						b.ReportMetric(100*gmacs/peak, "pct_peak")
					}
				})
			}
		}
	}
}
