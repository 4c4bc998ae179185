package weights

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Hugging Face tokenizer file names WriteHF writes.
const (
	HFTokenizerFile       = "tokenizer.json"
	HFTokenizerConfigFile = "tokenizer_config.json"
)

// HFWriteOptions configure WriteHF.
type HFWriteOptions struct {
	// DType is the dtype of the 2-D weights: F32, F16 or BF16; 0 keeps
	// each tensor's own when it is one of those and makes it F32 otherwise
	// (a quantized tensor is dequantized). 1-D tensors (norms, biases) are
	// always written as F32, as GGUF stores them.
	DType tensor.DType
	// ShardBytes > 0 splits the weights into shards of at most about this
	// many bytes (model-00001-of-0000N.safetensors, with
	// model.safetensors.index.json); 0 writes one model.safetensors.
	ShardBytes int64
}

// hfArchOf returns the model_type and entry of hfArchs for a GGUF
// architecture.
func hfArchOf(gguf string) (string, hfArch, bool) {
	for mt, a := range hfArchs {
		if a.gguf == gguf {
			return mt, a, true
		}
	}
	return "", hfArch{}, false
}

// hfPreRegex are the Split regexes of the tokenizer.ggml.pre values WriteHF
// writes (the tokenizer.json pre_tokenizer llama.cpp's converter maps to
// each), and whether model.ignore_merges is set.
var hfPreRegex = map[string]struct {
	regex        string
	ignoreMerges bool
}{
	"qwen2":     {`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, false},
	"llama-bpe": {`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, true},
}

// WriteHF writes f, a GGUF model of an architecture OpenHF reads (llama,
// qwen2, qwen3, qwen35: a Qwen3.5 text model, without a vision tower) with a byte-level BPE vocabulary (tokenizer.ggml.model
// "gpt2", pre-tokenizer qwen2, llama-bpe or gpt-2), as a Hugging Face
// checkpoint folder dir: config.json, the safetensors weights,
// tokenizer.json and tokenizer_config.json. It inverts what OpenHF and
// llama.cpp's converter do (names, llama's q/k row permutation, shapes in
// PyTorch order), so OpenHF(dir) gives f's tensors back bit for bit when
// DType keeps them. dir is created if needed; existing files are replaced.
func WriteHF(f *File, dir string, o HFWriteOptions) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("weights: write hf %s: %s", f.Path, fmt.Sprintf(format, args...))
	}
	switch o.DType {
	case 0, tensor.F32, tensor.F16, tensor.BF16:
	default:
		return fail("dtype %v: want f32, f16 or bf16", o.DType)
	}
	if f.Arch() == "qwen35" {
		return writeHFQwen35(f, dir, o)
	}
	modelType, arch, ok := hfArchOf(f.Arch())
	if !ok {
		return fail("architecture %q not supported (llama, qwen2, qwen3, qwen35)", f.Arch())
	}
	a := arch.gguf
	inRange := func(key string, v uint64) (int, error) {
		if v == 0 || v > 1<<31 {
			return 0, fail("%s.%s = %d out of range", a, key, v)
		}
		return int(v), nil
	}
	need := func(key string) (int, error) {
		v, err := f.Uint(a + "." + key)
		if err != nil {
			return 0, err
		}
		return inRange(key, v)
	}
	cfg := map[string]any{
		"architectures": []string{arch.class},
		"model_type":    modelType,
		"hidden_act":    "silu",
	}
	var layers, embed, heads, kvHeads int
	for _, k := range []struct {
		gguf, hf string
		dst      *int
	}{{"block_count", "num_hidden_layers", &layers}, {"embedding_length", "hidden_size", &embed},
		{"attention.head_count", "num_attention_heads", &heads}, {"feed_forward_length", "intermediate_size", nil}} {
		v, err := need(k.gguf)
		if err != nil {
			return err
		}
		cfg[k.hf] = v
		if k.dst != nil {
			*k.dst = v
		}
	}
	kvHeads = heads
	if f.Has(a + ".attention.head_count_kv") {
		v, err := need("attention.head_count_kv")
		if err != nil {
			return err
		}
		kvHeads = v
	}
	cfg["num_key_value_heads"] = kvHeads
	headDim := embed / heads
	if f.Has(a + ".attention.key_length") {
		v, err := need("attention.key_length")
		if err != nil {
			return err
		}
		headDim = v
		cfg["head_dim"] = v
	} else if embed%heads != 0 {
		return fail("%s.embedding_length %d not divisible by %d heads", a, embed, heads)
	}
	if f.Has(a+".rope.dimension_count") && !f.Has(a+".attention.key_length") {
		if v, err := need("rope.dimension_count"); err != nil {
			return err
		} else if v != headDim {
			return fail("%s.rope.dimension_count %d: partial rotary (of head dim %d) cannot be written", a, v, headDim)
		}
	}
	info, err := f.Info()
	if err != nil {
		return fail("%v", err)
	}
	if info.ContextLength > 0 {
		cfg["max_position_embeddings"] = info.ContextLength
	}
	for _, k := range []struct{ gguf, hf string }{{"rope.freq_base", "rope_theta"}, {"attention.layer_norm_rms_epsilon", "rms_norm_eps"}} {
		if f.Has(a + "." + k.gguf) {
			v, err := f.Float(a + "." + k.gguf)
			if err != nil {
				return err
			}
			// The shortest decimal of the float32 GGUF holds, which parses
			// back to the same float32.
			cfg[k.hf] = json.Number(strconv.FormatFloat(v, 'g', -1, 32))
		}
	}
	if _, err := f.Tensor(hfRopeFreqs); err == nil {
		return fail("tensor %q: rope frequency factors cannot be written as config.json rope_scaling", hfRopeFreqs)
	}
	if info.Vocab == 0 {
		return fail("no token_embd.weight")
	}
	cfg["vocab_size"] = info.Vocab
	_, err = f.Tensor("output.weight")
	cfg["tie_word_embeddings"] = err != nil

	// Tensors, in file order, with Hugging Face names.
	ggufToHF := map[string]string{}
	for h, g := range hfGlobalNames {
		ggufToHF[g] = h
	}
	var out []*SafeTensor
	for _, t := range f.Tensors {
		name, ok := ggufToHF[t.Name]
		if !ok {
			var l int
			var suffix string
			if n, _ := fmt.Sscanf(t.Name, "blk.%d.%s", &l, &suffix); n == 2 {
				for h, g := range hfLayerNames {
					if g == suffix {
						name, ok = fmt.Sprintf("model.layers.%d.%s", l, h), true
					}
				}
			}
		}
		if !ok || len(t.Shape) > 2 {
			return fail("tensor %q has no Hugging Face name for %s", t.Name, a)
		}
		st, err := hfTensor(t, name, o.DType)
		if err != nil {
			return fail("tensor %q: %v", t.Name, err)
		}
		if arch.permuteQK {
			_, suffix, _ := strings.Cut(strings.TrimPrefix(t.Name, "blk."), ".")
			switch suffix {
			case "attn_q.weight", "attn_q.bias":
				st.Data = PermuteRoPERows(st.Data, heads, headDim, true)
			case "attn_k.weight", "attn_k.bias":
				st.Data = PermuteRoPERows(st.Data, kvHeads, headDim, true)
			}
		}
		out = append(out, st)
	}
	return writeHFFiles(f, dir, cfg, out, o.ShardBytes)
}

