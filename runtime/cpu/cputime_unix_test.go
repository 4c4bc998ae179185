//go:build unix

package cpu

import "syscall"

// processCPUSeconds returns the CPU time (user and system) the process has
// used so far, or 0 where it cannot tell.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rusageThread is Linux's RUSAGE_THREAD; other systems refuse it, and
// threadCPUSeconds reports 0 there.
const rusageThread = 1

// threadCPUSeconds returns the CPU time the calling OS thread has used so
// far (Linux), or 0 where it cannot tell.
func threadCPUSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
