package httpfront

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The Anthropic Messages API (POST /v1/messages and
// /v1/messages/count_tokens). A request is translated into a chat
// completions request and decoded by DecodeChat, as /v1/responses is:
// system into a first system message, content blocks into chat messages
// (tool_use blocks into an assistant's tool_calls, tool_result blocks
// into tool messages, thinking blocks into reasoning_content), tools and
// tool_choice into their chat forms, stop_sequences into stop, thinking
// into the template's enable_thinking. A final assistant message is
// continued (Anthropic's prefill), as continue_final_message. Errors name
// the Messages field.

// messagesFields are the members of a /v1/messages request the server
// knows.
var messagesFields = map[string]fieldKind{
	"model": fieldUsed, "max_tokens": fieldUsed, "messages": fieldUsed, "system": fieldUsed,
	"tools": fieldUsed, "tool_choice": fieldUsed, "stop_sequences": fieldUsed, "temperature": fieldUsed,
	"top_p": fieldUsed, "top_k": fieldUsed, "stream": fieldUsed, "thinking": fieldUsed,
	"metadata": fieldIgnored, "service_tier": fieldIgnored, "cache_control": fieldIgnored,
	"container": fieldRejected, "mcp_servers": fieldRejected,
}

// messagesPassed are members that mean the same in a chat request.
var messagesPassed = []string{"model", "max_tokens", "temperature", "top_p", "top_k", "stream"}

// messagesNames maps chat field names to the Messages names, for errors.
var messagesNames = [][2]string{
	{"stop", "stop_sequences"},
	{"chat_template_kwargs", "thinking"},
	{"continue_final_message", "messages"},
}

// MessagesRequest is a validated /v1/messages request: the chat request
// it maps to.
type MessagesRequest struct {
	Chat *ChatRequest
}

// messageBlockFields are the members of a content block the server knows,
// by block type; cache_control is accepted on every block and ignored.
var messageBlockFields = map[string]map[string]bool{
	"text":              {"type": true, "text": true, "cache_control": true, "citations": true},
	"tool_use":          {"type": true, "id": true, "name": true, "input": true, "cache_control": true},
	"tool_result":       {"type": true, "tool_use_id": true, "content": true, "is_error": true, "cache_control": true},
	"thinking":          {"type": true, "thinking": true, "signature": true},
	"redacted_thinking": {"type": true, "data": true},
	"image":             {"type": true, "source": true, "cache_control": true},
	"document":          {"type": true, "source": true, "title": true, "context": true, "citations": true, "cache_control": true},
}

// DecodeMessages parses and validates a /v1/messages body; countOnly
// decodes a /v1/messages/count_tokens body, where max_tokens is not
// required. Errors are *Error with status 400 naming the field.
func DecodeMessages(body []byte, o DecodeOptions, countOnly bool) (*MessagesRequest, *Error) {
	f, e := object(body, messagesFields, o.Strict)
	if e != nil {
		return nil, e
	}
	if !countOnly && !f.has("max_tokens") {
		return nil, badParam("max_tokens", "Missing required parameter: 'max_tokens'.")
	}
	if e := messagesMetadata(f); e != nil {
		return nil, e
	}
	chat := map[string]json.RawMessage{}
	for _, k := range messagesPassed {
		if v, ok := f[k]; ok {
			chat[k] = v
		}
	}
	if countOnly {
		delete(chat, "max_tokens")
		delete(chat, "stream")
	}
	var msgs []map[string]any
	var msgAt []string
	var partAt [][]string
	if f.has("system") {
		text, e := blockText(f["system"], "system")
		if e != nil {
			return nil, e
		}
		msgs, msgAt, partAt = append(msgs, map[string]any{"role": "system", "content": text}), append(msgAt, "system"), append(partAt, nil)
	}
	in, inAt, inParts, prefill, e := messagesInput(f, o.Strict)
	if e != nil {
		return nil, e
	}
	msgs, msgAt, partAt = append(msgs, in...), append(msgAt, inAt...), append(partAt, inParts...)
	chat["messages"] = mustJSON(msgs)
	if prefill {
		chat["continue_final_message"] = json.RawMessage("true")
	}
	if f.has("stop_sequences") {
		chat["stop"] = f["stop_sequences"]
	}
	if f.has("tools") {
		t, e := messagesTools(f["tools"], o.Strict)
		if e != nil {
			return nil, e
		}
		chat["tools"] = t
	}
	forcesTool := false
	if f.has("tool_choice") {
		choice, parallel, forces, e := messagesToolChoice(f["tool_choice"])
		if e != nil {
			return nil, e
		}
		chat["tool_choice"], chat["parallel_tool_calls"], forcesTool = choice, parallel, forces
	}
	budget := 0
	if f.has("thinking") {
		on, b, e := messagesThinking(f)
		if e != nil {
			return nil, e
		}
		if on && forcesTool {
			// Anthropic's rule: a forced tool call leaves no room to think.
			return nil, badParam("tool_choice", "Thinking may not be enabled when tool_choice forces tool use.")
		}
		chat["chat_template_kwargs"] = mustJSON(map[string]bool{"enable_thinking": on})
		budget = b
	}
	cr, e := DecodeChat(mustJSON(chat), o)
	// An image block's URL is its source.
	blockAt := func(part string) string {
		var i, j int
		if n, _ := fmt.Sscanf(part, "messages[%d].content[%d]", &i, &j); n == 2 && i < len(partAt) && j < len(partAt[i]) {
			return partAt[i][j]
		}
		return renameField(part, msgAt, messagesNames)
	}
	if e != nil {
		if !imageFieldNames(nil, e, blockAt, ".source") {
			e = renameFields(e, msgAt, messagesNames)
		}
		return nil, e
	}
	imageFieldNames(cr, nil, blockAt, ".source")
	if budget > 0 && !countOnly && budget >= cr.Params.MaxTokens {
		return nil, badParam("thinking.budget_tokens", "Invalid 'thinking.budget_tokens': it must be less than max_tokens (%d), got %d.", cr.Params.MaxTokens, budget)
	}
	cr.Params.ReasoningBudget = budget
	return &MessagesRequest{Chat: cr}, nil
}

// messagesMetadata checks metadata ({"user_id": string}), accepted and
// ignored.
func messagesMetadata(f fields) *Error {
	var meta map[string]any
	if e := f.decode("metadata", "an object", &meta); e != nil {
		return e
	}
	if v, ok := meta["user_id"]; ok && v != nil {
		if _, ok := v.(string); !ok {
			return badParam("metadata.user_id", "Invalid type for 'metadata.user_id': expected a string.")
		}
	}
	return nil
}

// messagesThinking reads thinking: {"type":"enabled","budget_tokens":N}
// (N >= 1024 and, checked by DecodeMessages, below max_tokens, as
// Anthropic; the reply's reasoning is closed after N tokens), {"type":"adaptive"} or {"type":"between_tools"} (thinking on,
// the model decides how much), or {"type":"disabled"}; it reports whether
// thinking is on, and the budget (0 for none). display is checked and
// ignored: the thinking is always returned.
func messagesThinking(f fields) (on bool, budget int, e *Error) {
	var t struct {
		Type         string   `json:"type"`
		BudgetTokens *float64 `json:"budget_tokens"`
		Display      *string  `json:"display"`
	}
	if err := json.Unmarshal(f["thinking"], &t); err != nil {
		return false, 0, badParam("thinking", "Invalid type for 'thinking': expected an object with a 'type'.")
	}
	if t.Display != nil && *t.Display != "summarized" && *t.Display != "omitted" {
		return false, 0, badParam("thinking.display", "Invalid value for 'thinking.display': expected 'summarized' or 'omitted', got '%.32s'.", *t.Display)
	}
	switch t.Type {
	case "disabled":
		return false, 0, nil
	case "adaptive", "between_tools":
		return true, 0, nil
	case "enabled":
		if t.BudgetTokens == nil {
			return false, 0, badParam("thinking.budget_tokens", "Missing required parameter: 'thinking.budget_tokens'.")
		}
		if b := *t.BudgetTokens; b != float64(int(b)) || b < 1024 {
			return false, 0, badParam("thinking.budget_tokens", "Invalid 'thinking.budget_tokens': expected an integer >= 1024, got %g.", b)
		}
		return true, int(*t.BudgetTokens), nil
	}
	return false, 0, badParam("thinking.type", "Invalid value for 'thinking.type': expected 'enabled', 'adaptive', 'between_tools' or 'disabled', got '%.32s'.", t.Type)
}

// blockText reads system or a tool_result's content: a string, or an
// array of text blocks joined with a blank line.
func blockText(raw json.RawMessage, param string) (string, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", badParam(param, "Invalid type for '%s': expected a string or an array of text blocks.", param)
	}
	texts := make([]string, len(blocks))
	for i, b := range blocks {
		at := fmt.Sprintf("%s[%d]", param, i)
		switch {
		case b.Type != "text":
			return "", badParam(at+".type", "Invalid value for '%s.type': '%.32s' blocks are not supported here; use 'text'.", at, b.Type)
		case b.Text == nil:
			return "", badParam(at+".text", "Missing required parameter: '%s.text'.", at)
		}
		texts[i] = *b.Text
	}
	return strings.Join(texts, "\n\n"), nil
}

