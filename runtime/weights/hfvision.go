package weights

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// HFPreprocessorFile is the Hugging Face image processor's configuration
// (image_mean, image_std).
const HFPreprocessorFile = "preprocessor_config.json"

// hfVisionClasses are the config.json architectures whose vision tower
// OpenHFVision reads: those llama.cpp's converter writes as a
// qwen3vl_merger mmproj (conversion/qwen3vl.py, Qwen3VLVisionModel).
var hfVisionClasses = []string{"Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
	"Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration"}

// hfVisionBlockNames maps the names of a vision block's tensors after
// "model.visual.blocks.N." to mmproj names after "v.blk.N.".
var hfVisionBlockNames = map[string]string{
	"norm1":          "ln1",
	"attn.qkv":       "attn_qkv",
	"attn.proj":      "attn_out",
	"norm2":          "ln2",
	"mlp.linear_fc1": "ffn_up",
	"mlp.linear_fc2": "ffn_down",
}

// hfVisionNames maps the vision tower's tensors outside the blocks, after
// "model.visual.", to mmproj names (the patch kernel is split apart, see
// splitPatchKernel).
var hfVisionNames = map[string]string{
	"patch_embed.proj":  "v.patch_embd", // .bias; the .weight is split apart
	"pos_embed":         "v.position_embd",
	"merger.norm":       "v.post_ln",
	"merger.linear_fc1": "mm.0",
	"merger.linear_fc2": "mm.2",
}

// hfPatchKernel is the vision tower's Conv3D patch embedding, [E, 3, 2, p, p].
const hfPatchKernel = "model.visual.patch_embed.proj.weight"

// hfVisionName returns the mmproj name of the Hugging Face tensor name, or
// ok false for a name that is not the vision tower's (the text model's,
// lm_head, mtp) and known false for a vision tensor the tower does not
// have (deepstack mergers among them).
func hfVisionName(name string) (gguf string, vision, known bool) {
	rest, found := strings.CutPrefix(name, "model.visual.")
	if !found {
		return "", false, false
	}
	base, suffix := rest, ""
	if i := strings.LastIndexByte(rest, '.'); i >= 0 && (rest[i+1:] == "weight" || rest[i+1:] == "bias") {
		base, suffix = rest[:i], rest[i:]
	}
	if g, ok := hfVisionNames[base]; ok && suffix != "" {
		return g + suffix, true, true
	}
	num, part, found := strings.Cut(strings.TrimPrefix(base, "blocks."), ".")
	l, err := strconv.Atoi(num)
	if strings.HasPrefix(base, "blocks.") && found && err == nil && l >= 0 && strconv.Itoa(l) == num && suffix != "" {
		if g, ok := hfVisionBlockNames[part]; ok {
			return fmt.Sprintf("v.blk.%d.%s%s", l, g, suffix), true, true
		}
	}
	return "", true, false
}

// HFHasVision reports whether dir is a Hugging Face checkpoint folder with a
// vision tower OpenHFVision reads: config.json of one of its classes with a
// vision_config, preprocessor_config.json, and the patch-embedding kernel
// among its tensors (in the shard index, or the single file's header). A
// folder whose config.json does not parse has none (its errors are
// OpenHF's to report). note says why a folder whose config.json declares a
// tower has none; it is "" otherwise.
func HFHasVision(dir string) (has bool, note string) {
	if !IsHFDir(dir) {
		return false, ""
	}
	c, err := readJSONObject(filepath.Join(dir, HFConfigFile))
	if err != nil {
		return false, ""
	}
	var classes []string
	v, ok := c.raw("architectures")
	if !ok || json.Unmarshal(v, &classes) != nil || len(classes) == 0 || !slices.Contains(hfVisionClasses, classes[0]) {
		return false, ""
	}
	if _, ok = c.raw("vision_config"); !ok {
		return false, ""
	}
	if _, err := os.Stat(filepath.Join(dir, HFPreprocessorFile)); err != nil {
		return false, fmt.Sprintf("%s has a vision_config but no %s", HFConfigFile, HFPreprocessorFile)
	}
	if !hfHasTensor(dir, hfPatchKernel, strings.TrimPrefix(hfPatchKernel, "model.")) {
		return false, fmt.Sprintf("%s has a vision_config but the folder has no %s tensor", HFConfigFile, hfPatchKernel)
	}
	return true, ""
}

