package httpfront

import "strings"

// Reasoning says how a chat reply's reasoning is split from its content.
type Reasoning uint8

// Reasoning modes, chosen from the chat template and the rendered prompt.
const (
	// ReasoningOff leaves the reply as it is.
	ReasoningOff Reasoning = iota
	// ReasoningTagged takes a <think>...</think> block at the start of the
	// reply as its reasoning (Qwen3, DeepSeek-R1 style templates).
	ReasoningTagged
	// ReasoningOpen is ReasoningTagged for a prompt that already opened
	// the block: the reply starts inside it.
	ReasoningOpen
)

// Reasoning markup.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// reasoningOf is the mode for a chat template source and the prompt it
// rendered: off unless the template writes </think>; open when the prompt
// ends inside a <think> block.
func reasoningOf(template, prompt string) Reasoning {
	if !strings.Contains(template, thinkClose) {
		return ReasoningOff
	}
	if o := strings.LastIndex(prompt, thinkOpen); o >= 0 && o > strings.LastIndex(prompt, thinkClose) {
		return ReasoningOpen
	}
	return ReasoningTagged
}

// reasoningSplitter splits a reply's streamed text into reasoning and
// content: the text of a leading <think>...</think> block (leading
// whitespace before it allowed) is reasoning, without the markup and the
// newlines just inside it; the rest is content, without the newlines
// right after </think>. A reply that does not start with <think> is all
// content. It holds back text that may still turn out to be markup.
type reasoningSplitter struct {
	state int // splitStart, splitThink, splitAfter (strip newlines), splitContent
	held  string
	lead  bool // in splitThink: no reasoning text emitted yet (newlines dropped)
}

const (
	splitStart = iota
	splitThink
	splitAfter
	splitContent
)

// thinkOpening is the rule by which a tagged reply opens its reasoning
// block: "<think>" after leading blanks (" \t\r\n"). It returns the index
// of text just past "<think>", or -1 and whether more text may still open
// the block (text so far blank, or blanks and a partial "<think>").
// reasoningSplitter and reasoningBudget both read replies by it.
func thinkOpening(text string) (at int, undecided bool) {
	t := strings.TrimLeft(text, " \t\r\n")
	switch {
	case strings.HasPrefix(t, thinkOpen):
		return len(text) - len(t) + len(thinkOpen), false
	case strings.HasPrefix(thinkOpen, t):
		return -1, true
	}
	return -1, false
}

func newReasoningSplitter(mode Reasoning) *reasoningSplitter {
	switch mode {
	case ReasoningTagged:
		return &reasoningSplitter{state: splitStart}
	case ReasoningOpen:
		return &reasoningSplitter{state: splitThink, lead: true}
	}
	return nil
}

// push takes the next piece of text and returns what it lets out.
func (s *reasoningSplitter) push(text string) (reasoning, content string) {
	buf := s.held + text
	s.held = ""
	var r, c strings.Builder
	for buf != "" {
		switch s.state {
		case splitStart:
			at, undecided := thinkOpening(buf)
			switch {
			case at >= 0:
				buf, s.state, s.lead = buf[at:], splitThink, true
			case undecided:
				s.held = buf
				return r.String(), c.String()
			default:
				s.state = splitContent
			}
		case splitThink:
			if s.lead {
				buf = strings.TrimLeft(buf, "\n")
				if buf == "" {
					return r.String(), c.String()
				}
			}
			if i := strings.Index(buf, thinkClose); i >= 0 {
				r.WriteString(strings.TrimRight(buf[:i], "\n"))
				buf, s.state = buf[i+len(thinkClose):], splitAfter
				continue
			}
			keep := partialSuffix(buf, thinkClose)
			body := buf[:len(buf)-keep]
			trimmed := strings.TrimRight(body, "\n") // newlines before </think> are dropped
			s.held = body[len(trimmed):] + buf[len(buf)-keep:]
			if trimmed != "" {
				s.lead = false
			}
			r.WriteString(trimmed)
			return r.String(), c.String()
		case splitAfter:
			buf = strings.TrimLeft(buf, "\n")
			if buf != "" {
				s.state = splitContent
			}
		case splitContent:
			c.WriteString(buf)
			buf = ""
		}
	}
	return r.String(), c.String()
}

// flush returns the text still held when the reply has ended.
func (s *reasoningSplitter) flush() (reasoning, content string) {
	h := s.held
	s.held = ""
	switch s.state {
	case splitStart:
		return "", h
	case splitThink:
		return strings.TrimRight(h, "\n"), ""
	}
	return "", h
}

// partialSuffix is the length of the longest proper prefix of tag that
// text ends with.
func partialSuffix(text, tag string) int {
	for k := min(len(tag)-1, len(text)); k > 0; k-- {
		if strings.HasSuffix(text, tag[:k]) {
			return k
		}
	}
	return 0
}

// splitReasoning splits a whole reply.
func splitReasoning(mode Reasoning, text string) (reasoning, content string) {
	s := newReasoningSplitter(mode)
	if s == nil {
		return "", text
	}
	r, c := s.push(text)
	r2, c2 := s.flush()
	return r + r2, c + c2
}