// messagesInput turns messages into chat messages and gives the field
// each came from. A user message's tool_result blocks become tool
// messages and its text blocks a user message, in order; an assistant
// message's text becomes its content, its tool_use blocks its tool_calls
// and its thinking its reasoning_content. prefill reports a final
// assistant message with text and no tool calls, which the reply
// continues.
func messagesInput(f fields, strict bool) (msgs []map[string]any, at []string, partAt [][]string, prefill bool, e *Error) {
	if !f.has("messages") {
		return nil, nil, nil, false, badParam("messages", "Missing required parameter: 'messages'.")
	}
	var raw []fields
	if e := f.decode("messages", "an array of message objects", &raw); e != nil {
		return nil, nil, nil, false, e
	}
	if len(raw) == 0 {
		return nil, nil, nil, false, badParam("messages", "'messages' must contain at least one message.")
	}
	for i, m := range raw {
		where := fmt.Sprintf("messages[%d]", i)
		if m == nil {
			return nil, nil, nil, false, badParam(where, "Invalid type for '%s': expected an object.", where)
		}
		if e := nestedFields(m, map[string]bool{"role": true, "content": true}, where, "messages[]", strict); e != nil {
			return nil, nil, nil, false, e
		}
		var role string
		if e := m.decode("role", "a string", &role); e != nil {
			e.Param, e.Message = where+".role", fmt.Sprintf("Invalid type for '%s.role': expected a string.", where)
			return nil, nil, nil, false, e
		}
		if role != "user" && role != "assistant" {
			return nil, nil, nil, false, badParam(where+".role", "Invalid value for '%s.role': expected 'user' or 'assistant', got '%.32s'.", where, role)
		}
		if !m.has("content") {
			return nil, nil, nil, false, badParam(where+".content", "Missing required parameter: '%s.content'.", where)
		}
		var s string
		if json.Unmarshal(m["content"], &s) == nil {
			msgs, at, partAt = append(msgs, map[string]any{"role": role, "content": s}), append(at, where), append(partAt, nil)
			prefill = role == "assistant" && s != ""
			continue
		}
		var blocks []fields
		if err := json.Unmarshal(m["content"], &blocks); err != nil {
			return nil, nil, nil, false, badParam(where+".content", "Invalid type for '%s.content': expected a string or an array of content blocks.", where)
		}
		var out []map[string]any
		var outAt []string
		var outParts [][]string
		if role == "user" {
			out, outAt, outParts, e = userBlocks(blocks, where+".content", strict)
			prefill = false
		} else {
			var m map[string]any
			m, prefill, e = assistantBlocks(blocks, where+".content", strict)
			out, outAt, outParts = []map[string]any{m}, []string{where}, [][]string{nil}
		}
		if e != nil {
			return nil, nil, nil, false, e
		}
		msgs, at, partAt = append(msgs, out...), append(at, outAt...), append(partAt, outParts...)
	}
	return msgs, at, partAt, prefill, nil
}

