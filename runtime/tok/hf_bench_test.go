package tok

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParseHF measures building the real Qwen3 tokenizer (151,669
// tokens, 151,387 merges) from its tokenizer.json bytes.
func BenchmarkParseHF(b *testing.B) {
	dir := hfPackageDir(b, "qwen3")
	data, err := os.ReadFile(filepath.Join(dir, HFTokenizerFile))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseHF(HFFiles{Tokenizer: data, TokenizerName: HFTokenizerFile}); err != nil {
			b.Fatal(err)
		}
	}
}
