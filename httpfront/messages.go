package httpfront

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// Paths of the Anthropic Messages API.
const (
	MessagesPath    = "/v1/messages"
	CountTokensPath = "/v1/messages/count_tokens"
)

// messages serves /v1/messages: the request is decoded into a chat
// request (DecodeMessages), prepared and generated as a chat completion
// is, and answered with a Message or its event stream.
func (s *Server) messages(ctx *fasthttp.RequestCtx, m *Model) {
	received := time.Now()
	r, prompt := s.prepareMessages(ctx, m, false)
	if r == nil {
		return
	}
	a := &messagesAnswer{id: newID("msg_"), model: m.ID, ping: s.cfg.StreamPing}
	s.serveAnswer(ctx, m, a, "messages", r.Chat.Params, [][]int32{prompt}, received)
}

// countTokens serves /v1/messages/count_tokens: the prompt tokens a
// /v1/messages request with the same body renders to, which its usage
// bills as input_tokens + cache_read_input_tokens.
func (s *Server) countTokens(ctx *fasthttp.RequestCtx, m *Model) {
	if r, prompt := s.prepareMessages(ctx, m, true); r != nil {
		s.writeJSON(ctx, http.StatusOK, map[string]int{"input_tokens": len(prompt)})
	}
}

// prepareMessages decodes a Messages body (count_tokens' when countOnly)
// and renders its prompt, or answers the error and returns nil.
func (s *Server) prepareMessages(ctx *fasthttp.RequestCtx, m *Model, countOnly bool) (*MessagesRequest, []int32) {
	r, e := DecodeMessages(ctx.PostBody(), s.decodeOptions(ctx), countOnly)
	var prompt []int32
	if e == nil {
		prompt, e = s.prepareAdmitted(ctx, m, r.Chat, countOnly)
		e = renameFields(e, nil, messagesNames)
	}
	if e != nil {
		s.fail(ctx, e)
		return nil, nil
	}
	return r, prompt
}

// isMessagesPath reports whether path is served in Anthropic's shapes
// (errors included).
func isMessagesPath(path []byte) bool {
	p := string(path)
	return p == MessagesPath || strings.HasPrefix(p, MessagesPath+"/")
}

// anthropicError is e as Anthropic writes errors: its status (503 becomes
// Anthropic's 529 overloaded_error; a 504 past the request's deadline is
// Anthropic's timeout_error) and the document
// {"type":"error","error":{"type","message"}}.
func anthropicError(e *Error) (int, []byte) {
	status, typ := e.Status, "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusServiceUnavailable:
		status, typ = 529, "overloaded_error"
	case status == http.StatusGatewayTimeout:
		typ = "timeout_error"
	case status >= 500:
		typ = "api_error"
	}
	b, _ := marshal(newAnthropicError(typ, e.Message))
	return status, b
}