// blockContext is where content blocks sit: how errors name it (holder)
// and the block types it holds.
type blockContext struct {
	holder string
	types  []string
}

var (
	inUserMessage      = blockContext{"a user message", []string{"text", "image", "document", "tool_result"}}
	inToolResult       = blockContext{"a tool_result", []string{"text", "image"}}
	inAssistantMessage = blockContext{"an assistant message", []string{"text", "thinking", "redacted_thinking", "tool_use"}}
)

// contentBlock checks block i of a content array in context in and
// returns its type, one of in.types.
func contentBlock(b fields, at string, strict bool, in blockContext) (string, *Error) {
	if b == nil {
		return "", badParam(at, "Invalid type for '%s': expected an object.", at)
	}
	var typ string
	if e := b.decode("type", "a string", &typ); e != nil || typ == "" {
		return "", badParam(at+".type", "Missing required parameter: '%s.type'.", at)
	}
	if !slices.Contains(in.types, typ) {
		quoted := make([]string, len(in.types))
		for i, t := range in.types {
			quoted[i] = "'" + t + "'"
		}
		list := strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
		return "", badParam(at+".type", "Invalid value for '%s.type': %s holds %s blocks, not '%.32s'.", at, in.holder, list, typ)
	}
	return typ, nestedFields(b, messageBlockFields[typ], at, "messages[].content[]", strict)
}

