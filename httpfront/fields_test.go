package httpfront_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

func usageOf(doc map[string]any) (prompt, completion int) {
	u := doc["usage"].(map[string]any)
	return int(u["prompt_tokens"].(float64)), int(u["completion_tokens"].(float64))
}

// The generation fields vLLM and llama.cpp clients send change the output
// as they do there; the counts come from usage, the engine's own.
func TestGenerationFieldsClientsSend(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 2)
	tk := s.inst.Tokenizer
	eos := tk.EOS()
	imStart := tk.Encode("<|im_start|>", false, true)
	if len(imStart) != 1 || !tk.IsControl(imStart[0]) || tk.IsEOG(imStart[0]) {
		t.Fatalf("<|im_start|> encodes to %v", imStart)
	}
	const model = `"model":"tiny-qwen3-f32","prompt":"Hello there","temperature":0`
	for _, tc := range []struct {
		name           string
		body           string
		wantTokens     int
		wantFinish     string
		wantText       string // "" = not checked
		wantEmptyText  bool
		wantTextPrefix string
	}{
		{name: "ignore_eos with min_tokens equal to max_tokens yields exactly max_tokens",
			body:       fmt.Sprintf(`{%s,"max_tokens":17,"min_tokens":17,"ignore_eos":true,"logit_bias":{"%d":100}}`, model, eos),
			wantTokens: 17, wantFinish: "length", wantEmptyText: true},
		{name: "a logit bias that forces EOS ends at the first token",
			body:       fmt.Sprintf(`{%s,"max_tokens":10,"logit_bias":{"%d":100}}`, model, eos),
			wantTokens: 1, wantFinish: "stop", wantEmptyText: true},
		{name: "min_tokens keeps EOS out of the first min_tokens tokens",
			body:       fmt.Sprintf(`{%s,"max_tokens":10,"min_tokens":5,"logit_bias":{"%d":100}}`, model, eos),
			wantTokens: 6, wantFinish: "stop"},
		{name: "a stop token id ends the choice without its text",
			body:       fmt.Sprintf(`{%s,"max_tokens":10,"stop_token_ids":[%d],"logit_bias":{"%d":100}}`, model, imStart[0], imStart[0]),
			wantTokens: 1, wantFinish: "stop", wantEmptyText: true},
		{name: "min_tokens defers a stop token id past the first min_tokens tokens",
			body:       fmt.Sprintf(`{%s,"max_tokens":10,"min_tokens":3,"stop_token_ids":[%d],"logit_bias":{"%d":100}}`, model, imStart[0], imStart[0]),
			wantTokens: 4, wantFinish: "stop"},
		{name: "control tokens are hidden by default",
			body:       fmt.Sprintf(`{%s,"max_tokens":3,"logit_bias":{"%d":100}}`, model, imStart[0]),
			wantTokens: 3, wantFinish: "length", wantEmptyText: true},
		{name: "skip_special_tokens false shows them",
			body:       fmt.Sprintf(`{%s,"max_tokens":3,"skip_special_tokens":false,"logit_bias":{"%d":100}}`, model, imStart[0]),
			wantTokens: 3, wantFinish: "length", wantText: strings.Repeat("<|im_start|>", 3)},
		{name: "echo puts the prompt first",
			body:       fmt.Sprintf(`{%s,"max_tokens":3,"echo":true}`, model),
			wantTokens: 3, wantFinish: "length", wantTextPrefix: "Hello there"},
		{name: "cache_prompt and unknown fields are accepted",
			body:       fmt.Sprintf(`{%s,"max_tokens":2,"cache_prompt":true,"x_client_trace":"abc"}`, model),
			wantTokens: 2, wantFinish: "length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := s.completion(t, "/v1/completions", tc.body)
			c := choices(doc)[0]
			_, n := usageOf(doc)
			text := c["text"].(string)
			if n != tc.wantTokens || c["finish_reason"] != tc.wantFinish {
				t.Errorf("%d tokens, finish %v; want %d, %s", n, c["finish_reason"], tc.wantTokens, tc.wantFinish)
			}
			switch {
			case tc.wantEmptyText && text != "":
				t.Errorf("text %q, want none", text)
			case tc.wantText != "" && text != tc.wantText:
				t.Errorf("text %q, want %q", text, tc.wantText)
			case tc.wantTextPrefix != "" && (!strings.HasPrefix(text, tc.wantTextPrefix) || len(text) == len(tc.wantTextPrefix)):
				t.Errorf("text %q, want %q and more", text, tc.wantTextPrefix)
			}
		})
	}

	// min_tokens changes nothing when the model would not stop anyway:
	// greedy output equals the plain request's.
	plain := choices(s.completion(t, "/v1/completions", `{`+model+`,"max_tokens":12}`))[0]["text"]
	same := choices(s.completion(t, "/v1/completions", `{`+model+`,"max_tokens":12,"min_tokens":1}`))[0]["text"]
	if plain != same {
		t.Errorf("min_tokens 1 changed greedy text %q to %q", plain, same)
	}

	// echo streams the prompt first; n_probs asks for top logprobs.
	docs := s.stream(t, "/v1/completions", `{`+model+`,"max_tokens":3,"echo":true,"stream":true}`)
	if first := docs[0]["choices"].([]any)[0].(map[string]any)["text"]; first != "Hello there" {
		t.Errorf("first streamed text %q, want the prompt", first)
	}
	lp := choices(s.completion(t, "/v1/completions", `{`+model+`,"max_tokens":2,"n_probs":3}`))[0]["logprobs"].(map[string]any)
	if top := lp["top_logprobs"].([]any); len(top) != 2 || len(top[0].(map[string]any)) != 3 {
		t.Errorf("n_probs 3: top_logprobs %v", top)
	}

	for _, tc := range []struct{ name, body, param string }{
		{"a logit bias outside the vocabulary", fmt.Sprintf(`{%s,"logit_bias":{"%d":1}}`, model, tk.VocabSize()), "logit_bias"},
		{"a stop token id outside the vocabulary", fmt.Sprintf(`{%s,"stop_token_ids":[%d]}`, model, tk.VocabSize()), "stop_token_ids"},
		{"min_tokens above max_tokens", `{` + model + `,"max_tokens":2,"min_tokens":5}`, "min_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, "POST", "/v1/completions", tc.body)
			if e := errorOf(doc); status != 400 || e == nil || e["param"] != tc.param {
				t.Errorf("status %d %v, want 400 naming %s", status, doc, tc.param)
			}
		})
	}
}

