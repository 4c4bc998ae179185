package httpfront_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// thinkingTemplate opens a <think> block in the generation prompt, as
// thinking-only templates do, and closes it empty when enable_thinking is
// false, as Qwen3's does.
const thinkingTemplate = "{% for message in messages %}{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{% endfor %}" +
	"{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}" +
	"{% if enable_thinking is defined and enable_thinking is false %}{{ '\\n</think>\\n\\n' }}{% endif %}{% endif %}"

// A thinking template's reply is split: reasoning_content holds the text
// of the <think> block, content the rest, streaming and not. The random
// model never closes the block, so its whole greedy reply is reasoning;
// with enable_thinking false it is all content.
func TestReasoningContent(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	tk := s.inst.Tokenizer
	ct, err := tok.NewChatTemplate(thinkingTemplate, "", "<|im_end|>")
	if err != nil {
		t.Fatal(err)
	}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: tk, Chat: ct, Created: time.Unix(1, 0)})
	prompt := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
	raw := choices(s.completion(t, "/v1/completions", fmt.Sprintf(`{"model":"tiny-qwen3-f32","prompt":%s,"max_tokens":16,"temperature":0}`, idsJSON(tk.EncodeChat(prompt)))))[0]["text"].(string)
	if strings.Contains(raw, "</think>") || strings.TrimSpace(raw) == "" {
		t.Skipf("the greedy reply %q closes the block or is blank; pick another prompt", raw)
	}
	want := strings.TrimRight(strings.TrimLeft(raw, "\n"), "\n")

	const body = `{"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"temperature":0%s}`
	msg := choices(s.completion(t, "/v1/chat/completions", fmt.Sprintf(body, "")))[0]["message"].(map[string]any)
	if msg["reasoning_content"] != want || msg["content"] != "" {
		t.Errorf("message %v, want reasoning_content %q and no content", msg, want)
	}
	var reasoning, content strings.Builder
	for _, d := range s.stream(t, "/v1/chat/completions", fmt.Sprintf(body, `,"stream":true`)) {
		for _, c := range d["choices"].([]any) {
			delta := c.(map[string]any)["delta"].(map[string]any)
			if v, ok := delta["reasoning_content"].(string); ok {
				reasoning.WriteString(v)
			}
			if v, ok := delta["content"].(string); ok {
				content.WriteString(v)
			}
		}
	}
	if reasoning.String() != want || content.String() != "" {
		t.Errorf("streamed reasoning %q content %q, want %q and none", reasoning.String(), content.String(), want)
	}

	off := choices(s.completion(t, "/v1/chat/completions", fmt.Sprintf(body, `,"chat_template_kwargs":{"enable_thinking":false}`)))[0]["message"].(map[string]any)
	if _, has := off["reasoning_content"]; has || off["content"] == "" {
		t.Errorf("enable_thinking false: message %v, want content only", off)
	}
}

func idsJSON(ids []int32) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	return "[" + strings.Join(parts, ",") + "]"
}