// blockString reads a required string member of a content block.
func blockString(b fields, name, at string) (string, *Error) {
	var v string
	if !b.has(name) {
		return "", badParam(at+"."+name, "Missing required parameter: '%s.%s'.", at, name)
	}
	if e := b.decode(name, "a string", &v); e != nil {
		e.Param, e.Message = at+"."+name, fmt.Sprintf("Invalid type for '%s.%s': expected a string.", at, name)
		return "", e
	}
	return v, nil
}

// userBlocks turns a user message's blocks into chat messages: text
// blocks (and text documents, documentText) gather into a user message, each tool_result ends it and adds a
// tool message. partAt[i] is the block each content part of msgs[i] came
// from (nil without parts).
func userBlocks(blocks []fields, at string, strict bool) (msgs []map[string]any, msgAt []string, partAt [][]string, e *Error) {
	var text, textBlocks []string
	// With images, parts are the chat content parts so far, one per block
	// (text blocks are not merged), so that a part's index is its block's
	// when the chat message starts at block 0 (partsAt).
	var parts []map[string]any
	var partBlocks []string // each part's block
	textAt, partsAt := "", ""
	flush := func() {
		switch {
		case parts != nil:
			msgs, msgAt, partAt = append(msgs, map[string]any{"role": "user", "content": parts}), append(msgAt, partsAt), append(partAt, partBlocks)
			parts, partBlocks = nil, nil
		case text != nil:
			msgs, msgAt, partAt = append(msgs, map[string]any{"role": "user", "content": strings.Join(text, "\n\n")}), append(msgAt, textAt), append(partAt, nil)
			text, textBlocks = nil, nil
		}
	}
	for i, b := range blocks {
		where := fmt.Sprintf("%s[%d]", at, i)
		typ, e := contentBlock(b, where, strict, inUserMessage)
		if e != nil {
			return nil, nil, nil, e
		}
		switch typ {
		case "text", "document":
			var s string
			if typ == "text" {
				s, e = blockString(b, "text", where)
			} else {
				s, e = documentText(b, where)
			}
			if e != nil {
				return nil, nil, nil, e
			}
			if parts != nil {
				parts, partBlocks = append(parts, map[string]any{"type": "text", "text": s}), append(partBlocks, where)
				continue
			}
			if text == nil {
				textAt = where
			}
			text, textBlocks = append(text, s), append(textBlocks, where)
		case "image":
			url, e := imageBlockURL(b, where)
			if e != nil {
				return nil, nil, nil, e
			}
			if parts == nil {
				// The message's blocks so far (text since the last tool_result) become parts.
				partsAt = textAt
				if i-len(text) == 0 {
					partsAt = strings.TrimSuffix(at, ".content")
				} else if text == nil {
					partsAt = where
				}
				for _, s := range text {
					parts = append(parts, map[string]any{"type": "text", "text": s})
				}
				partBlocks = textBlocks
				text, textBlocks = nil, nil
			}
			parts, partBlocks = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": url}}), append(partBlocks, where)
		case "tool_result":
			flush()
			id, e := blockString(b, "tool_use_id", where)
			if e != nil {
				return nil, nil, nil, e
			}
			var content any = ""
			var parts []string
			if b.has("content") {
				if content, parts, e = toolResultContent(b["content"], where+".content", strict); e != nil {
					return nil, nil, nil, e
				}
			}
			var isErr bool
			if e := b.decode("is_error", "a boolean", &isErr); e != nil {
				e.Param, e.Message = where+".is_error", fmt.Sprintf("Invalid type for '%s.is_error': expected a boolean.", where)
				return nil, nil, nil, e
			}
			msgs, msgAt, partAt = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": content}), append(msgAt, where), append(partAt, parts)
		}
	}
	flush()
	if len(msgs) == 0 {
		msgs, msgAt, partAt = []map[string]any{{"role": "user", "content": ""}}, []string{at}, [][]string{nil}
	}
	return msgs, msgAt, partAt, nil
}

