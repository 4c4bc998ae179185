// Package tok implements the tokenizers stored in GGUF metadata, matching
// llama.cpp token for token: SentencePiece-style ("llama") vocabularies with
// score-driven bigram merges and byte fallback, and byte-level BPE ("gpt2")
// vocabularies with ranked merges behind a pre-tokenizer. It also turns ids
// back into bytes, including an incremental decoder that never emits half of
// a UTF-8 sequence.
package tok

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// kind is the tokenizer algorithm, chosen by tokenizer.ggml.model.
type kind uint8

const (
	kindSPM kind = iota + 1 // "llama"
	kindBPE                 // "gpt2"
)

// attr holds llama.cpp's token attributes (a bit set).
type attr uint16

const (
	attrUndefined attr = 0
	attrUnknown   attr = 1 << 0
	attrUnused    attr = 1 << 1
	attrNormal    attr = 1 << 2
	attrControl   attr = 1 << 3
	attrUser      attr = 1 << 4
	attrByte      attr = 1 << 5
	attrRStrip    attr = 1 << 8 // drop whitespace after the token when splitting
)

// GGUF token types (tokenizer.ggml.token_type).
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Metadata keys read by FromGGUF.
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTypes          = "tokenizer.ggml.token_type"
	keyMerges         = "tokenizer.ggml.merges"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	keyName           = "general.name"
)

// source is the part of a GGUF file's metadata the tokenizer reads
// (*weights.File).
type source interface {
	Has(key string) bool
	String(key string) (string, error)
	Uint(key string) (uint64, error)
	Int(key string) (int64, error)
	Bool(key string) (bool, error)
	Strings(key string) ([]string, error)
	Float32s(key string) ([]float32, error)
	Int32s(key string) ([]int32, error)
}

// ErrUnsupported is wrapped by FromGGUF's error when the file's tokenizer
// model or pre-tokenizer is not one this package implements.
var ErrUnsupported = errors.New("unsupported tokenizer")

// Tokenizer converts between text and token ids for one vocabulary. It is
// immutable after construction and safe for concurrent use.
type Tokenizer struct {
	kind kind
	pre  pre

	texts  []string // id -> vocabulary text
	scores []float32
	attrs  []attr
	ids    map[string]int32 // vocabulary text -> id
	pieces []string         // id -> decoded bytes (token_to_piece, special=true)

	// BPE merges: by the ids of both parts when both are tokens, else by
	// their texts. byteIDs[b] is the id of byte b's GPT-2 character.
	idRanks      map[uint64]merge
	textRanks    map[pair]int32
	byteIDs      [256]int32
	ignoreMerges bool

	bos, eos, unk  int32
	fim            [3]int32 // fill-in-the-middle prefix, suffix and middle tokens (-1: none)
	addBOS, addEOS bool
	addSpacePrefix bool
	eog            []bool

	special  []int32    // control, user-defined and unknown tokens, longest text first
	byteToks [256]int32 // SPM byte fallback: byte -> id, -1 if none

	chatTemplate string // tokenizer.chat_template, "" if none
}

// pair is a BPE merge key by text.
type pair struct{ left, right string }

// merge is a BPE merge's rank and the id of its result (-1 when the result
// is not a token).
type merge struct{ rank, result int32 }

// idPair is the idRanks key of a merge of tokens l and r.
func idPair(l, r int32) uint64 { return uint64(uint32(l))<<32 | uint64(uint32(r)) }

