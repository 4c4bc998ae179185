package weights

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Hugging Face checkpoint file names.
const (
	HFConfigFile      = "config.json"
	HFSafetensorsFile = "model.safetensors"
	HFIndexFile       = "model.safetensors.index.json"
)

// hfArch describes one architecture a Hugging Face folder may hold.
type hfArch struct {
	gguf  string // general.architecture
	class string // config.json architectures[0]
	// permuteQK: q and k rows are reordered for llama.cpp's adjacent-pair
	// RoPE (convert_hf_to_gguf.py LlamaModel.permute).
	permuteQK bool
}

// hfArchs are the supported architectures, by config.json model_type.
var hfArchs = map[string]hfArch{
	"llama": {gguf: "llama", class: "LlamaForCausalLM", permuteQK: true},
	"qwen2": {gguf: "qwen2", class: "Qwen2ForCausalLM"},
	"qwen3": {gguf: "qwen3", class: "Qwen3ForCausalLM"},
}

// hfGlobalNames maps the Hugging Face names of the tensors outside the
// layers to GGUF names.
var hfGlobalNames = map[string]string{
	"model.embed_tokens.weight": "token_embd.weight",
	"model.norm.weight":         "output_norm.weight",
	"lm_head.weight":            "output.weight",
}

// hfLayerNames maps the names of a layer's tensors after "model.layers.N."
// to GGUF names after "blk.N.".
var hfLayerNames = map[string]string{
	"input_layernorm.weight":          "attn_norm.weight",
	"self_attn.q_proj.weight":         "attn_q.weight",
	"self_attn.q_proj.bias":           "attn_q.bias",
	"self_attn.k_proj.weight":         "attn_k.weight",
	"self_attn.k_proj.bias":           "attn_k.bias",
	"self_attn.v_proj.weight":         "attn_v.weight",
	"self_attn.v_proj.bias":           "attn_v.bias",
	"self_attn.o_proj.weight":         "attn_output.weight",
	"self_attn.q_norm.weight":         "attn_q_norm.weight",
	"self_attn.k_norm.weight":         "attn_k_norm.weight",
	"post_attention_layernorm.weight": "ffn_norm.weight",
	"mlp.gate_proj.weight":            "ffn_gate.weight",
	"mlp.up_proj.weight":              "ffn_up.weight",
	"mlp.down_proj.weight":            "ffn_down.weight",
}

// hfRopeFreqs is the GGUF tensor of llama-3 rope frequency factors.
const hfRopeFreqs = "rope_freqs.weight"

// hfToGGUFName returns the GGUF name of a Hugging Face tensor and its layer
// (-1 outside the layers), or ok false for a name the architectures do not
// have.
func hfToGGUFName(name string) (gguf string, layer int, ok bool) {
	if g, ok := hfGlobalNames[name]; ok {
		return g, -1, true
	}
	rest, found := strings.CutPrefix(name, "model.layers.")
	if !found {
		return "", -1, false
	}
	num, suffix, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", -1, false
	}
	g, ok := hfLayerNames[suffix]
	if !ok {
		return "", -1, false
	}
	return fmt.Sprintf("blk.%d.%s", l, g), l, true
}

// hfIgnored reports whether a Hugging Face tensor is one llama.cpp's
// converter drops: the rotary embedding's precomputed inverse frequencies.
func hfIgnored(name string) bool { return strings.HasSuffix(name, ".rotary_emb.inv_freq") }

// IsHFDir reports whether path is a directory holding a config.json: a
// Hugging Face checkpoint folder.
func IsHFDir(path string) bool {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	st, err = os.Stat(filepath.Join(path, HFConfigFile))
	return err == nil && st.Mode().IsRegular()
}

// errFolder is the error of opening a folder as a file.
var errFolder = errors.New("a folder, not a file")

// folderError words err, from opening the model file at path, for a
// folder: one without config.json is not a Hugging Face checkpoint, and a
// model is either that or a GGUF file; it names what the folder holds (up
// to 8 entries). Other errors return unchanged.
func folderError(path string, err error) error {
	if !errors.Is(err, errFolder) {
		return err
	}
	entries, _ := os.ReadDir(path)
	var names []string
	for _, e := range entries {
		if len(names) == 8 {
			names = append(names, "...")
			break
		}
		names = append(names, e.Name())
	}
	found := "it is empty"
	if len(names) > 0 {
		found = "it holds " + strings.Join(names, ", ")
	}
	return fmt.Errorf("%s is a folder without %s: expected a GGUF file, or a Hugging Face checkpoint folder with %s, %s (or its shards and %s), %s and %s; %s",
		path, HFConfigFile, HFConfigFile, HFSafetensorsFile, HFIndexFile, HFTokenizerFile, HFTokenizerConfigFile, found)
}