// writeHFFiles writes the folder dir of f: config.json (cfg, with
// torch_dtype from out's dtypes and the tokenizer's token ids), the
// tokenizer files and out's safetensors (shards of shardBytes when > 0).
func writeHFFiles(f *File, dir string, cfg map[string]any, out []*SafeTensor, shardBytes int64) error {
	dtypes := map[string]bool{}
	for _, st := range out {
		dtypes[st.DType] = true
	}
	cfg["torch_dtype"] = "float32"
	if dtypes["BF16"] {
		cfg["torch_dtype"] = "bfloat16"
	} else if dtypes["F16"] {
		cfg["torch_dtype"] = "float16"
	}
	tokFiles, err := hfTokenizerFiles(f, cfg)
	if err != nil {
		return fmt.Errorf("weights: write hf %s: %v", f.Path, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	files := map[string][]byte{HFConfigFile: append(js, '\n')}
	maps.Copy(files, tokFiles)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return writeShards(dir, out, shardBytes)
}

// hfTensor is t as a safetensors tensor called name: 1-D as F32, 2-D as dt
// (0: t's dtype if a float one, else F32).
func hfTensor(t *Tensor, name string, dt tensor.DType) (*SafeTensor, error) {
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		shape[len(t.Shape)-1-i] = d
	}
	if len(t.Shape) == 1 {
		dt = tensor.F32
	} else if dt == 0 {
		dt = t.DType
		if dt != tensor.F16 && dt != tensor.BF16 {
			dt = tensor.F32
		}
	}
	data := t.Data
	if dt != t.DType {
		v, err := t.Float32s()
		if err != nil {
			return nil, err
		}
		rb, err := dt.RowBytes(len(v))
		if err != nil {
			return nil, err
		}
		data = make([]byte, rb)
		if err := tensor.QuantizeRow(dt, v, data); err != nil {
			return nil, err
		}
	}
	names := map[tensor.DType]string{tensor.F32: "F32", tensor.F16: "F16", tensor.BF16: "BF16"}
	return &SafeTensor{Name: name, DType: names[dt], Shape: shape, Data: data}, nil
}

// writeShards writes ts to dir as model.safetensors or, with shardBytes >
// 0, as shards with an index.
func writeShards(dir string, ts []*SafeTensor, shardBytes int64) error {
	write := func(name string, part []*SafeTensor) error {
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, part, map[string]string{"format": "pt"}); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
	}
	if shardBytes <= 0 {
		return write(HFSafetensorsFile, ts)
	}
	var parts [][]*SafeTensor
	var size, total int64
	for _, t := range ts {
		n := int64(len(t.Data))
		if len(parts) == 0 || (size > 0 && size+n > shardBytes) {
			parts, size = append(parts, nil), 0
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], t)
		size += n
		total += n
	}
	weightMap := map[string]string{}
	for i, part := range parts {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(parts))
		if err := write(name, part); err != nil {
			return err
		}
		for _, t := range part {
			weightMap[t.Name] = name
		}
	}
	js, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, HFIndexFile), append(js, '\n'), 0o644)
}

