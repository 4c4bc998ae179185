package httpfront_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

func TestDecodeResponsesErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"no input", `{"model":"m"}`, "input"},
		{"previous_response_id", `{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id"},
		{"conversation", `{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation"},
		{"store true", `{"model":"m","input":"hi","store":true}`, "store"},
		{"an image part with a bad url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].image_url"},
		{"an image part without a url", `{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0].image_url"},
		{"an unknown item type", `{"model":"m","input":[{"type":"web_search_call"}]}`, "input[0].type"},
		{"a bad role", `{"model":"m","input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{"a function call without call_id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id"},
		{"max_output_tokens below 1", `{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens"},
		{"temperature out of range", `{"model":"m","input":"hi","temperature":3}`, "temperature"},
		{"a tool of another type", `{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"a tool without a name", `{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name"},
		{"tool_choice naming no tool", `{"model":"m","input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, "tool_choice"},
		{"an unknown text.format", `{"model":"m","input":"hi","text":{"format":{"type":"yaml"}}}`, "text.format.type"},
		{"a json_schema without schema", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s"}}}`, "text.format.schema"},
		{"an unsupported schema keyword", `{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"string","pattern":"(?=a)b"}}}}`, "text.format.schema"},
		{"an empty final message after instructions", `{"model":"m","instructions":"be brief","input":[{"role":"user","content":"hi"},{"role":"assistant","content":7}]}`, "input[1].content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := httpfront.DecodeResponses([]byte(tc.body), httpfront.DecodeOptions{})
			if e == nil || e.Status != 400 || e.Param != tc.param {
				t.Fatalf("got %v, want a 400 naming %s", e, tc.param)
			}
			if !strings.Contains(e.Message, tc.param) && !strings.Contains(e.Message, strings.SplitN(tc.param, ".", 2)[0]) {
				t.Errorf("message %q does not name %s", e.Message, tc.param)
			}
		})
	}
}

// The input items map to the chat messages the template renders: the
// instructions first, function_call items as the assistant's tool calls,
// function_call_output items as tool messages.
func TestDecodeResponsesInput(t *testing.T) {
	r, e := httpfront.DecodeResponses([]byte(`{"model":"m","instructions":"Be brief.","max_output_tokens":7,"input":[
		{"role":"developer","content":[{"type":"input_text","text":"Use tools."}]},
		{"type":"message","role":"user","content":"Weather?"},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
		{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"22C"},
		{"role":"assistant","content":[{"type":"output_text","text":"It is ","annotations":[]},{"type":"output_text","text":"22C."}]}],
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"function","name":"get_time"}],
		"tool_choice":"required","parallel_tool_calls":false,"text":{"format":{"type":"json_object"}}}`), httpfront.DecodeOptions{Strict: true})
	if e == nil || e.Param != "tool_choice" {
		t.Fatalf("a forced tool call with a text.format: %v, want a 400 naming tool_choice", e)
	}
	r, e = httpfront.DecodeResponses([]byte(`{"model":"m","instructions":"Be brief.","max_output_tokens":7,"input":[
		{"role":"developer","content":[{"type":"input_text","text":"Use tools."}]},
		{"type":"message","role":"user","content":"Weather?"},
		{"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
		{"type":"function_call","call_id":"call_2","name":"get_time","arguments":"{}"},
		{"type":"function_call_output","call_id":"call_1","output":"22C"},
		{"role":"assistant","content":[{"type":"output_text","text":"It is ","annotations":[]},{"type":"output_text","text":"22C."}]}],
		"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}},{"type":"function","name":"get_time"}],
		"tool_choice":{"type":"function","name":"get_time"},"parallel_tool_calls":false}`), httpfront.DecodeOptions{Strict: true})
	if e != nil {
		t.Fatal(e)
	}
	c := r.Chat
	if c.MaxTokens != 7 || c.ToolChoice != "function" || c.ToolName != "get_time" || c.ParallelToolCalls {
		t.Errorf("params %+v, tool_choice %s %s", c.Params, c.ToolChoice, c.ToolName)
	}
	var roles []string
	for _, m := range c.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); got != "system,system,user,assistant,tool,assistant" {
		t.Fatalf("roles %s", got)
	}
	if m := c.Messages[3]; !strings.Contains(string(m.Extra["tool_calls"]), `"id":"call_2"`) || !strings.Contains(string(m.Extra["tool_calls"]), `"arguments":{"city":"Paris"}`) {
		t.Errorf("tool calls %s", m.Extra["tool_calls"])
	}
	if m := c.Messages[4]; m.Content != "22C" || string(m.Extra["tool_call_id"]) != `"call_1"` {
		t.Errorf("tool message %+v", m)
	}
	if c.Messages[0].Content != "Be brief." || c.Messages[5].Content != "It is 22C." {
		t.Errorf("messages %+v", c.Messages)
	}
	if !strings.Contains(string(c.Tools), `"function":{`) {
		t.Errorf("chat tools %s", c.Tools)
	}
}

// responsesStream posts a streaming /v1/responses request and returns its
// events (the SSE event name must equal the data's type, the sequence
// numbers count from 0).
func (s *server) responsesStream(t testing.TB, body string) []map[string]any {
	t.Helper()
	out := s.namedStream(t, "/v1/responses", body)
	for i, d := range out {
		if d["sequence_number"] != float64(i) {
			t.Fatalf("event %d: %v", i, d)
		}
	}
	return out
}

// namedStream posts a streaming request to path and returns its events,
// each named by its data's type (the Responses and Messages streams).
func (s *server) namedStream(t testing.TB, path, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(data), &d); err != nil {
			t.Fatalf("event %q: %v", data, err)
		}
		if d["type"] != name {
			t.Fatalf("event %d named %q: %v", len(out), name, d)
		}
		out = append(out, d)
	}
	return out
}

func outputItems(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, it := range doc["output"].([]any) {
		out = append(out, it.(map[string]any))
	}
	return out
}

func TestResponses(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	const body = `{"model":"tiny-qwen3-f32","instructions":"Tell stories.","input":"Once upon a time","max_output_tokens":12,"temperature":0%s}`
	doc := s.completion(t, "/v1/responses", strings.Replace(body, "%s", "", 1))
	if doc["object"] != "response" || !strings.HasPrefix(doc["id"].(string), "resp_") || doc["model"] != "tiny-qwen3-f32" {
		t.Fatalf("response %v", doc)
	}
	u := doc["usage"].(map[string]any)
	out := u["output_tokens"].(float64)
	if u["input_tokens"].(float64) <= 0 || out < 1 || out > 12 || u["total_tokens"] != u["input_tokens"].(float64)+out {
		t.Errorf("usage %v", u)
	}
	if _, ok := u["input_tokens_details"].(map[string]any)["cached_tokens"]; !ok {
		t.Errorf("usage %v has no cached_tokens", u)
	}
	switch doc["status"] {
	case "completed":
	case "incomplete":
		if doc["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" || out != 12 {
			t.Errorf("incomplete response %v", doc)
		}
	default:
		t.Errorf("status %v", doc["status"])
	}
	items := outputItems(doc)
	if len(items) != 1 || items[0]["type"] != "message" || items[0]["role"] != "assistant" {
		t.Fatalf("output %v", items)
	}
	part := items[0]["content"].([]any)[0].(map[string]any)
	want := part["text"].(string)
	if part["type"] != "output_text" || want == "" {
		t.Fatalf("content part %v", part)
	}

	events := s.responsesStream(t, strings.Replace(body, "%s", `,"stream":true`, 1))
	var types []string
	var text strings.Builder
	for _, e := range events {
		types = append(types, e["type"].(string))
		if e["type"] == "response.output_text.delta" {
			text.WriteString(e["delta"].(string))
		}
	}
	final := "response.completed"
	if doc["status"] == "incomplete" {
		final = "response.incomplete"
	}
	wantTypes := "response.created,response.in_progress,response.output_item.added,response.content_part.added,"
	got := strings.Join(types, ",")
	if !strings.HasPrefix(got, wantTypes) || !strings.HasSuffix(got, ",response.output_text.done,response.content_part.done,response.output_item.done,"+final) {
		t.Errorf("event types %s", got)
	}
	if text.String() != want {
		t.Errorf("streamed text %q, want %q", text.String(), want)
	}
	last := events[len(events)-1]["response"].(map[string]any)
	lastItems := outputItems(last)
	if len(lastItems) != 1 || lastItems[0]["content"].([]any)[0].(map[string]any)["text"] != want || last["usage"].(map[string]any)["output_tokens"] != out {
		t.Errorf("final response %v", last)
	}
	if done := events[len(events)-4]; done["text"] != want {
		t.Errorf("output_text.done %v", done)
	}

	// json_schema output parses and validates.
	schema := `{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`
	sch := compileSchema(t, schema)
	for _, seed := range []string{"1", "2"} {
		doc := s.completion(t, "/v1/responses", `{"model":"tiny-qwen3-f32","input":"Describe a person.","max_output_tokens":60,"temperature":1,"seed":`+seed+
			`,"text":{"format":{"type":"json_schema","name":"person","strict":true,"schema":`+schema+`}}}`)
		text := outputItems(doc)[0]["content"].([]any)[0].(map[string]any)["text"].(string)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err == nil {
			err = sch.Validate(inst)
		}
		if err != nil || doc["status"] != "completed" {
			t.Errorf("seed %s: %q (%v): %v", seed, text, doc["status"], err)
		}
	}
	if status, doc := s.call(t, "POST", "/v1/responses", `{"model":"tiny-qwen3-f32","input":"hi","previous_response_id":"resp_x"}`); status != 400 || errorOf(doc)["param"] != "previous_response_id" {
		t.Errorf("previous_response_id: %d %v", status, doc)
	}
}

// A tool call round trip with Qwen3's template: the forced call comes back
// as a function_call item, streaming and not, and its output goes back as
// a function_call_output item.
func TestResponsesToolCalls(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	src, err := os.ReadFile(filepath.Join("..", "runtime", "tok", "testdata", "chat", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := tok.NewChatTemplate(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: s.inst.Tokenizer, Chat: ct, Created: time.Unix(1, 0)})
	params := `{"type":"object","properties":{"city":{"type":"string","maxLength":10}},"required":["city"],"additionalProperties":false}`
	sch := compileSchema(t, params)
	tools := `[{"type":"function","name":"get_weather","description":"Weather of a city","parameters":` + params + `}]`
	body := `{"model":"tiny-qwen3-f32","input":"Weather in Paris?","tools":` + tools + `,"tool_choice":"required","max_output_tokens":80,"temperature":0%s}`
	doc := s.completion(t, "/v1/responses", strings.Replace(body, "%s", "", 1))
	var call map[string]any
	for _, it := range outputItems(doc) {
		switch it["type"] {
		case "function_call":
			if call != nil {
				t.Fatalf("two calls: %v", doc["output"])
			}
			call = it
		case "reasoning":
		default:
			t.Errorf("output item %v beside the forced call", it)
		}
	}
	if call == nil || call["name"] != "get_weather" || !strings.HasPrefix(call["call_id"].(string), "call_") || doc["status"] != "completed" {
		t.Fatalf("response %v", doc)
	}
	args := call["arguments"].(string)
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
	if err == nil {
		err = sch.Validate(inst)
	}
	if err != nil {
		t.Fatalf("arguments %s: %v", args, err)
	}

	var deltas strings.Builder
	var done, item map[string]any
	for _, e := range s.responsesStream(t, strings.Replace(body, "%s", `,"stream":true`, 1)) {
		switch e["type"] {
		case "response.function_call_arguments.delta":
			deltas.WriteString(e["delta"].(string))
		case "response.function_call_arguments.done":
			done = e
		case "response.output_item.done":
			if it := e["item"].(map[string]any); it["type"] == "function_call" {
				item = it
			}
		case "response.output_text.delta":
			t.Errorf("text beside the forced call: %v", e)
		}
	}
	if deltas.String() != args || done == nil || done["arguments"] != args || done["name"] != "get_weather" || item == nil || item["arguments"] != args {
		t.Errorf("streamed arguments %q (done %v, item %v), want %q", deltas.String(), done, item, args)
	}

	inCall, _ := json.Marshal(call)
	round := `{"model":"tiny-qwen3-f32","tools":` + tools + `,"max_output_tokens":4,"temperature":0,"input":[{"role":"user","content":"Weather in Paris?"},` +
		string(inCall) + `,{"type":"function_call_output","call_id":` + mustQuote(call["call_id"].(string)) + `,"output":"22C"}]}`
	final := s.completion(t, "/v1/responses", round)
	fu, du := final["usage"].(map[string]any), doc["usage"].(map[string]any)
	if fu["input_tokens"].(float64) <= du["input_tokens"].(float64) {
		t.Errorf("the call and its output are not in the prompt: %v then %v", du, fu)
	}
	if len(outputItems(final)) == 0 {
		t.Errorf("final response has no output: %v", final)
	}
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A reasoning input item becomes the reasoning_content of the assistant
// message after it: its content parts, or its summary parts when it has no
// content; anything but arrays of text parts is a 400 naming the item.
func TestDecodeResponsesReasoningItem(t *testing.T) {
	for _, tc := range []struct {
		name, item, want string
	}{
		{"content", `{"type":"reasoning","content":[{"type":"reasoning_text","text":"Think "},{"type":"reasoning_text","text":"twice."}],"summary":[{"type":"summary_text","text":"short"}]}`, `"Think twice."`},
		{"summary", `{"type":"reasoning","summary":[{"type":"summary_text","text":"short"}]}`, `"short"`},
		{"null content", `{"type":"reasoning","content":null,"summary":[{"type":"summary_text","text":"s"}]}`, `"s"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, e := httpfront.DecodeResponses([]byte(`{"model":"m","input":[{"role":"user","content":"Hi"},`+tc.item+`,{"role":"assistant","content":"Hello."},{"role":"user","content":"Again"}]}`), httpfront.DecodeOptions{Strict: true})
			if e != nil {
				t.Fatal(e)
			}
			got := string(r.Chat.Messages[1].Extra["reasoning_content"])
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reasoning_content (-want +got):\n%s", diff)
			}
		})
	}
	for _, item := range []string{
		`{"type":"reasoning","content":"not parts"}`,
		`{"type":"reasoning","summary":{"text":"x"}}`,
	} {
		_, e := httpfront.DecodeResponses([]byte(`{"model":"m","input":[`+item+`,{"role":"assistant","content":"Hello."}]}`), httpfront.DecodeOptions{})
		if e == nil || e.Status != 400 || e.Param != "input[0]" {
			t.Errorf("%s: got %v, want a 400 naming input[0]", item, e)
		}
	}
}
