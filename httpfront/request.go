package httpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/vision"
)

// Limits of request fields.
const (
	MaxN              = 16 // choices per prompt
	MaxStops          = 4  // stop sequences, as OpenAI
	MaxTopLogprobs    = 20 // chat top_logprobs
	MaxLegacyLogprobs = 5  // completions logprobs
	MaxPrompts        = 16 // prompts of one /v1/completions request
	MaxStopTokenIDs   = 256
	MaxLogitBias      = 1024 // logit_bias entries
	MaxLogitBiasValue = 100  // |bias|, as OpenAI
)

// Params are the generation parameters shared by chat and text completions,
// validated and with OpenAI's defaults applied.
type Params struct {
	// MaxTokens bounds the generated tokens per choice; 0 means up to the
	// context window (and the KV cache).
	MaxTokens   int
	Temperature float64 // default 1, as OpenAI
	TopP        float64 // default 1 (off)
	TopK        int     // 0 = off (-1 is accepted as off)
	MinP        float64
	Presence    float64
	Frequency   float64
	Repetition  float64 // default 1 (off)
	Seed        *int64  // nil: each choice draws a random seed
	Stop        []string
	N           int
	// Logprobs asks for the chosen tokens' log-probabilities and
	// TopLogprobs the most likely alternatives at each position.
	Logprobs     bool
	TopLogprobs  int
	Stream       bool
	IncludeUsage bool
	// IgnoreEOS keeps generating past end-of-generation tokens (vLLM's
	// ignore_eos): only max_tokens, stop and stop_token_ids end a choice.
	IgnoreEOS bool
	// MinTokens is how many tokens a choice generates before an
	// end-of-generation or stop token may be chosen, or a stop sequence
	// end it (vLLM's min_tokens).
	MinTokens int
	// StopTokenIDs end a choice when generated (after MinTokens); their
	// text is not part of the output, as vLLM.
	StopTokenIDs []int32
	// SkipSpecial leaves control tokens' text (e.g. "<|im_start|>") out
	// of the output; default true, as vLLM's skip_special_tokens.
	SkipSpecial bool
	// LogitBias is added to the logits of token ids before sampling.
	LogitBias map[int32]float32
	// Echo holds, for a completions request with echo, each prompt's
	// text (token prompts decoded), which goes before its choices' text;
	// nil otherwise. The handler fills it, not the decoder.
	Echo []string
	// Reasoning is how a chat reply's reasoning is split from its content
	// (reasoning_content); the handler sets it from the chat template.
	Reasoning Reasoning
	// ReasoningBudget, when > 0, is how many tokens the reply's reasoning
	// block may hold before the server closes it (Anthropic's
	// thinking.budget_tokens; reasoningBudget).
	ReasoningBudget int
	// ToolFormat names the tool call format parsed out of chat replies
	// (toolFormats), "" for none; the handler sets it from the chat
	// template when the request has tools and tool_choice "auto".
	// SingleToolCall keeps only the first call (parallel_tool_calls false).
	ToolFormat     string
	SingleToolCall bool
	// Constraint is the GBNF the output must follow (response_format,
	// grammar, json_schema, guided_*), "" for none; ConstraintField names
	// the field it came from. The handler compiles it into Grammar.
	Constraint      string
	ConstraintField string
	Grammar         *grammar.Grammar
	// Interrupt is DecodeOptions.Interrupt: polled while the constraint
	// compiles (nil: never).
	Interrupt func() error
	// Images are the encoded images of a chat request's prompt
	// (engine.Request.Images), and Vision when they were encoded.
	Images []engine.Image
	Vision VisionTiming
	// MessageEnds are the token offsets where a chat prompt's messages end
	// (engine.Request.MessageEnds), set by the chat handler for a model
	// that checkpoints recurrent state; not a request field.
	MessageEnds []int
}

// ChatRequest is a validated /v1/chat/completions request.
type ChatRequest struct {
	Model    string
	Messages []tok.Message
	// AddGenerationPrompt (default true) ends the prompt with the header
	// of an assistant turn; ContinueFinal instead leaves the final
	// message open, so the model continues it (vLLM's
	// continue_final_message; the two exclude each other).
	AddGenerationPrompt bool
	ContinueFinal       bool
	// TemplateKwargs are chat_template_kwargs: further variables of the
	// chat template (e.g. enable_thinking), as JSON values by name.
	TemplateKwargs map[string]json.RawMessage
	// Tools are the request's tools as sent (the template's tools), nil
	// when none; ToolChoice is "auto" (the default with tools), "none",
	// "required" (a call of some tool is forced) or "function" (a call of
	// ToolName is forced). ParallelToolCalls (default true) allows several
	// calls in a reply.
	Tools             json.RawMessage
	ToolChoice        string
	ToolName          string
	ParallelToolCalls bool
	// Images are the messages' images, in order (their places in
	// Messages' content are vision.MediaMarker); nil without any.
	Images *ChatImages
	Params
}