// HFOptions configure OpenHF.
type HFOptions struct {
	// Load reads the safetensors files into private huge-page memory, as
	// Load does for GGUF, instead of mapping them as Open does.
	Load bool
	// KV are further metadata entries for the File (for example the
	// tokenizer's tokenizer.chat_template); they must not repeat a key
	// OpenHF writes.
	KV []KV
}

// hfConfig is config.json, read key by key so errors can name the key
// (after prefix: "vision_config." in an object's keys).
type hfConfig struct {
	path, prefix string
	m            map[string]json.RawMessage
}

// readJSONObject reads the JSON object file at path as an hfConfig.
func readJSONObject(path string) (*hfConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c := &hfConfig{path: path}
	if err := json.Unmarshal(data, &c.m); err != nil || c.m == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, hfErr(path, "", "not a JSON object: %v", err)
	}
	return c, nil
}

// object returns the object key (required) as an hfConfig whose errors
// name its keys under key.
func (c *hfConfig) object(key string) (*hfConfig, error) {
	v, ok := c.raw(key)
	if !ok {
		return nil, hfErr(c.path, c.prefix+key, "missing")
	}
	o := &hfConfig{path: c.path, prefix: c.prefix + key + "."}
	if err := json.Unmarshal(v, &o.m); err != nil || o.m == nil {
		return nil, hfErr(c.path, c.prefix+key, "not an object")
	}
	return o, nil
}

// raw returns the value of key, absent when missing or null.
func (c *hfConfig) raw(key string) (json.RawMessage, bool) {
	v, ok := c.m[key]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil, false
	}
	return v, true
}

// int reads a positive integer key (at most 2^24 unless big); def < 0 makes
// it required.
func (c *hfConfig) int(key string, def int, big bool) (int, error) {
	v, ok := c.raw(key)
	if !ok {
		if def < 0 {
			return 0, hfErr(c.path, c.prefix+key, "missing")
		}
		return def, nil
	}
	var n int64
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, hfErr(c.path, c.prefix+key, "%s is not an integer", v)
	}
	limit := int64(1 << 24)
	if big {
		limit = math.MaxInt32
	}
	if n <= 0 || n > limit {
		return 0, hfErr(c.path, c.prefix+key, "%d out of range [1, %d]", n, limit)
	}
	return int(n), nil
}

// float reads a positive finite number key, ok false when absent.
func (c *hfConfig) float(key string) (float64, bool, error) {
	v, ok := c.raw(key)
	if !ok {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, false, hfErr(c.path, c.prefix+key, "%s is not a number", v)
	}
	if f <= 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, hfErr(c.path, c.prefix+key, "%g out of range", f)
	}
	return f, true, nil
}

// hfModel is what OpenHF reads from config.json.
type hfModel struct {
	hfDims
	arch        hfArch
	ropeFactors []float32
	kv          []KV
}

// hfDims are the transformer sizes of a config.json (or its text_config).
type hfDims struct {
	layers, embed, heads, kvHeads int
	headDim, ffn, vocab           int // vocab 0 when config.json has none
	ctx                           int // max_position_embeddings, 0 when absent
	hasHeadDim                    bool
}

// readHFDims reads c's sizes; head_dim defaults to hidden_size /
// num_attention_heads, num_key_value_heads to num_attention_heads.
func readHFDims(c *hfConfig) (hfDims, error) {
	var d hfDims
	var errs []error
	get := func(dst *int, key string, def int, big bool) {
		v, err := c.int(key, def, big)
		if err != nil {
			errs = append(errs, err)
		}
		*dst = v
	}
	get(&d.embed, "hidden_size", -1, false)
	get(&d.layers, "num_hidden_layers", -1, false)
	get(&d.ffn, "intermediate_size", -1, false)
	get(&d.heads, "num_attention_heads", -1, false)
	get(&d.kvHeads, "num_key_value_heads", max(d.heads, 1), false)
	get(&d.vocab, "vocab_size", 0, false)
	get(&d.ctx, "max_position_embeddings", 0, true)
	_, d.hasHeadDim = c.raw("head_dim")
	get(&d.headDim, "head_dim", 0, false)
	if err := errors.Join(errs...); err != nil {
		return d, err
	}
	if d.headDim == 0 {
		if d.embed%d.heads != 0 {
			return d, hfErr(c.path, c.prefix+"hidden_size", "%d is not divisible by num_attention_heads %d (give head_dim)", d.embed, d.heads)
		}
		d.headDim = d.embed / d.heads
	}
	if d.heads%d.kvHeads != 0 {
		return d, hfErr(c.path, c.prefix+"num_key_value_heads", "num_attention_heads %d is not a multiple of %d", d.heads, d.kvHeads)
	}
	return d, nil
}