// hfHasTensor reports whether dir's tensors include one of names: in the
// shard index, or in the header of its single safetensors file.
func hfHasTensor(dir string, names ...string) bool {
	shards, index, err := hfShards(dir)
	if err != nil {
		return false
	}
	if index != nil {
		return slices.ContainsFunc(names, func(n string) bool { _, ok := index[n]; return ok })
	}
	header, err := readSafetensorsHeader(shards[0])
	if err != nil {
		return false
	}
	return slices.ContainsFunc(names, func(n string) bool { _, ok := header[n]; return ok })
}

// readSafetensorsHeader reads only the JSON header of the safetensors file
// at path: its entries by tensor name (and __metadata__), unparsed.
func readSafetensorsHeader(path string) (map[string]json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var size [8]byte
	if _, err := io.ReadFull(f, size[:]); err != nil {
		return nil, hfErr(path, "header", "truncated: %v", err)
	}
	n := binary.LittleEndian.Uint64(size[:])
	if fi, err := f.Stat(); err != nil || n > uint64(max(fi.Size()-8, 0)) {
		return nil, hfErr(path, "header", "truncated: header of %d bytes does not fit in the file", n)
	}
	if n > safetensorsMaxHeader {
		return nil, hfErr(path, "header", "header of %d bytes exceeds the %d byte limit", n, safetensorsMaxHeader)
	}
	hdr := make([]byte, n)
	if _, err := io.ReadFull(f, hdr); err != nil {
		return nil, hfErr(path, "header", "truncated: %v", err)
	}
	return parseSafetensorsHeader(hdr, path)
}

// OpenHFVision opens the vision tower of the Hugging Face checkpoint folder
// dir (a Qwen3.5 or Qwen3-VL ...ForConditionalGeneration: config.json
// with a vision_config, the model.visual.* tensors, preprocessor_config.json)
// as the mmproj GGUF llama.cpp's converter writes from it: the metadata
// keys clip.* (vision_config's sizes, the text model's hidden_size as the
// projection width, text_config's rms_norm_eps as the layer-norm epsilon,
// the image mean and std), the tensor names v.* and mm.*, the Conv3D patch
// kernel split along its temporal axis into v.patch_embd.weight and
// v.patch_embd.weight.1 (copies), 1-D tensors as F32. The text model's
// tensors are left out; a tower with deepstack layers (Qwen3-VL) is
// refused. Errors name the file and the key or tensor
// (*HFError); the tensors' shapes are the tower's to check
// (vision.ReadConfig).
func OpenHFVision(dir string, o HFOptions) (*File, error) {
	kvs, err := readHFVisionConfig(dir)
	if err != nil {
		return nil, err
	}
	f, srcs, err := openHFFolder(dir, kvs, o)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
		}
	}()
	from := map[string]string{} // GGUF name -> the Hugging Face name it came from
	for _, s := range srcs {
		add := func(t *Tensor) error {
			if prev, dup := from[t.Name]; dup {
				return hfErr(s.file, s.st.Name, "gives %s, which %s already gave (a folder holds visual.* or model.visual.*, not both)", t.Name, prev)
			}
			from[t.Name] = s.st.Name
			f.tensors[t.Name] = len(f.Tensors)
			f.Tensors = append(f.Tensors, t)
			return nil
		}
		hf := s.st.Name
		if strings.HasPrefix(hf, "visual.") { // the converter reads both prefixes
			hf = "model." + hf
		}
		if hf == hfPatchKernel {
			halves, err := splitPatchKernel(s.st, s.file)
			if err != nil {
				return nil, err
			}
			if err := cmp.Or(add(halves[0]), add(halves[1])); err != nil {
				return nil, err
			}
			continue
		}
		name, vision, known := hfVisionName(hf)
		switch {
		case !vision:
			continue
		case !known:
			return nil, hfErr(s.file, s.st.Name, "tensor not known for a qwen3vl_merger vision tower")
		}
		t, err := hfGGUFTensor(s.st, s.file, name)
		if err != nil {
			return nil, err
		}
		if err := add(t); err != nil {
			return nil, err
		}
	}
	if _, err := f.Tensor("v.patch_embd.weight"); err != nil {
		return nil, hfErr(dir, hfPatchKernel, "missing: the folder holds no vision tower")
	}
	ok = true
	return f, nil
}

