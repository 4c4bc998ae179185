package httpfront

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// The stateless OpenAI Responses API (POST /v1/responses). A request is
// translated into a chat completions request (input items into messages,
// instructions into a first system message, Responses tools into chat
// tools, text.format into response_format, max_output_tokens into
// max_tokens) and decoded by DecodeChat, so both endpoints share one
// validation, one set of parameters and one template rendering. Errors
// name the Responses field.

// responsesFields are the members of a /v1/responses request the server
// knows.
var responsesFields = map[string]fieldKind{
	"model": fieldUsed, "input": fieldUsed, "instructions": fieldUsed, "max_output_tokens": fieldUsed,
	"temperature": fieldUsed, "top_p": fieldUsed, "tools": fieldUsed, "tool_choice": fieldUsed,
	"parallel_tool_calls": fieldUsed, "text": fieldUsed, "stream": fieldUsed, "reasoning": fieldUsed,
	"store": fieldUsed, "previous_response_id": fieldUsed, "conversation": fieldUsed, "background": fieldUsed,
	// vLLM's sampling extensions, as on /v1/chat/completions.
	"seed": fieldUsed, "top_k": fieldUsed, "min_p": fieldUsed, "repetition_penalty": fieldUsed,
	"ignore_eos": fieldUsed, "min_tokens": fieldUsed, "chat_template_kwargs": fieldUsed,
	"user": fieldIgnored, "metadata": fieldIgnored, "service_tier": fieldIgnored, "truncation": fieldIgnored,
	"stream_options": fieldIgnored, "prompt_cache_key": fieldIgnored, "safety_identifier": fieldIgnored,
	"prompt_cache_retention": fieldIgnored,
	"include":                fieldRejected, "prompt": fieldRejected, "max_tool_calls": fieldRejected, "top_logprobs": fieldRejected,
}

// responsesPassed are members that mean the same in a chat request.
var responsesPassed = []string{"model", "temperature", "top_p", "parallel_tool_calls", "stream", "seed", "top_k",
	"min_p", "repetition_penalty", "ignore_eos", "min_tokens", "chat_template_kwargs", "user", "metadata", "service_tier"}

// ResponsesRequest is a validated /v1/responses request: the chat request
// it maps to, and what the response object repeats of it.
type ResponsesRequest struct {
	Chat *ChatRequest
	// Instructions is the instructions text, nil when none was sent.
	Instructions *string
	// Tools are the request's tools in the Responses shape ([] when none);
	// ToolChoice the tool_choice as sent ("auto" when absent).
	Tools      json.RawMessage
	ToolChoice json.RawMessage
	// Text is the text configuration as sent ({"format":{"type":"text"}}
	// when absent).
	Text json.RawMessage
	// MaxOutputTokens is max_output_tokens, nil when not sent.
	MaxOutputTokens *int
	Metadata        map[string]string
}

// responsesNames maps chat field names to the Responses names, for errors;
// longest prefix first.
var responsesNames = [][2]string{
	{"response_format.json_schema.", "text.format."},
	{"response_format.json_schema", "text.format"},
	{"response_format.schema", "text.format.schema"},
	{"response_format", "text.format"},
	{"max_completion_tokens", "max_output_tokens"},
	{"max_tokens", "max_output_tokens"},
	{"reasoning_effort", "reasoning.effort"},
	{"messages", "input"},
	{"prompt", "input"},
}

// renameResponses gives a chat decoding error the Responses names of the
// fields it names; msgAt[i] is the Responses field message i came from.
func renameResponses(e *Error, msgAt []string) *Error {
	e = renameFields(e, msgAt, responsesNames)
	if e != nil {
		// Messages of other fields' errors (min_tokens, the context
		// check) name the token limit too.
		e.Message = chatTokenLimit.ReplaceAllString(e.Message, "max_output_tokens")
	}
	return e
}