// fromSource builds a tokenizer from GGUF-style metadata, following
// llama.cpp's llama_vocab::load.
func fromSource(src source) (*Tokenizer, error) {
	model, err := src.String(keyModel)
	if err != nil {
		return nil, fmt.Errorf("tok: %s: %w", keyModel, err)
	}
	t := &Tokenizer{unk: -1, bos: -1, eos: -1}
	// Default special ids: llama.cpp's for SentencePiece; none for BPE (where
	// llama.cpp's legacy default 11 would name an ordinary token).
	var defBOS, defEOS, defUNK int64 = -1, -1, -1
	switch model {
	case "llama":
		t.kind = kindSPM
		defBOS, defEOS, defUNK = 1, 2, 0
		t.addSpacePrefix = true
		t.addBOS = true
	case "gpt2":
		t.kind = kindBPE
		name := ""
		if src.Has(keyPre) {
			if name, err = src.String(keyPre); err != nil {
				return nil, fmt.Errorf("tok: %s: %w", keyPre, err)
			}
		}
		p, ok := preByName[name]
		if !ok {
			return nil, fmt.Errorf("tok: pre-tokenizer %q (%s): %w; supported: %s",
				name, keyPre, ErrUnsupported, strings.Join(preNames(), ", "))
		}
		t.pre = p.pre
		t.ignoreMerges = p.ignoreMerges
		t.addBOS = p.addBOS
	default:
		return nil, fmt.Errorf("tok: model %q (%s): %w; supported: llama, gpt2", model, keyModel, ErrUnsupported)
	}
	if src.Has(keyAddSpacePrefix) {
		if t.addSpacePrefix, err = src.Bool(keyAddSpacePrefix); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", keyAddSpacePrefix, err)
		}
	}

	if err := t.loadVocab(src); err != nil {
		return nil, err
	}
	if t.kind == kindBPE {
		if err := t.loadMerges(src); err != nil {
			return nil, err
		}
	}
	n := int64(len(t.texts))

	// Special ids: defaults first (dropped when outside the vocabulary), then
	// metadata; a metadata id outside the vocabulary (0xFFFFFFFF) means none.
	inVocab := func(id int64) int32 {
		if id >= 0 && id < n {
			return int32(id)
		}
		return -1
	}
	t.bos, t.eos, t.unk = inVocab(defBOS), inVocab(defEOS), inVocab(defUNK)
	eot, eom := int32(-1), int32(-1)
	var fim [6]int32 // pre, suf, mid, pad, rep, sep
	for i := range fim {
		fim[i] = -1
	}
	ids := []struct {
		key string
		dst *int32
	}{
		{"tokenizer.ggml.bos_token_id", &t.bos},
		{"tokenizer.ggml.eos_token_id", &t.eos},
		{"tokenizer.ggml.eot_token_id", &eot},
		{"tokenizer.ggml.eom_token_id", &eom},
		{"tokenizer.ggml.unknown_token_id", &t.unk},
		{"tokenizer.ggml.fim_pre_token_id", &fim[0]},
		{"tokenizer.ggml.fim_suf_token_id", &fim[1]},
		{"tokenizer.ggml.fim_mid_token_id", &fim[2]},
		{"tokenizer.ggml.fim_pad_token_id", &fim[3]},
		{"tokenizer.ggml.fim_rep_token_id", &fim[4]},
		{"tokenizer.ggml.fim_sep_token_id", &fim[5]},
		{"tokenizer.ggml.prefix_token_id", &fim[0]},
		{"tokenizer.ggml.suffix_token_id", &fim[1]},
		{"tokenizer.ggml.middle_token_id", &fim[2]},
	}
	for _, k := range ids {
		if !src.Has(k.key) {
			continue
		}
		v, err := readID(src, k.key)
		if err != nil {
			return nil, fmt.Errorf("tok: %s: %w", k.key, err)
		}
		// BOS and EOS are added to prompts and end generation: an id
		// outside the vocabulary is a corrupt file, not "none" (-1 is).
		if (k.dst == &t.bos || k.dst == &t.eos) && v != -1 && (v < 0 || v >= n) {
			return nil, fmt.Errorf("tok: %s = %d is outside the vocabulary of %d tokens", k.key, v, n)
		}
		*k.dst = inVocab(v)
	}
	if src.Has(keyAddBOS) {
		if t.addBOS, err = src.Bool(keyAddBOS); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", keyAddBOS, err)
		}
	}
	if src.Has(keyAddEOS) {
		if t.addEOS, err = src.Bool(keyAddEOS); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", keyAddEOS, err)
		}
	}
	if t.addBOS && t.bos < 0 {
		return nil, fmt.Errorf("tok: %s is true but the file has no BOS token", keyAddBOS)
	}
	if t.addEOS && t.eos < 0 {
		return nil, fmt.Errorf("tok: %s is true but the file has no EOS token", keyAddEOS)
	}

	t.detectSpecial(eot, eom, fim)
	t.buildSpecialCache()
	t.pieces = make([]string, n)
	for id := range t.pieces {
		t.pieces[id] = t.piece(int32(id))
	}
	if t.kind == kindSPM {
		for b := range 256 {
			t.byteToks[b] = t.spmByteToken(byte(b))
		}
	}
	if src.Has(keyName) {
		if name, err := src.String(keyName); err == nil {
			t.applyNameAttrs(name)
		}
	}
	if src.Has(KeyChatTemplate) {
		if t.chatTemplate, err = src.String(KeyChatTemplate); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", KeyChatTemplate, err)
		}
	}
	return t, nil
}

// readID reads a token id stored as any integer type.
func readID(src source, key string) (int64, error) {
	if u, err := src.Uint(key); err == nil {
		if u > 1<<62 || u == math.MaxUint32 { // -1 (none) written as unsigned
			return -1, nil
		}
		return int64(u), nil
	}
	return src.Int(key)
}

