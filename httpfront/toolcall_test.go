package httpfront

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Canned model replies in each format parse into content and calls, the
// same whether the reply arrives whole, in any two pieces or byte by byte.
func TestToolCallParsers(t *testing.T) {
	weather := toolCall{Name: "get_weather", Arguments: `{"city":"Paris","days":[1,2]}`}
	for _, tc := range []struct {
		name, format, reply string
		content             string
		calls               []toolCall
	}{
		{"hermes: one call", "hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1, 2]}}\n</tool_call>", "", []toolCall{weather}},
		{"hermes: text before a call", "hermes", "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": [1,2]}}\n</tool_call>", "Let me check.\n", []toolCall{weather}},
		{"hermes: parallel calls", "hermes", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": \"</tool\"}}\n</tool_call>\n", "",
			[]toolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"x":"</tool"}`}}},
		{"hermes: arguments as a string", "hermes", `<tool_call>{"name": "f", "arguments": "{\"q\": 1}"}</tool_call>`, "", []toolCall{{Name: "f", Arguments: `{"q": 1}`}}},
		{"hermes: no call is all content", "hermes", "Hello <tool there", "Hello <tool there", nil},
		{"hermes: a malformed block stays content", "hermes", "<tool_call>{not json}</tool_call>", "<tool_call>{not json}</tool_call>", nil},
		{"hermes: a call cut before its close tag still counts", "hermes", "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n", "", []toolCall{{Name: "a", Arguments: "{}"}}},
		{"hermes: a cut call whose JSON is unfinished is content", "hermes", "<tool_call>\n{\"name\": \"a\", \"argu", "<tool_call>\n{\"name\": \"a\", \"argu", nil},
		{"llama3: one call with parameters", "llama3_json", `{"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}`, "", []toolCall{weather}},
		{"llama3: after the python tag, two calls", "llama3_json", `<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"y": true}}`, "",
			[]toolCall{{Name: "a", Arguments: "{}"}, {Name: "b", Arguments: `{"y":true}`}}},
		{"llama3: text is content", "llama3_json", "The weather is fine.", "The weather is fine.", nil},
		{"llama3: a JSON reply that is not a call is content", "llama3_json", `{"answer": 42}`, `{"answer": 42}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chunkings := [][]string{}
			for i := 0; i <= len(tc.reply); i++ {
				chunkings = append(chunkings, []string{tc.reply[:i], tc.reply[i:]})
			}
			var bytes []string
			for i := range len(tc.reply) {
				bytes = append(bytes, tc.reply[i:i+1])
			}
			chunkings = append(chunkings, bytes)
			for _, pieces := range chunkings {
				p := newToolParser(tc.format)
				var content string
				var calls []toolCall
				for _, piece := range pieces {
					c, ds := p.push(piece)
					content += c
					calls = collectCalls(calls, ds)
				}
				c, ds := p.flush()
				content += c
				calls = collectCalls(calls, ds)
				if diff := cmp.Diff(tc.calls, calls, cmp.AllowUnexported(toolCall{})); diff != "" || content != tc.content {
					t.Fatalf("pieces %q: content %q (want %q), calls (-want +got):\n%s", pieces, content, tc.content, diff)
				}
			}
		})
	}
}

func TestToolFormatOf(t *testing.T) {
	for _, tc := range []struct{ template, want string }{
		{"{{ '<tool_call>' }}", "hermes"},
		{"<|start_header_id|>{% if tools %}Given the following functions{% endif %}", "llama3_json"},
		{"{{ messages }}", "hermes"},
	} {
		if got := toolFormatOf(tc.template); got != tc.want {
			t.Errorf("toolFormatOf(%q) = %s, want %s", tc.template, got, tc.want)
		}
	}
}

// A Hermes call's arguments stream as the model writes them, compacted,
// once its header ("name", then "arguments") is complete.
func TestHermesArgumentsStream(t *testing.T) {
	p := newToolParser("hermes")
	var got []toolDelta
	for _, piece := range []string{"<tool_call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": ", "\"x y", "\"}}\n</tool_call>"} {
		c, ds := p.push(piece)
		if c != "" {
			t.Errorf("content %q", c)
		}
		got = append(got, ds...)
	}
	want := []toolDelta{{index: 0, name: "f", args: `{"a":`}, {index: 0, args: `"x y`}, {index: 0, args: `"}`}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(toolDelta{})); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
}