// toolResultContent reads a tool_result's content at at: a string, or
// text and image blocks (a tool that returns a screenshot or a file's
// image). Text alone is joined with a blank line; with images the content
// is chat content parts, one per block, and partAt the block of each.
func toolResultContent(raw json.RawMessage, at string, strict bool) (content any, partAt []string, e *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil, nil
	}
	var blocks []fields
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, nil, badParam(at, "Invalid type for '%s': expected a string or an array of text and image blocks.", at)
	}
	var texts []string
	var parts []map[string]any
	images := false
	for i, b := range blocks {
		where := fmt.Sprintf("%s[%d]", at, i)
		typ, e := contentBlock(b, where, strict, inToolResult)
		if e != nil {
			return nil, nil, e
		}
		switch typ {
		case "text":
			t, e := blockString(b, "text", where)
			if e != nil {
				return nil, nil, e
			}
			texts, parts = append(texts, t), append(parts, map[string]any{"type": "text", "text": t})
		case "image":
			url, e := imageBlockURL(b, where)
			if e != nil {
				return nil, nil, e
			}
			parts, images = append(parts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": url}}), true
		}
		partAt = append(partAt, where)
	}
	if !images {
		return strings.Join(texts, "\n\n"), nil, nil
	}
	return parts, partAt, nil
}

// assistantBlocks turns an assistant message's blocks into one chat
// message; prefill reports text and no tool calls.
func assistantBlocks(blocks []fields, at string, strict bool) (map[string]any, bool, *Error) {
	var text, thinking []string
	var calls []map[string]any
	for i, b := range blocks {
		where := fmt.Sprintf("%s[%d]", at, i)
		typ, e := contentBlock(b, where, strict, inAssistantMessage)
		if e != nil {
			return nil, false, e
		}
		switch typ {
		case "text":
			s, e := blockString(b, "text", where)
			if e != nil {
				return nil, false, e
			}
			text = append(text, s)
		case "thinking":
			s, e := blockString(b, "thinking", where)
			if e != nil {
				return nil, false, e
			}
			thinking = append(thinking, s)
		case "redacted_thinking":
		case "tool_use":
			id, e := blockString(b, "id", where)
			if e != nil {
				return nil, false, e
			}
			name, e := blockString(b, "name", where)
			if e != nil {
				return nil, false, e
			}
			var input map[string]json.RawMessage
			if err := json.Unmarshal(b["input"], &input); err != nil || input == nil {
				return nil, false, badParam(where+".input", "Invalid type for '%s.input': expected an object.", where)
			}
			calls = append(calls, map[string]any{"id": id, "type": "function",
				"function": map[string]any{"name": name, "arguments": string(b["input"])}})
		}
	}
	m := map[string]any{"role": "assistant", "content": strings.Join(text, "\n\n")}
	if len(thinking) > 0 {
		m["reasoning_content"] = strings.Join(thinking, "\n\n")
	}
	if len(calls) > 0 {
		m["tool_calls"] = calls
	}
	return m, len(text) > 0 && len(calls) == 0 && m["content"] != "", nil
}

// messagesTools turns Anthropic tools ({name, description, input_schema})
// into chat tools. Anthropic's server tools (a type other than "custom")
// are not supported.
func messagesTools(raw json.RawMessage, strict bool) (json.RawMessage, *Error) {
	var tools []fields
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, badParam("tools", "Invalid type for 'tools': expected an array of tools.")
	}
	out := make([]map[string]any, len(tools))
	known := map[string]bool{"type": true, "name": true, "description": true, "input_schema": true, "cache_control": true}
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t == nil {
			return nil, badParam(at, "Invalid type for '%s': expected an object.", at)
		}
		var typ string
		if t.decode("type", "a string", &typ) != nil || (typ != "" && typ != "custom") {
			return nil, badParam(at+".type", "Invalid value for '%s.type': only custom tools (no 'type', or 'custom') are supported, not Anthropic's server tools.", at)
		}
		if e := nestedFields(t, known, at, "tools[]", strict); e != nil {
			return nil, e
		}
		var schema map[string]json.RawMessage
		if !t.has("input_schema") {
			return nil, badParam(at+".input_schema", "Missing required parameter: '%s.input_schema'.", at)
		}
		if err := json.Unmarshal(t["input_schema"], &schema); err != nil || schema == nil {
			return nil, badParam(at+".input_schema", "Invalid type for '%s.input_schema': expected a JSON Schema object.", at)
		}
		fn := map[string]json.RawMessage{"parameters": t["input_schema"]}
		for _, k := range []string{"name", "description"} {
			if t.has(k) {
				fn[k] = t[k]
			}
		}
		out[i] = map[string]any{"type": "function", "function": fn}
	}
	return mustJSON(out), nil
}