// kvs is d as GGUF metadata of architecture a with blocks blocks.
func (d hfDims) kvs(a string, blocks int) []KV {
	kv := []KV{
		{a + ".block_count", U32(uint32(blocks))},
		{a + ".embedding_length", U32(uint32(d.embed))},
		{a + ".feed_forward_length", U32(uint32(d.ffn))},
		{a + ".attention.head_count", U32(uint32(d.heads))},
		{a + ".attention.head_count_kv", U32(uint32(d.kvHeads))},
	}
	if d.ctx > 0 {
		kv = append(kv, KV{a + ".context_length", U32(uint32(d.ctx))})
	}
	if d.hasHeadDim {
		kv = append(kv, KV{a + ".attention.key_length", U32(uint32(d.headDim))}, KV{a + ".attention.value_length", U32(uint32(d.headDim))})
	}
	if d.vocab > 0 {
		kv = append(kv, KV{a + ".vocab_size", U32(uint32(d.vocab))})
	}
	return kv
}

// hfModelType returns config.json's model_type.
func hfModelType(c *hfConfig) (string, error) {
	var mt string
	if v, ok := c.raw("model_type"); !ok {
		return "", hfErr(c.path, "model_type", "missing")
	} else if err := json.Unmarshal(v, &mt); err != nil {
		return "", hfErr(c.path, "model_type", "%s is not a string", v)
	}
	return mt, nil
}

// readHFConfig reads and validates config.json at path into GGUF metadata.
func readHFConfig(path, dir string) (*hfModel, error) {
	c, err := readJSONObject(path)
	if err != nil {
		return nil, err
	}
	mt, err := hfModelType(c)
	if err != nil {
		return nil, err
	}
	arch, ok := hfArchs[mt]
	if !ok {
		return nil, hfErr(path, "model_type", "%q not supported (supported: llama, qwen2, qwen3, qwen3_5)", mt)
	}
	if v, ok := c.raw("architectures"); ok {
		var classes []string
		if err := json.Unmarshal(v, &classes); err != nil {
			return nil, hfErr(path, "architectures", "not a list of strings")
		}
		if len(classes) > 0 && classes[0] != arch.class {
			return nil, hfErr(path, "architectures", "%q not supported for model_type %q (want %s)", classes[0], mt, arch.class)
		}
	}
	d, err := readHFDims(c)
	if err != nil {
		return nil, err
	}
	m := &hfModel{hfDims: d, arch: arch}
	if m.headDim%2 != 0 {
		return nil, hfErr(path, "head_dim", "%d is odd", m.headDim)
	}
	eps, hasEps, err := c.float("rms_norm_eps")
	if err != nil {
		return nil, err
	}

	// Rope: rope_theta and rope_scaling at the top level, or (newer
	// transformers) both inside rope_parameters.
	ropeKey, ropeParams := "rope_scaling", map[string]json.RawMessage(nil)
	for _, key := range []string{"rope_scaling", "rope_parameters"} {
		if v, ok := c.raw(key); ok {
			if err := json.Unmarshal(v, &ropeParams); err != nil {
				return nil, hfErr(path, key, "not an object")
			}
			ropeKey = key
			break
		}
	}
	theta, hasTheta, err := c.float("rope_theta")
	if err != nil {
		return nil, err
	}
	rp := &hfConfig{path: path, m: ropeParams}
	if !hasTheta {
		if theta, hasTheta, err = rp.float("rope_theta"); err != nil {
			err.(*HFError).Key = ropeKey + ".rope_theta"
			return nil, err
		}
	}
	if len(ropeParams) > 0 {
		var typ string
		for _, key := range []string{"rope_type", "type"} {
			if v, ok := rp.raw(key); ok {
				if err := json.Unmarshal(v, &typ); err != nil {
					return nil, hfErr(path, ropeKey+"."+key, "%s is not a string", v)
				}
				break
			}
		}
		switch {
		case typ == "" || typ == "default":
		case typ == "llama3" && arch.gguf == "llama":
			base := 10000.0
			if hasTheta {
				base = theta
			}
			if m.ropeFactors, err = llama3RopeFactors(c, rp, ropeKey, base, m.headDim); err != nil {
				return nil, err
			}
		default:
			return nil, hfErr(path, ropeKey+".rope_type", "%q not supported for %s (supported: llama3 for llama)", typ, mt)
		}
	}

	a := arch.gguf
	name := filepath.Base(filepath.Clean(dir))
	m.kv = slices.Concat([]KV{{"general.architecture", Str(a)}, {"general.name", Str(name)}}, d.kvs(a, m.layers),
		[]KV{{a + ".rope.dimension_count", U32(uint32(m.headDim))}})
	if hasTheta {
		m.kv = append(m.kv, KV{a + ".rope.freq_base", F32(float32(theta))})
	}
	if hasEps {
		m.kv = append(m.kv, KV{a + ".attention.layer_norm_rms_epsilon", F32(float32(eps))})
	}
	return m, nil
}

