package cpu

import "syscall"

// osYield gives the CPU to another thread (sched_yield), so a goroutine
// waiting on a worker does not hold a core the worker needs.
func osYield() {
	syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
}
