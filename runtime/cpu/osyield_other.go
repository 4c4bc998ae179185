//go:build !linux

package cpu

import "runtime"

// osYield lets other goroutines run while a goroutine waits on a worker.
func osYield() { runtime.Gosched() }
