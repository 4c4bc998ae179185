package tok

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func readTemplate(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "chat", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestChatTemplatesRender(t *testing.T) {
	chatml := "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	sys := Message{Role: "system", Content: "You are brief."}
	user := Message{Role: "user", Content: "Hi there"}
	asst := Message{Role: "assistant", Content: "<think>\nhm\n</think>\n\nHello!"}
	now := time.Date(2025, 3, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, src, bos, eos string
		msgs                []Message
		gen                 bool
		want                string
	}{
		{
			name: "ChatML as in the tiny models", src: chatml, msgs: []Message{sys, user}, gen: true,
			want: "<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "ChatML without a generation prompt", src: chatml, msgs: []Message{user},
			want: "<|im_start|>user\nHi there<|im_end|>\n",
		},
		{
			name: "Qwen3 with a system message", src: readTemplate(t, "qwen3.jinja"), eos: "<|im_end|>",
			msgs: []Message{sys, user}, gen: true,
			want: "<|im_start|>system\nYou are brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "Qwen3 drops earlier reasoning from history", src: readTemplate(t, "qwen3.jinja"),
			msgs: []Message{user, asst, {Role: "user", Content: "Again"}}, gen: true,
			want: "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n" +
				"<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n",
		},
		{
			name: "Llama 3 writes BOS, the date and headers", src: readTemplate(t, "llama3.jinja"),
			bos: "<|begin_of_text|>", eos: "<|eot_id|>", msgs: []Message{sys, user}, gen: true,
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
				"Cutting Knowledge Date: December 2023\nToday Date: 07 Mar 2025\n\nYou are brief.<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>" +
				"<|start_header_id|>assistant<|end_header_id|>\n\n",
		},
		{
			name: "Llama 3 without a system message", src: readTemplate(t, "llama3.jinja"),
			bos: "<|begin_of_text|>", msgs: []Message{user},
			want: "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n" +
				"Cutting Knowledge Date: December 2023\nToday Date: 07 Mar 2025\n\n<|eot_id|>" +
				"<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>",
		},
		{
			name: "the plain template", src: PlainTemplate, msgs: []Message{sys, user}, gen: true,
			want: "system: You are brief.\nuser: Hi there\nassistant:",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := NewChatTemplate(tc.src, tc.bos, tc.eos)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ct.Render(tc.msgs, RenderOptions{AddGenerationPrompt: tc.gen, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Render (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChatTemplateErrorsWrapErrTemplate(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"unclosed block", "{% for m in messages %}"},
		{"raise_exception", "{{ raise_exception('roles must alternate') }}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := NewChatTemplate(tc.src, "", "")
			if err == nil {
				_, err = ct.Render([]Message{{Role: "user", Content: "x"}}, RenderOptions{})
			}
			if !errors.Is(err, ErrTemplate) {
				t.Errorf("error %v does not wrap ErrTemplate", err)
			}
		})
	}
}

// The bundled models: tiny-qwen3 carries ChatML, stories260K has no template
// and gets PlainTemplate; EncodeChat adds BOS only when the text lacks it.
func TestChatTemplateFromGGUF(t *testing.T) {
	shared := sharedDir(t)
	for _, tc := range []struct {
		model   string
		plain   bool
		wantIDs func(tk *Tokenizer, text string) []int32
	}{
		{"tiny-qwen3-f32.gguf", false, func(tk *Tokenizer, text string) []int32 { return tk.Encode(text, true, true) }},
		{"stories260K.gguf", true, func(tk *Tokenizer, text string) []int32 { return tk.Encode(text, true, true) }},
	} {
		t.Run(tc.model, func(t *testing.T) {
			f, err := weights.Open(filepath.Join(shared, "models", tc.model))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tk, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			ct, err := ChatTemplateFromGGUF(f, tk)
			if err != nil {
				t.Fatal(err)
			}
			if got := ct.Source() == PlainTemplate; got != tc.plain {
				t.Errorf("plain template = %v, want %v", got, tc.plain)
			}
			text, err := ct.Render([]Message{{Role: "user", Content: "hi"}}, RenderOptions{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantIDs(tk, text), tk.EncodeChat(text)); diff != "" {
				t.Errorf("EncodeChat (-want +got):\n%s", diff)
			}
			if bos := ct.BOSText(); bos != "" {
				twice := tk.EncodeChat(bos + text)
				if diff := cmp.Diff(tk.Encode(bos+text, false, true), twice); diff != "" {
					t.Errorf("EncodeChat added a second BOS (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// Tools, tool calls, tool results and template kwargs reach a Hugging Face
// template as it expects them: tools rendered with tojson in their own
// member order, assistant tool_calls, tool messages, and enable_thinking.
func TestChatTemplateVarsAndMessageExtras(t *testing.T) {
	ct, err := NewChatTemplate(readTemplate(t, "qwen3.jinja"), "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	tool := json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`)
	call := json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]`)
	msgs := []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", Content: "", Extra: map[string]json.RawMessage{"tool_calls": call}},
		{Role: "tool", Content: "22C", Extra: map[string]json.RawMessage{"tool_call_id": json.RawMessage(`"call_1"`)}},
	}
	got, err := ct.Render(msgs, RenderOptions{AddGenerationPrompt: true,
		Vars: map[string]json.RawMessage{"tools": tool, "enable_thinking": json.RawMessage("false")}})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
		`{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}` +
		"\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" +
		"<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\nWeather in Paris?<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n22C\n</tool_response><|im_end|>\n" +
		"<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Render (-want +got):\n%s", diff)
	}
	for _, name := range ReservedVars {
		_, err := ct.Render(msgs[:1], RenderOptions{Vars: map[string]json.RawMessage{name: json.RawMessage("1")}})
		if !errors.Is(err, ErrTemplate) {
			t.Errorf("a Var named %q: error %v, want one wrapping ErrTemplate", name, err)
		}
	}
	if _, err := ct.Render(msgs[:1], RenderOptions{Vars: map[string]json.RawMessage{"x": json.RawMessage("{")}}); !errors.Is(err, ErrTemplate) {
		t.Errorf("a malformed Var: error %v, want one wrapping ErrTemplate", err)
	}
}