// renameFields gives a chat decoding error the names of the API whose
// request was translated into the chat request: messages[i] becomes
// msgAt[i] (the field message i came from), tools[i].function.X becomes
// tools[i].X (both APIs put a function's members on the tool), and other
// fields take the first matching prefix of names. Whole field names
// quoted in the message are renamed too.
func renameFields(e *Error, msgAt []string, names [][2]string) *Error {
	if e == nil {
		return nil
	}
	param, ok := e.Param.(string)
	if !ok {
		return e
	}
	if to := renameField(param, msgAt, names); to != param {
		e.Message = strings.ReplaceAll(e.Message, "'"+param, "'"+to)
		for _, n := range names {
			if !strings.HasSuffix(n[0], ".") {
				e.Message = strings.ReplaceAll(e.Message, "'"+n[0]+"'", "'"+n[1]+"'")
			}
		}
		e.Param = to
	}
	return e
}

// renameField is renameFields' name of the chat field param.
func renameField(param string, msgAt []string, names [][2]string) string {
	if rest, ok := strings.CutPrefix(param, "messages["); ok && len(msgAt) > 0 {
		var i int
		if n, _ := fmt.Sscanf(rest, "%d]", &i); n == 1 && i >= 0 && i < len(msgAt) {
			return msgAt[i] + rest[strings.IndexByte(rest, ']')+1:]
		}
		return param
	}
	if rest, ok := strings.CutPrefix(param, "tools["); ok {
		return "tools[" + strings.Replace(rest, "].function", "]", 1)
	}
	for _, n := range names {
		if r, ok := strings.CutPrefix(param, n[0]); ok {
			return n[1] + r
		}
	}
	return param
}

// imageFieldNames gives the image fields of a chat request translated from
// another API that API's names: e's field when it names an image's URL
// (reporting whether it did), else, with e nil, the field of each of r's
// images, which later errors name. partAt is the API's field of a chat
// content part ("messages[i].content[j]"), member the member of that part
// holding the image (".source", ".image_url").
func imageFieldNames(r *ChatRequest, e *Error, partAt func(string) string, member string) bool {
	rename := func(p string) (string, bool) {
		part, ok := strings.CutSuffix(p, ".image_url.url")
		if !ok {
			return p, false
		}
		return partAt(part) + member, true
	}
	if e != nil {
		p, _ := e.Param.(string)
		to, ok := rename(p)
		if ok {
			e.Param, e.Message = to, strings.ReplaceAll(e.Message, p, to)
		}
		return ok
	}
	if r.Images != nil {
		for i, f := range r.Images.Fields {
			r.Images.Fields[i], _ = rename(f)
		}
	}
	return false
}

// chatTokenLimit matches the chat names of the Responses API's
// max_output_tokens.
var chatTokenLimit = regexp.MustCompile(`\bmax_(completion_)?tokens\b`)

