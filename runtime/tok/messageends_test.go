package tok

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// MessageEnds and TokenOffsets find where each message of a rendered chat
// ends, in bytes and in tokens: the tokens up to each offset are what
// encoding that many messages alone gives. A template that renders an
// earlier turn differently once a later user message follows (Qwen3
// drops the reasoning of earlier assistant turns) gives no offset for it.
func TestMessageEndsAreTokenPrefixes(t *testing.T) {
	tk := sharedModel(t, "tiny-qwen3-f32.gguf")
	chatml := "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
	msgs := []Message{
		{Role: "system", Content: "You are a careful assistant."},
		{Role: "user", Content: "What is two plus two?"},
		{Role: "assistant", Content: "<think>\nsmall sums\n</think>\n\nFour."},
		{Role: "user", Content: "And three plus three?"},
	}
	now := time.Date(2025, 3, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, src string
		want      []int // messages whose end is found, by index
	}{
		{"ChatML", chatml, []int{0, 1, 2, 3}},
		{"Qwen3 drops earlier reasoning", readTemplate(t, "qwen3.jinja"), []int{0, 1, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ct, err := NewChatTemplate(tc.src, "", "<|im_end|>")
			if err != nil {
				t.Fatal(err)
			}
			o := RenderOptions{AddGenerationPrompt: true, Now: now}
			text, err := ct.Render(msgs, o)
			if err != nil {
				t.Fatal(err)
			}
			ids := tk.EncodeChat(text)
			ends := ct.MessageEnds(msgs, text, o)
			offsets := tk.TokenOffsets(ids, text, ends)
			var want []int
			for _, i := range tc.want {
				prefix, err := ct.Render(msgs[:i+1], RenderOptions{Now: now})
				if err != nil {
					t.Fatal(err)
				}
				p := tk.EncodeChat(prefix)
				if !slices.Equal(p, ids[:len(p)]) {
					t.Fatalf("message %d: its tokens are not a prefix of the prompt's", i)
				}
				want = append(want, len(p))
			}
			if diff := cmp.Diff(want, offsets); diff != "" {
				t.Errorf("token offsets of message ends %v (-want +got):\n%s", ends, diff)
			}
		})
	}
}
