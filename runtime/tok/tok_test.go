package tok

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// sharedModel loads shared/models/<name>, skipping when shared data is
// absent.
func sharedModel(t testing.TB, name string) *Tokenizer {
	t.Helper()
	return loadModel(t, filepath.Join(sharedDir(t), "models", name))
}

// spmMeta describes a small SentencePiece vocabulary: <unk>, <s>, </s>, the
// 256 byte tokens, then pieces with the given scores, then control tokens.
func spmMeta(pieces []string, scores []float32, control ...string) meta {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{typeUnknown, typeControl, typeControl}
	sc := []float32{0, 0, 0}
	const hex = "0123456789ABCDEF"
	for b := range 256 {
		tokens = append(tokens, "<0x"+string(hex[b>>4])+string(hex[b&15])+">")
		types = append(types, typeByte)
		sc = append(sc, 0)
	}
	for i, p := range pieces {
		tokens = append(tokens, p)
		types = append(types, typeNormal)
		sc = append(sc, scores[i])
	}
	for _, c := range control {
		tokens = append(tokens, c)
		types = append(types, typeControl)
		sc = append(sc, 0)
	}
	return meta{
		keyModel:  weights.Str("llama"),
		keyTokens: weights.Arr(tokens),
		keyTypes:  weights.Arr(types),
		keyScores: weights.Arr(sc),
	}
}

// textsOf maps ids to vocabulary texts for readable diffs.
func (t *Tokenizer) textsOf(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = t.texts[id]
	}
	return out
}

