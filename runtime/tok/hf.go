package tok

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// Hugging Face file names FromHF reads.
const (
	HFTokenizerFile = "tokenizer.json"
	HFConfigFile    = "tokenizer_config.json"
	HFModelConfig   = "config.json"
)

// Pre-tokenizer regexes of tokenizer.json Split pre-tokenizers, and the
// tokenizer.ggml.pre name llama.cpp's converter gives each.
const (
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// FromHF builds the tokenizer of a Hugging Face tokenizer.json, exactly as
// llama.cpp tokenizes the GGUF that its converter (convert_hf_to_gguf.py)
// writes from the same files. path is the tokenizer.json itself or a
// directory holding it; a tokenizer_config.json beside it (bos/eos tokens,
// add_bos_token, add_eos_token, chat_template) and a config.json (vocab_size,
// bos_token_id, eos_token_id) are read when present.
//
// Only byte-level BPE tokenizers are supported (model.type "BPE" behind a
// ByteLevel pre-tokenizer), with the Qwen2, Llama 3 or GPT-2 split regex;
// others give an error wrapping ErrUnsupported. As in llama.cpp, the
// normalizer (for example Qwen's NFC) is not applied, and added tokens are
// control tokens when marked special or when they look special
// ("<|...|>"), user-defined tokens otherwise. Malformed files give an error
// naming the file and the key.
func FromHF(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tok: %w", err)
	}
	dir := filepath.Dir(path)
	if st.IsDir() {
		dir, path = path, filepath.Join(path, HFTokenizerFile)
	}
	tokJSON, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tok: %w", err)
	}
	optional := func(name string) ([]byte, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tok: %w", err)
		}
		return b, nil
	}
	cfg, err := optional(HFConfigFile)
	if err != nil {
		return nil, err
	}
	model, err := optional(HFModelConfig)
	if err != nil {
		return nil, err
	}
	return ParseHF(HFFiles{
		Tokenizer: tokJSON, TokenizerName: path,
		Config: cfg, ConfigName: filepath.Join(dir, HFConfigFile),
		Model: model, ModelName: filepath.Join(dir, HFModelConfig),
	})
}

// HFFiles are the contents of a Hugging Face tokenizer's files, with the
// names errors report. Config and Model may be nil.
type HFFiles struct {
	Tokenizer     []byte // tokenizer.json
	TokenizerName string
	Config        []byte // tokenizer_config.json
	ConfigName    string
	Model         []byte // config.json
	ModelName     string
}

// ParseHF is FromHF on file contents already read.
func ParseHF(files HFFiles) (*Tokenizer, error) {
	src, err := hfToSource(files)
	if err != nil {
		return nil, err
	}
	t, err := fromSource(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", files.TokenizerName, err)
	}
	return t, nil
}

