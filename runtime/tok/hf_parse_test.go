package tok

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hfJSON builds a small byte-level tokenizer.json: the 256 byte characters,
// one token per merge result, then added tokens; merges in the "a b" string
// form, or as [a, b] pairs when pairs is set. edit may change the document
// before it is encoded.
func hfJSON(t testing.TB, merges []string, pairs bool, added []hfAddedToken, edit func(map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for i, s := range byteLevelVocab() {
		vocab[s] = i
	}
	var ms []any
	for _, m := range merges {
		l, r, _ := strings.Cut(m, " ")
		vocab[l+r] = len(vocab)
		if pairs {
			ms = append(ms, []string{l, r})
		} else {
			ms = append(ms, m)
		}
	}
	var at []any
	for _, a := range added {
		at = append(at, map[string]any{"id": a.ID, "content": a.Content, "special": a.Special})
	}
	doc := map[string]any{
		"added_tokens": at,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regexQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": ms},
	}
	if edit != nil {
		edit(doc)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var hfTestMerges = []string{"Ġ t", "h e", "Ġt he", "i n", "Ġ a", "a n", "Ġ Ġ", "1 2"}

// hfTestAdded are added tokens after the 256 + len(hfTestMerges) ids.
var hfTestAdded = []hfAddedToken{
	{ID: 264, Content: "<|endoftext|>", Special: true},
	{ID: 265, Content: "<|im_start|>"},    // not marked special, but looks special: control
	{ID: 266, Content: "<think>"},         // user-defined: split out even without parseSpecial
	{ID: 267, Content: "\u2581sp\u2581x"}, // user-defined: U+2581 becomes a space
}

func parseTestHF(t testing.TB, tokJSON []byte, cfg, model string) (*Tokenizer, error) {
	t.Helper()
	f := HFFiles{Tokenizer: tokJSON, TokenizerName: "dir/tokenizer.json",
		ConfigName: "dir/tokenizer_config.json", ModelName: "dir/config.json"}
	if cfg != "" {
		f.Config = []byte(cfg)
	}
	if model != "" {
		f.Model = []byte(model)
	}
	return ParseHF(f)
}

func TestParseHFMergeForms(t *testing.T) {
	texts := []string{"the cat in the hat", " the  an 12 123", "<think>x</think>", "<|im_start|>hi<|endoftext|>", " sp x"}
	var results [2][][]int32
	for i, pairs := range []bool{false, true} {
		tk, err := parseTestHF(t, hfJSON(t, hfTestMerges, pairs, hfTestAdded, nil), "", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range texts {
			results[i] = append(results[i], tk.Encode(s, true, true))
		}
	}
	if diff := cmp.Diff(results[0], results[1]); diff != "" {
		t.Errorf("string and pair merges tokenize differently (-strings +pairs):\n%s", diff)
	}
	tk, err := parseTestHF(t, hfJSON(t, hfTestMerges, false, hfTestAdded, nil), "", "")
	if err != nil {
		t.Fatal(err)
	}
	// "Ġt he" is merge 2 (id 258): " the" is one token; "<think>" is split
	// out as user-defined; "<|im_start|>" is parsed as a control token only
	// with parseSpecial.
	for _, c := range []struct {
		text         string
		parseSpecial bool
		want         []int32
	}{
		{" the", false, []int32{258}},
		{"<think>", false, []int32{266}},
		{" sp x", false, []int32{267}},
		{"<|im_start|>", true, []int32{265}},
		{"in an", false, []int32{259, 260, 'n'}},
	} {
		if diff := cmp.Diff(c.want, tk.Encode(c.text, false, c.parseSpecial)); diff != "" {
			t.Errorf("Encode(%q, parseSpecial=%v) mismatch (-want +got):\n%s", c.text, c.parseSpecial, diff)
		}
	}
	if got := tk.Encode("<|im_start|>", false, false); len(got) == 1 {
		t.Errorf("Encode(<|im_start|>) without parseSpecial = %v, want it tokenized as text", got)
	}
}

func TestParseHFSpecialTokens(t *testing.T) {
	tokJSON := hfJSON(t, hfTestMerges, false, hfTestAdded, nil)
	withTemplate := hfJSON(t, hfTestMerges, false, hfTestAdded, func(d map[string]any) {
		d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
			map[string]any{"SpecialToken": map[string]any{"id": "<|endoftext|>", "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
		}}
	})
	type ids struct {
		N              int
		BOS, EOS       int32
		AddBOS         bool
		Hi             []int32
		TemplateLoaded bool
	}
	for _, c := range []struct {
		name       string
		tok        []byte
		cfg, model string
		want       ids
	}{
		{"without config files there are no special ids", tokJSON, "", "",
			ids{268, -1, -1, false, []int32{'h', 'i'}, false}},
		{"tokenizer_config names BOS and EOS among added tokens and asks for BOS", tokJSON,
			`{"bos_token": "<|endoftext|>", "eos_token": {"content": "<|im_start|>"}, "add_bos_token": true, "chat_template": "{{ messages }}"}`, "",
			ids{268, 264, 265, true, []int32{264, 'h', 'i'}, true}},
		{"config.json gives ids and pads the vocabulary", tokJSON, "",
			`{"vocab_size": 300, "bos_token_id": 264, "eos_token_id": [264, 265]}`,
			ids{300, 264, -1, false, []int32{'h', 'i'}, false}},
		{"a TemplateProcessing post-processor adds its first special token", withTemplate, "", "",
			ids{268, 264, -1, true, []int32{264, 'h', 'i'}, false}},
		{"add_bos_token false overrides the post-processor", withTemplate, `{"add_bos_token": false}`, "",
			ids{268, 264, -1, false, []int32{'h', 'i'}, false}},
		{"a list of named chat templates gives the default one", tokJSON,
			`{"chat_template": [{"name": "tool_use", "template": "t"}, {"name": "default", "template": "{{ messages }}"}]}`, "",
			ids{268, -1, -1, false, []int32{'h', 'i'}, true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := parseTestHF(t, c.tok, c.cfg, c.model)
			if err != nil {
				t.Fatal(err)
			}
			got := ids{tk.VocabSize(), tk.BOS(), tk.EOS(), tk.AddBOS(), tk.Encode("hi", true, true),
				tk.ChatTemplateSource() == "{{ messages }}"}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHFPreTokenizers(t *testing.T) {
	split := func(regex string) map[string]any {
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}}
	}
	for _, c := range []struct {
		name         string
		pre          map[string]any
		ignoreMerges bool
		want         pre
		wantIgnore   bool
		wantBOS      bool
	}{
		{"the Qwen2 regex is qwen2", split(regexQwen2), false, preQwen2, false, false},
		{"the Llama 3 regex with ignore_merges is llama-bpe", split(regexLlama3), true, preLlama3, true, true},
		{"the Llama 3 regex without ignore_merges is smaug-bpe", split(regexLlama3), false, preLlama3, false, false},
		{"a lone ByteLevel with its regex is gpt-2", map[string]any{"type": "ByteLevel", "add_prefix_space": false}, false, preGPT2, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := hfJSON(t, hfTestMerges, false, hfTestAdded, func(d map[string]any) {
				d["pre_tokenizer"] = c.pre
				d["model"].(map[string]any)["ignore_merges"] = c.ignoreMerges
			})
			cfg := ""
			if c.wantBOS {
				cfg = `{"bos_token": "<|endoftext|>"}`
			}
			tk, err := parseTestHF(t, doc, cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			if tk.pre != c.want || tk.ignoreMerges != c.wantIgnore || tk.AddBOS() != c.wantBOS {
				t.Errorf("pre %d, ignoreMerges %v, AddBOS %v; want %d, %v, %v", tk.pre, tk.ignoreMerges, tk.AddBOS(), c.want, c.wantIgnore, c.wantBOS)
			}
		})
	}
}

// TestParseHFErrors checks that malformed files give an error naming the
// file and the key, and unsupported ones wrap ErrUnsupported.
func TestParseHFErrors(t *testing.T) {
	edit := func(f func(d, model map[string]any)) []byte {
		return hfJSON(t, hfTestMerges, false, hfTestAdded, func(d map[string]any) { f(d, d["model"].(map[string]any)) })
	}
	vocab := func(m map[string]any) map[string]int { return m["vocab"].(map[string]int) }
	for _, c := range []struct {
		name        string
		tok         []byte
		cfg, model  string
		want        []string
		unsupported bool
	}{
		{"text that is not JSON", []byte("not json"), "", "", []string{"dir/tokenizer.json", "invalid character"}, false},
		{"a truncated file", hfJSON(t, hfTestMerges, false, hfTestAdded, nil)[:500], "", "", []string{"dir/tokenizer.json", "unexpected end"}, false},
		{"no model", edit(func(d, m map[string]any) { delete(d, "model") }), "", "", []string{"dir/tokenizer.json", "model: missing"}, false},
		{"a Unigram model", edit(func(d, m map[string]any) { m["type"] = "Unigram" }), "", "", []string{"model.type", "Unigram"}, true},
		{"byte fallback BPE", edit(func(d, m map[string]any) { m["byte_fallback"] = true }), "", "", []string{"model.byte_fallback"}, true},
		{"an empty vocabulary", edit(func(d, m map[string]any) { m["vocab"] = map[string]int{} }), "", "", []string{"model.vocab", "empty"}, false},
		{"a string id", edit(func(d, m map[string]any) { m["vocab"] = map[string]any{"a": "1"} }), "", "", []string{"dir/tokenizer.json", "model.vocab"}, false},
		{"a negative id", edit(func(d, m map[string]any) { vocab(m)["zz"] = -3 }), "", "", []string{"model.vocab", `"zz"`, "-3"}, false},
		{"two tokens with one id", edit(func(d, m map[string]any) { vocab(m)["zz"] = 7 }), "", "", []string{"model.vocab", "share id 7"}, false},
		{"ids far beyond the tokens", edit(func(d, m map[string]any) { vocab(m)["zz"] = 1 << 30 }), "", "", []string{"model.vocab", "ids for only"}, false},
		{"an added token whose id differs from the vocabulary's", edit(func(d, m map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 300, "content": "a"}}
		}), "", "", []string{"added_tokens[0]", `"a"`, "id 97"}, false},
		{"an added token without content", edit(func(d, m map[string]any) {
			d["added_tokens"] = []any{map[string]any{"id": 300}}
		}), "", "", []string{"added_tokens[0]", "empty content"}, false},
		{"merges that are numbers", edit(func(d, m map[string]any) { m["merges"] = []any{1, 2} }), "", "", []string{"model.merges"}, false},
		{"a merge pair of three", edit(func(d, m map[string]any) { m["merges"] = []any{[]string{"a", "b", "c"}} }), "", "", []string{"model.merges[0]", "want ']' after 2 parts, found ','"}, false},
		{"a merges object", edit(func(d, m map[string]any) { m["merges"] = map[string]any{} }), "", "", []string{"model.merges", "want a list, found an object"}, false},
		{"a merge pair of one", edit(func(d, m map[string]any) { m["merges"] = []any{[]string{"a", "b"}, []string{"a"}} }), "", "", []string{"model.merges[1]", "a second part"}, false},
		{"mixed merge forms", edit(func(d, m map[string]any) { m["merges"] = []any{"a b", []string{"a", "b"}} }), "", "", []string{"model.merges[1]", "want a string, found a list"}, false},
		{"a fractional id", edit(func(d, m map[string]any) { m["vocab"] = map[string]any{"a": 1.5} }), "", "", []string{"model.vocab", `entry "a"`, "integer"}, false},
		{"an unknown split regex", edit(func(d, m map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\w+`}
		}), "", "", []string{"pre_tokenizer", "Split regex"}, true},
		{"a Metaspace pre-tokenizer", edit(func(d, m map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }), "", "", []string{"pre_tokenizer", "Metaspace"}, true},
		{"no pre-tokenizer", edit(func(d, m map[string]any) { d["pre_tokenizer"] = nil }), "", "", []string{"pre_tokenizer", "missing"}, true},
		{"add_bos_token without a BOS token", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), `{"add_bos_token": true}`, "",
			[]string{"dir/tokenizer.json", "bos_token", "BOS is added"}, false},
		{"a malformed tokenizer_config.json", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), "{", "", []string{"dir/tokenizer_config.json"}, false},
		{"a numeric bos_token", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), `{"bos_token": 5}`, "", []string{"dir/tokenizer_config.json", "bos_token"}, false},
		{"a numeric chat_template", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), `{"chat_template": 5}`, "", []string{"dir/tokenizer_config.json", "chat_template"}, false},
		{"a malformed config.json", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), "", "[", []string{"dir/config.json"}, false},
		{"a vocab_size below the ids", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), "", `{"vocab_size": 10}`, []string{"dir/config.json", "vocab_size", "smaller"}, false},
		{"a string vocab_size", hfJSON(t, hfTestMerges, false, hfTestAdded, nil), "", `{"vocab_size": "big"}`, []string{"dir/config.json", "vocab_size"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseTestHF(t, c.tok, c.cfg, c.model)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if got := errors.Is(err, ErrUnsupported); got != c.unsupported {
				t.Errorf("errors.Is(%q, ErrUnsupported) = %v, want %v", err, got, c.unsupported)
			}
		})
	}
}
