package tok

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// meta is GGUF metadata for building test tokenizers.
type meta map[string]weights.Value

// build writes m as a GGUF file in memory, parses it and returns
// FromGGUF's result.
func (m meta) build() (*Tokenizer, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kvs := make([]weights.KV, 0, len(m))
	for _, k := range keys {
		kvs = append(kvs, weights.KV{Key: k, Value: m[k]})
	}
	var buf bytes.Buffer
	if err := weights.Write(&buf, 3, kvs, nil); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	f, err := weights.Parse(buf.Bytes(), "test.gguf")
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return FromGGUF(f)
}

// mustBuild is build for metadata that must be valid.
func (m meta) mustBuild(t testing.TB) *Tokenizer {
	t.Helper()
	tk, err := m.build()
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// byteLevelVocab returns the 256 GPT-2 byte characters in byte order.
func byteLevelVocab() []string {
	v := make([]string, 256)
	for b := range v {
		v[b] = byteEnc[b]
	}
	return v
}

// bpeMeta describes a byte-level BPE tokenizer: the 256 byte characters,
// then each merge's result, then the given control tokens.
func bpeMeta(pre string, merges []string, control ...string) meta {
	tokens := byteLevelVocab()
	for _, m := range merges {
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				tokens = append(tokens, m[:i]+m[i+1:])
				break
			}
		}
	}
	types := make([]int32, len(tokens), len(tokens)+len(control))
	for i := range types {
		types[i] = typeNormal
	}
	for _, c := range control {
		tokens = append(tokens, c)
		types = append(types, typeControl)
	}
	return meta{
		keyModel:  weights.Str("gpt2"),
		keyPre:    weights.Str(pre),
		keyTokens: weights.Arr(tokens),
		keyTypes:  weights.Arr(types),
		keyMerges: weights.Arr(merges),
	}
}

// qwen3Specials are the Qwen3 special tokens from id 151643 on, with
// whether each is a control token (else user-defined), as
// shared/tools/make_random_gguf.py lays them out.
var qwen3Specials = []struct {
	text    string
	control bool
}{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<|object_ref_start|>", true}, {"<|object_ref_end|>", true}, {"<|box_start|>", true},
	{"<|box_end|>", true}, {"<|quad_start|>", true}, {"<|quad_end|>", true},
	{"<|vision_start|>", true}, {"<|vision_end|>", true}, {"<|vision_pad|>", true},
	{"<|image_pad|>", true}, {"<|video_pad|>", true}, {"<tool_call>", false},
	{"</tool_call>", false}, {"<|fim_prefix|>", true}, {"<|fim_middle|>", true},
	{"<|fim_suffix|>", true}, {"<|fim_pad|>", true}, {"<|repo_name|>", true},
	{"<|file_sep|>", true}, {"<tool_response>", false}, {"</tool_response>", false},
	{"<think>", false}, {"</think>", false},
}

// qwen06Tokenizer rebuilds the tokenizer of qwen3-0.6b-shape-*.gguf (2.4 GB,
// not stored) the way make_random_gguf.py builds it: the byte symbols and
// merges of the tiny model, "<fillN>" up to id 151642, the Qwen3 special
// tokens at their real ids, then unused "[PADn]" up to 151935.
func qwen06Tokenizer(t testing.TB, tinyPath string) *Tokenizer {
	t.Helper()
	f, err := weights.Open(tinyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tiny, err := f.Strings(keyTokens)
	if err != nil {
		t.Fatal(err)
	}
	merges, err := f.Strings(keyMerges)
	if err != nil {
		t.Fatal(err)
	}
	const nNormal, nVocab = 151643, 151936
	nLearned := 256 + len(merges)
	tokens := append([]string(nil), tiny[:nLearned]...)
	types := make([]int32, 0, nVocab)
	for range tokens {
		types = append(types, typeNormal)
	}
	for i := 0; len(tokens) < nNormal; i++ {
		tokens = append(tokens, fmt.Sprintf("<fill%d>", i))
		types = append(types, typeNormal)
	}
	for _, s := range qwen3Specials {
		tokens = append(tokens, s.text)
		if s.control {
			types = append(types, typeControl)
		} else {
			types = append(types, typeUserDefined)
		}
	}
	for len(tokens) < nVocab {
		tokens = append(tokens, fmt.Sprintf("[PAD%d]", len(tokens)))
		types = append(types, typeUnused)
	}
	return meta{
		keyModel:                      weights.Str("gpt2"),
		keyPre:                        weights.Str("qwen2"),
		keyTokens:                     weights.Arr(tokens),
		keyTypes:                      weights.Arr(types),
		keyMerges:                     weights.Arr(merges),
		"tokenizer.ggml.eos_token_id": weights.U32(151645),
		"tokenizer.ggml.bos_token_id": weights.U32(151643),
		keyAddBOS:                     weights.Boolean(false),
	}.mustBuild(t)
}
