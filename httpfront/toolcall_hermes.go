package httpfront

import "strings"

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

type hermesParser struct {
	held   string // text that may begin a block, or an unfinished block
	inCall bool
	calls  int // calls parsed so far
}

func (p *hermesParser) push(text string) (string, []toolCall) {
	buf := p.held + text
	p.held = ""
	var content strings.Builder
	var calls []toolCall
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
			buf, p.inCall = buf[i+len(hermesOpen):], true
			continue
		}
		j := strings.Index(buf, hermesClose)
		if j < 0 {
			p.held = buf
			break
		}
		body := buf[:j]
		if c, ok := parseCallJSON(strings.TrimSpace(body)); ok {
			calls = append(calls, c)
			p.calls++
		} else {
			content.WriteString(hermesOpen + body + hermesClose) // not a call: kept as the model wrote it
		}
		buf, p.inCall = buf[j+len(hermesClose):], false
	}
	return content.String(), calls
}

// outside is text outside the blocks as content: after a call, blank
// text between blocks is dropped.
func (p *hermesParser) outside(s string) string {
	if p.calls > 0 && strings.TrimSpace(s) == "" {
		return ""
	}
	return s
}

func (p *hermesParser) flush() (string, []toolCall) {
	h := p.held
	p.held = ""
	if p.inCall {
		// An unfinished block: a call whose JSON is complete counts (the
		// reply ended before </tool_call>), else it is content.
		p.inCall = false
		if c, ok := parseCallJSON(strings.TrimSpace(h)); ok {
			p.calls++
			return "", []toolCall{c}
		}
		return hermesOpen + h, nil
	}
	return p.outside(h), nil
}
