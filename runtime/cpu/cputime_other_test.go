//go:build !unix

package cpu

// processCPUSeconds returns 0: no CPU time outside unix.
func processCPUSeconds() float64 { return 0 }

// threadCPUSeconds returns 0: no CPU time outside unix.
func threadCPUSeconds() float64 { return 0 }