// hfGGUFTensor is st (from file) as the GGUF tensor name: its shape in
// ggml order, its data where it lies (copied when not 32-byte aligned),
// a 1-D tensor as F32.
func hfGGUFTensor(st *SafeTensor, file, name string) (*Tensor, error) {
	dt, ok := hfDTypes[st.DType]
	if !ok {
		return nil, hfErr(file, st.Name, "dtype %s not supported (F32, F16, BF16)", st.DType)
	}
	t := &Tensor{Name: name, DType: dt, Data: st.Data}
	for i := len(st.Shape) - 1; i >= 0; i-- {
		t.Shape = append(t.Shape, st.Shape[i])
	}
	if len(t.Shape) == 1 && dt != tensor.F32 {
		v, err := t.Float32s()
		if err != nil {
			return nil, hfErr(file, st.Name, "%v", err)
		}
		t.DType, t.Data = tensor.F32, f32Data(v)
	}
	if len(t.Data) > 0 && !aligned(t.Data) {
		t.Data = alignedCopy(t.Data)
	}
	return t, nil
}

// splitPatchKernel splits the Conv3D patch kernel st, [E, 3, 2, p, p],
// along its temporal axis into the two Conv2D kernels v.patch_embd.weight
// and v.patch_embd.weight.1, each [E, 3, p, p] (ggml {p, p, 3, E}), as
// llama.cpp's converter does; a temporal patch other than 2 is refused.
func splitPatchKernel(st *SafeTensor, file string) ([2]*Tensor, error) {
	var out [2]*Tensor
	if len(st.Shape) != 5 || st.Shape[1] != 3 || st.Shape[2] != 2 || st.Shape[3] != st.Shape[4] {
		return out, hfErr(file, st.Name, "shape %v, want [embedding, 3, 2, patch, patch] (a temporal patch of 2)", st.Shape)
	}
	dt, ok := hfDTypes[st.DType]
	if !ok {
		return out, hfErr(file, st.Name, "dtype %s not supported (F32, F16, BF16)", st.DType)
	}
	e, p := st.Shape[0], st.Shape[3]
	plane := p * p * dt.BlockBytes() // bytes of one [p, p] slice (float types: blocks of 1)
	if len(st.Data) != e*3*2*plane {
		return out, hfErr(file, st.Name, "%d bytes, want %d", len(st.Data), e*3*2*plane)
	}
	for kt := range out {
		data := alignedBytes(e * 3 * plane)
		for ec := range e * 3 {
			src := (ec*2 + kt) * plane
			copy(data[ec*plane:], st.Data[src:src+plane])
		}
		name := "v.patch_embd.weight"
		if kt == 1 {
			name += ".1"
		}
		out[kt] = &Tensor{Name: name, DType: dt, Shape: []int{p, p, 3, e}, Data: data}
	}
	return out, nil
}