// Prompt is one prompt of a /v1/completions request: text, or token ids
// when IDs is not nil.
type Prompt struct {
	Text string
	IDs  []int32
}

// CompletionRequest is a validated /v1/completions request.
type CompletionRequest struct {
	Model   string
	Prompts []Prompt
	// Echo puts each prompt's text before its choices' text.
	Echo bool
	Params
}

// DecodeOptions configure the request decoders.
type DecodeOptions struct {
	// Strict rejects requests with fields the server does not know (400
	// naming the field); by default they are ignored and each name is
	// logged once per process, as vLLM does.
	Strict bool
	// Interrupt, when set, is polled while the request's constraint
	// compiles (a JSON Schema to GBNF, GBNF to a grammar): an error of
	// type interrupted stops the compilation, and the request fails
	// with its Error.
	Interrupt func() error
	// Media bounds a chat request's images (MediaOptions defaults when
	// zero).
	Media MediaOptions
}

// field kinds: how a request field is handled.
type fieldKind uint8

const (
	fieldUsed     fieldKind = iota + 1 // decoded and honoured
	fieldIgnored                       // accepted: it does not change the output
	fieldRejected                      // known, but its semantics are not implemented (unless a no-op value)
)

var commonFields = map[string]fieldKind{
	"model": fieldUsed, "max_tokens": fieldUsed, "temperature": fieldUsed, "top_p": fieldUsed,
	"top_k": fieldUsed, "min_p": fieldUsed, "presence_penalty": fieldUsed, "frequency_penalty": fieldUsed,
	"repetition_penalty": fieldUsed, "seed": fieldUsed, "stop": fieldUsed, "n": fieldUsed, "logprobs": fieldUsed,
	"stream": fieldUsed, "stream_options": fieldUsed,
	"ignore_eos": fieldUsed, "min_tokens": fieldUsed, "stop_token_ids": fieldUsed, "skip_special_tokens": fieldUsed,
	"logit_bias": fieldUsed, "n_probs": fieldUsed, "n_predict": fieldUsed, "repeat_penalty": fieldUsed,
	"user": fieldIgnored, "metadata": fieldIgnored, "store": fieldIgnored, "service_tier": fieldIgnored,
	"cache_prompt":    fieldIgnored,
	"response_format": fieldUsed, "grammar": fieldUsed, "json_schema": fieldUsed, "guided_json": fieldUsed,
	"guided_grammar": fieldUsed, "guided_choice": fieldUsed,
}

var chatFields = merged(commonFields, map[string]fieldKind{
	"messages": fieldUsed, "max_completion_tokens": fieldUsed, "top_logprobs": fieldUsed,
	"add_generation_prompt": fieldUsed, "continue_final_message": fieldUsed, "chat_template_kwargs": fieldUsed,
	"parallel_tool_calls": fieldUsed, "tools": fieldUsed, "tool_choice": fieldUsed,
	"functions": fieldRejected, "function_call": fieldRejected,
	"audio": fieldRejected, "modalities": fieldRejected, "prediction": fieldRejected,
	"reasoning_effort": fieldUsed, "web_search_options": fieldRejected,
})

var completionFields = merged(commonFields, map[string]fieldKind{
	"prompt": fieldUsed, "echo": fieldUsed, "best_of": fieldRejected, "suffix": fieldRejected,
})

