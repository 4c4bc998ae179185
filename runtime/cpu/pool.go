package cpu

import (
	"runtime"
	"sync"
)

// pool is a persistent set of worker goroutines. Parallel work is split into
// contiguous ranges so each output element is always computed by exactly one
// worker in a fixed order: results do not depend on the thread count.
type pool struct {
	n    int
	work []chan func()
	wg   sync.WaitGroup
}

func newPool(threads int) *pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &pool{n: threads}
	for i := 1; i < threads; i++ {
		ch := make(chan func(), 1)
		p.work = append(p.work, ch)
		go func() {
			for f := range ch {
				f()
				p.wg.Done()
			}
		}()
	}
	return p
}

// parallel calls fn(worker, lo, hi) over [0, n) split into at most p.n
// ranges, each a multiple of grain (except the last), and waits.
func (p *pool) parallel(n, grain int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	chunks := (n + grain - 1) / grain
	parts := min(p.n, chunks)
	if parts <= 1 {
		fn(0, 0, n)
		return
	}
	per := (chunks + parts - 1) / parts * grain
	p.wg.Add(parts - 1)
	for w := 1; w < parts; w++ {
		lo, hi := w*per, min((w+1)*per, n)
		if lo >= hi {
			p.wg.Done()
			continue
		}
		w := w
		p.work[w-1] <- func() { fn(w, lo, hi) }
	}
	fn(0, 0, min(per, n))
	p.wg.Wait()
}

func (p *pool) close() {
	for _, ch := range p.work {
		close(ch)
	}
	p.work = nil
}