// llama3RopeFactors computes the rope frequency factors of llama-3 rope
// scaling as llama.cpp's converter does (LlamaModel.generate_extra_tensors):
// for each pair's frequency base^(-2i/dim), 1 where its wavelength is below
// original/high_freq_factor, factor above original/low_freq_factor, and a
// smooth blend between, in float32 like the converter's torch tensors.
// Like the converter, original_max_position_embeddings is read at the top
// level of config.json (default 8192).
func llama3RopeFactors(c, rp *hfConfig, ropeKey string, base float64, dim int) ([]float32, error) {
	param := func(key string, def float64) (float32, error) {
		v, ok, err := rp.float(key)
		if err != nil {
			err.(*HFError).Key = ropeKey + "." + key
			return 0, err
		}
		if !ok {
			v = def
		}
		return float32(v), nil
	}
	factor, err := param("factor", 8)
	if err != nil {
		return nil, err
	}
	low, err := param("low_freq_factor", 1)
	if err != nil {
		return nil, err
	}
	high, err := param("high_freq_factor", 4)
	if err != nil {
		return nil, err
	}
	orig, err := c.int("original_max_position_embeddings", 8192, true)
	if err != nil {
		return nil, err
	}
	lowWave, highWave := float64(orig)/float64(low), float64(orig)/float64(high)
	if lowWave == highWave {
		return nil, hfErr(c.path, ropeKey+".high_freq_factor", "equals low_freq_factor")
	}
	out := make([]float32, dim/2)
	for i := range out {
		freq := 1 / float32(math.Pow(base, float64(float32(2*i)/float32(dim))))
		wave := float32(2 * math.Pi / float64(freq))
		switch {
		case float64(wave) < highWave:
			out[i] = 1
		case float64(wave) > lowWave:
			out[i] = factor
		default:
			smooth := (float32(orig)/wave - low) / (high - low)
			out[i] = 1 / ((1-smooth)/factor + smooth)
		}
	}
	return out, nil
}

// hfIndex is model.safetensors.index.json.
type hfIndex struct {
	WeightMap map[string]string `json:"weight_map"`
}

