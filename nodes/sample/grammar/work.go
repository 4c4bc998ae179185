package grammar

import (
	"errors"
	"fmt"
)

// MaxStacks bounds the stacks of one State: the ways the bytes so far can
// be parsed. An ambiguous grammar can double them with each byte
// (x ::= "a" x "b" | "a" x "c" | ""); past the bound the grammar is too
// ambiguous to follow and the operation fails with ErrTooAmbiguous.
const MaxStacks = 4096

// ErrTooAmbiguous is wrapped by the errors of operations that would
// give a State more than MaxStacks stacks.
var ErrTooAmbiguous = fmt.Errorf("the grammar is too ambiguous: more than %d ways to parse the output so far", MaxStacks)

// ErrWorkLimit is wrapped by the errors of operations stopped by their
// Work's limit.
var ErrWorkLimit = errors.New("the grammar needs more work per token than allowed")

// interruptEvery is how many units of work pass between two polls of
// Work.Interrupt.
const interruptEvery = 1 << 12

// workSlack is how far past its limit a Work may go: one charge's units
// (a State's stacks, counted at once) before the check.
const workSlack = 2 * MaxStacks

// Work meters the grammar work of one task (a mask, a compilation) and
// stops it: operations on a Cache bound to it (Cache.Bind) charge one unit
// per stack they examine, per rule alternative they expand and per trie
// edge a mask walks. Once Used passes Limit, or Interrupt returns an
// error, or a State would exceed MaxStacks, Err is set for good: the
// operations return early (Advance nil, Mask an incomplete mask) and
// keep nothing of what they computed. A Work is not safe for concurrent
// use.
type Work struct {
	Limit     int64        // units allowed; <= 0: no limit
	Interrupt func() error // polled every PollEvery units; nil: never
	PollEvery int64        // units (charged or ticked) between polls; <= 0: interruptEvery
	used      int64
	progress  int64 // used plus the units ticked
	nextPoll  int64 // the progress at which Interrupt is next polled
	err       error
}

// Used is the units charged so far.
func (w *Work) Used() int64 { return w.used }

// Err is why the work stopped, nil while it may continue.
func (w *Work) Err() error { return w.err }

// charge adds n units and reports whether the work may continue.
func (w *Work) charge(n int) bool {
	if w.err != nil {
		return false
	}
	w.used += int64(n)
	if w.Limit > 0 && w.used > w.Limit {
		w.err = fmt.Errorf("%w (%d units, limit %d)", ErrWorkLimit, w.used, w.Limit)
		return false
	}
	return w.tick(n)
}

// tick counts n units of progress on work charged already (a parse,
// reserved before it runs) and polls Interrupt when PollEvery units of
// progress have passed since the last poll. A nil Work always continues.
func (w *Work) tick(n int) bool {
	if w == nil {
		return true
	}
	if w.err != nil {
		return false
	}
	w.progress += int64(n)
	if w.Interrupt != nil && w.progress >= w.nextPoll {
		every := w.PollEvery
		if every <= 0 {
			every = interruptEvery
		}
		w.nextPoll = w.progress + every
		if err := w.Interrupt(); err != nil {
			w.err = err
			return false
		}
	}
	return true
}

// reserve is charge for units paid before the work they stand for: n
// units past the limit stop the work without being added, so that Used
// never passes Limit by a large charge.
func (w *Work) reserve(n int) bool {
	if w.err == nil && w.Limit > 0 && w.used+int64(n) > w.Limit {
		w.err = fmt.Errorf("%w (%d units, limit %d)", ErrWorkLimit, w.used+int64(n), w.Limit)
		return false
	}
	return w.charge(n)
}

// fail stops the work with err unless it has stopped already.
func (w *Work) fail(err error) {
	if w.err == nil {
		w.err = err
	}
}

// child is a Work for a part of w's task that may fail on its own (an
// enum value a check grammar finds too ambiguous): it is interrupted as
// w is and may spend what w has left. absorb charges its units back.
func (w *Work) child() *Work {
	c := &Work{Interrupt: w.Interrupt, PollEvery: w.PollEvery}
	if w.Limit > 0 {
		c.Limit = max(w.Limit-w.used, 1)
	}
	return c
}

// absorb charges w with the units c spent and stops w when c stopped for
// any reason but ErrTooAmbiguous (a failure of c's part alone).
func (w *Work) absorb(c *Work) {
	w.charge(int(min(c.used, 1<<40)))
	if c.err != nil && !errors.Is(c.err, ErrTooAmbiguous) {
		w.fail(c.err)
	}
}