// readHFVisionConfig reads config.json and preprocessor_config.json of dir
// into the mmproj's metadata, as llama.cpp's converter writes it
// (MmprojModel and Qwen3VLVisionModel.set_gguf_parameters).
func readHFVisionConfig(dir string) ([]KV, error) {
	path := filepath.Join(dir, HFConfigFile)
	c, err := readJSONObject(path)
	if err != nil {
		return nil, err
	}
	var classes []string
	if v, ok := c.raw("architectures"); !ok || json.Unmarshal(v, &classes) != nil || len(classes) == 0 || !slices.Contains(hfVisionClasses, classes[0]) {
		return nil, hfErr(path, "architectures", "want one of %s for a vision tower", strings.Join(hfVisionClasses, ", "))
	}
	vc, err := c.object("vision_config")
	if err != nil {
		return nil, err
	}
	tc, err := c.object("text_config")
	if err != nil {
		return nil, err
	}
	var sizes [6]int
	for i, key := range []string{"hidden_size", "intermediate_size", "depth", "num_heads", "patch_size", "spatial_merge_size"} {
		if sizes[i], err = vc.int(key, -1, false); err != nil {
			return nil, err
		}
	}
	width, ffn, depth, heads, patch, merge := sizes[0], sizes[1], sizes[2], sizes[3], sizes[4], sizes[5]
	imageSize, err := vc.int("image_size", 0, false)
	if err != nil {
		return nil, err
	}
	if imageSize == 0 {
		positions, err := vc.int("num_position_embeddings", 2304, false)
		if err != nil {
			return nil, err
		}
		imageSize = int(math.Sqrt(float64(positions)) * float64(patch)) // the converter's int(n**0.5 * patch)
		if imageSize > 1<<24 {
			return nil, hfErr(path, "vision_config.num_position_embeddings", "%d positions of patch %d give an image size of %d, above %d", positions, patch, imageSize, 1<<24)
		}
	}
	projection, err := tc.int("hidden_size", -1, false)
	if err != nil {
		return nil, err
	}
	eps, hasEps, err := tc.float("rms_norm_eps")
	if err != nil {
		return nil, err
	}
	if !hasEps {
		eps = 1e-6
	}
	if v, ok := vc.raw("deepstack_visual_indexes"); ok {
		var idx []int
		if err := json.Unmarshal(v, &idx); err != nil {
			return nil, hfErr(path, "vision_config.deepstack_visual_indexes", "%s is not a list of integers", v)
		}
		if len(idx) > 0 {
			return nil, hfErr(path, "vision_config.deepstack_visual_indexes", "deepstack layers (Qwen3-VL) are not supported: the Qwen3.5 text model takes none")
		}
	}
	pre, err := readJSONObject(filepath.Join(dir, HFPreprocessorFile))
	if err != nil {
		return nil, err
	}
	var meanStd [2][]float32
	for i, key := range []string{"image_mean", "image_std"} {
		v, ok := pre.raw(key)
		if !ok || json.Unmarshal(v, &meanStd[i]) != nil || len(meanStd[i]) != 3 {
			return nil, hfErr(pre.path, key, "want 3 numbers (R, G, B)")
		}
	}
	return []KV{
		{"general.architecture", Str("clip")},
		{"general.type", Str("mmproj")},
		{"general.name", Str(filepath.Base(filepath.Clean(dir)))},
		{"clip.projector_type", Str("qwen3vl_merger")},
		{"clip.has_vision_encoder", Boolean(true)},
		{"clip.use_gelu", Boolean(true)},
		{"clip.vision.projection_dim", U32(uint32(projection))},
		{"clip.vision.image_size", U32(uint32(imageSize))},
		{"clip.vision.patch_size", U32(uint32(patch))},
		{"clip.vision.embedding_length", U32(uint32(width))},
		{"clip.vision.feed_forward_length", U32(uint32(ffn))},
		{"clip.vision.block_count", U32(uint32(depth))},
		{"clip.vision.attention.head_count", U32(uint32(heads))},
		{"clip.vision.attention.layer_norm_epsilon", F32(float32(eps))},
		{"clip.vision.image_mean", Arr(meanStd[0])},
		{"clip.vision.image_std", Arr(meanStd[1])},
		{"clip.vision.spatial_merge_size", U32(uint32(merge))},
	}, nil
}