func TestSPMMergesHighestScoreFirstAndLeftmostOnTies(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		scores []float32
		in     string
		want   []string
	}{
		{"ties go to the leftmost pair", []string{"a", "b", "ab", "ba"}, []float32{-1, -1, -5, -5}, "aba",
			[]string{"ab", "a"}},
		{"a higher score wins over position", []string{"a", "b", "ab", "ba"}, []float32{-1, -1, -5, -4}, "aba",
			[]string{"a", "ba"}},
		{"merges continue into longer pieces", []string{"a", "b", "ab", "aba"}, []float32{-1, -1, -5, -6}, "aba",
			[]string{"aba"}},
		{"missing characters fall back to bytes", []string{"a"}, []float32{-1}, "aé",
			[]string{"a", "<0xC3>", "<0xA9>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := spmMeta(tc.pieces, tc.scores)
			m[keyAddSpacePrefix] = weights.Boolean(false)
			tk := m.mustBuild(t)
			got := tk.textsOf(tk.Encode(tc.in, false, false))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestBPEMergesLowestRankFirst(t *testing.T) {
	tests := []struct {
		name   string
		merges []string
		in     string
		want   []string
	}{
		{"rank decides between overlapping pairs", []string{"b c", "a b"}, "abc", []string{"a", "bc"}},
		{"the other order", []string{"a b", "b c"}, "abc", []string{"ab", "c"}},
		{"equal pairs merge left to right", []string{"a a"}, "aaa", []string{"aa", "a"}},
		{"merged symbols merge again", []string{"a a", "aa aa"}, "aaaa", []string{"aaaa"}},
		{"spaces are Ġ", []string{"Ġ a"}, "a a", []string{"a", "Ġa"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tk := bpeMeta("qwen2", tc.merges).mustBuild(t)
			got := tk.textsOf(tk.Encode(tc.in, false, false))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestBPEIgnoreMergesUsesWholeWordTokens(t *testing.T) {
	tokens := append(byteLevelVocab(), "ab", "cd", "abcd", "<|begin_of_text|>")
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = typeNormal
	}
	types[len(types)-1] = typeControl
	tk := meta{
		keyModel:                      weights.Str("gpt2"),
		keyPre:                        weights.Str("llama-bpe"),
		keyTokens:                     weights.Arr(tokens),
		keyTypes:                      weights.Arr(types),
		keyMerges:                     weights.Arr([]string{"a b", "c d"}),
		"tokenizer.ggml.bos_token_id": weights.U32(uint32(len(tokens) - 1)),
	}.mustBuild(t)
	if !tk.AddBOS() {
		t.Errorf("AddBOS() = false, want true for llama-bpe")
	}
	got := tk.textsOf(tk.Encode("abcd abd", true, false))
	want := []string{"<|begin_of_text|>", "abcd", "Ġ", "ab", "d"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Encode (-want +got):\n%s", diff)
	}
}

func TestSpecialTokens(t *testing.T) {
	qwen := sharedModel(t, "tiny-qwen3-f32.gguf")
	llama2 := sharedModel(t, "llama-2-tiny-random.gguf")
	tests := []struct {
		name         string
		tk           *Tokenizer
		in           string
		parseSpecial bool
		want         []int32
	}{
		{"adjacent control tokens", qwen, "<|im_start|><|im_end|>", true, []int32{2046, 2047}},
		{"control token text stays text without parseSpecial", qwen, "<|im_end|>", false,
			qwen.Encode("<|im_end|>", false, false)},
		{"a partial control token is text", qwen, "<|im_start|", true, qwen.Encode("<|im_start|", false, false)},
		{"text around control tokens", qwen, "a<|endoftext|>b", true,
			append(append(qwen.Encode("a", false, false), 2045), qwen.Encode("b", false, false)...)},
		{"spm prefixes a space after a special token", llama2, "<s>hello</s>world", true,
			append(append(append([]int32{1}, llama2.Encode("hello", false, false)...), 2),
				llama2.Encode("world", false, false)...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tk.Encode(tc.in, false, tc.parseSpecial)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q, parseSpecial=%v) (-want +got):\n%s", tc.in, tc.parseSpecial, diff)
			}
		})
	}
	for _, c := range []struct {
		tk   *Tokenizer
		text string
		id   int32
	}{{qwen, "<|im_end|>", 2047}, {llama2, "<s>", 1}} {
		got := c.tk.Encode(c.text, false, false)
		if slices.Contains(got, c.id) || len(got) < 2 {
			t.Errorf("Encode(%q, parseSpecial=false) = %v, want ordinary tokens", c.text, got)
		}
	}
}

func TestPhi3StripsSpacesAfterSpecialTokens(t *testing.T) {
	m := spmMeta([]string{"▁a", "▁b", "a", "b", "▁"}, []float32{-1, -1, -2, -2, -3}, "<|end|>")
	plain := m.mustBuild(t)
	m[keyName] = weights.Str("Phi-3-mini")
	phi := m.mustBuild(t)
	if got, want := plain.textsOf(plain.Encode("a<|end|> b", false, true)), []string{"▁a", "<|end|>", "▁", "▁b"}; !cmp.Equal(want, got) {
		t.Errorf("without strip: %q, want %q", got, want)
	}
	if got, want := phi.textsOf(phi.Encode("a<|end|> b", false, true)), []string{"▁a", "<|end|>", "▁b"}; !cmp.Equal(want, got) {
		t.Errorf("phi-3: %q, want %q", got, want)
	}
	if end := int32(phi.VocabSize() - 1); !phi.IsEOG(end) {
		t.Errorf("IsEOG(<|end|>) = false, want true")
	}
}

func TestSpecialIDsAndFlags(t *testing.T) {
	shared := sharedDir(t)
	tests := []struct {
		model            string
		bos, eos         int32
		addBOS           bool
		eog, notEOG      []int32
		vocab            int
		pieceID          int32
		piece            string
		controlPieceID   int32
		controlPieceText string
	}{
		{"stories260K.gguf", 1, 2, true, []int32{2}, []int32{0, 1, 13}, 512, 403, " Once", 1, "<s>"},
		{"llama-2-tiny-random.gguf", 1, 2, true, []int32{2}, []int32{1, 13}, 32000, 13, "\n", 2, "</s>"},
		{"tiny-qwen3-f32.gguf", 2045, 2047, false, []int32{2045, 2047}, []int32{2046, 0}, 2048, 220, " ", 2046, "<|im_start|>"},
		{"tiny-llama-f32.gguf", 2045, 2045, false, []int32{2045, 2047}, []int32{2046}, 2048, 198, "\n", 2047, "<|im_end|>"},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			tk := loadModel(t, filepath.Join(shared, "models", tc.model))
			if tk.BOS() != tc.bos || tk.EOS() != tc.eos || tk.AddBOS() != tc.addBOS || tk.VocabSize() != tc.vocab {
				t.Errorf("BOS, EOS, AddBOS, VocabSize = %d, %d, %v, %d; want %d, %d, %v, %d",
					tk.BOS(), tk.EOS(), tk.AddBOS(), tk.VocabSize(), tc.bos, tc.eos, tc.addBOS, tc.vocab)
			}
			for _, id := range tc.eog {
				if !tk.IsEOG(id) {
					t.Errorf("IsEOG(%d) = false, want true", id)
				}
			}
			for _, id := range append(tc.notEOG, -1, int32(tc.vocab)) {
				if tk.IsEOG(id) {
					t.Errorf("IsEOG(%d) = true, want false", id)
				}
			}
			if got := string(tk.Piece(tc.pieceID)); got != tc.piece {
				t.Errorf("Piece(%d) = %q, want %q", tc.pieceID, got, tc.piece)
			}
			if got := string(tk.Piece(tc.controlPieceID)); got != tc.controlPieceText {
				t.Errorf("Piece(%d) = %q, want %q", tc.controlPieceID, got, tc.controlPieceText)
			}
			if tk.Piece(-1) != nil || tk.Piece(int32(tc.vocab)) != nil {
				t.Errorf("Piece of an out-of-range id is not nil")
			}
		})
	}
}

func TestQwen3ShapeTreatsFIMPaddingAsEOG(t *testing.T) {
	tk := qwen06Tokenizer(t, filepath.Join(sharedDir(t), "models", "tiny-qwen3-f32.gguf"))
	for _, id := range []int32{151643, 151645, 151662, 151663, 151664} {
		if !tk.IsEOG(id) {
			t.Errorf("IsEOG(%d %q) = false, want true", id, tk.texts[id])
		}
	}
	for _, id := range []int32{151644, 151659, 151667, 151700} {
		if tk.IsEOG(id) {
			t.Errorf("IsEOG(%d %q) = true, want false", id, tk.texts[id])
		}
	}
	if got := string(tk.Piece(151700)); got != "" {
		t.Errorf("Piece of an unused token = %q, want empty", got)
	}
	got := tk.Encode("<think>x</think>", false, false)
	if want := []int32{151667}; !cmp.Equal(want, got[:1]) {
		t.Errorf("user-defined tokens are split without parseSpecial: got %v", got)
	}
}

func TestFromGGUFErrors(t *testing.T) {
	base := func() meta { return bpeMeta("qwen2", []string{"a b"}) }
	tests := []struct {
		name        string
		edit        func(meta)
		unsupported bool
		contains    string
	}{
		{"unknown model", func(m meta) { m[keyModel] = weights.Str("t5") }, true, "t5"},
		{"unknown pre-tokenizer", func(m meta) { m[keyPre] = weights.Str("deepseek-llm") }, true, "deepseek-llm"},
		{"missing pre-tokenizer", func(m meta) { delete(m, keyPre) }, true, "pre-tokenizer"},
		{"no model key", func(m meta) { delete(m, keyModel) }, false, keyModel},
		{"no tokens", func(m meta) { delete(m, keyTokens) }, false, keyTokens},
		{"no merges", func(m meta) { delete(m, keyMerges) }, false, keyMerges},
		{"short token types", func(m meta) { m[keyTypes] = weights.Arr([]int32{1}) }, false, keyTypes},
		{"duplicate token", func(m meta) { m[keyTokens] = weights.Arr([]string{"a", "a"}); delete(m, keyTypes) }, false, "duplicate"},
		{"add_bos without bos", func(m meta) { m[keyAddBOS] = weights.Boolean(true) }, false, keyAddBOS},
		{"tokens of the wrong type", func(m meta) { m[keyTokens] = weights.Str("x") }, false, keyTokens},
		{"eos outside the vocabulary", func(m meta) { m["tokenizer.ggml.eos_token_id"] = weights.U32(5000) }, false, "eos_token_id = 5000 is outside the vocabulary"},
		{"bos outside the vocabulary", func(m meta) { m["tokenizer.ggml.bos_token_id"] = weights.I32(-7) }, false, "bos_token_id = -7 is outside the vocabulary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.edit(m)
			_, err := m.build()
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(%v, ErrUnsupported) = %v, want %v", err, !tc.unsupported, tc.unsupported)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not mention %q", err, tc.contains)
			}
		})
	}
}

