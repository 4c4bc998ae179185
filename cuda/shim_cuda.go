//go:build cuda

package cuda

// The driver calls gorgonia.org/cu does not wrap: stream capture, graph
// instantiation and launch, and pinned host memory. Handles cross from cu
// as the raw driver pointers they hold.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

static CUresult ninferBeginCapture(CUstream s) {
	return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
}

// ninferEndCapture ends the capture on s and instantiates the graph; on
// success *g and *e hold the graph and its executable and *nodes its node
// count, on failure nothing is left allocated.
static CUresult ninferEndCapture(CUstream s, CUgraph *g, CUgraphExec *e, size_t *nodes) {
	CUresult r = cuStreamEndCapture(s, g);
	if (r != CUDA_SUCCESS) return r;
	r = cuGraphGetNodes(*g, NULL, nodes);
	if (r == CUDA_SUCCESS) r = cuGraphInstantiateWithFlags(e, *g, 0);
	if (r != CUDA_SUCCESS) cuGraphDestroy(*g);
	return r;
}

static const char *ninferErrorName(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL) return "CUDA_ERROR_UNKNOWN";
	return s;
}

static const char *ninferErrorString(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorString(r, &s) != CUDA_SUCCESS || s == NULL) return "unknown error";
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// driverError is a failed driver call of the shim.
type driverError struct {
	call string
	code C.CUresult
}

func (e *driverError) Error() string {
	return fmt.Sprintf("cuda: %s: %s (%s)", e.call, C.GoString(C.ninferErrorName(e.code)), C.GoString(C.ninferErrorString(e.code)))
}

func check(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	return &driverError{call, r}
}

// rawStream is the driver handle of s.
func rawStream(s cu.Stream) C.CUstream { return C.CUstream(unsafe.Pointer(s.C())) }

// graphExec is an instantiated captured graph.
type graphExec struct {
	g     C.CUgraph
	e     C.CUgraphExec
	nodes int // kernel launches (graph nodes) it replays
}

// beginCapture starts capturing the work this thread issues on s.
func beginCapture(s cu.Stream) error {
	return check("cuStreamBeginCapture", C.ninferBeginCapture(rawStream(s)))
}

// endCapture ends the capture begun on s and instantiates the graph.
func endCapture(s cu.Stream) (*graphExec, error) {
	var g graphExec
	var nodes C.size_t
	if err := check("cuStreamEndCapture", C.ninferEndCapture(rawStream(s), &g.g, &g.e, &nodes)); err != nil {
		return nil, err
	}
	g.nodes = int(nodes)
	return &g, nil
}

// launch replays the graph on s.
func (g *graphExec) launch(s cu.Stream) error {
	return check("cuGraphLaunch", C.cuGraphLaunch(g.e, rawStream(s)))
}

// destroy frees the graph and its executable.
func (g *graphExec) destroy() error {
	err := check("cuGraphExecDestroy", C.cuGraphExecDestroy(g.e))
	if err2 := check("cuGraphDestroy", C.cuGraphDestroy(g.g)); err == nil {
		err = err2
	}
	return err
}

// hostAlloc allocates n bytes of page-locked host memory, which
// asynchronous copies read and write without staging.
func hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if err := check("cuMemAllocHost", C.cuMemAllocHost(&p, C.size_t(n))); err != nil {
		return nil, err
	}
	return p, nil
}

// hostFree frees memory from hostAlloc.
func hostFree(p unsafe.Pointer) error {
	if p == nil {
		return nil
	}
	return check("cuMemFreeHost", C.cuMemFreeHost(p))
}

// headerVersion is the CUDA_VERSION of the cuda.h the shim was compiled
// with (11080 for 11.8).
func headerVersion() int { return int(C.CUDA_VERSION) }
