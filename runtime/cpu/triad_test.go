package cpu

import (
	"runtime"
	"sync"
	"testing"
)

// BenchmarkTriad measures memory bandwidth the way STREAM's triad does,
// a[i] = b[i] + s*c[i] over float64 arrays far larger than the caches,
// split across GOMAXPROCS goroutines, counting 24 bytes per element (two
// reads and one write). It is the yardstick for decode's weight bandwidth.
func BenchmarkTriad(b *testing.B) {
	const n = 1 << 24 // 128 MiB per array
	x, y, z := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range y {
		y[i], z[i] = 1, 2
	}
	threads := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	triad := func() {
		per := n / threads
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func(a, b, c []float64) {
				defer wg.Done()
				const s = 3.0
				for i := range a {
					a[i] = b[i] + s*c[i]
				}
			}(x[t*per:(t+1)*per], y[t*per:(t+1)*per], z[t*per:(t+1)*per])
		}
		wg.Wait()
	}
	triad()
	b.SetBytes(24 * n)
	b.ResetTimer()
	for range b.N {
		triad()
	}
	b.ReportMetric(float64(24*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
