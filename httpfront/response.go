package httpfront

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/ninfer/ninfer-go/httpfront/wire"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// response builds the JSON documents of one request's answer.
type response struct {
	id      string
	created int64
	model   string
	chat    bool
	tk      *tok.Tokenizer
}

// Chat completion documents, as OpenAI's API reference gives them.
type (
	chatCompletion struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		SystemFingerprint string        `json:"system_fingerprint"`
		Choices           []chatChoice  `json:"choices"`
		Usage             *wire.Usage   `json:"usage"`
		Timings           *wire.Timings `json:"timings,omitempty"`
	}
	chatChoice struct {
		Index        int           `json:"index"`
		Message      *chatReply    `json:"message,omitempty"`
		Delta        *chatMessage  `json:"delta,omitempty"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	}
	chatMessage struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
		// ReasoningContent is the reply's reasoning (vLLM's and
		// llama-server's field), without the <think> markup.
		ReasoningContent *string       `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallDoc `json:"tool_calls,omitempty"`
	}
	// chatReply is a whole reply: content is null beside tool calls.
	chatReply struct {
		Role             string        `json:"role"`
		Content          *string       `json:"content"`
		ReasoningContent *string       `json:"reasoning_content,omitempty"`
		ToolCalls        []toolCallDoc `json:"tool_calls,omitempty"`
	}
	chatLogprobs struct {
		Content []chatLogprob `json:"content"`
	}
	chatLogprob struct {
		Token       string        `json:"token"`
		Logprob     float32       `json:"logprob"`
		Bytes       []int         `json:"bytes"`
		TopLogprobs []chatLogprob `json:"top_logprobs"`
	}
)

// Text completion documents (the legacy completions API).
type (
	textCompletion struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		Created           int64         `json:"created"`
		Model             string        `json:"model"`
		SystemFingerprint string        `json:"system_fingerprint"`
		Choices           []textChoice  `json:"choices"`
		Usage             *wire.Usage   `json:"usage"`
		Timings           *wire.Timings `json:"timings,omitempty"`
	}
	textChoice struct {
		Index        int           `json:"index"`
		Text         string        `json:"text"`
		Logprobs     *textLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	}
	textLogprobs struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float32            `json:"token_logprobs"`
		TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
)

const fingerprint = "ninfer"

func (r *response) chatLogprob(id int32, lp float32) chatLogprob {
	piece := r.tk.Piece(id)
	b := make([]int, len(piece))
	for i, c := range piece {
		b[i] = int(c)
	}
	return chatLogprob{Token: tokenText(piece), Logprob: lp, Bytes: b, TopLogprobs: []chatLogprob{}}
}

// tokenText is a token's piece as a JSON string: bytes that are not valid
// UTF-8 on their own become U+FFFD (the bytes field keeps them exactly).
func tokenText(piece []byte) string {
	if utf8.Valid(piece) {
		return string(piece)
	}
	return strings.ToValidUTF8(string(piece), "\uFFFD")
}

func (r *response) chatLogprobs(lps []tokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatLogprob, 0, len(lps))}
	for _, lp := range lps {
		c := r.chatLogprob(lp.id, lp.logprob)
		for _, t := range lp.top {
			c.TopLogprobs = append(c.TopLogprobs, r.chatLogprob(t.ID, t.Logit))
		}
		out.Content = append(out.Content, c)
	}
	return out
}

