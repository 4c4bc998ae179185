package cpu

import (
	"runtime"
	"sync"
	"testing"
)

// chanPool is the previous pool design (a channel per worker and a
// WaitGroup), kept to measure the dispatch cost side by side.
type chanPool struct {
	n    int
	work []chan func()
	wg   sync.WaitGroup
}

func newChanPool(threads int) *chanPool {
	p := &chanPool{n: threads}
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

func (p *chanPool) parallel(n, grain int, fn func(worker, lo, hi int)) {
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
		w := w
		p.work[w-1] <- func() { fn(w, lo, hi) }
	}
	fn(0, 0, min(per, n))
	p.wg.Wait()
}

func (p *chanPool) close() {
	for _, ch := range p.work {
		close(ch)
	}
}

// BenchmarkPoolDispatch measures one parallel call over a small job (what a
// tiny model's decode step is made of), for the spinning pool and the
// channel pool.
func BenchmarkPoolDispatch(b *testing.B) {
	threads := runtime.GOMAXPROCS(0)
	data := make([]float32, 4096)
	var sink [64]float32
	fn := func(worker, lo, hi int) {
		var s float32
		for _, v := range data[lo:hi] {
			s += v
		}
		sink[worker*8] += s
	}
	b.Run("spin", func(b *testing.B) {
		p := newPool(threads)
		defer p.close()
		for range b.N {
			p.parallel(len(data), 64, fn)
		}
	})
	b.Run("channels", func(b *testing.B) {
		p := newChanPool(threads)
		defer p.close()
		for range b.N {
			p.parallel(len(data), 64, fn)
		}
	})
}
