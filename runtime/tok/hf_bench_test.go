package tok

import (
	"os"
	"path/filepath"
	"strings"
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

// benchText returns about 1 MB of mixed text: the strings of the
// tokenizer golden (English, code, CJK, emoji, whitespace, special tokens
// ...) one per line, repeated.
func benchText(b *testing.B, g tokenizerGolden) string {
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		for _, r := range g.Results {
			sb.WriteString(r.Text)
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

// BenchmarkEncodeHF measures Encode's tokens/s on 1 MB of mixed text with
// the real vocabularies, as one document.
func BenchmarkEncodeHF(b *testing.B) {
	for _, name := range []string{"qwen3", "llama3"} {
		b.Run(name, func(b *testing.B) {
			g := readTokenizerGolden(b, name)
			tk := hfPackage(b, name, g)
			text := benchText(b, g)
			b.SetBytes(int64(len(text)))
			n := 0
			for b.Loop() {
				n += len(tk.Encode(text, true, true))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
