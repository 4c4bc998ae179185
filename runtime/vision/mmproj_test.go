package vision

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

const modelsDir = "../../../shared/models"

func openModel(t *testing.T, name string) *weights.File {
	t.Helper()
	f, err := weights.Open(filepath.Join(modelsDir, name))
	if err != nil {
		t.Skipf("model not available: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReadConfigTinyQwen35(t *testing.T) {
	f := openModel(t, "tiny-qwen35-mmproj-f32.gguf")
	got, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Path: f.Path, Projector: ProjectorQwen3VL,
		ImageSize: 64, PatchSize: 16, SpatialMerge: 2, Width: 32, FFNWidth: 64, Layers: 2, Heads: 2,
		Eps: 1e-6, OutputWidth: 64, Mean: clipMean, Std: clipStd,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	derived := []int{got.PositionGrid(), got.HeadDim(), got.MergedWidth()}
	if diff := cmp.Diff([]int{4, 16, 128}, derived); diff != "" {
		t.Errorf("position grid, head width, merged width (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(qwenOptions(), got.Options(DecodeLimits{})); diff != "" {
		t.Errorf("preprocessing options (-want +got):\n%s", diff)
	}
}

// edited returns the tiny mmproj rewritten after edit changed its metadata
// or tensors, parsed under the name "edited.gguf".
func edited(t *testing.T, edit func(kvs *[]weights.KV, ts *[]*weights.Tensor)) *weights.File {
	t.Helper()
	f := openModel(t, "tiny-qwen35-mmproj-f32.gguf")
	kvs := slices.Clone(f.KV)
	ts := make([]*weights.Tensor, len(f.Tensors))
	for i, tn := range f.Tensors {
		c := *tn
		ts[i] = &c
	}
	edit(&kvs, &ts)
	var b bytes.Buffer
	if err := weights.Write(&b, f.Version, kvs, ts); err != nil {
		t.Fatal(err)
	}
	out, err := weights.Parse(b.Bytes(), "edited.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func setKV(key string, v weights.Value) func(*[]weights.KV, *[]*weights.Tensor) {
	return func(kvs *[]weights.KV, _ *[]*weights.Tensor) {
		for i := range *kvs {
			if (*kvs)[i].Key == key {
				(*kvs)[i].Value = v
				return
			}
		}
		*kvs = append(*kvs, weights.KV{Key: key, Value: v})
	}
}

func dropKV(key string) func(*[]weights.KV, *[]*weights.Tensor) {
	return func(kvs *[]weights.KV, _ *[]*weights.Tensor) {
		*kvs = slices.DeleteFunc(*kvs, func(kv weights.KV) bool { return kv.Key == key })
	}
}

func dropTensor(name string) func(*[]weights.KV, *[]*weights.Tensor) {
	return func(_ *[]weights.KV, ts *[]*weights.Tensor) {
		*ts = slices.DeleteFunc(*ts, func(t *weights.Tensor) bool { return t.Name == name })
	}
}

// reshapeTensor keeps a tensor's leading elements under a smaller shape.
func reshapeTensor(name string, shape ...int) func(*[]weights.KV, *[]*weights.Tensor) {
	return func(_ *[]weights.KV, ts *[]*weights.Tensor) {
		for _, t := range *ts {
			if t.Name == name {
				t.Shape = shape
				t.Data = t.Data[:4*t.Elements()]
			}
		}
	}
}

func TestReadConfigRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name string
		edit func(*[]weights.KV, *[]*weights.Tensor)
		want []string // substrings of the error
	}{
		{"a text model given as mmproj", setKV("general.architecture", weights.Str("qwen35")),
			[]string{"edited.gguf", "general.architecture", "qwen35"}},
		{"another projector", setKV("clip.projector_type", weights.Str("ldp")),
			[]string{"edited.gguf", "clip.projector_type", "ldp", "not supported"}},
		{"no patch size", dropKV("clip.vision.patch_size"),
			[]string{"edited.gguf", `"clip.vision.patch_size"`, "not found"}},
		{"a zero layer count", setKV("clip.vision.block_count", weights.U32(0)),
			[]string{"edited.gguf", `"clip.vision.block_count"`, "out of range"}},
		{"a string width", setKV("clip.vision.embedding_length", weights.Str("32")),
			[]string{"edited.gguf", `"clip.vision.embedding_length"`}},
		{"two std values", setKV("clip.vision.image_std", weights.Arr([]float32{0.5, 0.5})),
			[]string{"edited.gguf", `"clip.vision.image_std"`, "2 values"}},
		{"a zero std", setKV("clip.vision.image_std", weights.Arr([]float32{0.5, 0, 0.5})),
			[]string{"edited.gguf", `"clip.vision.image_std"`, "not positive"}},
		{"a negative eps", setKV("clip.vision.attention.layer_norm_epsilon", weights.F32(-1)),
			[]string{"edited.gguf", "layer_norm_epsilon"}},
		{"deepstack layers", setKV("clip.vision.is_deepstack_layers", weights.Arr([]bool{false, true})),
			[]string{"edited.gguf", "is_deepstack_layers", "deepstack"}},
		{"a token side that would overflow the pixel budget", setKV("clip.vision.spatial_merge_size", weights.U32(1<<19)),
			[]string{"edited.gguf", "spatial_merge_size", "above 4096"}},
		{"heads that do not divide the width", setKV("clip.vision.attention.head_count", weights.U32(3)),
			[]string{"edited.gguf", "head_count"}},
		{"a missing layer tensor", dropTensor("v.blk.1.ffn_down.weight"),
			[]string{"edited.gguf", `"v.blk.1.ffn_down.weight"`, "missing"}},
		{"a projector of the wrong width", reshapeTensor("mm.2.weight", 128, 32),
			[]string{"edited.gguf", `"mm.2.weight"`, "[128 32]", "[128 64]"}},
		{"one layer more than the file holds", setKV("clip.vision.block_count", weights.U32(3)),
			[]string{"edited.gguf", `"v.blk.2.ln1.weight"`, "missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ReadConfig(edited(t, tt.edit))
			if err == nil {
				t.Fatalf("ReadConfig = %+v, want an error", cfg)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestCheckTextModel(t *testing.T) {
	cfg, err := ReadConfig(openModel(t, "tiny-qwen35-mmproj-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckTextModel(openModel(t, "tiny-qwen35-vl-f32.gguf")); err != nil {
		t.Errorf("the golden's text model: %v", err)
	}
	err = cfg.CheckTextModel(openModel(t, "kq-qwen3-q4_k_m.gguf"))
	if err == nil {
		t.Fatal("a 256-wide text model was accepted for a 64-wide projector")
	}
	for _, s := range []string{"tiny-qwen35-mmproj-f32.gguf", "kq-qwen3-q4_k_m.gguf", "qwen3.embedding_length", "64", "256"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestOpenMMProjNamesTheFile(t *testing.T) {
	text := filepath.Join(modelsDir, "tiny-qwen35-vl-f32.gguf")
	for _, path := range []string{text, filepath.Join(t.TempDir(), "absent.gguf")} {
		f, cfg, err := OpenMMProj(path)
		if err == nil {
			f.Close()
			t.Fatalf("OpenMMProj(%s) = %+v, want an error", path, cfg)
		}
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
	f, cfg, err := OpenMMProj(filepath.Join(modelsDir, "tiny-qwen35-mmproj-f32.gguf"))
	if err != nil {
		t.Skipf("mmproj not available: %v", err)
	}
	defer f.Close()
	if cfg.Layers != 2 {
		t.Errorf("Layers = %d, want 2", cfg.Layers)
	}
}