// GGUF tokenizer token types (llama.cpp's llama_token_type).
const (
	tokNormal      = 1
	tokControl     = 3
	tokUserDefined = 4
	tokUnused      = 5
	tokByte        = 6
)

// hfTokenizerFiles returns tokenizer.json and tokenizer_config.json for f's
// byte-level BPE vocabulary, and sets config.json's token ids in cfg.
func hfTokenizerFiles(f *File, cfg map[string]any) (map[string][]byte, error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if model != "gpt2" {
		return nil, fmt.Errorf("tokenizer.ggml.model %q: only gpt2 (byte-level BPE) is written as %s", model, HFTokenizerFile)
	}
	pre := "gpt-2"
	if f.Has("tokenizer.ggml.pre") {
		if pre, err = f.String("tokenizer.ggml.pre"); err != nil {
			return nil, err
		}
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = tokNormal
	}
	if f.Has("tokenizer.ggml.token_type") {
		if types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
			return nil, err
		}
		if len(types) != len(tokens) {
			return nil, fmt.Errorf("tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
		}
	}
	var merges []string
	if f.Has("tokenizer.ggml.merges") {
		if merges, err = f.Strings("tokenizer.ggml.merges"); err != nil {
			return nil, err
		}
	}

	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	vocab := map[string]int{}
	var addedTokens []added
	for id, text := range tokens {
		switch types[id] {
		case tokNormal, tokByte:
			if _, dup := vocab[text]; dup {
				return nil, fmt.Errorf("tokenizer.ggml.tokens: %q appears twice", text)
			}
			vocab[text] = id
		case tokControl, tokUserDefined:
			addedTokens = append(addedTokens, added{ID: id, Content: text, Special: types[id] == tokControl})
		case tokUnused:
			if text != fmt.Sprintf("[PAD%d]", id) {
				vocab[text] = id
			}
		default:
			return nil, fmt.Errorf("tokenizer.ggml.token_type[%d] = %d: not writable", id, types[id])
		}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	var preTok any
	ignoreMerges := false
	if pre == "gpt-2" {
		preTok = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	} else if r, ok := hfPreRegex[pre]; ok {
		preTok = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": r.regex}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}}
		ignoreMerges = r.ignoreMerges
	} else {
		return nil, fmt.Errorf("tokenizer.ggml.pre %q: only qwen2, llama-bpe and gpt-2 are written as %s", pre, HFTokenizerFile)
	}
	if merges == nil {
		merges = []string{}
	}
	tj := map[string]any{
		"version":        "1.0",
		"truncation":     nil,
		"padding":        nil,
		"added_tokens":   addedTokens,
		"normalizer":     nil,
		"pre_tokenizer":  preTok,
		"post_processor": byteLevel,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": ignoreMerges, "vocab": vocab, "merges": merges,
		},
	}

	tc := map[string]any{"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": false}
	for _, s := range []struct{ key, hf string }{{"bos", "bos"}, {"eos", "eos"}, {"unknown", "unk"}, {"padding", "pad"}} {
		key := "tokenizer.ggml." + s.key + "_token_id"
		if !f.Has(key) {
			continue
		}
		id, err := f.Uint(key)
		if err != nil {
			return nil, err
		}
		if id >= uint64(len(tokens)) {
			continue // 0xFFFFFFFF: none
		}
		tc[s.hf+"_token"] = tokens[id]
		if s.hf != "unk" {
			cfg[s.hf+"_token_id"] = id
		}
	}
	for _, s := range []string{"bos", "eos"} {
		key := "tokenizer.ggml.add_" + s + "_token"
		if f.Has(key) {
			v, err := f.Bool(key)
			if err != nil {
				return nil, err
			}
			tc["add_"+s+"_token"] = v
		}
	}
	if f.Has("tokenizer.chat_template") {
		s, err := f.String("tokenizer.chat_template")
		if err != nil {
			return nil, err
		}
		tc["chat_template"] = s
	}
	out := map[string][]byte{}
	for name, v := range map[string]any{HFTokenizerFile: tj, HFTokenizerConfigFile: tc} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return nil, err
		}
		out[name] = buf.Bytes()
	}
	return out, nil
}
