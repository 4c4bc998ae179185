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

// pipeReply reads j's one choice through its reasoning split and tool
// call parser: add gets each piece, final the choice's final delta (after
// its last piece), fail an error, which ends the stream; with idleEvery >
// 0, idle is called each time idleEvery passes without a delta (a request
// waiting in the queue or in a long prefill), to keep the stream alive.
// Each reports whether its writes reached the client; pipeReply reports
// whether the client received everything.
func (j *job) pipeReply(add func(reasoning, content string, calls []toolDelta) bool, final func(d delta) bool, fail func(e *Error) bool,
	idleEvery time.Duration, idle func() bool) bool {
	pipe := &chatPipe{sp: newReasoningSplitter(j.p.Reasoning), tp: newToolParser(j.p.ToolFormat), single: j.p.SingleToolCall}
	var quiet <-chan time.Time // fires after idleEvery without a delta
	var timer *time.Timer
	if idleEvery > 0 {
		timer = time.NewTimer(idleEvery)
		defer timer.Stop()
		quiet = timer.C
	}
	for j.finishes < j.choices {
		var d delta
		select {
		case d = <-j.out: // past the deadline too, every runner still reports its end
		case <-quiet:
			if !idle() {
				return false
			}
			timer.Reset(idleEvery)
			continue
		}
		if timer != nil {
			timer.Reset(idleEvery)
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
