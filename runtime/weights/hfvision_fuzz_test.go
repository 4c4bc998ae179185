package weights

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadHFVisionConfig: any config.json and preprocessor_config.json
// give an *HFError or the mmproj metadata, never a panic; any tensor name
// maps to a v.* or mm.* name, or to none.
func FuzzReadHFVisionConfig(f *testing.F) {
	f.Add([]byte(`{"architectures":["Qwen3_5ForConditionalGeneration"],"text_config":{"hidden_size":8},"vision_config":{"hidden_size":4,"intermediate_size":8,"depth":1,"num_heads":1,"patch_size":2,"spatial_merge_size":2,"deepstack_visual_indexes":[]}}`),
		[]byte(`{"image_mean":[0.5,0.5,0.5],"image_std":[1,1,1]}`), "model.visual.blocks.0.attn.qkv.weight")
	f.Add([]byte(`{"architectures":["Qwen3VLForConditionalGeneration"],"text_config":null,"vision_config":{}}`), []byte(`null`), "model.visual.merger.norm")
	f.Fuzz(func(t *testing.T, config, pre []byte, name string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, HFConfigFile), config, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, HFPreprocessorFile), pre, 0o644); err != nil {
			t.Fatal(err)
		}
		if kvs, err := readHFVisionConfig(dir); err == nil && len(kvs) == 0 {
			t.Fatal("no metadata and no error")
		}
		if g, vision, known := hfVisionName(name); known && (!vision || !strings.HasPrefix(g, "v.") && !strings.HasPrefix(g, "mm.")) {
			t.Fatalf("%q maps to %q", name, g)
		}
	})
}
