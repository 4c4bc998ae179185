package bench

import (
	"sync"
	"time"
)

// Triad measures memory bandwidth with STREAM's triad, a[i] = b[i] + s*c[i],
// over three float64 arrays of elems elements split across threads
// goroutines. It runs passes passes after one untimed pass (which faults the
// pages in) and returns the best pass's rate in bytes per second, counting
// 24 bytes per element as STREAM does (two reads, one write; write-allocate
// traffic is not counted), and the bytes one pass moves. Choose elems so the
// arrays are several times the last-level cache.
func Triad(elems, threads, passes int) (bytesPerSecond float64, bytesPerPass int64) {
	threads = max(threads, 1)
	a, b, c := make([]float64, elems), make([]float64, elems), make([]float64, elems)
	for i := range b {
		b[i], c[i] = 1, 2
	}
	run := func() time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		per := (elems + threads - 1) / threads
		for lo := 0; lo < elems; lo += per {
			hi := min(lo+per, elems)
			wg.Add(1)
			go func(a, b, c []float64) {
				defer wg.Done()
				const s = 3.0
				for i := range a {
					a[i] = b[i] + s*c[i]
				}
			}(a[lo:hi], b[lo:hi], c[lo:hi])
		}
		wg.Wait()
		return time.Since(start)
	}
	run()
	best := time.Duration(1<<63 - 1)
	for range max(passes, 1) {
		best = min(best, run())
	}
	bytesPerPass = 24 * int64(elems)
	return float64(bytesPerPass) / best.Seconds(), bytesPerPass
}
