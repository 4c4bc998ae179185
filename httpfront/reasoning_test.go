package httpfront

import (
	"testing"
)

func TestReasoningSplit(t *testing.T) {
	for _, tc := range []struct {
		name               string
		mode               Reasoning
		text               string
		reasoning, content string
	}{
		{"a think block, then the answer", ReasoningTagged, "<think>\nLet me see.\n</think>\n\nHello!", "Let me see.", "Hello!"},
		{"an empty think block (enable_thinking false)", ReasoningTagged, "<think>\n\n</think>\n\nHi", "", "Hi"},
		{"no think block is all content", ReasoningTagged, "Hello <think> there", "", "Hello <think> there"},
		{"whitespace before the block", ReasoningTagged, "\n<think>a</think>b", "a", "b"},
		{"a reply cut inside the block is all reasoning", ReasoningTagged, "<think>\nstep 1\nstep", "step 1\nstep", ""},
		{"a reply that is only a partial tag is content", ReasoningTagged, "<thi", "", "<thi"},
		{"a prompt that opened the block", ReasoningOpen, "\nhmm\n</think>\n\nOK", "hmm", "OK"},
		{"markup-like text inside reasoning stays", ReasoningOpen, "a </thin b</think>c", "a </thin b", "c"},
		{"a second think block is content", ReasoningTagged, "<think>x</think>y<think>z</think>", "x", "y<think>z</think>"},
		{"newlines inside the reasoning stay", ReasoningTagged, "<think>a\n\nb\n</think>c\n", "a\n\nb", "c\n"},
		{"off leaves the markup", ReasoningOff, "<think>x</think>y", "", "<think>x</think>y"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, c := splitReasoning(tc.mode, tc.text)
			if r != tc.reasoning || c != tc.content {
				t.Fatalf("whole: reasoning %q content %q, want %q %q", r, c, tc.reasoning, tc.content)
			}
			if tc.mode == ReasoningOff {
				return
			}
			// Streamed in any two pieces, and byte by byte, the result is the same.
			chunkings := [][]string{}
			for i := 0; i <= len(tc.text); i++ {
				chunkings = append(chunkings, []string{tc.text[:i], tc.text[i:]})
			}
			var bytes []string
			for i := range len(tc.text) {
				bytes = append(bytes, tc.text[i:i+1])
			}
			chunkings = append(chunkings, bytes)
			for _, pieces := range chunkings {
				s := newReasoningSplitter(tc.mode)
				var r, c string
				for _, p := range pieces {
					pr, pc := s.push(p)
					r, c = r+pr, c+pc
				}
				fr, fc := s.flush()
				r, c = r+fr, c+fc
				if r != tc.reasoning || c != tc.content {
					t.Fatalf("pieces %q: reasoning %q content %q, want %q %q", pieces, r, c, tc.reasoning, tc.content)
				}
			}
		})
	}
}

func TestReasoningOf(t *testing.T) {
	const thinking = "{{ '<think>' }}{{ '</think>' }}"
	for _, tc := range []struct {
		template, prompt string
		want             Reasoning
	}{
		{"{{ messages }}", "<|im_start|>assistant\n", ReasoningOff},
		{thinking, "<|im_start|>assistant\n", ReasoningTagged},
		{thinking, "<|im_start|>assistant\n<think>\n\n</think>\n\n", ReasoningTagged},
		{thinking, "<|im_start|>assistant\n<think>\n", ReasoningOpen},
	} {
		if got := reasoningOf(tc.template, tc.prompt); got != tc.want {
			t.Errorf("reasoningOf(%q, %q) = %d, want %d", tc.template, tc.prompt, got, tc.want)
		}
	}
}
