package tok

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// words splits s with pre-tokenizer p and returns the words as strings.
func words(p pre, s string) []string {
	cps := decodeCodepoints(s, nil)
	cls := make([]class, len(cps))
	for i, c := range cps {
		cls[i] = classOf(c)
	}
	var out []string
	p.split(cps, cls, func(a, b int) { out = append(out, string(cps[a:b])) })
	return out
}

func TestPreTokenizerSplitsLikeTheRegex(t *testing.T) {
	tests := []struct {
		name string
		pre  pre
		in   string
		want []string
	}{
		{"qwen2 words keep their leading space", preQwen2, "Hello world", []string{"Hello", " world"}},
		{"qwen2 leaves one space for the next word", preQwen2, "a   b", []string{"a", "  ", " b"}},
		{"qwen2 two spaces before a word", preQwen2, "  hello", []string{" ", " hello"}},
		{"qwen2 trailing spaces stay together", preQwen2, "trailing   ", []string{"trailing", "   "}},
		{"qwen2 only spaces", preQwen2, "   ", []string{"   "}},
		{"qwen2 newlines are their own word", preQwen2, "x\n\ny", []string{"x", "\n\n", "y"}},
		{"qwen2 spaces up to the last newline", preQwen2, "x \n y", []string{"x", " \n", " y"}},
		{"qwen2 newline then indentation", preQwen2, "\n   x", []string{"\n", "  ", " x"}},
		{"qwen2 carriage return and newline", preQwen2, "x\r\n", []string{"x", "\r\n"}},
		{"qwen2 digits one by one", preQwen2, "123456", []string{"1", "2", "3", "4", "5", "6"}},
		{"llama3 digits in threes", preLlama3, "1234567", []string{"123", "456", "7"}},
		{"qwen2 decimal", preQwen2, "3.14", []string{"3", ".", "1", "4"}},
		{"qwen2 punctuation run", preQwen2, "hello!!! world", []string{"hello", "!!!", " world"}},
		{"qwen2 punctuation takes following newlines", preQwen2, "end.\n\nNext", []string{"end", ".\n\n", "Next"}},
		{"qwen2 punctuation after space then newline", preQwen2, "x.\n  y", []string{"x", ".\n", " ", " y"}},
		{"qwen2 a symbol prefixes a word", preQwen2, "(a+b)", []string{"(a", "+b", ")"}},
		{"qwen2 contractions any case", preQwen2, "it's I'M we'Ll", []string{"it", "'s", " I", "'M", " we", "'Ll"}},
		{"qwen2 apostrophe before a word", preQwen2, "'hello", []string{"'hello"}},
		{"qwen2 lone apostrophe", preQwen2, "' x", []string{"'", " x"}},
		{"qwen2 cyrillic", preQwen2, "Привет мир", []string{"Привет", " мир"}},
		{"qwen2 accented letters", preQwen2, "naïve café", []string{"naïve", " café"}},
		{"qwen2 han", preQwen2, "你好世界", []string{"你好世界"}},
		{"qwen2 emoji are punctuation-like", preQwen2, "🙂🙂 ok 🙂", []string{"🙂🙂", " ok", " 🙂"}},
		{"qwen2 tab prefixes a word", preQwen2, "a\tb", []string{"a", "\tb"}},
		{"qwen2 no-break space prefixes a word", preQwen2, "\u00a0x", []string{"\u00a0x"}},
		{"qwen2 em dash between spaces", preQwen2, "a — b", []string{"a", " —", " b"}},
		{"qwen2 unicode digits", preQwen2, "٣٤", []string{"٣", "٤"}},
		{"qwen2 code", preQwen2, "    return a + b\n",
			[]string{"   ", " return", " a", " +", " b", "\n"}},
		{"qwen2 invalid utf-8 is a symbol", preQwen2, "a\xffb", []string{"a", "\ufffdb"}},
		{"gpt2 words", preGPT2, "Hello  world", []string{"Hello", " ", " world"}},
		{"gpt2 contractions lower case only", preGPT2, "it's IT'S", []string{"it", "'s", " IT", "'", "S"}},
		{"gpt2 digit runs", preGPT2, "123456 abc", []string{"123456", " abc"}},
		{"gpt2 tab is a word", preGPT2, "a\tb", []string{"a", "\t", "b"}},
		{"gpt2 punctuation with space", preGPT2, "hi !!", []string{"hi", " !!"}},
		{"gpt2 trailing whitespace", preGPT2, "x \n", []string{"x", " \n"}},
		{"gpt2 newline before word", preGPT2, "x\n\ny", []string{"x", "\n", "\n", "y"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, words(tc.pre, tc.in)); diff != "" {
				t.Errorf("split(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestDecodeCodepointsFollowsLlamaCpp(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []rune
	}{
		{"ascii", "ab", []rune{'a', 'b'}},
		{"two, three and four bytes", "é你🙂", []rune{'é', '你', '🙂'}},
		{"stray continuation byte", "\x80a", []rune{0xFFFD, 'a'}},
		{"truncated sequence", "\xe4\xbd", []rune{0xFFFD, 0xFFFD}},
		{"overlong form is accepted", "\xc0\x80", []rune{0}},
		{"surrogate is accepted", "\xed\xa0\x80", []rune{0xD800}},
		{"beyond U+10FFFF", "\xf7\xbf\xbf\xbf", []rune{0xFFFD}},
		{"invalid lead byte", "\xff", []rune{0xFFFD}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decodeCodepoints(tc.in, nil)); diff != "" {
				t.Errorf("decodeCodepoints(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
