package httpfront

import (
	"strings"
	"time"
)

// The pieces of a chat reply (reasoning, content, tool call deltas) as the
// answers built from them (/v1/responses' output items, /v1/messages'
// content blocks) take them: whole for a non-streaming answer, delta by
// delta for a stream.

// replyDeltas is a whole reply as the pieces a streamed one arrives in:
// its reasoning, its content and its tool calls as deltas.
func replyDeltas(p *Params, text string) (reasoning, content string, deltas []toolDelta) {
	reasoning, content, calls := replyParts(p, text)
	for i, call := range calls {
		deltas = append(deltas, callDeltasOf(i, call)...)
	}
	return reasoning, content, deltas
}

// quietTimer fires after every passes with no bytes written to a stream:
// the stream's writes touch it. A nil quietTimer never fires.
type quietTimer struct {
	every time.Duration
	t     *time.Timer
}

// newQuietTimer starts a quietTimer, or returns nil for every <= 0.
func newQuietTimer(every time.Duration) *quietTimer {
	if every <= 0 {
		return nil
	}
	return &quietTimer{every: every, t: time.NewTimer(every)}
}

// touch restarts the wait: bytes were just written.
func (q *quietTimer) touch() {
	if q != nil {
		q.t.Reset(q.every)
	}
}

func (q *quietTimer) c() <-chan time.Time {
	if q == nil {
		return nil
	}
	return q.t.C
}

func (q *quietTimer) stop() {
	if q != nil {
		q.t.Stop()
	}
}

// pipeReply reads j's one choice through its reasoning split and tool
// call parser: add gets each piece, final the choice's final delta (after
// its last piece), fail an error, which ends the stream; idle is called
// each time quiet fires (its every passed with nothing written: a request
// waiting in the queue or in a long prefill, or deltas the split, the
// parser or the caller hold back), to keep the stream alive, and is
// expected to write (and touch quiet). Each reports whether its writes
// reached the client; pipeReply reports whether the client received
// everything.
func (j *job) pipeReply(add func(reasoning, content string, calls []toolDelta) bool, final func(d delta) bool, fail func(e *Error) bool,
	quiet *quietTimer, idle func() bool) bool {
	pipe := &chatPipe{sp: newReasoningSplitter(j.p.Reasoning), tp: newToolParser(j.p.ToolFormat), single: j.p.SingleToolCall}
	defer quiet.stop()
	for j.finishes < j.choices {
		var d delta
		select {
		case d = <-j.out: // past the deadline too, every runner still reports its end
		case <-quiet.c():
			if !idle() {
				return false
			}
			continue
		}
		if d.err != nil {
			ok := fail(d.err)
			j.leave()
			return ok
		}
		if !add(pipe.push(d)) {
			return false
		}
		if !d.final {
			continue
		}
		j.finishes++
		if !final(d) {
			return false
		}
	}
	return true
}

// heldSpace holds back content that is only whitespace while no text item
// is open: the newlines around tool call markup make no text of their own.
type heldSpace struct{ pending string }

// take returns the content to write, the held whitespace first, or false
// when all of it is held.
func (h *heldSpace) take(content string) (string, bool) {
	if strings.TrimSpace(h.pending+content) == "" {
		h.pending += content
		return "", false
	}
	content, h.pending = h.pending+content, ""
	return content, true
}

// eachCall walks tool call deltas: open starts a call (its name), args
// adds a piece of the open call's arguments; with single only the first
// call counts. It stops at the first false.
func eachCall(calls []toolDelta, single bool, open func(name string) bool, args func(piece string) bool) bool {
	for _, c := range calls {
		if single && c.index > 0 {
			break
		}
		if c.name != "" && !open(c.name) {
			return false
		}
		if c.args != "" && !args(c.args) {
			return false
		}
	}
	return true
}