func merged(a, b map[string]fieldKind) map[string]fieldKind {
	out := map[string]fieldKind{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// fields is a request object's members by name.
type fields map[string]json.RawMessage

// has reports whether name is present and not null.
func (f fields) has(name string) bool {
	v, ok := f[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

func (f fields) decode(name, want string, dst any) *Error {
	if !f.has(name) {
		return nil
	}
	if err := json.Unmarshal(f[name], dst); err != nil {
		return badParam(name, "Invalid type for '%s': expected %s.", name, want)
	}
	return nil
}

func (f fields) float(name string, dst *float64) *Error {
	return f.decode(name, "a number", dst)
}

func (f fields) int(name string, dst *int) *Error {
	var v float64
	if e := f.decode(name, "an integer", &v); e != nil || !f.has(name) {
		return e
	}
	if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
		return badParam(name, "Invalid type for '%s': expected an integer.", name)
	}
	*dst = int(v)
	return nil
}

// object parses body as a JSON object and rejects members whose semantics
// are not implemented (unless they hold a value that changes nothing).
// Unknown members are rejected when strict, else ignored (unknown logs
// each name once).
func object(body []byte, known map[string]fieldKind, strict bool) (fields, *Error) {
	var f fields
	if err := json.Unmarshal(body, &f); err != nil || f == nil {
		msg := "We could not parse the JSON body of your request: expected a JSON object."
		if err != nil {
			msg = fmt.Sprintf("We could not parse the JSON body of your request: %v.", err)
		}
		return nil, badRequest("invalid_json", "%s", msg)
	}
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		switch known[k] {
		case 0:
			if strict {
				return nil, badParam(k, "Unrecognized request argument supplied: %s", k)
			}
			unknown.note(k)
		case fieldRejected:
			if !noOp(k, f[k]) {
				return nil, badParam(k, "'%s' is not supported by this server.", k)
			}
		}
	}
	return f, nil
}

// noOp reports whether a rejected field's value asks for nothing: null,
// an empty list or object, or the value that means the default.
func noOp(name string, v json.RawMessage) bool {
	s := string(bytes.TrimSpace(v))
	switch s {
	case "null", "[]", "{}":
		return true
	}
	switch name {
	case "function_call":
		return s == `"none"`
	case "modalities":
		return s == `["text"]`
	case "best_of", "n_cmpl":
		return s == "1"
	case "return_tokens":
		return s == "false"
	case "suffix":
		return s == `""`
	}
	return false
}

// DecodeChat parses and validates a /v1/chat/completions body. Errors are
// *Error with status 400 naming the field.
func DecodeChat(body []byte, o DecodeOptions) (*ChatRequest, *Error) {
	f, e := object(body, chatFields, o.Strict)
	if e != nil {
		return nil, e
	}
	r := &ChatRequest{AddGenerationPrompt: true, ParallelToolCalls: true}
	if r.Model, e = model(f); e != nil {
		return nil, e
	}
	images := &requestImages{opts: o.Media.withDefaults()}
	if r.Messages, e = messages(f, o.Strict, images); e != nil {
		return nil, e
	}
	if e := images.markerError(); e != nil {
		return nil, e
	}
	r.Images = images.images()
	if r.Params, e = params(f, true, o); e != nil {
		return nil, e
	}
	if e := f.decode("add_generation_prompt", "a boolean", &r.AddGenerationPrompt); e != nil {
		return nil, e
	}
	if e := f.decode("continue_final_message", "a boolean", &r.ContinueFinal); e != nil {
		return nil, e
	}
	if r.ContinueFinal && r.AddGenerationPrompt && f.has("add_generation_prompt") {
		return nil, badParam("continue_final_message", "Invalid value for 'continue_final_message': it cannot be true together with 'add_generation_prompt'.")
	}
	if r.ContinueFinal {
		r.AddGenerationPrompt = false
		if last := r.Messages[len(r.Messages)-1]; last.Content == "" {
			return nil, badParam("continue_final_message", "Invalid value for 'continue_final_message': the final message has no text to continue.")
		}
	}
	if e := f.decode("chat_template_kwargs", "an object", &r.TemplateKwargs); e != nil {
		return nil, e
	}
	for k := range r.TemplateKwargs {
		if slices.Contains(tok.ReservedVars, k) {
			return nil, badParam("chat_template_kwargs."+k, "Invalid 'chat_template_kwargs': '%s' is set by the server.", k)
		}
	}
	if e := tools(f, r); e != nil {
		return nil, e
	}
	if f.has("reasoning_effort") {
		// A template variable, as vLLM passes it: templates that read it
		// (e.g. gpt-oss) honour it, others ignore it.
		var effort string
		if e := f.decode("reasoning_effort", "a string", &effort); e != nil {
			return nil, e
		}
		if !slices.Contains([]string{"none", "minimal", "low", "medium", "high"}, effort) {
			return nil, badParam("reasoning_effort", "Invalid value for 'reasoning_effort': expected 'none', 'minimal', 'low', 'medium' or 'high', got '%.32s'.", effort)
		}
		if _, set := r.TemplateKwargs["reasoning_effort"]; !set {
			if r.TemplateKwargs == nil {
				r.TemplateKwargs = map[string]json.RawMessage{}
			}
			r.TemplateKwargs["reasoning_effort"] = f["reasoning_effort"]
		}
	}
	return r, nil
}

// DecodeCompletion parses and validates a /v1/completions body. Errors are
// *Error with status 400 naming the field.
func DecodeCompletion(body []byte, o DecodeOptions) (*CompletionRequest, *Error) {
	f, e := object(body, completionFields, o.Strict)
	if e != nil {
		return nil, e
	}
	r := &CompletionRequest{}
	if r.Model, e = model(f); e != nil {
		return nil, e
	}
	if r.Prompts, e = prompts(f); e != nil {
		return nil, e
	}
	if r.Params, e = params(f, false, o); e != nil {
		return nil, e
	}
	if e := f.decode("echo", "a boolean", &r.Echo); e != nil {
		return nil, e
	}
	if r.Echo && r.Logprobs {
		return nil, badParam("echo", "Invalid value for 'echo': 'echo' with 'logprobs' needs the prompt's log-probabilities, which this server does not compute.")
	}
	return r, nil
}

func model(f fields) (string, *Error) {
	var m string
	if !f.has("model") {
		return "", badParam("model", "Missing required parameter: 'model'.")
	}
	if e := f.decode("model", "a string", &m); e != nil {
		return "", e
	}
	return m, nil
}

// messageFields are the members of a chat message the server knows; all
// but role and content reach the chat template as they are (tool_calls
// with their arguments parsed, as vLLM gives them to templates).
// nestedFields checks the member names of a nested request object: at
// names it in errors ("messages[2]"), logAs in the unknown-field log
// ("messages[]"). Under strict the first unknown name, in sorted order, is
// a 400; otherwise each is noted and ignored.
func nestedFields(obj fields, known map[string]bool, at, logAs string, strict bool) *Error {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if known[k] {
			continue
		}
		if strict {
			return badParam(at+"."+k, "Unrecognized request argument supplied: %s.%s", at, k)
		}
		unknown.note(logAs + "." + k)
	}
	return nil
}

var streamOptionsFields = map[string]bool{"include_usage": true}

var messageFields = map[string]bool{"role": true, "content": true, "name": true, "tool_calls": true,
	"tool_call_id": true, "reasoning_content": true}

func messages(f fields, strict bool, images *requestImages) ([]tok.Message, *Error) {
	if !f.has("messages") {
		return nil, badParam("messages", "Missing required parameter: 'messages'.")
	}
	var raw []fields
	if e := f.decode("messages", "an array of message objects", &raw); e != nil {
		return nil, e
	}
	if len(raw) == 0 {
		return nil, badParam("messages", "'messages' must contain at least one message.")
	}
	out := make([]tok.Message, len(raw))
	// The ids of the tool calls of the assistant messages so far, and how
	// many of those calls had none (a tool message may answer any of them).
	callIDs, anonymousCalls := map[string]bool{}, 0
	for i, m := range raw {
		at := fmt.Sprintf("messages[%d]", i)
		if m == nil {
			return nil, badParam(at, "Invalid type for '%s': expected an object.", at)
		}
		if e := nestedFields(m, messageFields, at, "messages[]", strict); e != nil {
			return nil, e
		}
		var role, name string
		if e := m.decode("role", "a string", &role); e != nil {
			e.Param = at + ".role"
			return nil, e
		}
		if e := m.decode("name", "a string", &name); e != nil {
			e.Param, e.Message = at+".name", fmt.Sprintf("Invalid type for '%s.name': expected a string.", at)
			return nil, e
		}
		switch role {
		case "system", "user", "assistant", "tool":
		case "developer":
			role = "system"
		case "":
			return nil, badParam(at+".role", "Missing required parameter: '%s.role'.", at)
		default:
			return nil, badParam(at+".role", "Invalid value for '%s.role': '%s' is not supported; use 'system', 'developer', 'user', 'assistant' or 'tool'.", at, role)
		}
		msg := tok.Message{Role: role}
		var strs [2]string // tool_call_id, reasoning_content
		for j, k := range [2]string{"tool_call_id", "reasoning_content"} {
			if e := m.decode(k, "a string", &strs[j]); e != nil {
				e.Param, e.Message = at+"."+k, fmt.Sprintf("Invalid type for '%s.%s': expected a string.", at, k)
				return nil, e
			}
		}
		if m.has("tool_calls") && role != "assistant" {
			return nil, badParam(at+".tool_calls", "Invalid '%s.tool_calls': only assistant messages carry tool calls.", at)
		}
		if role == "tool" {
			if !m.has("tool_call_id") {
				return nil, badParam(at+".tool_call_id", "Missing required parameter: '%s.tool_call_id'.", at)
			}
			if id := strs[0]; !callIDs[id] && anonymousCalls == 0 {
				return nil, badParam(at+".tool_call_id", "Invalid '%s.tool_call_id': no earlier assistant message has a tool call with id '%.64s'.", at, id)
			}
		}
		for _, k := range []string{"name", "tool_call_id", "reasoning_content"} {
			if m.has(k) {
				if msg.Extra == nil {
					msg.Extra = map[string]json.RawMessage{}
				}
				msg.Extra[k] = m[k]
			}
		}
		if m.has("tool_calls") {
			calls, ids, e := messageToolCalls(m["tool_calls"], at+".tool_calls")
			if e != nil {
				return nil, e
			}
			if msg.Extra == nil {
				msg.Extra = map[string]json.RawMessage{}
			}
			msg.Extra["tool_calls"] = calls
			for _, id := range ids {
				if id == "" {
					anonymousCalls++
				}
				callIDs[id] = true
			}
		}
		if role == "assistant" && msg.Extra["tool_calls"] != nil && !m.has("content") {
			out[i] = msg // content may be null beside tool calls, as OpenAI
			continue
		}
		content, e := messageContent(m, at, images)
		if e != nil {
			return nil, e
		}
		msg.Content = content
		out[i] = msg
	}
	return out, nil
}

// messageToolCalls validates an assistant message's tool_calls and returns
// them for the chat template (OpenAI's shape with each function's
// arguments, a JSON string, parsed into its object: Hugging Face templates
// render arguments with tojson) and each call's id ("" when it has none).
func messageToolCalls(raw json.RawMessage, at string) (json.RawMessage, []string, *Error) {
	var calls []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, nil, badParam(at, "Invalid type for '%s': expected an array of tool calls.", at)
	}
	type fn struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	type call struct {
		ID       string `json:"id,omitempty"`
		Type     string `json:"type"`
		Function fn     `json:"function"`
	}
	out, ids := make([]call, len(calls)), make([]string, len(calls))
	for i, c := range calls {
		ci := fmt.Sprintf("%s[%d]", at, i)
		if c.Type != "" && c.Type != "function" {
			return nil, nil, badParam(ci+".type", "Invalid value for '%s.type': only 'function' tool calls are supported.", ci)
		}
		if c.Function == nil || c.Function.Name == "" {
			return nil, nil, badParam(ci+".function", "Missing required parameter: '%s.function.name'.", ci)
		}
		args := c.Function.Arguments
		var text string
		if json.Unmarshal(args, &text) == nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal([]byte(text), &obj) == nil && obj != nil {
				args = json.RawMessage(text)
			}
		}
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		out[i], ids[i] = call{ID: c.ID, Type: "function", Function: fn{Name: c.Function.Name, Arguments: args}}, c.ID
	}
	b, err := marshal(out)
	if err != nil {
		return nil, nil, badParam(at, "Invalid '%s': %v", at, err)
	}
	return b, ids, nil
}