// DecodeResponses parses and validates a /v1/responses body. Errors are
// *Error with status 400 naming the field.
func DecodeResponses(body []byte, o DecodeOptions) (*ResponsesRequest, *Error) {
	f, e := object(body, responsesFields, o.Strict)
	if e != nil {
		return nil, e
	}
	for _, k := range []string{"previous_response_id", "conversation"} {
		if f.has(k) {
			return nil, badParam(k, "'%s' is not supported: this server keeps no state between requests; send the whole conversation in 'input'.", k)
		}
	}
	for _, k := range []string{"store", "background"} {
		var on bool
		if e := f.decode(k, "a boolean", &on); e != nil {
			return nil, e
		}
		if on {
			return nil, badParam(k, "Invalid value for '%s': this server keeps no state between requests, so it must be false (or absent).", k)
		}
	}
	chat := map[string]json.RawMessage{}
	for _, k := range responsesPassed {
		if v, ok := f[k]; ok {
			chat[k] = v
		}
	}
	r := &ResponsesRequest{Tools: json.RawMessage("[]"), ToolChoice: json.RawMessage(`"auto"`),
		Text: json.RawMessage(`{"format":{"type":"text"}}`)}
	if f.has("max_output_tokens") {
		var n int
		if e := f.int("max_output_tokens", &n); e != nil {
			return nil, e
		}
		r.MaxOutputTokens = &n
		chat["max_tokens"] = f["max_output_tokens"]
	}
	if e := f.decode("metadata", "an object of string values", &r.Metadata); e != nil {
		return nil, e
	}
	var msgs []map[string]any
	var msgAt []string
	if f.has("instructions") {
		var s string
		if e := f.decode("instructions", "a string", &s); e != nil {
			return nil, e
		}
		r.Instructions = &s
		msgs, msgAt = append(msgs, map[string]any{"role": "system", "content": s}), append(msgAt, "instructions")
	}
	in, inAt, e := responsesInput(f, o.Strict)
	if e != nil {
		return nil, e
	}
	msgs, msgAt = append(msgs, in...), append(msgAt, inAt...)
	b, err := json.Marshal(msgs)
	if err != nil {
		return nil, badParam("input", "Invalid 'input': %v", err)
	}
	chat["messages"] = b
	if f.has("tools") {
		t, e := responsesTools(f["tools"])
		if e != nil {
			return nil, e
		}
		r.Tools, chat["tools"] = f["tools"], t
	}
	if f.has("tool_choice") {
		t, e := responsesToolChoice(f["tool_choice"])
		if e != nil {
			return nil, e
		}
		r.ToolChoice, chat["tool_choice"] = f["tool_choice"], t
	}
	if f.has("text") {
		rf, e := responsesFormat(f["text"])
		if e != nil {
			return nil, e
		}
		r.Text = f["text"]
		if rf != nil {
			chat["response_format"] = rf
		}
	}
	if f.has("reasoning") {
		var rs struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(f["reasoning"], &rs); err != nil {
			return nil, badParam("reasoning", "Invalid type for 'reasoning': expected an object.")
		}
		if rs.Effort != nil {
			chat["reasoning_effort"], _ = json.Marshal(*rs.Effort)
		}
	}
	cb, err := json.Marshal(chat)
	if err != nil {
		return nil, badRequest("invalid_json", "%v", err)
	}
	cr, e := DecodeChat(cb, o)
	// An input_image part's URL is its image_url member.
	partAt := func(p string) string { return renameField(p, msgAt, responsesNames) }
	if e != nil {
		if !imageFieldNames(nil, e, partAt, ".image_url") {
			e = renameResponses(e, msgAt)
		}
		return nil, e
	}
	imageFieldNames(cr, nil, partAt, ".image_url")
	if cr.ConstraintField == "response_format" {
		cr.ConstraintField = "text.format"
	}
	r.Chat = cr
	return r, nil
}

// Members of input items the server knows, by item type.
var inputItemFields = map[string]map[string]bool{
	"message":              {"type": true, "role": true, "content": true, "id": true, "status": true},
	"function_call":        {"type": true, "call_id": true, "name": true, "arguments": true, "id": true, "status": true},
	"function_call_output": {"type": true, "call_id": true, "output": true, "id": true, "status": true},
	"reasoning":            {"type": true, "summary": true, "content": true, "id": true, "status": true, "encrypted_content": true},
}

