package tok

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// fuzzTokenizers returns small synthetic tokenizers of both kinds plus the
// shared models when they are present.
func fuzzTokenizers(f *testing.F) map[string]*Tokenizer {
	llama3 := bpeMeta("llama-bpe", []string{"Ġ t", "h e", "Ġt he", "1 2", "12 3"}, "<|begin_of_text|>")
	llama3["tokenizer.ggml.bos_token_id"] = weights.U32(256 + 5)
	toks := map[string]*Tokenizer{
		"synthetic-bpe": bpeMeta("qwen2", []string{"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "a n", "Ġ Ġ", "ĠĠ ĠĠ", "Ċ Ċ"},
			"<|im_start|>", "<|im_end|>").mustBuild(f),
		"synthetic-llama3": llama3.mustBuild(f),
		"synthetic-gpt2":   bpeMeta("gpt-2", []string{"Ġ t", "h e", "Ġt he", "' s"}, "<|endoftext|>").mustBuild(f),
		"synthetic-spm": spmMeta([]string{"▁", "t", "h", "e", "▁t", "he", "▁the", "▁▁"},
			[]float32{-1, -2, -2, -2, -3, -3, -4, -5}).mustBuild(f),
	}
	if shared, ok := findShared(); ok {
		for _, m := range []string{"stories260K.gguf", "llama-2-tiny-random.gguf", "tiny-qwen3-f32.gguf"} {
			path := filepath.Join(shared, "models", m)
			if _, err := os.Stat(path); err == nil {
				toks[m] = loadModel(f, path)
			}
		}
	}
	return toks
}

func FuzzEncode(f *testing.F) {
	toks := fuzzTokenizers(f)
	for _, s := range append(roundTripTexts,
		"<|im_start|>user\nhi<|im_end|>\n", "<s>x</s>", "<unk>", "<0x41>", "\xff\xfe", "\xe4\xbd", "\xed\xa0\x80",
		"a  b   c    ", "\r\n\r\n", "'s'S'll", "▁▁x", "🙂🙂🙂", "123456789") {
		f.Add(s, true, true)
		f.Add(s, false, false)
	}
	f.Fuzz(func(t *testing.T, s string, addSpecial, parseSpecial bool) {
		for name, tk := range toks {
			ids := tk.Encode(s, addSpecial, parseSpecial)
			for _, id := range ids {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("%s: Encode(%q) gave id %d outside the vocabulary", name, s, id)
				}
			}
			d := tk.NewDecoder()
			var streamed strings.Builder
			for _, id := range ids {
				part := d.Add(id)
				if !utf8.ValidString(part) {
					t.Fatalf("%s: Decoder.Add returned invalid UTF-8 %q", name, part)
				}
				streamed.WriteString(part)
			}
			streamed.WriteString(d.Flush())
			whole := tk.Decode(ids)
			if want := strings.ToValidUTF8(whole, "\uFFFD"); utf8.ValidString(whole) && streamed.String() != want {
				t.Fatalf("%s: streamed %q, Decode %q", name, streamed.String(), whole)
			}
			if !utf8.ValidString(s) {
				continue
			}
			plain := tk.Decode(tk.Encode(s, false, parseSpecial))
			switch {
			case tk.kind == kindBPE:
				if plain != s {
					t.Fatalf("%s: Decode(Encode(%q, parseSpecial=%v)) = %q", name, s, parseSpecial, plain)
				}
			case !parseSpecial && s != "" && !strings.Contains(s, "\u2581"):
				if want := " " + s; plain != want {
					t.Fatalf("%s: Decode(Encode(%q)) = %q, want %q", name, s, plain, want)
				}
			}
		}
	})
}