// anthropicErrorDoc is Anthropic's error document (and a stream's error
// event).
type anthropicErrorDoc struct {
	Type  string `json:"type"` // "error"
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func newAnthropicError(typ, message string) anthropicErrorDoc {
	d := anthropicErrorDoc{Type: "error"}
	d.Error.Type, d.Error.Message = typ, message
	return d
}

// Message documents, as Anthropic's API reference gives them.
type (
	messageDoc struct {
		ID           string        `json:"id"`
		Type         string        `json:"type"` // "message"
		Role         string        `json:"role"`
		Model        string        `json:"model"`
		Content      []any         `json:"content"`
		StopReason   *string       `json:"stop_reason"`
		StopSequence *string       `json:"stop_sequence"`
		Usage        messagesUsage `json:"usage"`
	}
	// messagesUsage counts the prompt as Anthropic does: InputTokens are
	// the tokens computed, CacheReadInputTokens those the prefix cache
	// held; their sum is the prompt.
	messagesUsage struct {
		InputTokens              int `json:"input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		OutputTokens             int `json:"output_tokens"`
	}
	textBlock struct {
		Type string `json:"type"` // "text"
		Text string `json:"text"`
	}
	// thinkingBlock carries no signature: the reasoning is the model's
	// own text, nothing to verify.
	thinkingBlock struct {
		Type      string `json:"type"` // "thinking"
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"` // "tool_use"
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
)

// messagesAnswer builds a /v1/messages answer (one choice).
type messagesAnswer struct {
	id    string
	model string
	ping  time.Duration // Config.StreamPing
}

func (a *messagesAnswer) ident() string { return a.id }

func (a *messagesAnswer) rename(e *Error) *Error { return renameFields(e, nil, messagesNames) }

// usage is the Anthropic usage of a finished choice.
func (a *messagesAnswer) usage(j *job, st engine.Stats) messagesUsage {
	u, _ := j.account([]engine.Stats{st})
	cached := u.Cached()
	return messagesUsage{InputTokens: u.PromptTokens - cached, CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens}
}

// stopReason is Anthropic's stop_reason of a choice that ended with
// finish (and stopSeq, the stop sequence that ended it, if one did).
func stopReason(finish, stopSeq string, calls int) (reason string, seq *string) {
	switch {
	case finish == "length":
		return "max_tokens", nil
	case stopSeq != "":
		return "stop_sequence", &stopSeq
	case calls > 0:
		return "tool_use", nil
	}
	return "end_turn", nil
}

func (a *messagesAnswer) doc(content []any, u messagesUsage) messageDoc {
	if content == nil {
		content = []any{}
	}
	return messageDoc{ID: a.id, Type: "message", Role: "assistant", Model: a.model, Content: content, Usage: u}
}

func (a *messagesAnswer) complete(j *job, res []*choiceResult) any {
	c := res[0]
	b := &blockBuilder{single: j.p.SingleToolCall}
	b.add(replyDeltas(&j.p, c.text.String()))
	b.end()
	d := a.doc(b.blocks, a.usage(j, c.stats))
	reason, seq := stopReason(c.finish, c.stopSeq, b.calls)
	d.StopReason, d.StopSequence = &reason, seq
	return d
}

// stream writes the Message's events: message_start, a ping, each content
// block's content_block_start, deltas and content_block_stop, then
// message_delta (stop reason and the whole usage) and message_stop; a
// ping each time a.ping passes without an event written (deltas held
// back write none).
func (a *messagesAnswer) stream(w *bufio.Writer, j *job) bool {
	out := &sse{w: w}
	defer func() {
		if out.err != nil {
			j.leave()
		}
	}()
	b := &blockBuilder{single: j.p.SingleToolCall}
	quiet := newQuietTimer(a.ping)
	b.emit = func(typ string, ev map[string]any) bool {
		ev["type"] = typ
		quiet.touch()
		return out.named(typ, ev)
	}
	start := a.doc(nil, messagesUsage{InputTokens: len(j.prompts[0])})
	if !b.emit("message_start", map[string]any{"message": start}) || !b.emit("ping", map[string]any{}) {
		return false
	}
	return j.pipeReply(b.add, func(d delta) bool {
		reason, seq := stopReason(d.finish, d.stopSeq, b.calls)
		return b.end() && b.emit("message_delta", map[string]any{"delta": map[string]any{"stop_reason": reason, "stop_sequence": seq},
			"usage": a.usage(j, d.stats)}) && b.emit("message_stop", map[string]any{})
	}, func(e *Error) bool {
		_, body := anthropicError(e)
		return out.named("error", json.RawMessage(body))
	}, quiet, func() bool { return b.emit("ping", map[string]any{}) })
}

// blockBuilder turns a reply's reasoning, content and tool call deltas,
// in order, into a Message's content blocks: thinking, text and tool_use.
// With emit set it streams each step as Anthropic's content block events;
// the non-streaming answer feeds it the whole reply. Content that is only
// whitespace before a tool call (the newlines around its markup) makes no
// text block.
type blockBuilder struct {
	emit   func(typ string, ev map[string]any) bool
	single bool // disable_parallel_tool_use: only the first call

	blocks []any
	open   bool   // the last block is being written
	args   string // the open tool_use block's input so far
	held   heldSpace
	calls  int // tool_use blocks opened
}

func (b *blockBuilder) send(typ string, ev map[string]any) bool {
	if b.emit == nil {
		return true
	}
	return b.emit(typ, ev)
}

func (b *blockBuilder) index() int { return len(b.blocks) - 1 }

// last is the open block, nil when none.
func (b *blockBuilder) last() any {
	if !b.open {
		return nil
	}
	return b.blocks[b.index()]
}

// openBlock closes the open block and opens blk, whose streamed start is
// start (blk with its content empty).
func (b *blockBuilder) openBlock(blk, start any) bool {
	if !b.closeBlock() {
		return false
	}
	b.blocks, b.open = append(b.blocks, blk), true
	return b.send("content_block_start", map[string]any{"index": b.index(), "content_block": start})
}

// closeBlock ends the open block (a tool_use block takes its input).
func (b *blockBuilder) closeBlock() bool {
	if !b.open {
		return true
	}
	if t, ok := b.blocks[b.index()].(*toolUseBlock); ok {
		t.Input = json.RawMessage(b.args)
		if !json.Valid(t.Input) {
			t.Input = json.RawMessage("{}")
		}
	}
	b.open = false
	return b.send("content_block_stop", map[string]any{"index": b.index()})
}

// add takes the next piece of the reply.
func (b *blockBuilder) add(reasoning, content string, calls []toolDelta) bool {
	if reasoning != "" {
		t, ok := b.last().(*thinkingBlock)
		if !ok {
			t = &thinkingBlock{Type: "thinking"}
			if !b.openBlock(t, thinkingBlock{Type: "thinking"}) {
				return false
			}
		}
		t.Thinking += reasoning
		if !b.send("content_block_delta", map[string]any{"index": b.index(), "delta": map[string]string{"type": "thinking_delta", "thinking": reasoning}}) {
			return false
		}
	}
	if content != "" && !b.addText(content) {
		return false
	}
	return eachCall(calls, b.single, func(name string) bool {
		b.held.pending = ""
		b.calls++
		t := &toolUseBlock{Type: "tool_use", ID: newID("toolu_"), Name: name}
		start := *t
		start.Input = json.RawMessage("{}")
		if !b.openBlock(t, start) { // closes the previous call with its arguments
			return false
		}
		b.args = ""
		return true
	}, func(args string) bool {
		if _, ok := b.last().(*toolUseBlock); !ok {
			return true
		}
		b.args += args
		return b.send("content_block_delta", map[string]any{"index": b.index(), "delta": map[string]string{"type": "input_json_delta", "partial_json": args}})
	})
}

func (b *blockBuilder) addText(content string) bool {
	t, ok := b.last().(*textBlock)
	if !ok {
		if content, ok = b.held.take(content); !ok {
			return true
		}
		t = &textBlock{Type: "text"}
		if !b.openBlock(t, textBlock{Type: "text"}) {
			return false
		}
	}
	t.Text += content
	return b.send("content_block_delta", map[string]any{"index": b.index(), "delta": map[string]string{"type": "text_delta", "text": content}})
}

// end closes the content: held-back whitespace of a reply without tool
// calls becomes its text.
func (b *blockBuilder) end() bool {
	if b.held.pending != "" && b.calls == 0 {
		pending := b.held.pending
		b.held.pending = ""
		t := &textBlock{Type: "text"}
		if !b.openBlock(t, textBlock{Type: "text"}) {
			return false
		}
		t.Text = pending
		if !b.send("content_block_delta", map[string]any{"index": b.index(), "delta": map[string]string{"type": "text_delta", "text": pending}}) {
			return false
		}
	}
	return b.closeBlock()
}