// --strict-fields (Config.StrictFields) rejects a field the server does
// not know, naming it; by default it is ignored.
func TestStrictFields(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{StrictFields: true}, 1)
	status, doc := s.call(t, "POST", "/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":1,"temprature":0}`)
	if e := errorOf(doc); status != 400 || e == nil || e["param"] != "temprature" {
		t.Errorf("status %d %v, want 400 naming temprature", status, doc)
	}
	s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":1,"ignore_eos":true,"cache_prompt":false}`)
}

// add_generation_prompt, continue_final_message and chat_template_kwargs
// shape the prompt the model sees (counted in usage.prompt_tokens).
func TestChatPromptFields(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	tk := s.inst.Tokenizer
	// Qwen3's own template: enable_thinking false writes an empty think block.
	src, err := os.ReadFile(filepath.Join("..", "runtime", "tok", "testdata", "chat", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := tok.NewChatTemplate(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: tk, Chat: ct, Created: time.Unix(1, 0)})
	user := `{"role":"user","content":"hi"}`
	for _, tc := range []struct{ name, extra, want string }{
		{"the generation prompt by default", `"messages":[` + user + `]`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{"add_generation_prompt false", `"messages":[` + user + `],"add_generation_prompt":false`,
			"<|im_start|>user\nhi<|im_end|>\n"},
		{"enable_thinking false through chat_template_kwargs", `"messages":[` + user + `],"chat_template_kwargs":{"enable_thinking":false}`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
		{"continue_final_message leaves the assistant turn open", `"messages":[` + user + `,{"role":"assistant","content":"Once upon"}],"continue_final_message":true,"add_generation_prompt":false`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nOnce upon"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := s.completion(t, "/v1/chat/completions", `{"model":"tiny-qwen3-f32","max_tokens":1,`+tc.extra+`}`)
			got, _ := usageOf(doc)
			if want := len(tk.EncodeChat(tc.want)); got != want {
				t.Errorf("prompt_tokens %d, want %d (%q)", got, want, tc.want)
			}
		})
	}
}

// Tools, assistant tool calls and tool results reach the model's template:
// the prompt the engine sees is the template's rendering of them.
func TestToolsReachTheTemplate(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	tk := s.inst.Tokenizer
	src, err := os.ReadFile(filepath.Join("..", "runtime", "tok", "testdata", "chat", "qwen3.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := tok.NewChatTemplate(string(src), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: tk, Chat: ct, Created: time.Unix(1, 0)})
	tools := `[{"type":"function","function":{"name":"get_weather","description":"Weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	msgs := `[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"22C"}]`
	want, err := ct.Render([]tok.Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Extra: map[string]json.RawMessage{"tool_calls": json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":{"city":"Paris"}}}]`)}},
		{Role: "tool", Content: "22C", Extra: map[string]json.RawMessage{"tool_call_id": json.RawMessage(`"call_1"`)}},
	}, tok.RenderOptions{AddGenerationPrompt: true, Vars: map[string]json.RawMessage{"tools": json.RawMessage(tools)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, `<tools>`+"\n"+`{"type": "function", "function": {"name": "get_weather"`) || !strings.Contains(want, "<tool_response>\n22C\n</tool_response>") ||
		!strings.Contains(want, `{"name": "get_weather", "arguments": {"city": "Paris"}}`) {
		t.Fatalf("the template did not render the tools, the call and the result:\n%s", want)
	}
	for _, choice := range []string{`"auto"`, `"none"`} {
		doc := s.completion(t, "/v1/chat/completions", `{"model":"tiny-qwen3-f32","max_tokens":4,"temperature":0,"tools":`+tools+`,"tool_choice":`+choice+`,"messages":`+msgs+`}`)
		if got, _ := usageOf(doc); got != len(tk.EncodeChat(want)) {
			t.Errorf("tool_choice %s: prompt_tokens %d, want %d", choice, got, len(tk.EncodeChat(want)))
		}
	}
}