// loadVocab reads tokens, scores and token types.
func (t *Tokenizer) loadVocab(src source) error {
	texts, err := src.Strings(keyTokens)
	if err != nil {
		return fmt.Errorf("tok: %s: %w", keyTokens, err)
	}
	n := len(texts)
	if n == 0 {
		return fmt.Errorf("tok: %s is empty", keyTokens)
	}
	if int64(n) > 1<<31-1 {
		return fmt.Errorf("tok: %s has %d entries, more than int32 ids can address", keyTokens, n)
	}
	t.texts = make([]string, n)
	t.scores = make([]float32, n)
	t.attrs = make([]attr, n)
	t.ids = make(map[string]int32, n)
	if src.Has(keyScores) {
		scores, err := src.Float32s(keyScores)
		if err != nil {
			return fmt.Errorf("tok: %s: %w", keyScores, err)
		}
		if len(scores) < n {
			return fmt.Errorf("tok: %s has %d entries for %d tokens", keyScores, len(scores), n)
		}
		copy(t.scores, scores)
	}
	var types []int32
	if src.Has(keyTypes) {
		if types, err = src.Int32s(keyTypes); err != nil {
			return fmt.Errorf("tok: %s: %w", keyTypes, err)
		}
		if len(types) < n {
			return fmt.Errorf("tok: %s has %d entries for %d tokens", keyTypes, len(types), n)
		}
	}
	for i, s := range texts {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.ids[s]; dup {
			return fmt.Errorf("tok: duplicate token %q in vocabulary: ids %d and %d", s, prev, i)
		}
		t.ids[s] = int32(i)
		t.texts[i] = s
		t.attrs[i] = attrNormal
		if types != nil {
			switch types[i] {
			case typeNormal:
				t.attrs[i] = attrNormal
			case typeUnknown:
				t.attrs[i] = attrUnknown
			case typeControl:
				t.attrs[i] = attrControl
			case typeUserDefined:
				t.attrs[i] = attrUser
			case typeUnused:
				t.attrs[i] = attrUnused
			case typeByte:
				t.attrs[i] = attrByte
			default:
				t.attrs[i] = attrUndefined
			}
		}
	}
	return nil
}

// loadMerges reads tokenizer.ggml.merges into the rank maps. A merge is
// split at its first space after the first byte; the first occurrence of a
// pair keeps its rank.
func (t *Tokenizer) loadMerges(src source) error {
	if !src.Has(keyMerges) {
		return fmt.Errorf("tok: gpt2 tokenizer without %s", keyMerges)
	}
	merges, err := src.Strings(keyMerges)
	if err != nil {
		return fmt.Errorf("tok: %s: %w", keyMerges, err)
	}
	t.idRanks = make(map[uint64]merge, len(merges))
	t.textRanks = make(map[pair]int32)
	var joined []byte
	for i, m := range merges {
		var p pair
		if len(m) > 1 {
			if k := strings.IndexByte(m[1:], ' '); k >= 0 {
				p = pair{m[:k+1], m[k+2:]}
			}
		}
		l, lok := t.ids[p.left]
		r, rok := t.ids[p.right]
		if lok && rok {
			if _, dup := t.idRanks[idPair(l, r)]; !dup {
				joined = append(append(joined[:0], p.left...), p.right...)
				res, ok := t.ids[string(joined)]
				if !ok {
					res = -1
				}
				t.idRanks[idPair(l, r)] = merge{rank: int32(i), result: res}
			}
		} else if _, dup := t.textRanks[p]; !dup {
			t.textRanks[p] = int32(i)
		}
	}
	for b := range t.byteIDs {
		t.byteIDs[b] = -1
		if id, ok := t.ids[byteEnc[b]]; ok {
			t.byteIDs[b] = id
		}
	}
	return nil
}

// Texts that llama.cpp recognizes as end-of-turn, end-of-generation and
// fill-in-the-middle tokens.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
		"▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
		"▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
		"▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	eogTexts    = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
	alwaysRendered = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}
)

