package engine

import "sync"

// mailbox delivers one request's events in order without ever blocking the
// engine loop: put appends to a queue, and a forwarding goroutine hands the
// queue to the request's (unbuffered) channel as fast as its reader takes
// them. Its memory is the events produced and not yet read (each step
// appends at most 1+k, k the draft window), never a buffer sized by the
// request's max tokens up front.
type mailbox struct {
	out    chan Event
	mu     sync.Mutex
	queue  []Event
	closed bool
	wake   chan struct{} // capacity 1: something was put or the box closed
}

func newMailbox() *mailbox {
	b := &mailbox{out: make(chan Event), wake: make(chan struct{}, 1)}
	go b.forward()
	return b
}

// put queues ev; the final event (ev.Done) closes the box after it.
func (b *mailbox) put(ev Event) {
	b.mu.Lock()
	b.queue = append(b.queue, ev)
	if ev.Done {
		b.closed = true
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// forward moves queued events to out, then closes out after the final one.
func (b *mailbox) forward() {
	var batch []Event
	for {
		<-b.wake
		b.mu.Lock()
		batch, b.queue = b.queue, batch[:0]
		closed := b.closed
		b.mu.Unlock()
		for _, ev := range batch {
			b.out <- ev
		}
		clear(batch)
		if closed { // the final event was in this batch: put is done
			close(b.out)
			return
		}
	}
}