// hfTokenizer is the part of tokenizer.json the conversion reads.
type hfTokenizer struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	PreTokenizer  *hfPreTokenizer `json:"pre_tokenizer"`
	PostProcessor *hfProcessor    `json:"post_processor"`
	Model         *struct {
		Type         string          `json:"type"`
		Vocab        json.RawMessage `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		IgnoreMerges bool            `json:"ignore_merges"`
		ByteFallback bool            `json:"byte_fallback"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID      int64  `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

// hfPreTokenizer is a tokenizer.json pre_tokenizer (one of its types).
type hfPreTokenizer struct {
	Type          string           `json:"type"`
	PreTokenizers []hfPreTokenizer `json:"pretokenizers"`
	Pattern       struct {
		Regex *string `json:"Regex"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// hfProcessor is a tokenizer.json post_processor (one of its types).
type hfProcessor struct {
	Type       string        `json:"type"`
	Processors []hfProcessor `json:"processors"`
	Single     []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

// hfConfig is the part of tokenizer_config.json the conversion reads. The
// token fields are a string or an AddedToken object ({"content": ...}).
type hfConfig struct {
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	UNKToken     json.RawMessage `json:"unk_token"`
	ClsToken     json.RawMessage `json:"cls_token"`
	SepToken     json.RawMessage `json:"sep_token"`
	AddBOS       json.RawMessage `json:"add_bos_token"`
	AddEOS       json.RawMessage `json:"add_eos_token"`
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// hfModelConfig is the part of config.json the conversion reads; ids that
// are not plain integers (Llama 3.1's eos_token_id list) are ignored, as the
// converter ignores them.
type hfModelConfig struct {
	VocabSize  json.RawMessage `json:"vocab_size"`
	BOSTokenID json.RawMessage `json:"bos_token_id"`
	EOSTokenID json.RawMessage `json:"eos_token_id"`
	UNKTokenID json.RawMessage `json:"unk_token_id"`
}

// hfSource is GGUF-style tokenizer metadata converted from Hugging Face
// files, so that fromSource builds both kinds the same way.
type hfSource map[string]any

// hfError is a malformed-file error naming the file and the key.
func hfError(file, key, format string, args ...any) error {
	return fmt.Errorf("tok: %s: %s: %s", file, key, fmt.Sprintf(format, args...))
}

// hfToSource converts the files the way llama.cpp's convert_hf_to_gguf.py
// (get_vocab_base, _set_vocab_gpt2, gguf-py SpecialVocab) does.
func hfToSource(files HFFiles) (hfSource, error) {
	name := files.TokenizerName
	var tj hfTokenizer
	if err := json.Unmarshal(files.Tokenizer, &tj); err != nil {
		return nil, fmt.Errorf("tok: %s: %w", name, err)
	}
	if tj.Model == nil {
		return nil, hfError(name, "model", "missing")
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tok: %s: model.type %q: %w; supported: BPE (byte-level)", name, tj.Model.Type, ErrUnsupported)
	}
	if tj.Model.ByteFallback {
		return nil, fmt.Errorf("tok: %s: model.byte_fallback: %w: only byte-level BPE is supported", name, ErrUnsupported)
	}
	vocab, err := parseVocab(bytes.TrimSpace(tj.Model.Vocab))
	if err != nil {
		return nil, hfError(name, "model.vocab", "%v", err)
	}
	if len(vocab) == 0 {
		return nil, hfError(name, "model.vocab", "missing or empty")
	}
	preName, err := hfPreName(name, tj.PreTokenizer, tj.Model.IgnoreMerges)
	if err != nil {
		return nil, err
	}

	var cfg hfConfig
	if files.Config != nil {
		if err := json.Unmarshal(files.Config, &cfg); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", files.ConfigName, err)
		}
	}
	var mc hfModelConfig
	if files.Model != nil {
		if err := json.Unmarshal(files.Model, &mc); err != nil {
			return nil, fmt.Errorf("tok: %s: %w", files.ModelName, err)
		}
	}

	// Vocabulary: model.vocab, then added_tokens over it.
	nEntries := len(vocab) + len(tj.AddedTokens)
	maxID := int64(-1)
	checkID := func(key string, id int64, text string) error {
		if id < 0 || id > math.MaxInt32 {
			return hfError(name, key, "token %q has id %d, outside 0..%d", text, id, math.MaxInt32)
		}
		maxID = max(maxID, id)
		return nil
	}
	added := make(map[string]int, len(tj.AddedTokens)) // content -> index in added_tokens
	for i, a := range tj.AddedTokens {
		key := fmt.Sprintf("added_tokens[%d]", i)
		if err := checkID(key, a.ID, a.Content); err != nil {
			return nil, err
		}
		if a.Content == "" {
			return nil, hfError(name, key, "empty content")
		}
		added[a.Content] = i
	}
	for _, e := range vocab {
		if err := checkID("model.vocab", e.id, e.text); err != nil {
			return nil, err
		}
		if i, ok := added[e.text]; ok && tj.AddedTokens[i].ID != e.id {
			return nil, hfError(name, fmt.Sprintf("added_tokens[%d]", i), "token %q has id %d, but model.vocab gives it id %d",
				e.text, tj.AddedTokens[i].ID, e.id)
		}
	}
	n := maxID + 1
	if vs, ok, err := rawInt(mc.VocabSize); err != nil {
		return nil, hfError(files.ModelName, "vocab_size", "%v", err)
	} else if ok {
		if vs < n {
			return nil, hfError(files.ModelName, "vocab_size", "%d is smaller than the tokenizer's %d ids", vs, n)
		}
		n = vs
	}
	// Ids without a token are padding; a file that is mostly gaps is
	// malformed, not a vocabulary (and must not allocate without bound).
	if n > 2*int64(nEntries)+1024 {
		return nil, hfError(name, "model.vocab", "%d ids for only %d tokens", n, nEntries)
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for _, e := range vocab {
		text, id := e.text, e.id
		if tokens[id] != "" {
			return nil, hfError(name, "model.vocab", "tokens %q and %q share id %d", tokens[id], text, id)
		}
		if text == "" {
			return nil, hfError(name, "model.vocab", "empty token text for id %d", id)
		}
		tokens[id], types[id] = text, typeNormal
	}
	for i, a := range tj.AddedTokens {
		if prev := tokens[a.ID]; prev != "" && prev != a.Content {
			return nil, hfError(name, fmt.Sprintf("added_tokens[%d]", i), "tokens %q and %q share id %d", prev, a.Content, a.ID)
		}
		text, typ := a.Content, int32(typeControl)
		if !a.Special && !looksSpecial(text) {
			text, typ = strings.ReplaceAll(text, "\u2581", " "), typeUserDefined
		}
		tokens[a.ID], types[a.ID] = text, typ
	}
	for id := range tokens {
		if tokens[id] == "" {
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), typeUnused
		}
	}

	merges, err := hfMerges(name, tj.Model.Merges)
	if err != nil {
		return nil, err
	}

	src := hfSource{
		keyModel:  "gpt2",
		keyPre:    preName,
		keyTokens: tokens,
		keyTypes:  types,
		keyMerges: merges,
	}

	// Special tokens: tokenizer_config's <typ>_token texts looked up among
	// added_tokens, then config.json's <typ>_token_id; whether to add BOS
	// and EOS from add_<typ>_token or else a TemplateProcessing.
	text := func(file, key string, raw json.RawMessage) (string, error) {
		s, err := rawTokenText(raw)
		if err != nil {
			return "", hfError(file, key, "%v", err)
		}
		return s, nil
	}
	var special [5]string // bos, eos, unk, cls, sep
	for i, f := range []struct {
		key string
		raw json.RawMessage
	}{{"bos_token", cfg.BOSToken}, {"eos_token", cfg.EOSToken}, {"unk_token", cfg.UNKToken},
		{"cls_token", cfg.ClsToken}, {"sep_token", cfg.SepToken}} {
		if special[i], err = text(files.ConfigName, f.key, f.raw); err != nil {
			return nil, err
		}
	}
	bos, eos, unk := special[0], special[1], special[2]
	if files.Config != nil {
		if bos == "" {
			bos = special[3]
		}
		if eos == "" {
			eos = special[4]
		}
	}
	var addBOS, addEOS *bool
	if pp := tj.PostProcessor; pp != nil {
		procs := pp.Processors
		if pp.Type != "Sequence" {
			procs = []hfProcessor{*pp}
		}
		for _, p := range procs {
			if p.Type != "TemplateProcessing" || len(p.Single) < 2 {
				continue
			}
			if first := p.Single[0].SpecialToken; first != nil && first.ID != "" {
				if bos == "" {
					bos = first.ID
				}
				v := first.ID == bos || first.ID == special[3]
				addBOS = &v
			}
			if last := p.Single[len(p.Single)-1].SpecialToken; last != nil && last.ID != "" {
				if eos == "" {
					eos = last.ID
				}
				v := last.ID == eos
				addEOS = &v
			}
		}
	}
	for _, f := range []struct {
		key string
		raw json.RawMessage
		dst **bool
	}{{"add_bos_token", cfg.AddBOS, &addBOS}, {"add_eos_token", cfg.AddEOS, &addEOS}} {
		var v bool
		if len(f.raw) > 0 && json.Unmarshal(f.raw, &v) == nil {
			*f.dst = &v
		}
	}
	if addBOS != nil {
		src[keyAddBOS] = *addBOS
	}
	if addEOS != nil {
		src[keyAddEOS] = *addEOS
	}
	addedID := func(s string) int64 {
		for _, a := range tj.AddedTokens {
			if a.Content == s {
				return a.ID
			}
		}
		return -1
	}
	for _, f := range []struct {
		text, key, cfgKey string
		raw               json.RawMessage
	}{
		{bos, "tokenizer.ggml.bos_token_id", "bos_token_id", mc.BOSTokenID},
		{eos, "tokenizer.ggml.eos_token_id", "eos_token_id", mc.EOSTokenID},
		{unk, "tokenizer.ggml.unknown_token_id", "unk_token_id", mc.UNKTokenID},
	} {
		id := int64(-1)
		if f.text != "" {
			id = addedID(f.text)
		}
		if id < 0 {
			v, ok, err := rawInt(f.raw)
			if err == nil && ok && v >= 0 && v < n {
				id = v
			}
		}
		if id >= 0 && id < n {
			src[f.key] = uint64(id)
		}
	}
	if _, hasBOS := src["tokenizer.ggml.bos_token_id"]; !hasBOS {
		if (addBOS != nil && *addBOS) || (addBOS == nil && preByName[preName].addBOS) {
			return nil, hfError(name, "bos_token", "BOS is added for this tokenizer (add_bos_token, or the default of the %s pre-tokenizer) "+
				"but none is named: give %s a bos_token or %s a bos_token_id", preName, HFConfigFile, HFModelConfig)
		}
	}
	if len(cfg.ChatTemplate) > 0 {
		var s string
		if json.Unmarshal(cfg.ChatTemplate, &s) == nil {
			src[KeyChatTemplate] = s
		} else if tmpl, ok := namedTemplate(cfg.ChatTemplate); ok {
			src[KeyChatTemplate] = tmpl
		} else if !bytes.Equal(bytes.TrimSpace(cfg.ChatTemplate), []byte("null")) {
			return nil, hfError(files.ConfigName, "chat_template", "neither a string nor a list of {name, template}")
		}
	}
	return src, nil
}

// hfPreName picks the tokenizer.ggml.pre value for a byte-level BPE
// pre_tokenizer: a Split by a known regex followed by a ByteLevel that
// does no splitting of its own, or a lone ByteLevel with GPT-2's regex.
// llama.cpp's converter identifies the pre-tokenizer by hashing a test
// tokenization; the regex (and model.ignore_merges for the Llama 3 regex)
// tells the same families apart.
func hfPreName(file string, p *hfPreTokenizer, ignoreMerges bool) (string, error) {
	unsupported := func(what string) error {
		return fmt.Errorf("tok: %s: pre_tokenizer: %s: %w", file, what, ErrUnsupported)
	}
	if p == nil {
		return "", unsupported("missing (only byte-level BPE is supported)")
	}
	useRegex := func(b *hfPreTokenizer) bool { return b.UseRegex == nil || *b.UseRegex }
	if p.Type == "ByteLevel" {
		if p.AddPrefixSpace {
			return "", unsupported("ByteLevel with add_prefix_space")
		}
		if !useRegex(p) {
			return "", unsupported("ByteLevel without a regex")
		}
		return "gpt-2", nil
	}
	if p.Type != "Sequence" {
		return "", unsupported(fmt.Sprintf("type %q", p.Type))
	}
	seq := p.PreTokenizers
	if len(seq) != 2 || seq[0].Type != "Split" || seq[1].Type != "ByteLevel" {
		var types []string
		for _, s := range seq {
			types = append(types, s.Type)
		}
		return "", unsupported(fmt.Sprintf("Sequence of [%s], want [Split, ByteLevel]", strings.Join(types, ", ")))
	}
	split, bl := &seq[0], &seq[1]
	if bl.AddPrefixSpace || useRegex(bl) {
		return "", unsupported("ByteLevel after Split must have add_prefix_space and use_regex false")
	}
	if split.Pattern.Regex == nil || split.Invert || split.Behavior != "Isolated" {
		return "", unsupported("Split must be an Isolated, non-inverted Regex pattern")
	}
	switch *split.Pattern.Regex {
	case regexQwen2:
		return "qwen2", nil
	case regexLlama3:
		if ignoreMerges {
			return "llama-bpe", nil
		}
		return "smaug-bpe", nil
	case regexGPT2:
		return "gpt-2", nil
	}
	return "", unsupported(fmt.Sprintf("Split regex %q", *split.Pattern.Regex))
}

// hfMerges reads model.merges in either form (see parseMerges).
func hfMerges(file string, raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, nil
	}
	merges, i, err := parseMerges(raw)
	if err != nil {
		key := "model.merges"
		if i >= 0 {
			key = fmt.Sprintf("model.merges[%d]", i)
		}
		return nil, hfError(file, key, "%v", err)
	}
	return merges, nil
}

// looksSpecial reports whether an added token's text looks like a special
// token to the converter (does_token_look_special).
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<\uff5c") && strings.HasSuffix(s, "\uff5c>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">"))
}

