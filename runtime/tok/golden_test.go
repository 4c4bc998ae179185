package tok

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// findShared returns <module root>/../shared and whether it holds golden
// data.
func findShared() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
	shared := filepath.Join(dir, "..", "shared")
	if _, err := os.Stat(filepath.Join(shared, "golden")); err != nil {
		return "", false
	}
	return shared, true
}

// sharedDir returns <module root>/../shared, skipping the test when it is
// absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	shared, ok := findShared()
	if !ok {
		t.Skip("shared data (<module root>/../shared) not found")
	}
	return shared
}

// golden is the part of a /shared/golden/*.json file the tokenizer checks.
type golden struct {
	Model   string `json:"model"`
	NVocab  int    `json:"n_vocab"`
	Results []struct {
		ID              string   `json:"id"`
		Prompt          string   `json:"prompt"`
		PromptTokens    []int32  `json:"prompt_tokens"`
		GeneratedTokens []int32  `json:"generated_tokens"`
		GeneratedText   string   `json:"generated_text"`
		GeneratedHex    string   `json:"generated_text_hex"`
		PiecesHex       []string `json:"generated_pieces_hex"`
		// Chunks is the prompt as a vision golden splits it: text chunks,
		// each tokenized on its own (special tokens added to the first
		// only), around image chunks. Such a result has no prompt_tokens.
		Chunks []struct {
			Type   string  `json:"type"`
			Text   string  `json:"text"`
			Tokens []int32 `json:"tokens"`
		} `json:"chunks"`
	} `json:"results"`
}

// greedyGoldens returns the greedy-generation goldens in shared/golden by
// file name without ".json": the files with a model and its n_vocab (not
// the prompt lists, the tokenizer goldens of TestHFGoldenTokens, the
// speculative counts or matmul-quant.json).
func greedyGoldens(t testing.TB, shared string) map[string]golden {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(shared, "golden", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]golden{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			continue
		}
		g := readGolden(t, file)
		if g.Model != "" && g.NVocab > 0 {
			out[strings.TrimSuffix(filepath.Base(file), ".json")] = g
		}
	}
	return out
}

func readGolden(t testing.TB, path string) golden {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return g
}

var tokCache sync.Map // model path -> *Tokenizer

// loadModel opens a GGUF file and builds its tokenizer (cached per path).
func loadModel(t testing.TB, path string) *Tokenizer {
	t.Helper()
	if tk, ok := tokCache.Load(path); ok {
		return tk.(*Tokenizer)
	}
	f, err := weights.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatalf("FromGGUF(%s): %v", path, err)
	}
	tokCache.Store(path, tk)
	return tk
}

// goldenTokenizer returns the tokenizer of a golden file's model: the GGUF
// in shared/models, or for the qwen3-0.6b-shape file (not stored) the same
// vocabulary rebuilt from tiny-qwen3-f32.gguf (see qwen06Tokenizer). ok is
// false when neither is available.
func goldenTokenizer(t *testing.T, shared string, g golden) (tk *Tokenizer, ok bool) {
	path := filepath.Join(shared, "models", g.Model)
	if _, err := os.Stat(path); err == nil {
		return loadModel(t, path), true
	}
	if strings.HasPrefix(g.Model, "qwen3-0.6b-shape") {
		return qwen06Tokenizer(t, filepath.Join(shared, "models", "tiny-qwen3-f32.gguf")), true
	}
	return nil, false
}

func TestGoldenPromptTokens(t *testing.T) {
	shared := sharedDir(t)
	n := 0
	for file, g := range greedyGoldens(t, shared) {
		// One subtest per file: a model that fails to load fails only its own.
		t.Run(file, func(t *testing.T) {
			tk, ok := goldenTokenizer(t, shared, g)
			if !ok {
				t.Skipf("model %s not available", g.Model)
			}
			if tk.VocabSize() != g.NVocab {
				t.Errorf("%s: VocabSize() = %d, golden n_vocab %d", g.Model, tk.VocabSize(), g.NVocab)
			}
			for _, r := range g.Results {
				n++
				t.Run(r.ID, func(t *testing.T) {
					if len(r.Chunks) == 0 {
						got := tk.Encode(r.Prompt, true, true)
						if diff := cmp.Diff(r.PromptTokens, got); diff != "" {
							t.Errorf("Encode(%q) mismatch (-llama.cpp +got):\n%s", r.Prompt, diff)
						}
						return
					}
					for i, c := range r.Chunks {
						if c.Type != "text" {
							continue
						}
						got := tk.Encode(c.Text, i == 0, true)
						if diff := cmp.Diff(c.Tokens, got); diff != "" {
							t.Errorf("chunk %d: Encode(%q) mismatch (-llama.cpp +got):\n%s", i, c.Text, diff)
						}
					}
				})
			}
		})
	}
	if n == 0 {
		t.Skip("no golden cases with a model")
	}
}

func TestGoldenGeneratedPieces(t *testing.T) {
	shared := sharedDir(t)
	for file, g := range greedyGoldens(t, shared) {
		t.Run(file, func(t *testing.T) {
			tk, ok := goldenTokenizer(t, shared, g)
			if !ok {
				t.Skipf("model %s not available", g.Model)
			}
			for _, r := range g.Results {
				t.Run(r.ID, func(t *testing.T) {
					var pieces []string
					for _, id := range r.GeneratedTokens {
						pieces = append(pieces, hex.EncodeToString(tk.Piece(id)))
					}
					if diff := cmp.Diff(r.PiecesHex, pieces); diff != "" {
						t.Errorf("pieces mismatch (-llama.cpp +got):\n%s", diff)
					}
					if got := hex.EncodeToString([]byte(tk.Decode(r.GeneratedTokens))); got != r.GeneratedHex {
						t.Errorf("Decode hex = %s, want %s", got, r.GeneratedHex)
					}
					d := tk.NewDecoder()
					var b strings.Builder
					for _, id := range r.GeneratedTokens {
						b.WriteString(d.Add(id))
					}
					b.WriteString(d.Flush())
					// The golden shows each invalid byte as one U+FFFD; the
					// streaming decoder writes one per maximal invalid
					// sequence (as Python and browsers do), so where the
					// bytes are not UTF-8 runs of U+FFFD compare as one.
					want, got := r.GeneratedText, b.String()
					if raw, _ := hex.DecodeString(r.GeneratedHex); !utf8.Valid(raw) {
						want, got = collapseReplacements(want), collapseReplacements(got)
					}
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("streamed text mismatch (-golden +got):\n%s", diff)
					}
				})
			}
		})
	}
}

// collapseReplacements replaces each run of U+FFFD in s by one.
func collapseReplacements(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if r == utf8.RuneError && prev {
			continue
		}
		prev = r == utf8.RuneError
		b.WriteRune(r)
	}
	return b.String()
}
