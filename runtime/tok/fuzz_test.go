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
	for _, name := range []string{"qwen3", "llama3"} {
		if dir, ok := findHFPackage(name); ok {
			tk, err := FromHF(dir)
			if err != nil {
				f.Fatal(err)
			}
			toks["hf-"+name] = tk
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

func FuzzParseHF(f *testing.F) {
	withTemplate := hfJSON(f, hfTestMerges, true, hfTestAdded, func(d map[string]any) {
		d["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{
			map[string]any{"type": "ByteLevel"},
			map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<|endoftext|>"}},
				map[string]any{"Sequence": map[string]any{"id": "A"}},
				map[string]any{"SpecialToken": map[string]any{"id": "<|im_start|>"}},
			}},
		}}
	})
	for _, c := range []struct{ tok, cfg, model []byte }{
		{hfJSON(f, hfTestMerges, false, hfTestAdded, nil), nil, nil},
		{hfJSON(f, hfTestMerges, true, hfTestAdded, nil), []byte(`{"bos_token": "<|endoftext|>", "add_bos_token": true}`), []byte(`{"vocab_size": 300}`)},
		{withTemplate, []byte(`{"eos_token": {"content": "<|im_start|>"}, "chat_template": [{"name": "default", "template": "x"}]}`), []byte(`{"bos_token_id": 264, "eos_token_id": [1, 2]}`)},
		{[]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 5}, "merges": [["a", "b"]]}, "pre_tokenizer": {"type": "ByteLevel"}}`), nil, nil},
		{[]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": null}, "added_tokens": [{"id": 0, "content": "a"}], "pre_tokenizer": {"type": "ByteLevel"}}`), []byte(`{}`), []byte(`{}`)},
	} {
		f.Add(c.tok, c.cfg, c.model, "the cat <think> <|im_start|> 123 ")
	}
	f.Fuzz(func(t *testing.T, tokJSON, cfg, model []byte, text string) {
		tk, err := ParseHF(HFFiles{Tokenizer: tokJSON, TokenizerName: "tokenizer.json",
			Config: cfg, ConfigName: "tokenizer_config.json", Model: model, ModelName: "config.json"})
		if err != nil {
			if !strings.Contains(err.Error(), ".json") {
				t.Fatalf("error %q names no file", err)
			}
			return
		}
		for _, special := range []bool{false, true} {
			for _, id := range tk.Encode(text, special, special) {
				if id < 0 || int(id) >= tk.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside the vocabulary of %d", text, id, tk.VocabSize())
				}
			}
		}
	})
}