// responsesInput turns input (a string, or a list of items) into chat
// messages, and gives the field each message came from. function_call
// items become an assistant message's tool_calls (consecutive calls one
// message), function_call_output items tool messages, and a reasoning
// item the reasoning_content of the assistant message after it.
func responsesInput(f fields, strict bool) ([]map[string]any, []string, *Error) {
	if !f.has("input") {
		return nil, nil, badParam("input", "Missing required parameter: 'input'.")
	}
	var s string
	if json.Unmarshal(f["input"], &s) == nil {
		return []map[string]any{{"role": "user", "content": s}}, []string{"input"}, nil
	}
	var items []fields
	if err := json.Unmarshal(f["input"], &items); err != nil {
		return nil, nil, badParam("input", "Invalid type for 'input': expected a string or an array of input items.")
	}
	if len(items) == 0 {
		return nil, nil, badParam("input", "'input' must contain at least one item.")
	}
	var msgs []map[string]any
	var at []string
	var reasoning string
	for i, it := range items {
		where := fmt.Sprintf("input[%d]", i)
		if it == nil {
			return nil, nil, badParam(where, "Invalid type for '%s': expected an object.", where)
		}
		typ := "message"
		if e := it.decode("type", "a string", &typ); e != nil {
			e.Param, e.Message = where+".type", fmt.Sprintf("Invalid type for '%s.type': expected a string.", where)
			return nil, nil, e
		}
		known, ok := inputItemFields[typ]
		if !ok {
			return nil, nil, badParam(where+".type", "Invalid value for '%s.type': '%.32s' items are not supported; use 'message', 'function_call', 'function_call_output' or 'reasoning'.", where, typ)
		}
		if e := nestedFields(it, known, where, "input[]", strict); e != nil {
			return nil, nil, e
		}
		str := func(k string, required bool) (string, *Error) {
			var v string
			if required && !it.has(k) {
				return "", badParam(where+"."+k, "Missing required parameter: '%s.%s'.", where, k)
			}
			if e := it.decode(k, "a string", &v); e != nil {
				e.Param, e.Message = where+"."+k, fmt.Sprintf("Invalid type for '%s.%s': expected a string.", where, k)
				return "", e
			}
			return v, nil
		}
		switch typ {
		case "message":
			role, e := str("role", true)
			if e != nil {
				return nil, nil, e
			}
			switch role {
			case "user", "system", "developer", "assistant":
			default:
				return nil, nil, badParam(where+".role", "Invalid value for '%s.role': '%.32s' is not supported; use 'user', 'system', 'developer' or 'assistant'.", where, role)
			}
			content, e := inputContent(it["content"], where+".content", true)
			if e != nil {
				return nil, nil, e
			}
			m := map[string]any{"role": role, "content": content}
			if role == "assistant" && reasoning != "" {
				m["reasoning_content"], reasoning = reasoning, ""
			}
			msgs, at = append(msgs, m), append(at, where)
		case "function_call":
			callID, e := str("call_id", true)
			if e != nil {
				return nil, nil, e
			}
			name, e := str("name", true)
			if e != nil {
				return nil, nil, e
			}
			args, e := str("arguments", false)
			if e != nil {
				return nil, nil, e
			}
			if args == "" {
				args = "{}"
			}
			call := map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
			if n := len(msgs); n > 0 && msgs[n-1]["role"] == "assistant" && reasoning == "" {
				last := msgs[n-1]
				calls, _ := last["tool_calls"].([]any)
				last["tool_calls"] = append(calls, call)
				continue
			}
			m := map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
			if reasoning != "" {
				m["reasoning_content"], reasoning = reasoning, ""
			}
			msgs, at = append(msgs, m), append(at, where)
		case "function_call_output":
			callID, e := str("call_id", true)
			if e != nil {
				return nil, nil, e
			}
			if !it.has("output") {
				return nil, nil, badParam(where+".output", "Missing required parameter: '%s.output'.", where)
			}
			out, e := inputContent(it["output"], where+".output", false)
			if e != nil {
				return nil, nil, e
			}
			msgs, at = append(msgs, map[string]any{"role": "tool", "tool_call_id": callID, "content": out}), append(at, where)
		case "reasoning":
			var content, summary []struct {
				Text string `json:"text"`
			}
			if it.decode("content", "", &content) != nil || it.decode("summary", "", &summary) != nil {
				return nil, nil, badParam(where, "Invalid '%s': expected a reasoning item with 'content' and 'summary' arrays of text parts.", where)
			}
			parts := content
			if len(parts) == 0 {
				parts = summary
			}
			var b strings.Builder
			for _, p := range parts {
				b.WriteString(p.Text)
			}
			reasoning = b.String()
		}
	}
	return msgs, at, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// inputContent reads a message's content or a function call's output: a
// string, or an array of text parts (input_text, output_text) joined with
// no separator. A message's input_image parts (allowImages) make it the
// chat content parts instead: text, and image_url with the part's
// image_url, which the chat decoder reads and checks.
func inputContent(raw json.RawMessage, param string, allowImages bool) (any, *Error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", badParam(param, "Missing required parameter: '%s'.", param)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     *string `json:"text"`
		ImageURL *string `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badParam(param, "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	var b strings.Builder
	var chatParts []map[string]any
	images := false
	for j, p := range parts {
		switch {
		case p.Type == "input_image" && allowImages:
			if p.ImageURL == nil {
				return "", badParam(fmt.Sprintf("%s[%d].image_url", param, j), "Missing required parameter: '%s[%d].image_url' (file_id is not supported).", param, j)
			}
			chatParts, images = append(chatParts, map[string]any{"type": "image_url", "image_url": map[string]string{"url": *p.ImageURL}}), true
			continue
		case p.Type != "input_text" && p.Type != "output_text" && p.Type != "text":
			return "", badParam(fmt.Sprintf("%s[%d].type", param, j), "Invalid value for '%s[%d].type': '%.32s' parts are not supported; use 'input_text', 'output_text' or 'input_image'.", param, j, p.Type)
		case p.Text == nil:
			return "", badParam(fmt.Sprintf("%s[%d].text", param, j), "Missing required parameter: '%s[%d].text'.", param, j)
		}
		b.WriteString(*p.Text)
		chatParts = append(chatParts, map[string]any{"type": "text", "text": *p.Text})
	}
	if images {
		return chatParts, nil
	}
	return b.String(), nil
}

// responsesTools turns Responses function tools ({type, name,
// description, parameters, strict}) into chat tools.
func responsesTools(raw json.RawMessage) (json.RawMessage, *Error) {
	var tools []fields
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, badParam("tools", "Invalid type for 'tools': expected an array of tools.")
	}
	out := make([]map[string]any, len(tools))
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		var typ string
		if t == nil || json.Unmarshal(t["type"], &typ) != nil || typ != "function" {
			return nil, badParam(at+".type", "Invalid value for '%s.type': only 'function' tools are supported.", at)
		}
		fn := map[string]json.RawMessage{}
		for k, v := range t {
			switch k {
			case "type":
			case "name", "description", "parameters", "strict":
				fn[k] = v
			default:
				unknown.note("tools[]." + k)
			}
		}
		out[i] = map[string]any{"type": "function", "function": fn}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, badParam("tools", "Invalid 'tools': %v", err)
	}
	return b, nil
}

// responsesToolChoice turns a Responses tool_choice ("none", "auto",
// "required" or {"type":"function","name":...}) into the chat form.
func responsesToolChoice(raw json.RawMessage) (json.RawMessage, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return raw, nil
	}
	var named struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Type != "function" || named.Name == "" {
		return nil, badParam("tool_choice", "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}.")
	}
	return mustJSON(map[string]any{"type": "function", "function": map[string]string{"name": named.Name}}), nil
}

// responsesFormat turns text.format into a chat response_format; nil for
// plain text.
func responsesFormat(raw json.RawMessage) (json.RawMessage, *Error) {
	var text struct {
		Format json.RawMessage `json:"format"`
	}
	if err := json.Unmarshal(raw, &text); err != nil {
		return nil, badParam("text", "Invalid type for 'text': expected an object.")
	}
	if len(text.Format) == 0 || string(text.Format) == "null" {
		return nil, nil
	}
	var format struct {
		Type   string          `json:"type"`
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(text.Format, &format); err != nil {
		return nil, badParam("text.format", "Invalid type for 'text.format': expected an object with a 'type'.")
	}
	switch format.Type {
	case "text":
		return nil, nil
	case "json_object":
		return json.RawMessage(`{"type":"json_object"}`), nil
	case "json_schema":
		if len(format.Schema) == 0 || string(format.Schema) == "null" {
			return nil, badParam("text.format.schema", "Missing required parameter: 'text.format.schema'.")
		}
		return mustJSON(map[string]any{"type": "json_schema", "json_schema": map[string]any{
			"name": format.Name, "schema": format.Schema, "strict": format.Strict}}), nil
	}
	return nil, badParam("text.format.type", "Invalid value for 'text.format.type': expected 'text', 'json_object' or 'json_schema', got '%.32s'.", format.Type)
}