// rawTokenText reads a tokenizer_config token field: absent or null (""),
// a string, or an object with a "content" string.
func rawTokenText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("neither a string nor an object with a \"content\" string")
	}
	return *obj.Content, nil
}

// rawInt reads an optional JSON integer; ok is false when raw is absent,
// null or not a plain integer (such as a list).
func rawInt(raw json.RawMessage) (v int64, ok bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || raw[0] == '[' {
		return 0, false, nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false, fmt.Errorf("not an integer: %s", raw)
	}
	return v, true, nil
}

// namedTemplate returns the "default" template of a chat_template given as
// a list of {name, template} objects (or the first when none is named
// "default").
func namedTemplate(raw json.RawMessage) (string, bool) {
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return "", false
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, true
		}
	}
	return list[0].Template, true
}

func (s hfSource) Has(key string) bool { _, ok := s[key]; return ok }

func (s hfSource) String(key string) (string, error) {
	v, ok := s[key].(string)
	if !ok {
		return "", fmt.Errorf("%s is not a string", key)
	}
	return v, nil
}

func (s hfSource) Uint(key string) (uint64, error) {
	v, ok := s[key].(uint64)
	if !ok {
		return 0, fmt.Errorf("%s is not an unsigned integer", key)
	}
	return v, nil
}

func (s hfSource) Int(key string) (int64, error) {
	v, ok := s[key].(uint64)
	if !ok || v > math.MaxInt64 {
		return 0, fmt.Errorf("%s is not an integer", key)
	}
	return int64(v), nil
}

func (s hfSource) Bool(key string) (bool, error) {
	v, ok := s[key].(bool)
	if !ok {
		return false, fmt.Errorf("%s is not a boolean", key)
	}
	return v, nil
}

func (s hfSource) Strings(key string) ([]string, error) {
	v, ok := s[key].([]string)
	if !ok {
		return nil, fmt.Errorf("%s is not a string list", key)
	}
	return v, nil
}

func (s hfSource) Float32s(key string) ([]float32, error) {
	v, ok := s[key].([]float32)
	if !ok {
		return nil, fmt.Errorf("%s is not a float32 list", key)
	}
	return v, nil
}

func (s hfSource) Int32s(key string) ([]int32, error) {
	v, ok := s[key].([]int32)
	if !ok {
		return nil, fmt.Errorf("%s is not an int32 list", key)
	}
	return v, nil
}