func TestSpecialIDsOutsideTheVocabularyMeanNone(t *testing.T) {
	m := bpeMeta("qwen2", nil, "<|endoftext|>")
	m["tokenizer.ggml.bos_token_id"] = weights.U32(0xFFFFFFFF)
	m["tokenizer.ggml.eos_token_id"] = weights.U32(0xFFFFFFFF)
	tk := m.mustBuild(t)
	if tk.BOS() != -1 || tk.EOS() != -1 {
		t.Errorf("BOS, EOS = %d, %d; want -1, -1", tk.BOS(), tk.EOS())
	}
	if !tk.IsEOG(256) {
		t.Errorf("<|endoftext|> is not EOG")
	}
	spm := spmMeta(nil, nil)
	spm[keyAddSpacePrefix] = weights.Boolean(false)
	spm[keyAddEOS] = weights.Boolean(true)
	stk := spm.mustBuild(t)
	if got, want := stk.Encode("A", true, false), []int32{1, 3 + 'A', 2}; !cmp.Equal(want, got) {
		t.Errorf("Encode with add_eos and no space prefix = %v, want %v", got, want)
	}
	if got := stk.Encode("", true, false); !cmp.Equal([]int32{1, 2}, got) {
		t.Errorf("Encode(\"\") = %v, want [1 2]", got)
	}
}

