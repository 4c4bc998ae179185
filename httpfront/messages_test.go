package httpfront_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// chatView is a chat message as the template sees it, its extra members
// decoded, for cmp diffs.
func chatView(t *testing.T, msgs []tok.Message) []map[string]any {
	t.Helper()
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		v := map[string]any{"role": m.Role, "content": m.Content}
		for k, raw := range m.Extra {
			var x any
			if err := json.Unmarshal(raw, &x); err != nil {
				t.Fatalf("message %d %s: %v", i, k, err)
			}
			v[k] = x
		}
		out[i] = v
	}
	return out
}

// A Messages request becomes the chat request the template renders:
// system first, tool_use blocks as the assistant's tool_calls (input as
// arguments), tool_result blocks as tool messages before the user's text,
// thinking blocks as reasoning_content; tools, tool_choice,
// stop_sequences and thinking in their chat forms.
func TestDecodeMessagesTranslation(t *testing.T) {
	type want struct {
		Messages          []map[string]any
		ToolChoice        string
		ToolName          string
		ParallelToolCalls bool
		Stop              []string
		MaxTokens         int
		TopK              int
		Stream            bool
		ContinueFinal     bool
		Kwargs            map[string]any
		ReasoningBudget   int
		Tools             any
	}
	for _, tc := range []struct {
		name, body string
		want       want
	}{
		{"a string system and a string message",
			`{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"top_k":3,"stream":true,"metadata":{"user_id":"u"}}`,
			want{Messages: []map[string]any{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}},
				ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 5, TopK: 3, Stream: true}},
		{"system blocks and text blocks, cache_control ignored",
			`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"A."},{"type":"text","text":"B.","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"text","text":"two","cache_control":{"type":"ephemeral"}}]}]}`,
			want{Messages: []map[string]any{{"role": "system", "content": "A.\n\nB."}, {"role": "user", "content": "one\n\ntwo"}},
				ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 5}},
		{"a tool round trip",
			`{"model":"m","max_tokens":9,"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}],
			"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"stop_sequences":["END"],
			"messages":[{"role":"user","content":"Weather?"},
			{"role":"assistant","content":[{"type":"thinking","thinking":"Ask the tool.","signature":""},{"type":"text","text":"Checking."},
				{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"22C"}]},{"type":"text","text":"And tomorrow?"}]}]}`,
			want{Messages: []map[string]any{
				{"role": "user", "content": "Weather?"},
				{"role": "assistant", "content": "Checking.", "reasoning_content": "Ask the tool.",
					"tool_calls": []any{map[string]any{"id": "toolu_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": map[string]any{"city": "Paris"}}}}},
				{"role": "tool", "content": "22C", "tool_call_id": "toolu_1"},
				{"role": "user", "content": "And tomorrow?"}},
				ToolChoice: "auto", ParallelToolCalls: false, Stop: []string{"END"}, MaxTokens: 9,
				Tools: []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather", "parameters": map[string]any{"type": "object"}}}}}},
		{"tool_choice auto, and thinking enabled with a budget",
			`{"model":"m","max_tokens":2048,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},
			"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"x"}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "x"}}, ToolChoice: "auto", ParallelToolCalls: true, MaxTokens: 2048,
				Kwargs: map[string]any{"enable_thinking": true}, ReasoningBudget: 1024,
				Tools: []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}}},
		{"adaptive thinking",
			`{"model":"m","max_tokens":9,"thinking":{"type":"adaptive","display":"summarized"},"messages":[{"role":"user","content":"x"}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "x"}}, ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 9,
				Kwargs: map[string]any{"enable_thinking": true}}},
		{"tool_choice any, and thinking disabled",
			`{"model":"m","max_tokens":9,"tools":[{"name":"f","input_schema":{"type":"object"},"type":"custom"}],"tool_choice":{"type":"any"},
			"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"x"}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "x"}}, ToolChoice: "required", ParallelToolCalls: true, MaxTokens: 9,
				Kwargs: map[string]any{"enable_thinking": false},
				Tools:  []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}}},
		{"tool_choice none",
			`{"model":"m","max_tokens":9,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"x"}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "x"}}, ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 9,
				Tools: []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object"}}}}}},
		{"a final assistant message is continued",
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"Count."},{"role":"assistant","content":[{"type":"text","text":"One, two,"}]}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "Count."}, {"role": "assistant", "content": "One, two,"}},
				ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 9, ContinueFinal: true}},
		{"a text document is text of the user message, title and context first",
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"Summarise."},
			{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The cat sat."},"title":"Cats","context":"A reader's note.","citations":{"enabled":true},"cache_control":{"type":"ephemeral"}}]}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "Summarise.\n\nCats\n\nA reader's note.\n\nThe cat sat."}},
				ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 9}},
		{"content documents of text blocks and of a string, no title",
			`{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"title":null},
			{"type":"document","source":{"type":"content","content":"c"}},{"type":"text","text":"Compare."}]}]}`,
			want{Messages: []map[string]any{{"role": "user", "content": "a\n\nb\n\nc\n\nCompare."}},
				ToolChoice: "none", ParallelToolCalls: true, MaxTokens: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, e := httpfront.DecodeMessages([]byte(tc.body), httpfront.DecodeOptions{Strict: true}, false)
			if e != nil {
				t.Fatal(e)
			}
			c := r.Chat
			got := want{Messages: chatView(t, c.Messages), ToolChoice: c.ToolChoice, ToolName: c.ToolName, ParallelToolCalls: c.ParallelToolCalls,
				Stop: c.Stop, MaxTokens: c.MaxTokens, TopK: c.TopK, Stream: c.Stream, ContinueFinal: c.ContinueFinal, ReasoningBudget: c.ReasoningBudget}
			if c.TemplateKwargs != nil {
				got.Kwargs = map[string]any{}
				for k, v := range c.TemplateKwargs {
					var x any
					_ = json.Unmarshal(v, &x)
					got.Kwargs[k] = x
				}
			}
			if c.Tools != nil {
				if err := json.Unmarshal(c.Tools, &got.Tools); err != nil {
					t.Fatal(err)
				}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("chat request (-want +got):\n%s", d)
			}
		})
	}
}