// textLogprobs builds the legacy form; offset is the choice's text length
// before these tokens.
func (r *response) textLogprobs(lps []tokenLogprob, offset int) *textLogprobs {
	out := &textLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, lp := range lps {
		piece := r.tk.Piece(lp.id)
		out.Tokens = append(out.Tokens, tokenText(piece))
		out.TokenLogprobs = append(out.TokenLogprobs, lp.logprob)
		top := map[string]float32{}
		for _, t := range lp.top {
			if _, ok := top[tokenText(r.tk.Piece(t.ID))]; !ok {
				top[tokenText(r.tk.Piece(t.ID))] = t.Logit
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(piece)
	}
	return out
}

// complete is the non-streaming document of a finished job.
func (r *response) complete(j *job, res []*choiceResult) any {
	stats := make([]engine.Stats, len(res))
	for i, c := range res {
		stats[i] = c.stats
	}
	u, t := j.account(stats)
	if r.chat {
		doc := chatCompletion{ID: r.id, Object: "chat.completion", Created: r.created, Model: r.model,
			SystemFingerprint: fingerprint, Usage: &u, Timings: &t}
		for i, c := range res {
			reasoning, content, calls := replyParts(&j.p, c.text.String())
			finish := c.finish
			ch := chatChoice{Index: i, Message: &chatReply{Role: "assistant", Content: &content}, FinishReason: &finish}
			if reasoning != "" {
				ch.Message.ReasoningContent = &reasoning
			}
			for _, call := range calls {
				ch.Message.ToolCalls = append(ch.Message.ToolCalls, callDoc(call))
			}
			if len(calls) > 0 {
				if strings.TrimSpace(content) == "" {
					ch.Message.Content = nil
				}
				if finish == "stop" {
					finish = "tool_calls"
				}
			}
			if j.p.Logprobs {
				ch.Logprobs = r.chatLogprobs(c.logprobs)
			}
			doc.Choices = append(doc.Choices, ch)
		}
		return doc
	}
	doc := textCompletion{ID: r.id, Object: "text_completion", Created: r.created, Model: r.model,
		SystemFingerprint: fingerprint, Usage: &u, Timings: &t}
	for i, c := range res {
		finish := c.finish
		ch := textChoice{Index: i, Text: j.echo(i) + c.text.String(), FinishReason: &finish}
		if j.p.Logprobs {
			ch.Logprobs = r.textLogprobs(c.logprobs, 0)
		}
		doc.Choices = append(doc.Choices, ch)
	}
	return doc
}

// replyParts splits a whole chat reply as p asks: its reasoning, its
// content, and the tool calls parsed out of the content (only the first
// with p.SingleToolCall).
func replyParts(p *Params, text string) (reasoning, content string, calls []toolCall) {
	reasoning, content = splitReasoning(p.Reasoning, text)
	if tp := newToolParser(p.ToolFormat); tp != nil {
		var deltas, more []toolDelta
		content, deltas = tp.push(content)
		var rest string
		rest, more = tp.flush()
		content += rest
		calls = collectCalls(nil, append(deltas, more...))
		if p.SingleToolCall && len(calls) > 1 {
			calls = calls[:1]
		}
	}
	return reasoning, content, calls
}

// sse writes documents as server-sent events and reports whether the
// client is still there (a failed flush means it left).
type sse struct {
	w   *bufio.Writer
	err error
}

// event writes v as an unnamed SSE event (the Chat Completions stream).
func (s *sse) event(v any) bool { return s.named("", v) }

// named writes v as an SSE event, with an "event: name" line unless name
// is empty (the Responses stream names every event).
func (s *sse) named(name string, v any) bool {
	if s.err != nil {
		return false
	}
	b, err := marshal(v)
	if err != nil {
		s.err = err
		return false
	}
	if name != "" {
		s.w.WriteString("event: ")
		s.w.WriteString(name)
		s.w.WriteString("\n")
	}
	s.w.WriteString("data: ")
	s.w.Write(b)
	s.w.WriteString("\n\n")
	s.err = s.w.Flush()
	return s.err == nil
}

func (s *sse) done() bool {
	if s.err != nil {
		return false
	}
	s.w.WriteString("data: [DONE]\n\n")
	s.err = s.w.Flush()
	return s.err == nil
}

// stream writes j's output as SSE chunks ending with "data: [DONE]", and
// reports whether the client received it all. When a write fails the client
// has left: the job's choices are aborted (their KV is freed at the engine's
// next step) and stream returns false.
func (r *response) stream(w *bufio.Writer, j *job) bool {
	out := &sse{w: w}
	defer func() {
		if out.err != nil {
			j.leave()
		}
	}()
	var u *wire.Usage // null in every chunk when usage is asked for, absent otherwise
	offsets := make([]int, j.choices)
	stats := make([]engine.Stats, j.choices)
	pipes := make([]*chatPipe, j.choices)
	for i := range pipes {
		pipes[i] = &chatPipe{sp: newReasoningSplitter(j.p.Reasoning), tp: newToolParser(j.p.ToolFormat), single: j.p.SingleToolCall}
	}
	for i := range j.choices {
		if r.chat {
			empty := ""
			if !out.event(r.chatChunk(i, &chatMessage{Role: "assistant", Content: &empty}, nil, nil, u)) {
				return false
			}
		} else if echo := j.echo(i); echo != "" {
			if !out.event(r.textChunk(i, echo, nil, nil, u)) {
				return false
			}
		}
	}
	for j.finishes < j.choices {
		d := <-j.out // past the deadline too, every runner still reports its end
		if d.err != nil {
			out.event(struct {
				Error *Error `json:"error"`
			}{d.err})
			j.leave()
			return out.err == nil
		}
		if r.chat && (pipes[d.index].sp != nil || pipes[d.index].tp != nil) {
			if !r.streamChat(out, pipes[d.index], d, u) {
				return false
			}
		} else if d.text != "" || d.logprobs != nil {
			var ok bool
			if r.chat {
				var lp *chatLogprobs
				if j.p.Logprobs {
					lp = r.chatLogprobs(d.logprobs)
				}
				text := d.text
				ok = out.event(r.chatChunk(d.index, &chatMessage{Content: &text}, lp, nil, u))
			} else {
				var lp *textLogprobs
				if j.p.Logprobs {
					lp = r.textLogprobs(d.logprobs, offsets[d.index])
				}
				ok = out.event(r.textChunk(d.index, d.text, lp, nil, u))
			}
			offsets[d.index] += len(d.text)
			if !ok {
				return false
			}
		}
		if !d.final {
			continue
		}
		j.finishes++
		stats[d.index] = d.stats
		finish := d.finish
		if pipes[d.index].calls > 0 && finish == "stop" {
			finish = "tool_calls"
		}
		var t *wire.Timings // on the last finish chunk when no usage chunk follows
		if j.finishes == j.choices && !j.p.IncludeUsage {
			_, tt := j.account(stats)
			t = &tt
		}
		var ok bool
		if r.chat {
			c := r.chatChunk(d.index, &chatMessage{}, nil, &finish, u)
			c.Timings = t
			ok = out.event(c)
		} else {
			c := r.textChunk(d.index, "", nil, &finish, u)
			c.Timings = t
			ok = out.event(c)
		}
		if !ok {
			return false
		}
	}
	total, t := j.account(stats)
	if j.p.IncludeUsage {
		var doc any
		if r.chat {
			doc = chatCompletion{ID: r.id, Object: "chat.completion.chunk", Created: r.created, Model: r.model,
				SystemFingerprint: fingerprint, Choices: []chatChoice{}, Usage: &total, Timings: &t}
		} else {
			doc = textCompletion{ID: r.id, Object: "text_completion", Created: r.created, Model: r.model,
				SystemFingerprint: fingerprint, Choices: []textChoice{}, Usage: &total, Timings: &t}
		}
		if !out.event(doc) {
			return false
		}
	}
	return out.done()
}

// chatPipe is one streamed chat choice's text processing: the reasoning
// split, then tool call parsing of the content (either may be off).
type chatPipe struct {
	sp     *reasoningSplitter
	tp     toolParser
	single bool // parallel_tool_calls false: only the first call
	calls  int  // tool calls streamed
}

// push sends a delta's text through p: the reasoning and the content it
// lets out, and the tool call deltas it completes (a final delta flushes
// what was held back).
func (p *chatPipe) push(d delta) (reasoning, content string, calls []toolDelta) {
	reasoning, content = "", d.text
	if p.sp != nil {
		reasoning, content = p.sp.push(d.text)
		if d.final {
			fr, fc := p.sp.flush()
			reasoning, content = reasoning+fr, content+fc
		}
	}
	if p.tp != nil {
		content, calls = p.tp.push(content)
		if d.final {
			fc, more := p.tp.flush()
			content, calls = content+fc, append(calls, more...)
		}
	}
	return reasoning, content, calls
}

// streamChat sends a chat delta's text through p: reasoning_content and
// content in one chunk, then the tool call deltas as OpenAI streams them
// (deltaDocs). Text that may still be markup is held back; a final delta
// flushes it.
func (r *response) streamChat(out *sse, p *chatPipe, d delta, u *wire.Usage) bool {
	reasoning, content, calls := p.push(d)
	var lp *chatLogprobs
	if d.logprobs != nil {
		lp = r.chatLogprobs(d.logprobs)
	}
	if reasoning != "" || content != "" || lp != nil {
		m := &chatMessage{}
		if reasoning != "" {
			m.ReasoningContent = &reasoning
		}
		if content != "" || reasoning == "" {
			m.Content = &content
		}
		if !out.event(r.chatChunk(d.index, m, lp, nil, u)) {
			return false
		}
	}
	for _, c := range calls {
		if p.single && c.index > 0 {
			break
		}
		if c.name != "" {
			p.calls++
		}
		for _, doc := range deltaDocs(c) {
			if !out.event(r.chatChunk(d.index, &chatMessage{ToolCalls: []toolCallDoc{doc}}, nil, nil, u)) {
				return false
			}
		}
	}
	return true
}

func (r *response) chatChunk(index int, d *chatMessage, lp *chatLogprobs, finish *string, u *wire.Usage) chatCompletion {
	return chatCompletion{ID: r.id, Object: "chat.completion.chunk", Created: r.created, Model: r.model,
		SystemFingerprint: fingerprint, Usage: u,
		Choices: []chatChoice{{Index: index, Delta: d, Logprobs: lp, FinishReason: finish}}}
}

func (r *response) textChunk(index int, text string, lp *textLogprobs, finish *string, u *wire.Usage) textCompletion {
	return textCompletion{ID: r.id, Object: "text_completion", Created: r.created, Model: r.model,
		SystemFingerprint: fingerprint, Usage: u,
		Choices: []textChoice{{Index: index, Text: text, Logprobs: lp, FinishReason: finish}}}
}

// marshal encodes v as JSON without HTML escaping: model text such as
// "<|im_end|>" stays readable on the wire (json.Marshal would send \u003c).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