func TestDecoderNeverSplitsUTF8(t *testing.T) {
	llama2 := sharedModel(t, "llama-2-tiny-random.gguf")
	qwen := sharedModel(t, "tiny-qwen3-f32.gguf")
	spmByte := func(b byte) int32 { return llama2.byteToks[b] }
	bpeByte := func(b byte) int32 { return qwen.ids[byteEnc[b]] }
	tests := []struct {
		name  string
		tk    *Tokenizer
		ids   []int32
		adds  []string
		flush string
	}{
		{"spm three-byte char byte by byte", llama2, []int32{spmByte(0xE4), spmByte(0xBD), spmByte(0xA0)},
			[]string{"", "", "你"}, ""},
		{"bpe four-byte char byte by byte", qwen, []int32{bpeByte(0xF0), bpeByte(0x9F), bpeByte(0x99), bpeByte(0x82)},
			[]string{"", "", "", "🙂"}, ""},
		{"an interrupted sequence becomes U+FFFD", llama2, []int32{spmByte(0xE4), spmByte('A')},
			[]string{"", "\uFFFDA"}, ""},
		{"an incomplete tail is flushed as U+FFFD", llama2, []int32{spmByte('x'), spmByte(0xE4), spmByte(0xBD)},
			[]string{"x", "", ""}, "\uFFFD"},
		{"a stray continuation byte is U+FFFD at once", llama2, []int32{spmByte(0x80)}, []string{"\uFFFD"}, ""},
		{"surrogates are invalid", llama2, []int32{spmByte(0xED), spmByte(0xA0), spmByte(0x80)},
			[]string{"", "\uFFFD\uFFFD", "\uFFFD"}, ""},
		{"out-of-range ids add nothing", llama2, []int32{-5, 1 << 30}, []string{"", ""}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.tk.NewDecoder()
			var adds []string
			for _, id := range tc.ids {
				adds = append(adds, d.Add(id))
			}
			if diff := cmp.Diff(tc.adds, adds); diff != "" {
				t.Errorf("Add results (-want +got):\n%s", diff)
			}
			if got := d.Flush(); got != tc.flush {
				t.Errorf("Flush() = %q, want %q", got, tc.flush)
			}
			if got := d.Flush(); got != "" {
				t.Errorf("second Flush() = %q, want empty", got)
			}
		})
	}
}

// roundTripTexts are plain texts that Decode(Encode(x)) must reproduce.
var roundTripTexts = []string{
	"Once upon a time",
	"  leading and trailing spaces  ",
	"tabs\tand\r\nnewlines\n\n\n",
	"Café naïve — 你好 🙂 Привет, مرحبا!",
	"def f(x):\n    return x ** 2  # square\n",
	"numbers 1234567890 and 3.14159",
	"it's, they're, I'LL, we'd",
	"\u00a0no-break\u3000ideographic space",
	"",
}

func TestDecodeEncodeRoundTrips(t *testing.T) {
	for _, model := range []string{"tiny-qwen3-f32.gguf", "tiny-llama-f32.gguf", "stories260K.gguf", "llama-2-tiny-random.gguf"} {
		tk := sharedModel(t, model)
		for _, s := range append(roundTripTexts, "<|im_start|>user\nhi<|im_end|>\n") {
			t.Run(model+"/"+s, func(t *testing.T) {
				for _, parse := range []bool{false, true} {
					got := tk.Decode(tk.Encode(s, false, parse))
					want := s
					if tk.kind == kindSPM && s != "" {
						want = " " + s
					}
					if got != want {
						t.Errorf("Decode(Encode(%q, parseSpecial=%v)) = %q, want %q", s, parse, got, want)
					}
				}
			})
		}
	}
}

func TestStreamingEqualsDecode(t *testing.T) {
	tk := sharedModel(t, "tiny-qwen3-f32.gguf")
	for _, s := range roundTripTexts {
		ids := tk.Encode(s, false, true)
		d := tk.NewDecoder()
		var b strings.Builder
		for _, id := range ids {
			part := d.Add(id)
			if !utf8.ValidString(part) {
				t.Errorf("Add returned invalid UTF-8 %q", part)
			}
			b.WriteString(part)
		}
		b.WriteString(d.Flush())
		if b.String() != s {
			t.Errorf("streamed %q, want %q", b.String(), s)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	long := strings.Repeat("Once upon a time, in a small village near a big green forest, there lived a girl named Mia. ", 100)
	for _, model := range []string{"tiny-qwen3-f32.gguf", "llama-2-tiny-random.gguf", "stories260K.gguf"} {
		tk := sharedModel(b, model)
		b.Run(model, func(b *testing.B) {
			b.SetBytes(int64(len(long)))
			for b.Loop() {
				tk.Encode(long, true, true)
			}
		})
	}
}
