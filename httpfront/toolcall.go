package httpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// toolCall is one function call parsed from a model's reply: its name and
// its arguments as a JSON text (OpenAI sends them as a string).
type toolCall struct {
	Name      string
	Arguments string
}

// toolDelta is a piece of a reply's tool calls, in order: a call's first
// delta has its name, later ones (and maybe the first) pieces of its
// arguments, which joined are the compact JSON text of the arguments.
type toolDelta struct {
	index int // the call's position in the reply
	name  string
	args  string
}

// toolParser turns a reply's streamed text into content and tool call
// deltas. push returns the content it lets out and the deltas the text
// completes; text that may still be markup is held back. flush returns
// what is held at the end of the reply.
type toolParser interface {
	push(text string) (content string, deltas []toolDelta)
	flush() (content string, deltas []toolDelta)
}

// callDeltasOf is a whole call as deltas: its name, then its arguments.
func callDeltasOf(index int, c toolCall) []toolDelta {
	return []toolDelta{{index: index, name: c.Name, args: c.Arguments}}
}

// collectCalls joins deltas into calls.
func collectCalls(calls []toolCall, deltas []toolDelta) []toolCall {
	for _, d := range deltas {
		if d.name != "" {
			calls = append(calls, toolCall{Name: d.name})
		}
		if len(calls) > 0 {
			calls[len(calls)-1].Arguments += d.args
		}
	}
	return calls
}

// toolFormat is one tool call format: its name, whether a chat template
// writes it (detect), and a parser for replies in it.
type toolFormat struct {
	name string
	// detect reports whether the chat template source uses the format;
	// formats are tried by descending priority, the default last.
	detect   func(template string) bool
	priority int
	new      func() toolParser
}

var toolFormats = map[string]toolFormat{}

// defaultToolFormat is used when no format's detect matches the template.
const defaultToolFormat = "hermes"

// registerToolFormat adds a format; it panics on a duplicate name (a
// programmer error). Each format registers itself from its file's init.
func registerToolFormat(f toolFormat) {
	if _, dup := toolFormats[f.name]; dup {
		panic("httpfront: tool call format registered twice: " + f.name)
	}
	toolFormats[f.name] = f
}

// toolFormatOf is the format of the tool calls a chat template's model
// writes: the highest-priority format that detects itself in the
// template, else Hermes.
func toolFormatOf(template string) string {
	names := make([]string, 0, len(toolFormats))
	for n := range toolFormats {
		names = append(names, n)
	}
	sort.Slice(names, func(a, b int) bool {
		fa, fb := toolFormats[names[a]], toolFormats[names[b]]
		if fa.priority != fb.priority {
			return fa.priority > fb.priority
		}
		return fa.name < fb.name
	})
	for _, n := range names {
		if f := toolFormats[n]; f.detect != nil && f.detect(template) {
			return n
		}
	}
	return defaultToolFormat
}

// newToolParser returns a parser for the named format, or nil for "".
func newToolParser(format string) toolParser {
	if format == "" {
		return nil
	}
	return toolFormats[format].new()
}

// parseCallJSON reads one call object, {"name": ..., "arguments": {...}}
// (or "parameters", Llama 3's name), and reports whether it is one.
// Arguments given as a JSON string are taken as that string.
func parseCallJSON(text string) (toolCall, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &obj); err != nil || obj == nil {
		return toolCall{}, false
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return toolCall{}, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args, ok = obj["parameters"]
	}
	if !ok || bytes.Equal(bytes.TrimSpace(args), []byte("null")) {
		return toolCall{Name: name, Arguments: "{}"}, true
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		return toolCall{Name: name, Arguments: s}, true
	}
	var b bytes.Buffer
	if err := json.Compact(&b, args); err != nil {
		return toolCall{}, false
	}
	return toolCall{Name: name, Arguments: b.String()}, true
}

// toolCallDoc is a tool call as OpenAI's API gives it, whole (in a
// message) or as a streamed delta (Index set; ID, Type and Name in the
// first delta of a call only).
type toolCallDoc struct {
	Index    *int            `json:"index,omitempty"`
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function toolFunctionDoc `json:"function"`
}

type toolFunctionDoc struct {
	Name      string  `json:"name,omitempty"`
	Arguments *string `json:"arguments,omitempty"`
}

// callDoc is call as a message's tool call.
func callDoc(c toolCall) toolCallDoc {
	args := c.Arguments
	return toolCallDoc{ID: newID("call_"), Type: "function", Function: toolFunctionDoc{Name: c.Name, Arguments: &args}}
}

// deltaDocs is d as OpenAI streams a call: a call's first delta with its
// id, type, name and empty arguments, then its argument pieces.
func deltaDocs(d toolDelta) []toolCallDoc {
	i := d.index
	var out []toolCallDoc
	if d.name != "" {
		empty := ""
		out = append(out, toolCallDoc{Index: &i, ID: newID("call_"), Type: "function", Function: toolFunctionDoc{Name: d.name, Arguments: &empty}})
	}
	if d.args != "" {
		args := d.args
		out = append(out, toolCallDoc{Index: &i, Function: toolFunctionDoc{Arguments: &args}})
	}
	return out
}

// toolNames checks a request's tools and returns their function names.
func toolNames(raw json.RawMessage) ([]string, *Error) {
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return nil, badParam("tools", "Invalid type for 'tools': expected an array of tools.")
	}
	names := make([]string, len(tools))
	for i, t := range tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Type != "function" {
			return nil, badParam(at+".type", "Invalid value for '%s.type': only 'function' tools are supported.", at)
		}
		if t.Function == nil || !validToolName(t.Function.Name) {
			return nil, badParam(at+".function.name", "Invalid '%s.function.name': expected 1 to 64 letters, digits, '_' or '-'.", at)
		}
		if j := slices.Index(names[:i], t.Function.Name); j >= 0 {
			return nil, badParam(at+".function.name", "Invalid '%s.function.name': tools[%d] is also named '%s'; tool names must be unique.", at, j, t.Function.Name)
		}
		if p := t.Function.Parameters; len(p) > 0 && string(p) != "null" {
			var schema map[string]json.RawMessage
			if json.Unmarshal(p, &schema) != nil {
				return nil, badParam(at+".function.parameters", "Invalid type for '%s.function.parameters': expected a JSON Schema object.", at)
			}
		}
		names[i] = t.Function.Name
	}
	return names, nil
}

func validToolName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	return strings.IndexFunc(n, func(r rune) bool {
		return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0
}

// ToolParser names the tool call format parsed out of replies of a model
// with this chat template ("" when none applies).
func ToolParser(chatTemplate string) string { return toolFormatOf(chatTemplate) }