// messagesToolChoice turns an Anthropic tool_choice ({"type": "auto",
// "any", "tool" with "name", or "none"; disable_parallel_tool_use}) into
// the chat tool_choice and parallel_tool_calls; forces reports any and
// tool, which make the reply call a tool.
func messagesToolChoice(raw json.RawMessage) (choice, parallel json.RawMessage, forces bool, e *Error) {
	var c struct {
		Type            string `json:"type"`
		Name            string `json:"name"`
		DisableParallel bool   `json:"disable_parallel_tool_use"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, false, badParam("tool_choice", "Invalid type for 'tool_choice': expected an object with a 'type'.")
	}
	parallel = mustJSON(!c.DisableParallel)
	switch c.Type {
	case "auto", "none":
		return mustJSON(c.Type), parallel, false, nil
	case "any":
		return mustJSON("required"), parallel, true, nil
	case "tool":
		if c.Name == "" {
			return nil, nil, false, badParam("tool_choice.name", "Missing required parameter: 'tool_choice.name'.")
		}
		return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}}), parallel, true, nil
	}
	return nil, nil, false, badParam("tool_choice.type", "Invalid value for 'tool_choice.type': expected 'auto', 'any', 'tool' or 'none', got '%.32s'.", c.Type)
}

// documentText reads a text document block as the text the user message
// holds: its title, its context and its text (source.type "text" with
// media_type text/plain, or "content": a string or text blocks joined
// with a blank line), each present one separated from the next by a blank
// line. PDF (base64), url and file sources are refused naming
// source.type: only text documents are read.
func documentText(b fields, where string) (string, *Error) {
	if !b.has("source") {
		return "", badParam(where+".source", "Missing required parameter: '%s.source'.", where)
	}
	var src fields
	if err := json.Unmarshal(b["source"], &src); err != nil || src == nil {
		return "", badParam(where+".source", "Invalid type for '%s.source': expected an object.", where)
	}
	at := where + ".source"
	typ, e := blockString(src, "type", at)
	if e != nil {
		return "", e
	}
	var text string
	switch typ {
	case "text":
		if text, e = blockString(src, "data", at); e != nil {
			return "", e
		}
		if src.has("media_type") {
			mt, e := blockString(src, "media_type", at)
			if e != nil {
				return "", e
			}
			if mt != "text/plain" {
				return "", badParam(at+".media_type", "Invalid value for '%s.media_type': expected 'text/plain', got '%.32s'.", at, mt)
			}
		}
	case "content":
		if !src.has("content") {
			return "", badParam(at+".content", "Missing required parameter: '%s.content'.", at)
		}
		if text, e = blockText(src["content"], at+".content"); e != nil {
			return "", e
		}
	default:
		return "", badParam(at+".type", "Invalid value for '%s.type': '%.32s' documents are not read; only text documents are (source.type 'text' or 'content').", at, typ)
	}
	var out []string
	for _, name := range []string{"title", "context"} {
		if !b.has(name) || string(b[name]) == "null" {
			continue
		}
		v, e := blockString(b, name, where)
		if e != nil {
			return "", e
		}
		if v != "" {
			out = append(out, v)
		}
	}
	return strings.Join(append(out, text), "\n\n"), nil
}

// imageBlockURL reads an image block's source as the URL the chat decoder
// reads: base64 data as a data URL, a url source as it is.
func imageBlockURL(b fields, where string) (string, *Error) {
	var src struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	if err := json.Unmarshal(b["source"], &src); err != nil {
		return "", badParam(where+".source", "Invalid type for '%s.source': expected an object.", where)
	}
	switch src.Type {
	case "base64":
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case "url":
		return src.URL, nil
	}
	return "", badParam(where+".source.type", "Invalid value for '%s.source.type': '%.32s'; use 'base64' or 'url'.", where, src.Type)
}
