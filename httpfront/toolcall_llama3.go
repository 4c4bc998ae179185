package httpfront

import (
	"encoding/json"
	"strings"
)

// The Llama 3.1+ JSON format: the whole reply is a call object,
// {"name": ..., "parameters": {...}}, optionally after <|python_tag|>;
// several calls are separated by ";". A reply that does not start with
// "{" is content.
func init() {
	registerToolFormat(toolFormat{
		name: "llama3_json",
		detect: func(t string) bool {
			return strings.Contains(t, "<|start_header_id|>") && strings.Contains(t, "tools") &&
				!strings.Contains(t, hermesOpen)
		},
		priority: 1,
		new:      func() toolParser { return &llama3Parser{} },
	})
}

const pythonTag = "<|python_tag|>"

type llama3Parser struct {
	state int // 0: undecided, 1: a call (buffered to the end), 2: content
	held  string
}

func (p *llama3Parser) push(text string) (string, []toolDelta) {
	if p.state == 2 {
		return text, nil
	}
	p.held += text
	if p.state == 1 {
		return "", nil
	}
	lead := strings.TrimLeft(p.held, " \t\r\n")
	if strings.HasPrefix(pythonTag, lead) { // blank, or (part of) the tag alone
		return "", nil
	}
	after := strings.TrimLeft(strings.TrimPrefix(lead, pythonTag), " \t\r\n")
	switch {
	case after == "":
		return "", nil
	case strings.HasPrefix(after, "{"):
		p.state = 1
		return "", nil
	}
	p.state = 2
	h := p.held
	p.held = ""
	return h, nil
}

func (p *llama3Parser) flush() (string, []toolDelta) {
	h := p.held
	p.held = ""
	if p.state != 1 {
		return h, nil
	}
	body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(h), pythonTag))
	var calls []toolDelta
	dec := json.NewDecoder(strings.NewReader(body))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return h, nil // not calls: the reply is content as written
		}
		c, ok := parseCallJSON(string(raw))
		if !ok {
			return h, nil
		}
		calls = append(calls, callDeltasOf(len(calls), c)...)
		rest := strings.TrimLeft(body[dec.InputOffset():], " \t\r\n")
		if rest == "" {
			return "", calls
		}
		if !strings.HasPrefix(rest, ";") {
			return h, nil
		}
		body = strings.TrimLeft(rest[1:], " \t\r\n")
		if body == "" {
			return "", calls
		}
		dec = json.NewDecoder(strings.NewReader(body))
	}
}
