package httpfront

import (
	"regexp"
	"strings"
)

// The Hermes format (Qwen2.5, Qwen3, Hermes): each call is a JSON object
// between <tool_call> and </tool_call>; text outside the blocks is
// content.
func init() {
	registerToolFormat(toolFormat{
		name:   "hermes",
		detect: func(t string) bool { return strings.Contains(t, hermesOpen) },
		new:    func() toolParser { return &hermesParser{} },
	})
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
)

// hermesHeader is the start of a call as templates ask for it: once it is
// complete, the arguments object is streamed as it is generated.
var hermesHeader = regexp.MustCompile(`^\s*\{\s*"name"\s*:\s*"([A-Za-z0-9_-]{1,64})"\s*,\s*"arguments"\s*:\s*\{`)

type hermesParser struct {
	held   string // text that may begin or end a block
	inCall bool
	body   string // the current block's text so far
	calls  int    // calls started so far
	// Streaming the current call's arguments (after hermesHeader).
	streaming bool
	args      argScanner
}

func (p *hermesParser) push(text string) (string, []toolDelta) {
	buf := p.held + text
	p.held = ""
	var content strings.Builder
	var deltas []toolDelta
	for buf != "" {
		if !p.inCall {
			i := strings.Index(buf, hermesOpen)
			if i < 0 {
				keep := partialSuffix(buf, hermesOpen)
				content.WriteString(p.outside(buf[:len(buf)-keep]))
				p.held = buf[len(buf)-keep:]
				break
			}
			content.WriteString(p.outside(buf[:i]))
			buf, p.inCall, p.body, p.streaming = buf[i+len(hermesOpen):], true, "", false
			continue
		}
		j := strings.Index(buf, hermesClose)
		if j < 0 {
			keep := partialSuffix(buf, hermesClose)
			deltas = p.feed(buf[:len(buf)-keep], deltas)
			p.held = buf[len(buf)-keep:]
			break
		}
		deltas = p.feed(buf[:j], deltas)
		var c string
		c, deltas = p.end(deltas)
		content.WriteString(c)
		buf, p.inCall = buf[j+len(hermesClose):], false
	}
	return content.String(), deltas
}

// feed adds text of the current block: once the header is complete the
// call starts and its arguments stream.
func (p *hermesParser) feed(text string, deltas []toolDelta) []toolDelta {
	p.body += text
	if p.streaming {
		if a := p.args.feed(text); a != "" {
			deltas = append(deltas, toolDelta{index: p.calls - 1, args: a})
		}
		return deltas
	}
	m := hermesHeader.FindStringSubmatchIndex(p.body)
	if m == nil {
		return deltas
	}
	p.streaming, p.args = true, argScanner{}
	p.calls++
	args := p.args.feed(p.body[m[1]-1:]) // from the arguments' "{"
	return append(deltas, toolDelta{index: p.calls - 1, name: p.body[m[2]:m[3]], args: args})
}

// end closes the current block: a call whose header did not stream is
// parsed whole; a block that is no call is content, as the model wrote it.
func (p *hermesParser) end(deltas []toolDelta) (string, []toolDelta) {
	if p.streaming {
		return "", deltas
	}
	if c, ok := parseCallJSON(strings.TrimSpace(p.body)); ok {
		p.calls++
		return "", append(deltas, callDeltasOf(p.calls-1, c)...)
	}
	return hermesOpen + p.body + hermesClose, deltas
}

// outside is text outside the blocks as content: after a call, blank
// text between blocks is dropped.
func (p *hermesParser) outside(s string) string {
	if p.calls > 0 && strings.TrimSpace(s) == "" {
		return ""
	}
	return s
}

func (p *hermesParser) flush() (string, []toolDelta) {
	h := p.held
	p.held = ""
	if !p.inCall {
		return p.outside(h), nil
	}
	// The reply ended inside a block (before </tool_call>): a streamed
	// call stays; otherwise a block whose JSON is complete is a call, and
	// anything else is content.
	p.inCall = false
	deltas := p.feed(h, nil)
	if p.streaming {
		return "", deltas
	}
	if c, ok := parseCallJSON(strings.TrimSpace(p.body)); ok {
		p.calls++
		return "", callDeltasOf(p.calls-1, c)
	}
	return hermesOpen + p.body, nil
}

// argScanner passes a JSON value through as it streams, compacted (blanks
// outside strings dropped, as json.Compact), and stops at its end.
type argScanner struct {
	started, done bool
	depth         int
	inStr, esc    bool
}

func (a *argScanner) feed(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && !a.done; i++ {
		c := s[i]
		switch {
		case a.inStr:
			b.WriteByte(c)
			switch {
			case a.esc:
				a.esc = false
			case c == '\\':
				a.esc = true
			case c == '"':
				a.inStr = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			b.WriteByte(c)
			switch c {
			case '"':
				a.inStr = true
			case '{', '[':
				a.depth++
				a.started = true
			case '}', ']':
				a.depth--
				if a.started && a.depth == 0 {
					a.done = true
				}
			}
		}
	}
	return b.String()
}