// messageContent reads a message's content: a string, or an array of
// content parts: text parts joined with no separator, or, when the parts
// hold images (image_url, added to images), joined as llama-server joins
// them (vision.JoinContent: "\n" between text parts, each image a
// vision.MediaMarker).
func messageContent(m fields, at string, images *requestImages) (string, *Error) {
	param := at + ".content"
	if !m.has("content") {
		return "", badParam(param, "Missing required parameter: '%s'.", param)
	}
	var s string
	if json.Unmarshal(m["content"], &s) == nil {
		images.noteMarker(s, param)
		return s, nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(m["content"], &raw); err != nil {
		return "", badParam(param, "Invalid type for '%s': expected a string or an array of content parts.", param)
	}
	var parts []vision.Part
	withImages := false
	for j, r := range raw {
		at := fmt.Sprintf("%s[%d]", param, j)
		var p struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(r, &p); err != nil {
			return "", badParam(at, "Invalid content part '%s': expected an object.", at)
		}
		switch {
		case p.Type == "text" && p.Text != nil:
			images.noteMarker(*p.Text, at)
			parts = append(parts, vision.Part{Text: *p.Text})
		case p.Type == "image_url":
			url, e := imagePartURL(r, at)
			if e == nil {
				e = images.add(url, at+".image_url.url")
			}
			if e != nil {
				return "", e
			}
			parts, withImages = append(parts, vision.Part{Image: true}), true
		default:
			return "", badParam(at, "Invalid content part type '%s': only 'text' and 'image_url' parts are supported.", p.Type)
		}
	}
	if withImages {
		return vision.JoinContent(parts), nil
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

func prompts(f fields) ([]Prompt, *Error) {
	if !f.has("prompt") {
		return nil, badParam("prompt", "Missing required parameter: 'prompt'.")
	}
	raw := f["prompt"]
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Prompt{{Text: s}}, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []Prompt{{IDs: ids}}, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		out := make([]Prompt, len(texts))
		for i, t := range texts {
			out[i] = Prompt{Text: t}
		}
		return checkPrompts(out)
	}
	var lists [][]int32
	if json.Unmarshal(raw, &lists) == nil && len(lists) > 0 {
		out := make([]Prompt, len(lists))
		for i, l := range lists {
			if len(l) == 0 {
				return nil, badParam("prompt", "Invalid value for 'prompt': prompt %d has no tokens.", i)
			}
			out[i] = Prompt{IDs: l}
		}
		return checkPrompts(out)
	}
	return nil, badParam("prompt", "Invalid type for 'prompt': expected a string, an array of strings, an array of token ids or an array of token id arrays (none empty).")
}

func checkPrompts(ps []Prompt) ([]Prompt, *Error) {
	if len(ps) > MaxPrompts {
		return nil, badParam("prompt", "Invalid value for 'prompt': at most %d prompts per request, got %d.", MaxPrompts, len(ps))
	}
	return ps, nil
}

// params reads the generation parameters; chat selects the chat
// completions' logprobs form (bool + top_logprobs) over the legacy one (int).
func params(f fields, chat bool, o DecodeOptions) (Params, *Error) {
	strict := o.Strict
	p := Params{Temperature: 1, TopP: 1, Repetition: 1, N: 1, SkipSpecial: true, Interrupt: o.Interrupt}
	var e *Error
	check := func(err *Error) {
		if e == nil {
			e = err
		}
	}
	check(f.int("max_tokens", &p.MaxTokens))
	if e == nil && f.has("max_tokens") && p.MaxTokens < 1 {
		return p, badParam("max_tokens", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", p.MaxTokens)
	}
	if f.has("n_predict") && !f.has("max_tokens") && !(chat && f.has("max_completion_tokens")) {
		// llama.cpp's name for max_tokens; -1 means no limit.
		var n int
		check(f.int("n_predict", &n))
		if e == nil && n != -1 && n < 1 {
			return p, badParam("n_predict", "Invalid 'n_predict': expected -1 (no limit) or a value >= 1, but got %d instead.", n)
		}
		p.MaxTokens = max(n, 0)
	}
	if chat && f.has("max_completion_tokens") {
		check(f.int("max_completion_tokens", &p.MaxTokens))
		if e == nil && p.MaxTokens < 1 {
			return p, badParam("max_completion_tokens", "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", p.MaxTokens)
		}
	}
	check(f.float("temperature", &p.Temperature))
	check(f.float("top_p", &p.TopP))
	check(f.int("top_k", &p.TopK))
	check(f.float("min_p", &p.MinP))
	check(f.float("presence_penalty", &p.Presence))
	check(f.float("frequency_penalty", &p.Frequency))
	check(f.float("repetition_penalty", &p.Repetition))
	if !f.has("repetition_penalty") {
		check(f.float("repeat_penalty", &p.Repetition)) // llama.cpp's name
	}
	check(f.int("n", &p.N))
	if f.has("seed") {
		var s float64
		check(f.decode("seed", "an integer", &s))
		if e == nil {
			if s != math.Trunc(s) || math.Abs(s) > 1<<63 {
				return p, badParam("seed", "Invalid type for 'seed': expected an integer.")
			}
			v := int64(s)
			p.Seed = &v
		}
	}
	check(f.decode("stream", "a boolean", &p.Stream))
	check(f.decode("ignore_eos", "a boolean", &p.IgnoreEOS))
	check(f.int("min_tokens", &p.MinTokens))
	check(f.decode("stop_token_ids", "an array of token ids", &p.StopTokenIDs))
	check(f.decode("skip_special_tokens", "a boolean", &p.SkipSpecial))
	// Accepted and ignored, but typed as OpenAI (and llama.cpp) type them.
	var user, tier string
	var store, cachePrompt bool
	var metadata map[string]string
	check(f.decode("user", "a string", &user))
	check(f.decode("service_tier", "a string", &tier))
	check(f.decode("store", "a boolean", &store))
	check(f.decode("metadata", "an object of string values", &metadata))
	check(f.decode("cache_prompt", "a boolean", &cachePrompt))
	if e != nil {
		return p, e
	}
	if f.has("stream_options") {
		if !p.Stream {
			return p, badParam("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		var so fields
		if e := f.decode("stream_options", "an object", &so); e != nil {
			return p, e
		}
		if e := nestedFields(so, streamOptionsFields, "stream_options", "stream_options", strict); e != nil {
			return p, e
		}
		if e := so.decode("include_usage", "a boolean", &p.IncludeUsage); e != nil {
			e.Param = "stream_options.include_usage"
			return p, e
		}
	}
	if chat {
		if e := f.decode("logprobs", "a boolean", &p.Logprobs); e != nil {
			return p, e
		}
		if e := f.int("top_logprobs", &p.TopLogprobs); e != nil {
			return p, e
		}
		if f.has("top_logprobs") && !p.Logprobs {
			return p, badParam("top_logprobs", "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.")
		}
		if p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs {
			return p, badParam("top_logprobs", "Invalid 'top_logprobs': expected a value in [0, %d], but got %d instead.", MaxTopLogprobs, p.TopLogprobs)
		}
	} else if f.has("logprobs") {
		var n int
		if e := f.int("logprobs", &n); e != nil {
			return p, e
		}
		if n < 0 || n > MaxLegacyLogprobs {
			return p, badParam("logprobs", "Invalid 'logprobs': expected a value in [0, %d], but got %d instead.", MaxLegacyLogprobs, n)
		}
		p.Logprobs, p.TopLogprobs = true, n
	}
	if f.has("n_probs") {
		var n int
		if e := f.int("n_probs", &n); e != nil {
			return p, e
		}
		if n < 0 || n > MaxTopLogprobs {
			return p, badParam("n_probs", "Invalid 'n_probs': expected a value in [0, %d], but got %d instead.", MaxTopLogprobs, n)
		}
		if f.has("logprobs") || f.has("top_logprobs") {
			return p, badParam("n_probs", "Invalid value for 'n_probs': send either 'n_probs' (llama.cpp) or 'logprobs'/'top_logprobs' (OpenAI), not both.")
		}
		if n > 0 {
			p.Logprobs, p.TopLogprobs = true, n
		}
	}
	if e := stops(f, &p); e != nil {
		return p, e
	}
	if p.Constraint, p.ConstraintField, e = constraintOf(f, o.Interrupt); e != nil {
		return p, e
	}
	if e := logitBias(f, &p); e != nil {
		return p, e
	}
	return p, p.ranges()
}

// tools reads tools, tool_choice and parallel_tool_calls; "required" and
// a named function force the call through the grammar constraint.
func tools(f fields, r *ChatRequest) *Error {
	if e := f.decode("parallel_tool_calls", "a boolean", &r.ParallelToolCalls); e != nil {
		return e
	}
	var names []string
	if f.has("tools") {
		var e *Error
		if names, e = toolNames(f["tools"]); e != nil {
			return e
		}
		if len(names) > 0 {
			r.Tools = f["tools"]
		}
	}
	r.ToolChoice = "none"
	if len(names) > 0 {
		r.ToolChoice = "auto"
	}
	if !f.has("tool_choice") {
		return nil
	}
	var choice string
	if json.Unmarshal(f["tool_choice"], &choice) != nil {
		var named struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(f["tool_choice"], &named); err != nil || named.Type != "function" || named.Function.Name == "" {
			return badParam("tool_choice", "Invalid 'tool_choice': expected 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
		}
		if !slices.Contains(names, named.Function.Name) {
			return badParam("tool_choice", "Invalid 'tool_choice': no tool is named '%.64s'.", named.Function.Name)
		}
		r.ToolChoice, r.ToolName = "function", named.Function.Name
	} else {
		switch choice {
		case "none", "auto":
			r.ToolChoice = choice
		case "required":
			if len(names) == 0 {
				return badParam("tool_choice", "Invalid 'tool_choice': 'required' needs 'tools'.")
			}
			r.ToolChoice = "required"
		default:
			return badParam("tool_choice", "Invalid value for 'tool_choice': expected 'none', 'auto', 'required' or a named function, got '%.32s'.", choice)
		}
	}
	if len(names) == 0 && r.ToolChoice == "auto" {
		r.ToolChoice = "none"
	}
	if (r.ToolChoice == "required" || r.ToolChoice == "function") && r.Constraint != "" {
		return badParam("tool_choice", "Invalid request: a forced tool call and '%s' both constrain the output; send one.", r.ConstraintField)
	}
	return nil
}

// logitBias reads OpenAI's logit_bias: an object from token ids (as
// strings) to a bias in [-100, 100]. The server checks the ids against the
// vocabulary.
func logitBias(f fields, p *Params) *Error {
	if !f.has("logit_bias") {
		return nil
	}
	var raw map[string]float64
	if e := f.decode("logit_bias", "an object from token ids to numbers", &raw); e != nil {
		return e
	}
	if len(raw) > MaxLogitBias {
		return badParam("logit_bias", "Invalid 'logit_bias': at most %d entries, got %d.", MaxLogitBias, len(raw))
	}
	if len(raw) == 0 {
		return nil
	}
	p.LogitBias = make(map[int32]float32, len(raw))
	for k, v := range raw {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			return badParam("logit_bias", "Invalid 'logit_bias': key %.32q is not a token id.", k)
		}
		if math.IsNaN(v) || v < -MaxLogitBiasValue || v > MaxLogitBiasValue {
			return badParam("logit_bias", "Invalid 'logit_bias': the bias of token %d must be in [-%d, %d], got %g.", id, MaxLogitBiasValue, MaxLogitBiasValue, v)
		}
		p.LogitBias[int32(id)] = float32(v)
	}
	return nil
}

func stops(f fields, p *Params) *Error {
	if !f.has("stop") {
		return nil
	}
	var one string
	if json.Unmarshal(f["stop"], &one) == nil {
		p.Stop = []string{one}
	} else if e := f.decode("stop", "a string or an array of strings", &p.Stop); e != nil {
		return e
	}
	if len(p.Stop) > MaxStops {
		return badParam("stop", "Invalid 'stop': expected an array with maximum length %d, but got an array with length %d instead.", MaxStops, len(p.Stop))
	}
	for _, s := range p.Stop {
		if s == "" {
			return badParam("stop", "Invalid 'stop': stop sequences must not be empty.")
		}
	}
	return nil
}

// outOfRange is the invalid_request_error of value v outside range r.
func outOfRange(r request.Range, v float64) *Error {
	return badParam(r.Name, "Invalid '%s': expected a value in %s, but got %g instead.", r.Name, r, v)
}

// ranges checks each parameter's range: the sampling parameters' are
// runtime/request's (OpenAI's where OpenAI has one).
func (p *Params) ranges() *Error {
	for _, c := range []struct {
		r request.Range
		v float64
	}{{request.Temperature, p.Temperature}, {request.TopP, p.TopP}} {
		if !c.r.Contains(c.v) {
			return outOfRange(c.r, c.v)
		}
	}
	if p.TopK < -1 {
		return badParam("top_k", "Invalid 'top_k': expected -1 (off), 0 (off) or a positive integer, but got %d instead.", p.TopK)
	}
	for _, c := range []struct {
		r request.Range
		v float64
	}{{request.MinP, p.MinP}, {request.PresencePenalty, p.Presence}, {request.FrequencyPenalty, p.Frequency}, {request.RepetitionPenalty, p.Repetition}} {
		if !c.r.Contains(c.v) {
			return outOfRange(c.r, c.v)
		}
	}
	switch {
	case p.N < 1 || p.N > MaxN:
		return badParam("n", "Invalid 'n': expected a value in [1, %d], but got %d instead.", MaxN, p.N)
	case p.MinTokens < 0:
		return badParam("min_tokens", "Invalid 'min_tokens': expected a value >= 0, but got %d instead.", p.MinTokens)
	case p.MaxTokens > 0 && p.MinTokens > p.MaxTokens:
		return badParam("min_tokens", "Invalid 'min_tokens': it must not exceed max_tokens (%d), but got %d.", p.MaxTokens, p.MinTokens)
	case len(p.StopTokenIDs) > MaxStopTokenIDs:
		return badParam("stop_token_ids", "Invalid 'stop_token_ids': at most %d ids, got %d.", MaxStopTokenIDs, len(p.StopTokenIDs))
	}
	for _, id := range p.StopTokenIDs {
		if id < 0 {
			return badParam("stop_token_ids", "Invalid 'stop_token_ids': %d is not a token id.", id)
		}
	}
	if p.TopK == -1 {
		p.TopK = 0
	}
	return nil
}