// detectSpecial finds end-of-turn, fill-in-the-middle and end-of-generation
// tokens by their text, marks them as control tokens, and builds the EOG set
// the way llama.cpp does. Ids not given in the metadata are taken from the
// first matching token in id order.
func (t *Tokenizer) detectSpecial(eot, eom int32, fim [6]int32) {
	byText := func(dst *int32, texts []string) {
		if *dst >= 0 {
			return
		}
		best := int32(-1)
		for _, s := range texts {
			if id, ok := t.ids[s]; ok && (best < 0 || id < best) {
				best = id
			}
		}
		if best >= 0 {
			*dst = best
			t.attrs[best] |= attrControl
		}
	}
	byText(&eot, eotTexts)
	byText(&eom, eomTexts)
	byText(&fim[0], fimPreTexts)
	byText(&fim[1], fimSufTexts)
	byText(&fim[2], fimMidTexts)
	byText(&fim[3], fimPadTexts)
	byText(&fim[4], fimRepTexts)
	byText(&fim[5], fimSepTexts)
	t.fim = [3]int32{fim[0], fim[1], fim[2]}

	t.eog = make([]bool, len(t.texts))
	for _, id := range fim[3:] {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range eogTexts {
		if id, ok := t.ids[s]; ok {
			t.eog[id] = true
			t.attrs[id] |= attrControl
		}
	}
	for _, s := range alwaysRendered {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUser
		}
	}
	for _, id := range []int32{t.eos, eot, eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	// A vocabulary with <|return|> and <|call|> (or <|calls|> and <|flush|>)
	// ends turns with those, so <|end|> is not EOG there.
	has := func(s string) bool { id, ok := t.ids[s]; return ok && t.eog[id] }
	if end, ok := t.ids["<|end|>"]; ok && t.eog[end] {
		call := has("<|call|>") || has("<|calls|>")
		if (has("<|return|>") && call) || (call && has("<|flush|>")) {
			t.eog[end] = false
			t.attrs[end] = attrUser
		}
	}
	// With <|tool_response>, </s> is an ordinary token.
	if s, ok := t.ids["</s>"]; ok && t.eog[s] && has("<|tool_response>") {
		t.eog[s] = false
		t.attrs[s] = attrNormal
	}
}

// buildSpecialCache lists the tokens that are split out of the text before
// tokenization, longest text first (ties by id).
func (t *Tokenizer) buildSpecialCache() {
	for id, a := range t.attrs {
		if a&(attrControl|attrUser|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.texts[t.special[i]]) > len(t.texts[t.special[j]])
	})
}

// applyNameAttrs sets the strip attributes llama.cpp gives some models by
// name: Phi-3 strips whitespace after its special tokens.
func (t *Tokenizer) applyNameAttrs(name string) {
	name = strings.ToLower(name)
	if !strings.Contains(name, "phi-3") && !strings.Contains(name, "phi3") {
		return
	}
	for _, id := range t.special {
		t.attrs[id] |= attrRStrip
	}
	if id, ok := t.ids["</s>"]; ok {
		t.attrs[id] |= attrRStrip
	}
	for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] &^= attrRStrip
		}
	}
}

// spmByteToken is the id of byte b's fallback token: <0xNN>, else the
// one-byte token, else unknown (-1 when there is none).
func (t *Tokenizer) spmByteToken(b byte) int32 {
	const hex = "0123456789ABCDEF"
	if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
		return id
	}
	if id, ok := t.ids[string([]byte{b})]; ok {
		return id
	}
	return t.unk
}

// ChatTemplateSource returns the Jinja chat template stored with the
// vocabulary (GGUF tokenizer.chat_template, tokenizer_config.json
// chat_template), or "" when there is none.
func (t *Tokenizer) ChatTemplateSource() string { return t.chatTemplate }

// FIM returns the fill-in-the-middle prefix, suffix and middle tokens, from
// the GGUF metadata or found by their text as llama.cpp does; ok is false
// unless the vocabulary has all three.
func (t *Tokenizer) FIM() (pre, suf, mid int32, ok bool) {
	return t.fim[0], t.fim[1], t.fim[2], t.fim[0] >= 0 && t.fim[1] >= 0 && t.fim[2] >= 0
}

// VocabSize returns the number of tokens in the vocabulary; valid ids are
// 0 through VocabSize()-1.
func (t *Tokenizer) VocabSize() int { return len(t.texts) }

// BOS returns the beginning-of-sequence token id, or -1 when the vocabulary
// has none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS returns the end-of-sequence token id, or -1 when the vocabulary has
// none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// AddBOS reports whether Encode with addSpecial prepends BOS(): the file's
// tokenizer.ggml.add_bos_token, defaulting to llama.cpp's choice for the
// tokenizer type (true for SentencePiece, false for most byte-level BPE).
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// IsEOG reports whether generating id ends generation: EOS, end-of-turn
// tokens such as <|im_end|>, <|eot_id|> or <|endoftext|>, and the other
// tokens llama.cpp treats as end of generation. Ids outside the vocabulary
// report false.
func (t *Tokenizer) IsEOG(id int32) bool {
	return id >= 0 && int(id) < len(t.eog) && t.eog[id]
}