// count_tokens takes the same body without max_tokens.
func TestDecodeMessagesCountOnly(t *testing.T) {
	r, e := httpfront.DecodeMessages([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`), httpfront.DecodeOptions{}, true)
	if e != nil || r.Chat.MaxTokens != 0 {
		t.Fatalf("count_tokens body: %v %+v", e, r)
	}
}

func TestDecodeMessagesErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"no messages", `{"model":"m","max_tokens":5}`, "messages"},
		{"max_tokens below 1", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"a system role in messages", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"hi"}]}`, "messages[0].role"},
		{"an image block without a source type", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, "messages[0].content[0].source.type"},
		{"a document without a source", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document"}]}]}`, "messages[0].content[0].source"},
		{"a text document without data", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain"}}]}]}`, "messages[0].content[0].source.data"},
		{"a text document of html", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/html","data":"<p>"}}]}]}`, "messages[0].content[0].source.media_type"},
		{"a content document holding an image", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"content","content":[{"type":"image","source":{"type":"url","url":"u"}}]}}]}]}`, "messages[0].content[0].source.content[0].type"},
		{"a document title that is not a string", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"x"},"title":3}]}]}`, "messages[0].content[0].title"},
		{"a text block without text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, "messages[0].content[0].text"},
		{"a tool_result without tool_use_id", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, "messages[0].content[0].tool_use_id"},
		{"a tool_use in a user message", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`, "messages[0].content[0].type"},
		{"a tool_use whose input is not an object", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":3}]}]}`, "messages[1].content[0].input"},
		{"a system image block", `{"model":"m","max_tokens":5,"system":[{"type":"image"}],"messages":[{"role":"user","content":"hi"}]}`, "system[0].type"},
		{"a server tool", `{"model":"m","max_tokens":5,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].type"},
		{"a tool without input_schema", `{"model":"m","max_tokens":5,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].input_schema"},
		{"a bad tool name", `{"model":"m","max_tokens":5,"tools":[{"name":"a b","input_schema":{}}],"messages":[{"role":"user","content":"hi"}]}`, "tools[0].name"},
		{"tool_choice naming no tool", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
		{"tool_choice tool without a name", `{"model":"m","max_tokens":5,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice.name"},
		{"an unknown tool_choice", `{"model":"m","max_tokens":5,"tool_choice":{"type":"some"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice.type"},
		{"too many stop sequences", `{"model":"m","max_tokens":5,"stop_sequences":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`, "stop_sequences"},
		{"thinking without budget", `{"model":"m","max_tokens":5,"thinking":{"type":"enabled"},"messages":[{"role":"user","content":"hi"}]}`, "thinking.budget_tokens"},
		{"a thinking budget below 1024", `{"model":"m","max_tokens":5,"thinking":{"type":"enabled","budget_tokens":10},"messages":[{"role":"user","content":"hi"}]}`, "thinking.budget_tokens"},
		{"a thinking budget not below max_tokens", `{"model":"m","max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "thinking.budget_tokens"},
		{"thinking with tool_choice tool", `{"model":"m","max_tokens":2048,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
		{"adaptive thinking with tool_choice any", `{"model":"m","max_tokens":5,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"any"},"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"hi"}]}`, "tool_choice"},
		{"an unknown thinking display", `{"model":"m","max_tokens":5,"thinking":{"type":"adaptive","display":"full"},"messages":[{"role":"user","content":"hi"}]}`, "thinking.display"},
		{"an unknown thinking type", `{"model":"m","max_tokens":5,"thinking":{"type":"deep"},"messages":[{"role":"user","content":"hi"}]}`, "thinking.type"},
		{"a metadata user_id that is not a string", `{"model":"m","max_tokens":5,"metadata":{"user_id":1},"messages":[{"role":"user","content":"hi"}]}`, "metadata.user_id"},
		{"temperature out of range", `{"model":"m","max_tokens":5,"temperature":3,"messages":[{"role":"user","content":"hi"}]}`, "temperature"},
		{"mcp_servers", `{"model":"m","max_tokens":5,"mcp_servers":[{"url":"x"}],"messages":[{"role":"user","content":"hi"}]}`, "mcp_servers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := httpfront.DecodeMessages([]byte(tc.body), httpfront.DecodeOptions{}, false)
			if e == nil || e.Status != 400 || e.Param != tc.param {
				t.Fatalf("got %v, want a 400 naming %s", e, tc.param)
			}
			if !strings.Contains(e.Message, tc.param) {
				t.Errorf("message %q does not name %s", e.Message, tc.param)
			}
		})
	}
}

// A block of a type its context does not hold is refused naming the types
// that context holds: a user message's, a tool_result's, an assistant
// message's.
func TestDecodeMessagesBlockTypeErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"a search_result in a user message", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"search_result","source":"s"}]}]}`,
			"Invalid value for 'messages[0].content[0].type': a user message holds 'text', 'image', 'document' and 'tool_result' blocks, not 'search_result'."},
		{"a tool_use in a user message", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]}`,
			"Invalid value for 'messages[0].content[0].type': a user message holds 'text', 'image', 'document' and 'tool_result' blocks, not 'tool_use'."},
		{"a PDF document", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQ="}}]}]}`,
			"Invalid value for 'messages[0].content[0].source.type': 'base64' documents are not read; only text documents are (source.type 'text' or 'content')."},
		{"a url document", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"Read:"},{"type":"document","source":{"type":"url","url":"https://a.example/x.pdf"}}]}]}`,
			"Invalid value for 'messages[0].content[1].source.type': 'url' documents are not read; only text documents are (source.type 'text' or 'content')."},
		{"a document in a tool_result", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{}}]}]}]}`,
			"Invalid value for 'messages[0].content[0].content[0].type': a tool_result holds 'text' and 'image' blocks, not 'document'."},
		{"an image in an assistant message", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"image","source":{}}]}]}`,
			"Invalid value for 'messages[1].content[0].type': an assistant message holds 'text', 'thinking', 'redacted_thinking' and 'tool_use' blocks, not 'image'."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := httpfront.DecodeMessages([]byte(tc.body), httpfront.DecodeOptions{}, false)
			if e == nil {
				t.Fatal("accepted")
			}
			if diff := cmp.Diff(tc.want, e.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
		})
	}
}

// Errors on the Messages paths have Anthropic's shape and statuses, the
// key is taken from x-api-key or Authorization, and other paths keep
// OpenAI's shape.
func TestMessagesErrorShapes(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{APIKey: "k"}, 1)
	key := []string{"x-api-key", "k", "anthropic-version", "2023-06-01"}
	ok := `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	type answer struct {
		Status int
		Doc    map[string]any
	}
	anthropic := func(status int, typ string) answer {
		return answer{status, map[string]any{"type": "error", "error": map[string]any{"type": typ}}}
	}
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		want                     answer
	}{
		{"missing max_tokens", "POST", "/v1/messages", `{"model":"` + s.id + `","messages":[{"role":"user","content":"hi"}]}`, key, anthropic(400, "invalid_request_error")},
		{"no key", "POST", "/v1/messages", ok, nil, anthropic(401, "authentication_error")},
		{"a wrong x-api-key", "POST", "/v1/messages", ok, []string{"x-api-key", "bad"}, anthropic(401, "authentication_error")},
		{"an unknown model", "POST", "/v1/messages", strings.Replace(ok, s.id, "claude-x", 1), key, anthropic(404, "not_found_error")},
		{"count_tokens of an unknown model", "POST", "/v1/messages/count_tokens", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, key, anthropic(404, "not_found_error")},
		{"a body that is not JSON", "POST", "/v1/messages", `{`, key, anthropic(400, "invalid_request_error")},
		{"GET", "GET", "/v1/messages", "", key, anthropic(405, "invalid_request_error")},
		{"an unknown path under /v1/messages", "POST", "/v1/messages/batches", ok, key, anthropic(404, "not_found_error")},
		{"the OpenAI paths keep OpenAI's shape", "POST", "/v1/chat/completions", `{"model":"` + s.id + `"}`, key,
			answer{400, map[string]any{"error": map[string]any{"type": "invalid_request_error", "param": "messages", "code": nil}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, tc.method, tc.path, tc.body, tc.header...)
			e, _ := doc["error"].(map[string]any)
			if e == nil || e["message"] == "" {
				t.Fatalf("no error message in %v", doc)
			}
			delete(e, "message")
			if d := cmp.Diff(tc.want, answer{status, doc}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	// A field renamed for the decoder's errors is not renamed again for
	// the chat path's.
	if status, doc := s.call(t, "POST", "/v1/messages", strings.Replace(ok, `"max_tokens":2,`, `"max_tokens":2,"stop_sequences":[""],`, 1), key...); status != 400 ||
		!strings.Contains(fmt.Sprint(doc), "'stop_sequences") || strings.Contains(fmt.Sprint(doc), "stop_sequences_sequences") {
		t.Errorf("an empty stop sequence: %d %v, want a 400 naming 'stop_sequences'", status, doc)
	}
	for _, h := range [][]string{key, {"Authorization", "Bearer k"}} {
		if status, doc := s.call(t, "POST", "/v1/messages", ok, h...); status != 200 || doc["type"] != "message" {
			t.Errorf("key in %s: status %d %v", h[0], status, doc)
		}
	}
}

// A streamed message is Anthropic's event sequence, and it adds up to the
// non-streamed message: text, stop reason, stop sequence and usage.
func TestMessagesStream(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	body := `{"model":"` + s.id + `","max_tokens":12,"temperature":0,"messages":[{"role":"user","content":"Tell me a story."}]%s}`
	_, whole := s.call(t, "POST", "/v1/messages", strings.Replace(body, "%s", "", 1))
	text := whole["content"].([]any)[0].(map[string]any)["text"].(string)
	if len(text) < 6 {
		t.Fatalf("reply %q too short to cut", text)
	}
	stop := text[3:6]
	for _, tc := range []struct {
		name, extra string
		text        string
		stop        any
		reason      string
	}{
		{"to max_tokens", "", text, nil, whole["stop_reason"].(string)},
		{"to a stop sequence", `,"stop_sequences":[` + mustQuote(stop) + `]`, text[:strings.Index(text, stop)], stop, "stop_sequence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := s.namedStream(t, "/v1/messages", strings.Replace(body, "%s", tc.extra+`,"stream":true`, 1))
			var names []string
			var streamed strings.Builder
			for _, e := range events {
				names = append(names, e["type"].(string))
				if d, ok := e["delta"].(map[string]any); ok && d["type"] == "text_delta" {
					streamed.WriteString(d["text"].(string))
				}
			}
			want := []string{"message_start", "ping", "content_block_start"}
			for range len(names) - 6 {
				want = append(want, "content_block_delta")
			}
			want = append(want, "content_block_stop", "message_delta", "message_stop")
			if d := cmp.Diff(want, names); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
			last := events[len(events)-2]
			got := map[string]any{"text": streamed.String(), "delta": last["delta"]}
			wantDoc := map[string]any{"text": tc.text, "delta": map[string]any{"stop_reason": tc.reason, "stop_sequence": tc.stop}}
			if d := cmp.Diff(wantDoc, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			_, nonStream := s.call(t, "POST", "/v1/messages", strings.Replace(body, "%s", tc.extra, 1))
			u, wu := last["usage"].(map[string]any), nonStream["usage"].(map[string]any)
			if u["output_tokens"] != wu["output_tokens"] || u["input_tokens"].(float64)+u["cache_read_input_tokens"].(float64) != wu["input_tokens"].(float64)+wu["cache_read_input_tokens"].(float64) {
				t.Errorf("streamed usage %v, non-streamed %v", u, wu)
			}
			if nonStream["stop_reason"] != tc.reason || nonStream["stop_sequence"] != tc.stop {
				t.Errorf("non-streamed stop %v %v, want %v %v", nonStream["stop_reason"], nonStream["stop_sequence"], tc.reason, tc.stop)
			}
		})
	}
	_, count := s.call(t, "POST", "/v1/messages/count_tokens", `{"model":"`+s.id+`","messages":[{"role":"user","content":"Tell me a story."}]}`)
	start := s.namedStream(t, "/v1/messages", strings.Replace(body, "%s", `,"stream":true`, 1))[0]["message"].(map[string]any)["usage"].(map[string]any)
	if count["input_tokens"] != start["input_tokens"] {
		t.Errorf("count_tokens %v, message_start usage %v", count, start)
	}
}

// Past the request's deadline a message is Anthropic's 504 timeout_error:
// the status before the stream starts, an error event after.
func TestMessagesPastTheDeadline(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{Timeout: 30 * time.Millisecond}, 1)
	body := `{"model":"stories260K","max_tokens":450,%s"messages":[{"role":"user","content":"Once"}]}`
	// busy keeps the only slot busy so the message waits past its deadline.
	busy := func() {
		go http.Post(s.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"stories260K","prompt":"Once","max_tokens":450,"temperature":0,"ignore_eos":true}`))
		time.Sleep(5 * time.Millisecond)
	}
	t.Run("streamed: an error event", func(t *testing.T) {
		busy()
		events := s.namedStream(t, "/v1/messages", fmt.Sprintf(body, `"stream":true,`))
		last := events[len(events)-1]
		if e, _ := last["error"].(map[string]any); last["type"] != "error" || e["type"] != "timeout_error" || e["message"] == "" {
			t.Errorf("last event %v, want a timeout_error event", last)
		}
		s.waitIdle(t)
	})
	t.Run("not streamed: 504", func(t *testing.T) {
		busy()
		status, doc := s.call(t, "POST", "/v1/messages", fmt.Sprintf(body, ""))
		if e, _ := doc["error"].(map[string]any); status != 504 || doc["type"] != "error" || e["type"] != "timeout_error" {
			t.Errorf("status %d %v, want 504 timeout_error", status, doc)
		}
		s.waitIdle(t)
	})
}

// The statuses that need a server in a particular state: 403 for a
// cross-origin preflight from an origin not allowed, 413 for a body over
// the limit, 429 for a full queue, 529 while no model is loaded; each in
// Anthropic's shape.
func TestMessagesOverloadAndLimits(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{MaxQueue: 1, MaxBodyBytes: 4 << 10, AllowedOrigins: []string{"https://app.example"}}, 1)
	loading := httpfront.New(httpfront.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go loading.Serve(ln)
	t.Cleanup(func() { loading.Shutdown(context.Background()) })
	ok := `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`
	big := `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":"` + strings.Repeat("a", 8<<10) + `"}]}`
	type answer struct {
		Status int
		Type   string
	}
	for _, tc := range []struct {
		name, url, method, path, body string
		header                        []string
		want                          answer
	}{
		{"a preflight from an origin not allowed", s.url, "OPTIONS", "/v1/messages", "", []string{"Origin", "https://other.example", "Access-Control-Request-Method", "POST"}, answer{403, "permission_error"}},
		{"a body over --max-body", s.url, "POST", "/v1/messages", big, nil, answer{413, "request_too_large"}},
		{"count_tokens of a body over --max-body", s.url, "POST", "/v1/messages/count_tokens", big, nil, answer{413, "request_too_large"}},
		{"while the model loads", "http://" + ln.Addr().String(), "POST", "/v1/messages", ok, nil, answer{529, "overloaded_error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := (&server{url: tc.url}).call(t, tc.method, tc.path, tc.body, tc.header...)
			e, _ := doc["error"].(map[string]any)
			if e == nil || doc["type"] != "error" || e["message"] == "" {
				t.Fatalf("not an Anthropic error: %v", doc)
			}
			if d := cmp.Diff(tc.want, answer{status, e["type"].(string)}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	t.Run("a full queue", func(t *testing.T) {
		cancel := s.fillQueue(t)
		defer cancel()
		status, doc := s.call(t, "POST", "/v1/messages", ok)
		if e, _ := doc["error"].(map[string]any); status != 429 || e["type"] != "rate_limit_error" {
			t.Errorf("status %d %v, want 429 rate_limit_error", status, doc)
		}
		cancel()
		s.waitIdle(t)
	})
}

// A stream that waits (here in the queue, behind a long request) sends a
// ping each time Config.StreamPing passes without an event, and is
// otherwise Anthropic's event sequence.
func TestMessagesStreamPingsWhileItWaits(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{StreamPing: 5 * time.Millisecond}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions",
		strings.NewReader(`{"model":"`+s.id+`","prompt":"Once","max_tokens":4000,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	busy, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Body.Close()
	go func() {
		time.Sleep(200 * time.Millisecond)
		cancel()
	}()
	events := s.namedStream(t, "/v1/messages", `{"model":"`+s.id+`","max_tokens":3,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	var names []string
	pings := 0
	for _, e := range events {
		if e["type"] == "ping" {
			pings++
			continue
		}
		names = append(names, e["type"].(string))
	}
	want := []string{"message_start", "content_block_start"}
	for range len(names) - 5 {
		want = append(want, "content_block_delta")
	}
	want = append(want, "content_block_stop", "message_delta", "message_stop")
	if d := cmp.Diff(want, names); d != "" {
		t.Errorf("events but pings (-want +got):\n%s", d)
	}
	// One ping follows message_start at once; the wait of ~200 ms holds
	// tens of 5 ms periods.
	if pings < 4 {
		t.Errorf("%d pings in a stream that waited ~200 ms with a 5 ms ping period", pings)
	}
	s.waitIdle(t)
}

// thinking.budget_tokens closes the reasoning after that many tokens: the
// random model never closes its <think> block itself, so without a budget
// its reply is all thinking; with one, the server closes the block at the
// budget and the model writes text after it, streamed and not alike.
func TestMessagesThinkingBudget(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	ct, err := tok.NewChatTemplate(thinkingTemplate, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: s.inst.Tokenizer, Chat: ct, Created: time.Unix(1, 0)})
	const budget, maxTokens = 1024, 1040
	body := fmt.Sprintf(`{"model":"%s","max_tokens":%d,"temperature":0,"messages":[{"role":"user","content":"hi"}],"thinking":%%s%%s}`, s.id, maxTokens)
	types := func(content []any) []string {
		var out []string
		for _, b := range content {
			out = append(out, b.(map[string]any)["type"].(string))
		}
		return out
	}
	_, unbounded := s.call(t, "POST", "/v1/messages", fmt.Sprintf(body, `{"type":"adaptive"}`, ""))
	if d := cmp.Diff([]string{"thinking"}, types(unbounded["content"].([]any))); d != "" {
		t.Fatalf("without a budget the reply is not all thinking (-want +got):\n%s", d)
	}
	enabled := fmt.Sprintf(`{"type":"enabled","budget_tokens":%d}`, budget)
	_, bounded := s.call(t, "POST", "/v1/messages", fmt.Sprintf(body, enabled, ""))
	content := bounded["content"].([]any)
	if d := cmp.Diff([]string{"thinking", "text"}, types(content)); d != "" {
		t.Fatalf("with budget_tokens %d of max_tokens %d (-want +got):\n%s", budget, maxTokens, d)
	}
	thinking := content[0].(map[string]any)["thinking"].(string)
	if !strings.HasPrefix(unbounded["content"].([]any)[0].(map[string]any)["thinking"].(string), thinking) {
		t.Errorf("the bounded thinking is not the start of the unbounded one")
	}
	if u := bounded["usage"].(map[string]any); u["output_tokens"] != float64(maxTokens) || bounded["stop_reason"] != "max_tokens" {
		t.Errorf("usage %v, stop_reason %v: want %d output tokens, max_tokens", u, bounded["stop_reason"], maxTokens)
	}
	var streamed []any
	var open map[string]any
	for _, e := range s.namedStream(t, "/v1/messages", fmt.Sprintf(body, enabled, `,"stream":true`)) {
		switch e["type"] {
		case "content_block_start":
			open = e["content_block"].(map[string]any)
			streamed = append(streamed, open)
		case "content_block_delta":
			d := e["delta"].(map[string]any)
			for _, k := range []string{"thinking", "text"} {
				if v, ok := d[k].(string); ok {
					open[k] = open[k].(string) + v
				}
			}
		}
	}
	if d := cmp.Diff(content, streamed); d != "" {
		t.Errorf("streamed content (-non-streamed +streamed):\n%s", d)
	}
}
