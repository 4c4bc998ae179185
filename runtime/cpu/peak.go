package cpu

import (
	"runtime"
	"sync"
	"time"
)

// PeakOp is a multiply-add whose peak rate Peak measures.
type PeakOp int

const (
	// PeakInt8 is the int8 dot product the quantized kernels are built
	// on: AVX-512 VNNI VPDPBUSD (64 multiply-adds per instruction), at
	// avx2 VPMADDUBSW (32, summed in int16 pairs; the kernels add a
	// VPMADDWD or VPADDW to accumulate, so they reach less of it).
	PeakInt8 PeakOp = iota
	// PeakF32 is the float32 fused multiply-add of the float kernels, at
	// the running level's width (16 lanes at avx512, 8 at avx2).
	PeakF32
)

func (op PeakOp) String() string { return [...]string{"int8", "f32"}[op] }

// peakLoop returns the loop Peak times for op at the running level and
// the multiply-adds one of its iterations does, or nil where the level
// lacks the instruction.
func peakLoop(op PeakOp) (run func(n int), macs int) {
	switch {
	case level == levelAVX512 && op == PeakInt8:
		return peakVNNI, 16 * 64
	case level == levelAVX512 && op == PeakF32:
		return peakFMA512, 16 * 16
	case level == levelAVX2 && op == PeakInt8:
		return peakMADDUBSW256, 12 * 32
	case level == levelAVX2 && op == PeakF32:
		return peakFMA256, 12 * 8
	}
	return nil, 0
}

// Peak measures the most multiply-adds of op per second that threads
// goroutines (each on an OS thread of its own) issue together, from a loop
// of independent register-only instructions that run for about d: the
// ceiling a matmul of that arithmetic can approach. It returns 0 where the
// running kernel level lacks the instruction.
func Peak(op PeakOp, threads int, d time.Duration) float64 {
	run, macs := peakLoop(op)
	if run == nil || threads < 1 {
		return 0
	}
	// Calibrate on one thread: iterations that take about d.
	n := 1 << 16
	for {
		start := time.Now()
		run(n)
		if el := time.Since(start); el >= d/8 || n >= 1<<34 {
			n = int(float64(n) * float64(d) / float64(max(el, time.Microsecond)))
			break
		}
		n *= 4
	}
	var wg sync.WaitGroup
	var ready, start sync.WaitGroup
	ready.Add(threads)
	start.Add(1)
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ready.Done()
			start.Wait()
			run(n)
		}()
	}
	ready.Wait()
	t0 := time.Now()
	start.Done()
	wg.Wait()
	return float64(threads) * float64(n) * float64(macs) / time.Since(t0).Seconds()
}