// OpenHF opens the Hugging Face checkpoint folder dir (config.json, and
// model.safetensors or the shards model.safetensors.index.json names) as a
// File with the metadata keys and tensor names a GGUF from llama.cpp's
// converter has, so that everything that reads GGUF files reads it
// unchanged. Architectures: llama, qwen2 and qwen3 (config.json
// model_type), and the Qwen3.5 hybrid (qwen3_5: see hfQwen35.tensor for
// what the converter changes there; the vision tower is OpenHFVision's).
// Tokenizer files are not read: see tok.FromHF.
//
// Weights are F32, F16 or BF16 and stay where they are mapped (or loaded,
// see HFOptions.Load), except what must change: llama's q and k rows are
// permuted for adjacent-pair RoPE as the converter permutes them, 1-D
// tensors (norms, biases) become F32, and a tensor whose data is not 32-byte
// aligned is copied. llama-3 rope scaling (rope_scaling.rope_type "llama3")
// becomes rope_freqs.weight as the converter computes it.
//
// Malformed files give an *HFError naming the file and the key: config.json
// keys missing or out of range, a shard the index names that cannot be
// opened, a safetensors header that does not parse, a tensor whose shape
// does not fit config.json, a dtype other than F32, F16 or BF16, a tensor
// of unknown name, and a tensor the model needs that no file has.
func OpenHF(dir string, o HFOptions) (*File, error) {
	path := filepath.Join(dir, HFConfigFile)
	c, err := readJSONObject(path)
	if err != nil {
		return nil, err
	}
	if mt, _ := hfModelType(c); mt == "qwen3_5" || mt == "qwen3_5_text" {
		return openHFQwen35(dir, c, o)
	}
	m, err := readHFConfig(path, dir)
	if err != nil {
		return nil, err
	}
	f, srcs, err := openHFFolder(dir, m.kv, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	for _, s := range srcs {
		if hfIgnored(s.st.Name) {
			continue
		}
		name, layer, known := hfToGGUFName(s.st.Name)
		if !known {
			return nil, hfErr(s.file, s.st.Name, "tensor not known for %s", m.arch.gguf)
		}
		if layer >= m.layers {
			return nil, hfErr(s.file, s.st.Name, "layer %d, but num_hidden_layers is %d", layer, m.layers)
		}
		t, err := m.tensor(s.st, s.file, name)
		if err != nil {
			return nil, err
		}
		f.tensors[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	if m.ropeFactors != nil {
		f.tensors[hfRopeFreqs] = len(f.Tensors)
		f.Tensors = append(f.Tensors, &Tensor{Name: hfRopeFreqs, Shape: []int{len(m.ropeFactors)}, DType: tensor.F32, Data: f32Data(m.ropeFactors)})
	}
	if err := m.checkComplete(f, dir, hfSharded(dir)); err != nil {
		return nil, err
	}
	ok = true
	return f, nil
}

// openHFFolder is a File for the folder dir with metadata kvs and o.KV,
// and the tensors of its safetensors files (hfSources), mapped until the
// File closes; on error nothing stays open.
func openHFFolder(dir string, kvs []KV, o HFOptions) (*File, []hfSource, error) {
	f := &File{Path: dir, Version: 3, Alignment: DefaultAlignment, keys: map[string]int{}, tensors: map[string]int{}}
	var releases []func() error
	f.unmap = func() error {
		var errs []error
		for _, r := range releases {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	if err := f.addKV(slices.Concat(kvs, o.KV)); err != nil {
		return nil, nil, err
	}
	srcs, err := hfSources(dir, o.Load, &releases)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, srcs, nil
}

// addKV adds metadata entries to f, a folder's File; a key given twice is
// an error.
func (f *File) addKV(kvs []KV) error {
	for _, kv := range kvs {
		if _, dup := f.keys[kv.Key]; dup {
			return fmt.Errorf("weights: %s: metadata key %q given twice", f.Path, kv.Key)
		}
		f.keys[kv.Key] = len(f.KV)
		f.KV = append(f.KV, kv)
	}
	return nil
}

// hfSource is one tensor of a Hugging Face folder and the file it is in.
type hfSource struct {
	st   *SafeTensor
	file string
}

// hfSources maps (or, with load, reads) the safetensors files of dir
// (hfShards) and returns their tensors in file order, appending each
// file's release to releases (also on error). A tensor in two files, or in
// another shard than the index says, is an *HFError.
func hfSources(dir string, load bool, releases *[]func() error) ([]hfSource, error) {
	shards, index, err := hfShards(dir)
	if err != nil {
		return nil, err
	}
	var srcs []hfSource
	seen := map[string]string{} // HF name -> file
	for _, path := range shards {
		data, release, err := mapFile(path, load)
		if err != nil {
			if index != nil {
				return nil, hfErr(filepath.Join(dir, HFIndexFile), shardKey(index, path), "shard %s: %v", filepath.Base(path), err)
			}
			return nil, err
		}
		*releases = append(*releases, release)
		st, err := ParseSafetensors(data, path)
		if err != nil {
			return nil, err
		}
		for _, t := range st.Tensors {
			if prev, dup := seen[t.Name]; dup {
				return nil, hfErr(path, t.Name, "also in %s", prev)
			}
			seen[t.Name] = path
			srcs = append(srcs, hfSource{t, path})
		}
	}
	if index != nil {
		if err := checkIndex(index, seen); err != nil {
			return nil, err
		}
	}
	return srcs, nil
}

// hfSharded reports whether dir's tensors are in shards an index names.
func hfSharded(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, HFIndexFile))
	return err == nil
}

// hfShards returns the safetensors files of dir: model.safetensors, or the
// shards model.safetensors.index.json names; then index maps each tensor
// the index names to its shard's path.
func hfShards(dir string) (shards []string, index map[string]string, err error) {
	indexPath := filepath.Join(dir, HFIndexFile)
	data, err := os.ReadFile(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		single := filepath.Join(dir, HFSafetensorsFile)
		if _, err := os.Stat(single); err != nil {
			return nil, nil, fmt.Errorf("weights: %s: no %s or %s: %w", dir, HFSafetensorsFile, HFIndexFile, err)
		}
		return []string{single}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var idx hfIndex
	if err := json.Unmarshal(data, &idx); err != nil {
		return nil, nil, hfErr(indexPath, "", "not a JSON object: %v", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, nil, hfErr(indexPath, "weight_map", "missing or empty")
	}
	index = make(map[string]string, len(idx.WeightMap))
	for _, name := range slices.Sorted(maps.Keys(idx.WeightMap)) {
		file := idx.WeightMap[name]
		if file == "" || file == "." || file == ".." || strings.ContainsAny(file, `/\`) {
			return nil, nil, hfErr(indexPath, name, "shard %q is not a file name in the folder", file)
		}
		path := filepath.Join(dir, file)
		if !slices.Contains(shards, path) {
			shards = append(shards, path)
		}
		index[name] = path
	}
	slices.Sort(shards)
	return shards, index, nil
}

// shardKey returns the first tensor, in name order, that index places in
// the shard at path.
func shardKey(index map[string]string, path string) string {
	for _, name := range slices.Sorted(maps.Keys(index)) {
		if index[name] == path {
			return name
		}
	}
	return ""
}

// checkIndex checks that every tensor the index names is in the shard it
// names; found maps each tensor read to its file.
func checkIndex(index, found map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(index)) {
		want := index[name]
		if got, ok := found[name]; !ok {
			return hfErr(want, name, "missing (%s places it in this shard)", HFIndexFile)
		} else if got != want {
			return hfErr(got, name, "%s places it in %s", HFIndexFile, filepath.Base(want))
		}
	}
	return nil
}

// expectShape returns the PyTorch-order shape config.json implies for the
// GGUF tensor name (vocab-sized dimensions as given by rows, the tensor's
// own first dimension, when config.json has no vocab_size).
func (m *hfModel) expectShape(name string, rows int) []int {
	vocab := m.vocab
	if vocab == 0 {
		vocab = rows
	}
	qd, kvd := m.heads*m.headDim, m.kvHeads*m.headDim
	switch name {
	case "token_embd.weight", "output.weight":
		return []int{vocab, m.embed}
	case "output_norm.weight":
		return []int{m.embed}
	}
	_, suffix, _ := strings.Cut(strings.TrimPrefix(name, "blk."), ".")
	switch suffix {
	case "attn_norm.weight", "ffn_norm.weight":
		return []int{m.embed}
	case "attn_q.weight":
		return []int{qd, m.embed}
	case "attn_q.bias":
		return []int{qd}
	case "attn_k.weight", "attn_v.weight":
		return []int{kvd, m.embed}
	case "attn_k.bias", "attn_v.bias":
		return []int{kvd}
	case "attn_output.weight":
		return []int{m.embed, qd}
	case "attn_q_norm.weight", "attn_k_norm.weight":
		return []int{m.headDim}
	case "ffn_gate.weight", "ffn_up.weight":
		return []int{m.ffn, m.embed}
	case "ffn_down.weight":
		return []int{m.embed, m.ffn}
	}
	return nil
}

// hfDTypes are the safetensors dtypes OpenHF reads.
var hfDTypes = map[string]tensor.DType{"F32": tensor.F32, "F16": tensor.F16, "BF16": tensor.BF16}

// tensor converts st (from file) to the GGUF tensor name.
func (m *hfModel) tensor(st *SafeTensor, file, name string) (*Tensor, error) {
	rows := 0
	if len(st.Shape) > 0 {
		rows = st.Shape[0]
	}
	if want := m.expectShape(name, rows); !slices.Equal(st.Shape, want) {
		return nil, hfErr(file, st.Name, "shape %v, want %v from %s", st.Shape, want, HFConfigFile)
	}
	t, err := hfGGUFTensor(st, file, name)
	if err != nil {
		return nil, err
	}
	if m.arch.permuteQK {
		_, suffix, _ := strings.Cut(strings.TrimPrefix(name, "blk."), ".")
		switch suffix {
		case "attn_q.weight", "attn_q.bias":
			t.Data = PermuteRoPERows(t.Data, m.heads, m.headDim, false)
		case "attn_k.weight", "attn_k.bias":
			t.Data = PermuteRoPERows(t.Data, m.kvHeads, m.headDim, false)
		}
	}
	if len(t.Data) > 0 && !aligned(t.Data) {
		t.Data = alignedCopy(t.Data)
	}
	return t, nil
}

// aligned reports whether b starts at a DefaultAlignment boundary.
func aligned(b []byte) bool { return uintptr(unsafe.Pointer(&b[0]))%DefaultAlignment == 0 }

// checkComplete checks that f has every tensor the architecture needs and
// names the first one missing. The check stops there, so its work is bound
// by the tensors the files hold, not by the num_hidden_layers config.json
// declares.
func (m *hfModel) checkComplete(f *File, dir string, sharded bool) error {
	file := filepath.Join(dir, HFSafetensorsFile)
	if sharded {
		file = filepath.Join(dir, HFIndexFile)
	}
	has := func(name string) bool {
		g, _, _ := hfToGGUFName(name)
		_, err := f.Tensor(g)
		return err == nil
	}
	for _, name := range []string{"model.embed_tokens.weight", "model.norm.weight"} {
		if !has(name) {
			return hfErr(file, name, "missing: the model needs it")
		}
	}
	layer := []string{"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
		"self_attn.o_proj.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}
	switch m.arch.gguf {
	case "qwen2":
		layer = append(layer, "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias")
	case "qwen3":
		layer = append(layer, "self_attn.q_norm.weight", "self_attn.k_norm.weight")
	}
	for l := range m.layers {
		held := 0
		for _, s := range layer {
			if has(fmt.Sprintf("model.layers.%d.%s", l, s)) {
				held++
			}
		}
		if held == len(layer) {
			continue
		}
		for _, s := range layer {
			if name := fmt.Sprintf("model.layers.%d.%s", l, s); !has(name) {
				if held == 0 {
					return hfErr(file, name, "missing: the model needs it (config.json num_hidden_layers is %d, the files hold layers 0 to %d)", m.layers, l-1)
				}
				return hfErr(file, name, "missing: the model needs it")
			}
		}
	}
	return nil
}

// PermuteRoPERows reorders the rows of a q or k projection (data holds
// heads*headDim rows of equal size) between the Hugging Face layout, where
// RoPE pairs element j of a head with element j+headDim/2, and llama.cpp's
// adjacent-pair layout (convert_hf_to_gguf.py LlamaModel.permute): row
// 2j+s of a head comes from Hugging Face row s*headDim/2+j. inverse maps
// back. It returns a new slice.
func PermuteRoPERows(data []byte, heads, headDim int, inverse bool) []byte {
	out := make([]byte, len(data))
	rows := heads * headDim
	rb := len(data) / rows
	half := headDim / 2
	for h := range heads {
		for j := range half {
			for s := range 2 {
				gguf := h*headDim + 2*j + s
				hf := h*headDim + s*half + j
				dst, src := gguf, hf
				if inverse {
					dst, src = hf, gguf
				}
				copy(out[dst*rb:(dst+1)*rb], data[src*rb:(src+1)*rb])
			}
		}
	}
	return out
}

// alignedCopy returns a copy of b whose first byte is DefaultAlignment
// aligned.
func alignedCopy(b []byte) []byte {
	out := alignedBytes(len(b))
	copy(out, b)
	return out
}

// alignedBytes returns n zero bytes starting at a DefaultAlignment boundary.
func alignedBytes(n int) []byte {
	buf := make([]byte, n+DefaultAlignment)
	off := 0
	if rem := int(uintptr(unsafe.Pointer(&buf[0])) % DefaultAlignment); rem != 0 {
		off = DefaultAlignment - rem
	}
	return buf[off : off+n : off+n]
}

// f32Data encodes v as little-endian float32s in aligned memory.
func f32Data(v []float32) []byte {
	out := alignedBytes(4 * len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
	}
	return out
}
