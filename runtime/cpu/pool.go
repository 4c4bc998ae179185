package cpu

import (
	"runtime"
	"sync/atomic"
	"time"
)

// pool is a persistent set of worker goroutines. Parallel work is split into
// contiguous chunks so each output element is always computed by exactly one
// worker in a fixed order: results do not depend on the thread count or on
// which worker runs which chunk.
//
// A job is published in one atomic word (ctl: generation, chunk count, next
// chunk); the caller and the workers claim chunks from it with
// compare-and-swap, so a worker that the OS has not scheduled never holds
// the caller up unless it has already claimed a chunk. Idle workers poll ctl
// for a short while (ops of one step follow each other within microseconds),
// then yield the CPU, then park on a channel, so an idle engine burns no CPU.
// Only one goroutine (the backend's) may call parallel or run.
type pool struct {
	n       int
	workers []*poolWorker

	// The current job, written by the caller before ctl publishes it and
	// read by a worker only after it has claimed one of its chunks.
	job  task
	jobN int // items
	per  int // items per chunk

	_    [64]byte
	ctl  atomic.Uint64 // gen<<40 | chunks<<20 | next
	_    [64]byte
	done atomic.Int64 // chunks finished in the current job

	closed atomic.Bool
}

// poolWorker is one helper goroutine's parking state, padded to its own
// cache lines.
type poolWorker struct {
	_        [64]byte
	id       int
	sleeping atomic.Bool
	wake     chan struct{}
	_        [64]byte
}

// task is a unit of parallel work: run handles items [lo, hi) on a worker.
// worker is in [0, pool.n) and unique among concurrent calls.
type task interface {
	run(worker, lo, hi int)
}

// funcTask adapts a function to a task.
type funcTask func(worker, lo, hi int)

func (f funcTask) run(worker, lo, hi int) { f(worker, lo, hi) }

const (
	ctlBits         = 20
	ctlMask         = 1<<ctlBits - 1
	chunksPerWorker = 4
	// spinIters is how many times a waiting goroutine polls before it
	// starts yielding the CPU between polls.
	spinIters = 2000
	// idleFor is how long an idle worker polls and yields before parking.
	idleFor = 100 * time.Microsecond
)

func newPool(threads int) *pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &pool{n: threads}
	for i := 1; i < threads; i++ {
		w := &poolWorker{id: i, wake: make(chan struct{}, 1)}
		p.workers = append(p.workers, w)
		go p.loop(w)
	}
	return p
}

// parallel calls fn(worker, lo, hi) over [0, n) split into contiguous
// ranges, each a multiple of grain (except the last), and waits.
func (p *pool) parallel(n, grain int, fn func(worker, lo, hi int)) {
	p.run(n, grain, p.n, funcTask(fn))
}

// run is parallel for a task; maxWorkers 1 runs t on the calling goroutine.
// It does not allocate.
func (p *pool) run(n, grain, maxWorkers int, t task) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	grains := (n + grain - 1) / grain
	if min(p.n, maxWorkers) <= 1 || grains <= 1 {
		t.run(0, 0, n)
		return
	}
	chunks := min(grains, p.n*chunksPerWorker, ctlMask)
	per := (grains + chunks - 1) / chunks * grain
	chunks = (n + per - 1) / per
	p.job, p.jobN, p.per = t, n, per
	p.done.Store(0)
	gen := p.ctl.Load()>>(2*ctlBits) + 1
	p.ctl.Store(gen<<(2*ctlBits) | uint64(chunks)<<ctlBits)
	for _, w := range p.workers {
		if w.sleeping.Load() && w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
	for p.claim(0) {
	}
	for i := 0; p.done.Load() != int64(chunks); i++ {
		if i >= spinIters {
			osYield()
		}
	}
	p.job = nil
}

// claim claims and runs one chunk of the current job, reporting whether
// there was one.
func (p *pool) claim(worker int) bool {
	for {
		s := p.ctl.Load()
		chunks, next := int(s>>ctlBits&ctlMask), int(s&ctlMask)
		if next >= chunks {
			return false
		}
		if !p.ctl.CompareAndSwap(s, s+1) {
			continue
		}
		lo := next * p.per
		p.job.run(worker, lo, min(lo+p.per, p.jobN))
		p.done.Add(1)
		return true
	}
}

func (p *pool) loop(w *poolWorker) {
	for !p.closed.Load() {
		if p.claim(w.id) {
			continue
		}
		p.idle(w)
	}
}

// idle returns when the current job may have chunks left to claim or the
// pool is closed: it polls, then yields between polls, then parks until run
// or close wakes it.
func (p *pool) idle(w *poolWorker) {
	start := time.Now()
	for i := 0; ; i++ {
		s := p.ctl.Load()
		if int(s&ctlMask) < int(s>>ctlBits&ctlMask) || p.closed.Load() {
			return
		}
		if i >= spinIters {
			if i%64 == 0 && time.Since(start) > idleFor {
				break
			}
			osYield()
		}
	}
	w.sleeping.Store(true)
	s := p.ctl.Load()
	if int(s&ctlMask) < int(s>>ctlBits&ctlMask) || p.closed.Load() {
		if !w.sleeping.CompareAndSwap(true, false) {
			<-w.wake // a waker claimed us and sent a token: consume it
		}
		return
	}
	<-w.wake
}

func (p *pool) close() {
	if p.closed.Swap(true) {
		return
	}
	for _, w := range p.workers {
		if w.sleeping.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
}
