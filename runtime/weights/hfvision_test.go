package weights

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// visionFolder writes a Hugging Face folder holding a one-block vision
// tower (width 4, patch 2) and a text tensor into a test folder, after
// edit changes its config.json, preprocessor_config.json and tensors.
func visionFolder(t *testing.T, edit func(config, pre map[string]any, ts map[string]*SafeTensor)) string {
	t.Helper()
	dir := t.TempDir()
	config := map[string]any{
		"architectures": []any{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
		"text_config": map[string]any{"hidden_size": 8, "rms_norm_eps": 1e-5},
		"vision_config": map[string]any{"hidden_size": 4, "intermediate_size": 8, "depth": 1, "num_heads": 1, "patch_size": 2,
			"spatial_merge_size": 2, "num_position_embeddings": 4},
	}
	pre := map[string]any{"image_mean": []any{0.5, 0.5, 0.5}, "image_std": []any{0.25, 0.5, 1}}
	f32 := func(name string, shape ...int) *SafeTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return &SafeTensor{Name: name, DType: "F32", Shape: shape, Data: seqBytes(4*n, 1)}
	}
	ts := map[string]*SafeTensor{}
	for _, st := range []*SafeTensor{
		{Name: hfPatchKernel, DType: "F32", Shape: []int{4, 3, 2, 2, 2}, Data: f32Bytes(patchKernelValues()...)},
		f32("model.visual.patch_embed.proj.bias", 4),
		f32("model.visual.pos_embed.weight", 4, 4),
		f32("model.visual.blocks.0.attn.qkv.weight", 12, 4),
		{Name: "model.visual.blocks.0.norm1.weight", DType: "F16", Shape: []int{4}, Data: []byte{0, 0x3c, 0, 0x40, 0, 0x42, 0, 0x44}},
		f32("model.visual.merger.linear_fc2.weight", 8, 16),
		f32("model.language_model.embed_tokens.weight", 16, 8),
		f32("lm_head.weight", 16, 8),
		f32("mtp.fc.weight", 8, 16),
	} {
		ts[st.Name] = st
	}
	if edit != nil {
		edit(config, pre, ts)
	}
	for name, v := range map[string]any{HFConfigFile: config, HFPreprocessorFile: pre} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var list []*SafeTensor
	for _, st := range ts {
		list = append(list, st)
	}
	if err := os.WriteFile(filepath.Join(dir, HFSafetensorsFile), encodeSafetensors(t, list, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// patchKernelValues is a Conv3D kernel [4, 3, 2, 2, 2] whose value says
// where it sits: 100*e + 10*c + t + (y*2+x)/10.
func patchKernelValues() []float32 {
	var v []float32
	for e := range 4 {
		for c := range 3 {
			for kt := range 2 {
				for yx := range 4 {
					v = append(v, float32(100*e+10*c+kt)+float32(yx)/10)
				}
			}
		}
	}
	return v
}

// OpenHFVision writes the converter's metadata, splits the patch kernel
// by its temporal index (kernel kt holds the values of t = kt, in
// [E, 3, p, p] order), names the tensors as the mmproj does, turns 1-D
// tensors into F32 and leaves the text model's tensors out.
func TestOpenHFVision(t *testing.T) {
	f, err := OpenHFVision(visionFolder(t, nil), HFOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	for _, tt := range f.Tensors {
		names = append(names, tt.Name)
	}
	want := []string{"mm.2.weight", "v.blk.0.attn_qkv.weight", "v.blk.0.ln1.weight", "v.patch_embd.bias", "v.patch_embd.weight",
		"v.patch_embd.weight.1", "v.position_embd.weight"}
	if diff := cmp.Diff(want, slices.Sorted(slices.Values(names))); diff != "" {
		t.Errorf("tensors (-want +got):\n%s", diff)
	}
	for kt, name := range []string{"v.patch_embd.weight", "v.patch_embd.weight.1"} {
		k, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := k.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		var want []float32
		for e := range 4 {
			for c := range 3 {
				for yx := range 4 {
					want = append(want, float32(100*e+10*c+kt)+float32(yx)/10)
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" || !cmp.Equal(k.Shape, []int{2, 2, 3, 4}) {
			t.Errorf("%s, shape %v (-want +got):\n%s", name, k.Shape, diff)
		}
	}
	norm, _ := f.Tensor("v.blk.0.ln1.weight")
	if v, _ := norm.Float32s(); norm.DType != tensor.F32 || !cmp.Equal(v, []float32{1, 2, 3, 4}) {
		t.Errorf("ln1 (F16 in the folder): %v %v, want F32 [1 2 3 4]", norm.DType, v)
	}
	if qkv, _ := f.Tensor("v.blk.0.attn_qkv.weight"); !cmp.Equal(qkv.Shape, []int{4, 12}) {
		t.Errorf("attn_qkv shape %v, want ggml [4 12]", qkv.Shape)
	}
	for key, want := range map[string]any{
		"general.architecture": "clip", "clip.projector_type": "qwen3vl_merger", "clip.has_vision_encoder": true,
		"clip.vision.projection_dim": uint32(8), "clip.vision.image_size": uint32(4), "clip.vision.patch_size": uint32(2),
		"clip.vision.embedding_length": uint32(4), "clip.vision.feed_forward_length": uint32(8), "clip.vision.block_count": uint32(1),
		"clip.vision.attention.head_count": uint32(1), "clip.vision.spatial_merge_size": uint32(2),
		"clip.vision.attention.layer_norm_epsilon": float32(1e-5), "clip.vision.image_std": []float32{0.25, 0.5, 1},
	} {
		v, ok := f.Lookup(key)
		if !ok || !cmp.Equal(v.Any(), want) {
			t.Errorf("%s = %v, want %v", key, v.Any(), want)
		}
	}
}

// A folder that is not a vision checkpoint, or whose vision config or
// tensors are malformed, fails naming the file and the key or tensor.
func TestOpenHFVisionErrorsNameFileAndKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(config, pre map[string]any, ts map[string]*SafeTensor)
		file, key string
		want      string
	}{
		{"a text-only architecture", func(c, _ map[string]any, _ map[string]*SafeTensor) { c["architectures"] = []any{"Qwen3ForCausalLM"} },
			HFConfigFile, "architectures", "for a vision tower"},
		{"no vision_config", func(c, _ map[string]any, _ map[string]*SafeTensor) { delete(c, "vision_config") },
			HFConfigFile, "vision_config", "missing"},
		{"no depth", func(c, _ map[string]any, _ map[string]*SafeTensor) {
			delete(c["vision_config"].(map[string]any), "depth")
		},
			HFConfigFile, "vision_config.depth", "missing"},
		{"a text hidden size of 0", func(c, _ map[string]any, _ map[string]*SafeTensor) {
			c["text_config"].(map[string]any)["hidden_size"] = 0
		},
			HFConfigFile, "text_config.hidden_size", "out of range"},
		{"a deepstack layer (Qwen3-VL)", func(c, _ map[string]any, _ map[string]*SafeTensor) {
			c["vision_config"].(map[string]any)["deepstack_visual_indexes"] = []any{0}
		}, HFConfigFile, "vision_config.deepstack_visual_indexes", "not supported"},
		{"positions x patch past 2^24", func(c, _ map[string]any, _ map[string]*SafeTensor) {
			vc := c["vision_config"].(map[string]any)
			vc["num_position_embeddings"], vc["patch_size"] = 1<<24, 1<<24
		}, HFConfigFile, "vision_config.num_position_embeddings", "image size of 68719476736"},
		{"two std values", func(_, p map[string]any, _ map[string]*SafeTensor) { p["image_std"] = []any{1, 1} },
			HFPreprocessorFile, "image_std", "want 3 numbers"},
		{"a temporal patch of 1", func(_, _ map[string]any, ts map[string]*SafeTensor) {
			ts[hfPatchKernel] = &SafeTensor{Name: hfPatchKernel, DType: "F32", Shape: []int{4, 3, 1, 2, 2}, Data: make([]byte, 4*48)}
		}, HFSafetensorsFile, hfPatchKernel, "a temporal patch of 2"},
		{"an unknown vision tensor", func(_, _ map[string]any, ts map[string]*SafeTensor) {
			ts["model.visual.blocks.0.attn.gate.weight"] = &SafeTensor{Name: "model.visual.blocks.0.attn.gate.weight", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}
		}, HFSafetensorsFile, "model.visual.blocks.0.attn.gate.weight", "not known"},
		{"no vision tensors", func(_, _ map[string]any, ts map[string]*SafeTensor) {
			for name := range ts {
				if strings.HasPrefix(name, "model.visual.") {
					delete(ts, name)
				}
			}
		}, "", hfPatchKernel, "holds no vision tower"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := visionFolder(t, tc.edit)
			he := openHFVisionError(t, dir)
			file := dir
			if tc.file != "" {
				file = filepath.Join(dir, tc.file)
			}
			if he.File != file || he.Key != tc.key || !strings.Contains(he.Error(), tc.want) {
				t.Errorf("error %v (file %s, key %s), want file %s, key %s, with %q", he, he.File, he.Key, file, tc.key, tc.want)
			}
		})
	}
}

// openHFVisionError opens dir as a vision tower and returns the *HFError
// it must fail with.
func openHFVisionError(t *testing.T, dir string) *HFError {
	t.Helper()
	f, err := OpenHFVision(dir, HFOptions{})
	if err == nil {
		f.Close()
		t.Fatal("opened")
	}
	var he *HFError
	if !errors.As(err, &he) {
		t.Fatalf("%v is not an *HFError", err)
	}
	return he
}

// A folder holding a tensor under both prefixes the converter reads,
// visual.* and model.visual.*, is refused naming the file and either one.
func TestOpenHFVisionRefusesATensorNamedTwice(t *testing.T) {
	for _, name := range []string{"patch_embed.proj.bias", "patch_embed.proj.weight"} {
		t.Run(name, func(t *testing.T) {
			dir := visionFolder(t, func(_, _ map[string]any, ts map[string]*SafeTensor) {
				twin := *ts["model.visual."+name]
				twin.Name = "visual." + name
				ts[twin.Name] = &twin
			})
			he := openHFVisionError(t, dir)
			names := []string{"visual." + name, "model.visual." + name}
			if he.File != filepath.Join(dir, HFSafetensorsFile) || !slices.Contains(names, he.Key) || !strings.Contains(he.Error(), "already gave") {
				t.Errorf("error %v (file %s, key %s), want the safetensors file and one of %v", he, he.File, he.Key, names)
			}
		})
	}
}

// splitPatchKernel allocates the two kernels' bytes once: they are written
// in place into aligned memory, not gathered and then copied.
func TestSplitPatchKernelAllocatesOnce(t *testing.T) {
	const e, p = 64, 16
	st := &SafeTensor{Name: hfPatchKernel, DType: "F32", Shape: []int{e, 3, 2, p, p}, Data: make([]byte, 4*e*3*2*p*p)}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := splitPatchKernel(st, "model.safetensors"); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// The allocator rounds each half up to its size class: a few pages over.
	if got, want := after.TotalAlloc-before.TotalAlloc, uint64(len(st.Data)*5/4); got > want {
		t.Errorf("allocated %d bytes to split a %d-byte kernel, want at most %d", got, len(st.Data), want)
	}
}

// TestHFHasVision checks a folder has a tower only with its config's
// vision_config, preprocessor_config.json and the patch kernel among its
// tensors (single file or shard index), and that the note names what a
// folder whose config declares a tower lacks.
func TestHFHasVision(t *testing.T) {
	indexed := func(dir string, drop string) {
		t.Helper()
		st, err := readSafetensorsHeader(filepath.Join(dir, HFSafetensorsFile))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for name := range st {
			if name != drop && name != safetensorsMetadataKey {
				m[name] = HFSafetensorsFile
			}
		}
		data, _ := json.Marshal(map[string]any{"weight_map": m})
		if err := os.WriteFile(filepath.Join(dir, HFIndexFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		edit  func(config, pre map[string]any, ts map[string]*SafeTensor)
		after func(dir string)
		has   bool
		note  string
	}{
		{"tower", nil, nil, true, ""},
		{"tower in a shard index", nil, func(dir string) { indexed(dir, "") }, true, ""},
		{"tower under visual.", func(_, _ map[string]any, ts map[string]*SafeTensor) {
			st := ts[hfPatchKernel]
			delete(ts, hfPatchKernel)
			st.Name = "visual.patch_embed.proj.weight"
			ts[st.Name] = st
		}, nil, true, ""},
		{"no vision_config", func(config, _ map[string]any, _ map[string]*SafeTensor) { delete(config, "vision_config") }, nil, false, ""},
		{"no preprocessor", nil, func(dir string) { os.Remove(filepath.Join(dir, HFPreprocessorFile)) }, false, HFPreprocessorFile},
		{"no tower tensors", func(_, _ map[string]any, ts map[string]*SafeTensor) {
			for name := range ts {
				if strings.HasPrefix(name, "model.visual.") {
					delete(ts, name)
				}
			}
		}, nil, false, hfPatchKernel},
		{"no patch kernel in the index", nil, func(dir string) { indexed(dir, hfPatchKernel) }, false, hfPatchKernel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := visionFolder(t, tc.edit)
			if tc.after != nil {
				tc.after(dir)
			}
			has, note := HFHasVision(dir)
			if has != tc.has || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
				t.Errorf("HFHasVision = %v, %q; want %v and a note naming %q", has, note, tc.has, tc.note)
			}
		})
	}
}

// TestOpenHFVisionImageSizeFromPositions checks a vision_config without
// image_size gets the converter's int(sqrt(positions) * patch), rounding
// once after the product.
func TestOpenHFVisionImageSizeFromPositions(t *testing.T) {
	for _, tc := range []struct{ positions, want int }{{4, 4}, {8, 5}, {2304, 96}} {
		dir := visionFolder(t, func(config, _ map[string]any, _ map[string]*SafeTensor) {
			config["vision_config"].(map[string]any)["num_position_embeddings"] = tc.positions
		})
		f, err := OpenHFVision(dir, HFOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Uint("clip.vision.image_size")
		f.Close()
		if err != nil || got != uint64(tc.want) {
			t.Errorf("%d positions of patch 2: image_size %d, %v; want %d", tc.positions, got, err, tc.want)
		}
	}
}
