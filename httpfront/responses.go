package httpfront

import (
	"bufio"
	"encoding/json"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// responses serves /v1/responses: the request is decoded into a chat
// request (DecodeResponses), prepared and generated as a chat completion
// is, and answered with a Responses object or event stream.
func (s *Server) responses(ctx *fasthttp.RequestCtx, m *Model) {
	received := time.Now()
	r, e := DecodeResponses(ctx.PostBody(), s.decodeOptions(ctx))
	var prompt []int32
	if e == nil {
		prompt, e = s.prepareAdmitted(ctx, m, r.Chat, false)
		e = renameResponses(e, nil)
	}
	if e != nil {
		s.fail(ctx, e)
		return
	}
	a := &responsesAnswer{id: newID("resp_"), created: time.Now().Unix(), model: m.ID, req: r, m: m}
	s.serveAnswer(ctx, m, a, "input", r.Chat.Params, [][]int32{prompt}, received)
}

// Responses documents, as the OpenAI API reference (and the Node SDK's
// types) give them.
type (
	responseDoc struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"`
		CreatedAt          int64              `json:"created_at"`
		Status             string             `json:"status"`
		Error              *responseError     `json:"error"`
		IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
		Instructions       *string            `json:"instructions"`
		MaxOutputTokens    *int               `json:"max_output_tokens"`
		Model              string             `json:"model"`
		Output             []any              `json:"output"`
		ParallelToolCalls  bool               `json:"parallel_tool_calls"`
		PreviousResponseID *string            `json:"previous_response_id"`
		Store              bool               `json:"store"`
		Temperature        float64            `json:"temperature"`
		Text               json.RawMessage    `json:"text"`
		ToolChoice         json.RawMessage    `json:"tool_choice"`
		Tools              json.RawMessage    `json:"tools"`
		TopP               float64            `json:"top_p"`
		Truncation         string             `json:"truncation"`
		Metadata           map[string]string  `json:"metadata"`
		Usage              *responseUsage     `json:"usage"`
	}
	responseError struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	}
	incompleteDetails struct {
		Reason string `json:"reason"`
	}
	responseUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	outputMessage struct {
		ID      string       `json:"id"`
		Type    string       `json:"type"` // "message"
		Status  string       `json:"status"`
		Role    string       `json:"role"`
		Content []outputText `json:"content"`
	}
	outputText struct {
		Type        string `json:"type"` // "output_text"
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
		Logprobs    []any  `json:"logprobs"`
	}
	reasoningItem struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"` // "reasoning"
		Status  string          `json:"status"`
		Summary []any           `json:"summary"`
		Content []reasoningText `json:"content"`
	}
	reasoningText struct {
		Type string `json:"type"` // "reasoning_text"
		Text string `json:"text"`
	}
	functionCallItem struct {
		ID        string `json:"id"`
		Type      string `json:"type"` // "function_call"
		Status    string `json:"status"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
)

// responsesAnswer builds a /v1/responses answer (one choice).
type responsesAnswer struct {
	id      string
	created int64
	model   string
	req     *ResponsesRequest
	m       *Model
}

func (a *responsesAnswer) ident() string { return a.id }

func (a *responsesAnswer) rename(e *Error) *Error { return renameResponses(e, nil) }

// doc is the response object with status and output.
func (a *responsesAnswer) doc(status string, output []any) responseDoc {
	p := a.req.Chat.Params
	if output == nil {
		output = []any{}
	}
	meta := a.req.Metadata
	if meta == nil {
		meta = map[string]string{}
	}
	return responseDoc{ID: a.id, Object: "response", CreatedAt: a.created, Status: status,
		Instructions: a.req.Instructions, MaxOutputTokens: a.req.MaxOutputTokens, Model: a.model, Output: output,
		ParallelToolCalls: a.req.Chat.ParallelToolCalls, Temperature: p.Temperature, Text: a.req.Text,
		ToolChoice: a.req.ToolChoice, Tools: a.req.Tools, TopP: p.TopP, Truncation: "disabled", Metadata: meta}
}

// finish is the final response object: status from the choice's finish
// reason, usage from its stats (reasoning_tokens counts the reasoning
// text's tokens, re-encoded).
func (a *responsesAnswer) finish(j *job, b *outputBuilder, finish string, st engine.Stats) responseDoc {
	status := "completed"
	if finish == "length" {
		status = "incomplete"
	}
	d := a.doc(status, b.items)
	if status == "incomplete" {
		d.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	}
	u, _ := j.account([]engine.Stats{st})
	ru := &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	ru.InputTokensDetails.CachedTokens = u.Cached()
	if b.reasoning.Len() > 0 {
		ru.OutputTokensDetails.ReasoningTokens = min(len(a.m.Tokenizer.Encode(b.reasoning.String(), false, false)), u.CompletionTokens)
	}
	d.Usage = ru
	return d
}

func (a *responsesAnswer) complete(j *job, res []*choiceResult) any {
	c := res[0]
	b := &outputBuilder{single: j.p.SingleToolCall}
	b.add(replyDeltas(&j.p, c.text.String()))
	b.end(c.finish)
	return a.finish(j, b, c.finish, c.stats)
}

func (a *responsesAnswer) stream(w *bufio.Writer, j *job) bool {
	out := &sse{w: w}
	defer func() {
		if out.err != nil {
			j.leave()
		}
	}()
	b := &outputBuilder{single: j.p.SingleToolCall}
	b.emit = func(typ string, ev map[string]any) bool {
		ev["type"], ev["sequence_number"] = typ, b.seq
		b.seq++
		return out.named(typ, ev)
	}
	if !b.emit("response.created", map[string]any{"response": a.doc("in_progress", nil)}) ||
		!b.emit("response.in_progress", map[string]any{"response": a.doc("in_progress", nil)}) {
		return false
	}
	return j.pipeReply(b.add, func(d delta) bool {
		if !b.end(d.finish) {
			return false
		}
		doc := a.finish(j, b, d.finish, d.stats)
		typ := "response.completed"
		if doc.Status == "incomplete" {
			typ = "response.incomplete"
		}
		return b.emit(typ, map[string]any{"response": doc})
	}, func(e *Error) bool {
		b.emit("error", map[string]any{"code": e.Code, "message": e.Message, "param": e.Param})
		return out.err == nil
	}, nil, nil)
}

// outputBuilder turns a reply's reasoning, content and tool call deltas,
// in order, into the response's output items: a reasoning item, message
// items (output_text) and function_call items. With emit set it streams
// each step as the Responses events; the non-streaming answer feeds it
// the whole reply. Content that is only whitespace before a tool call
// (e.g. the newlines around its markup) makes no message, as a chat
// reply's content is null beside tool calls.
type outputBuilder struct {
	emit   func(typ string, ev map[string]any) bool
	seq    int
	single bool // parallel_tool_calls false: only the first call

	items     []any
	open      any    // the item being written (last of items), nil when none
	text      string // the open message's or reasoning item's text so far
	held      heldSpace
	calls     int // function calls opened
	messages  int // message items opened
	reasoning strings.Builder
}

func (b *outputBuilder) send(typ string, ev map[string]any) bool {
	if b.emit == nil {
		return true
	}
	return b.emit(typ, ev)
}

func (b *outputBuilder) index() int { return len(b.items) - 1 }

// openItem closes the open item and opens it.
func (b *outputBuilder) openItem(it any) bool {
	if !b.closeItem("completed") {
		return false
	}
	b.items, b.open, b.text = append(b.items, it), it, ""
	return b.send("response.output_item.added", map[string]any{"output_index": b.index(), "item": it})
}

// closeItem finishes the open item with status.
func (b *outputBuilder) closeItem(status string) bool {
	at := b.index()
	switch it := b.open.(type) {
	case nil:
		return true
	case *outputMessage:
		part := outputText{Type: "output_text", Text: b.text, Annotations: []any{}, Logprobs: []any{}}
		done := *it
		done.Status, done.Content = status, []outputText{part}
		b.items[at] = &done
		if !b.send("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "text": b.text, "logprobs": []any{}}) ||
			!b.send("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "part": part}) {
			return false
		}
	case *reasoningItem:
		part := reasoningText{Type: "reasoning_text", Text: b.text}
		done := *it
		done.Status, done.Content = status, []reasoningText{part}
		b.items[at] = &done
		if !b.send("response.reasoning_text.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "text": b.text}) ||
			!b.send("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": at, "content_index": 0, "part": part}) {
			return false
		}
	case *functionCallItem:
		done := *it
		done.Status = status
		b.items[at] = &done
		if !b.send("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": at, "name": it.Name, "arguments": it.Arguments}) {
			return false
		}
	}
	b.open = nil
	return b.send("response.output_item.done", map[string]any{"output_index": at, "item": b.items[at]})
}

// add takes the next piece of the reply.
func (b *outputBuilder) add(reasoning, content string, calls []toolDelta) bool {
	if reasoning != "" {
		if _, ok := b.open.(*reasoningItem); !ok {
			it := &reasoningItem{ID: newID("rs_"), Type: "reasoning", Status: "in_progress", Summary: []any{}, Content: []reasoningText{}}
			if !b.openItem(it) || !b.send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": b.index(),
				"content_index": 0, "part": reasoningText{Type: "reasoning_text", Text: ""}}) {
				return false
			}
		}
		b.text += reasoning
		b.reasoning.WriteString(reasoning)
		if !b.send("response.reasoning_text.delta", map[string]any{"item_id": b.open.(*reasoningItem).ID, "output_index": b.index(), "content_index": 0, "delta": reasoning}) {
			return false
		}
	}
	if content != "" && !b.addContent(content) {
		return false
	}
	return eachCall(calls, b.single, func(name string) bool {
		b.held.pending = ""
		b.calls++
		return b.openItem(&functionCallItem{ID: newID("fc_"), Type: "function_call", Status: "in_progress", CallID: newID("call_"), Name: name})
	}, func(args string) bool {
		fc, ok := b.open.(*functionCallItem)
		if !ok {
			return true
		}
		fc.Arguments += args
		return b.send("response.function_call_arguments.delta", map[string]any{"item_id": fc.ID, "output_index": b.index(), "delta": args})
	})
}

func (b *outputBuilder) addContent(content string) bool {
	msg, ok := b.open.(*outputMessage)
	if !ok {
		if content, ok = b.held.take(content); !ok {
			return true
		}
		if !b.openMessage() {
			return false
		}
		msg = b.open.(*outputMessage)
	}
	b.text += content
	return b.send("response.output_text.delta", map[string]any{"item_id": msg.ID, "output_index": b.index(), "content_index": 0,
		"delta": content, "logprobs": []any{}})
}

func (b *outputBuilder) openMessage() bool {
	b.messages++
	it := &outputMessage{ID: newID("msg_"), Type: "message", Status: "in_progress", Role: "assistant", Content: []outputText{}}
	return b.openItem(it) && b.send("response.content_part.added", map[string]any{"item_id": it.ID, "output_index": b.index(),
		"content_index": 0, "part": outputText{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})
}

// end closes the output: a reply with neither a message nor a tool call
// gets a message (with the held-back whitespace, maybe empty); the last
// item is incomplete when the reply hit max_output_tokens.
func (b *outputBuilder) end(finish string) bool {
	if b.messages == 0 && b.calls == 0 {
		if _, ok := b.open.(*outputMessage); !ok {
			pending := b.held.pending
			b.held.pending = ""
			if !b.openMessage() {
				return false
			}
			if pending != "" && !b.addContent(pending) {
				return false
			}
		}
	}
	status := "completed"
	if finish == "length" {
		status = "incomplete"
	}
	return b.closeItem(status)
}
