package httpfront

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// BenchmarkGrammarMask is the constrained sampler's cost per token on the
// real Qwen3 vocabulary (151,936 tokens; `just tokenizers` makes
// .cache/qwen3-vocab.gguf): one mask of a json_object grammar in the
// states decoding spends its time in.
func BenchmarkGrammarMask(b *testing.B) {
	_, file, _, _ := runtime.Caller(0)
	f, err := weights.Open(filepath.Join(filepath.Dir(file), "..", ".cache", "qwen3-vocab.gguf"))
	if err != nil {
		b.Skipf("vocabulary: %v (run just tokenizers)", err)
	}
	defer f.Close()
	tk, err := tok.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	g := grammar.JSONObject()
	vocabOf(tk) // built once per tokenizer, at the first constrained request
	logits := make([]float32, tk.VocabSize())
	for _, tc := range []struct{ name, prefix string }{
		{"object start", ``},
		{"after a key", `{"name"`},
		{"inside a string", `{"name": "Ali`},
		{"inside a number", `{"age": 4`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			gen := tk.Encode(tc.prefix, false, false)
			m := benchMask(b, g, tk)
			m.mask(gen, logits)
			b.ResetTimer()
			for range b.N {
				// The state seen before: its mask is reused.
				m.mask(gen, logits)
			}
		})
		b.Run(tc.name+", first visit", func(b *testing.B) {
			gen := tk.Encode(tc.prefix, false, false)
			for range b.N {
				m := benchMask(b, g, tk)
				m.mask(gen, logits)
			}
		})
	}
}

// benchMask is a 4096-token choice's mask of g.
func benchMask(b *testing.B, g *grammar.Grammar, tk *tok.Tokenizer) *grammarMask {
	m, e := newGrammarMask(context.Background(), func(error) {}, &Params{Grammar: g, ConstraintField: "response_format"}, tk, 4096)
	if e != nil {
		b.Fatal(e.Message)
	}
	return m
}
