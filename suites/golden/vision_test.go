package golden_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/suites/golden"
)

// TestLoadVision reads the vision golden and checks what its users rely
// on: every case's image chunks name its images in order, and the chunks'
// tokens add up to the prompt's token count; a text golden is refused.
func TestLoadVision(t *testing.T) {
	dir := filepath.Join(sharedDir(t), "golden")
	f, err := golden.LoadVision(filepath.Join(dir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Fatal(err)
	}
	if f.MediaMarker == "" || len(f.Results) < 6 || len(f.Embeddings) == 0 {
		t.Fatalf("marker %q, %d cases, %d full embeddings", f.MediaMarker, len(f.Results), len(f.Embeddings))
	}
	for _, r := range f.Results {
		var images []string
		tokens := 0
		for _, c := range r.Chunks {
			if c.Type == "image" {
				images = append(images, c.Image)
				tokens += c.NTokens
				if c.EmbdStats == nil || len(c.EmbdFirst8) != 8 {
					t.Errorf("%s: image %s has no embedding checksums", r.ID, c.Image)
				}
				continue
			}
			tokens += len(c.Tokens)
		}
		if diff := cmp.Diff(r.Images, images, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: images (-listed +chunks):\n%s", r.ID, diff)
		}
		if tokens != r.NPromptTokens {
			t.Errorf("%s: chunks hold %d tokens, n_prompt_tokens %d", r.ID, tokens, r.NPromptTokens)
		}
	}
	if _, err := golden.LoadVision(filepath.Join(dir, "tiny-qwen3-f32.json")); err == nil {
		t.Error("a text golden loaded as a vision golden")
	}
}
