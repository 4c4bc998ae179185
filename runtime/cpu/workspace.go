package cpu

import (
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/exec"
)

// Workspace accounting (exec.WorkspaceReporter). A program's workspace is
// its op output buffers (the activations between ops, sized when the graph
// is prepared and shared by ops whose lifetimes do not overlap) and the
// scratch its kernels grow on demand and keep: quantized and rounded
// activations, weight tiles, attention, recurrent and MoE scratch; the
// weights themselves take none of it. Capacity is what every open program holds; used is what the program of
// the last step held when it finished, and peak the most any step's
// program held.

// footprint is bytes in use (the slices' lengths) and held (their
// capacities).
type footprint struct{ used, held int64 }

// addSlice adds s to f.
func addSlice[E any](f *footprint, s []E) {
	var e E
	size := int64(unsafe.Sizeof(e))
	f.used += size * int64(len(s))
	f.held += size * int64(cap(s))
}

// addSlices adds each slice of ss to f.
func addSlices[E any](f *footprint, ss [][]E) {
	for _, s := range ss {
		addSlice(f, s)
	}
}

// workspace returns p's footprint.
func (p *program) workspace() footprint {
	var f footprint
	for _, buf := range p.arena {
		addSlice(&f, buf[:cap(buf)]) // shared by ops of different sizes: held whole
	}
	m := &p.mm
	for _, q := range m.xq {
		addSlice(&f, q.d)
		addSlice(&f, q.qs)
	}
	addSlice(&f, m.xr)
	m.preparedActs.addTo(&f)
	addSlices(&f, m.tiles)
	addSlices(&f, m.unpacked)
	addSlices(&f, p.score)
	addSlices(&f, p.trig)
	addSlice(&f, p.ropeTab.trig)
	for _, s := range p.attnScr {
		addSlice(&f, s.scores)
		addSlice(&f, s.acc)
		addSlice(&f, s.koffs)
		addSlice(&f, s.voffs)
		addSlice(&f, s.ks)
		addSlice(&f, s.vs)
		addSlice(&f, s.rows)
	}
	addSlice(&f, p.visible)
	addSlice(&f, p.stateRead)
	addSlice(&f, p.stateWrite)
	addSlice(&f, p.hy.seqStart)
	addSlice(&f, p.hy.seqRows)
	addSlices(&f, p.hy.scr)
	addSlice(&f, p.hy.ones)
	e := &p.moeScr
	addSlice(&f, e.choice)
	addSlice(&f, e.weight)
	addSlice(&f, e.prob)
	addSlice(&f, e.order)
	addSlice(&f, e.rows)
	addSlice(&f, e.x)
	addSlice(&f, e.g)
	addSlice(&f, e.u)
	addSlice(&f, e.y)
	addSlice(&f, e.results)
	e.acts.addTo(&f)
	return f
}

// addTo adds a's buffers to f.
func (a *actQuant) addTo(f *footprint) {
	addSlice(f, a.qs)
	addSlice(f, a.d)
	addSlice(f, a.s)
	addSlice(f, a.bsums)
	addSlice(f, a.x4)
}

// noteStep records the workspace after p's step: p's as used, every open
// program's as capacity. It runs on the goroutine that drives the backend
// (as Prepare and Close do, which call it with p nil); Workspace, which
// may be called from another goroutine between steps, reads what it
// recorded.
func (b *Backend) noteStep(p *program) {
	var capacity int64
	for q := range b.programs {
		capacity += q.workspace().held
	}
	b.wsMu.Lock()
	defer b.wsMu.Unlock()
	b.ws.CapacityBytes = capacity
	if p != nil {
		b.ws.UsedBytes = p.workspace().held
		b.ws.PeakUsedBytes = max(b.ws.PeakUsedBytes, b.ws.UsedBytes)
	}
}

// Workspace implements exec.WorkspaceReporter.
func (b *Backend) Workspace() exec.Workspace {
	b.wsMu.Lock()
	defer b.wsMu.Unlock()
	return b.ws
}
