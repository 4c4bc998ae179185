package weights

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SameVocabulary accepts a quantized copy of the target and rejects a
// model with another vocabulary size or one token text changed, naming
// the difference.
func TestSameVocabulary(t *testing.T) {
	f32 := openModel(t, "tiny-qwen3-f32.gguf")
	q8 := openModel(t, "tiny-qwen3-q8_0.gguf")
	stories := openModel(t, "stories260K.gguf")
	if err := SameVocabulary(f32, q8); err != nil {
		t.Errorf("tiny-qwen3 f32 and q8_0: %v", err)
	}
	if err := SameVocabulary(f32, stories); err == nil || !strings.Contains(err.Error(), "512 token embeddings in the draft, 2048 in the target") {
		t.Errorf("tiny-qwen3 and stories260K: %v", err)
	}
	// A copy of q8_0 with token 300's text changed.
	kvs := slices.Clone(q8.KV)
	for i, e := range kvs {
		if e.Key == "tokenizer.ggml.tokens" {
			toks := slices.Clone(e.Value.Any().([]string))
			toks[300] = "changed"
			kvs[i] = KV{Key: e.Key, Value: Arr(toks)}
		}
	}
	var buf bytes.Buffer
	if err := Write(&buf, q8.Version, kvs, q8.Tensors); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "changed.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer changed.Close()
	if err := SameVocabulary(f32, changed); err == nil || !strings.Contains(err.Error(), `token 300 is "changed" in the draft`) {
		t.Errorf("one token text changed: %v", err)
	}
}
