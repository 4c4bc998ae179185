package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertedFolderVerifiesLlamaCppGoldens converts the tiny models to
// Hugging Face folders with `ninfer convert` and checks llama.cpp's greedy
// goldens of the GGUFs with `ninfer golden verify --model DIR` (and the
// Qwen3.5 hybrid's MTP drafts with `golden drafts`).
func TestConvertedFolderVerifiesLlamaCppGoldens(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-f32", "tiny-llama-f32", "tiny-qwen35-f32"} {
		t.Run(name, func(t *testing.T) {
			model := sharedPath(t, "models", name+".gguf")
			gold := sharedPath(t, "golden", name+".json")
			dir := filepath.Join(t.TempDir(), name)
			code, stdout, stderr := runCLI("convert", "--model", model, "--to", "hf", "--out", dir, "--shard-bytes", "1000000")
			if code != 0 || !strings.Contains(stdout, "wrote "+dir) {
				t.Fatalf("convert: exit %d: %s%s", code, stdout, stderr)
			}
			code, stdout, stderr = runCLI("golden", "verify", "--model", dir, gold)
			if code != 0 || !strings.Contains(stdout, "cases match") {
				t.Fatalf("golden verify: exit %d:\n%s%s", code, stdout, stderr)
			}
			t.Log(strings.TrimSpace(stdout))
			if name == "tiny-qwen35-f32" { // its MTP block, read from mtp.*, drafts as llama-server's
				code, stdout, stderr = runCLI("golden", "drafts", "--graph", "mtp", "--model", dir, sharedPath(t, "golden", "spec-tiny-qwen35-mtp.json"))
				if code != 0 || !strings.Contains(stdout, "8/8 cases draft as llama-server") {
					t.Fatalf("golden drafts --graph mtp: exit %d:\n%s%s", code, stdout, stderr)
				}
			}
		})
	}
}

func TestConvertFlagErrors(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--to", "hf", "--out", out}, "--model is required"},
		{[]string{"--model", model, "--to", "hf"}, "--out is required"},
		{[]string{"--model", model, "--out", out}, `--to "": only hf is supported`},
		{[]string{"--model", model, "--to", "hf", "--out", out, "--dtype", "q8_0"}, `--dtype "q8_0": want f32, f16 or bf16`},
		{[]string{"--model", sharedPath(t, "models", "stories260K.gguf"), "--to", "hf", "--out", out}, `tokenizer.ggml.model "llama"`},
	} {
		code, _, stderr := runCLI(append([]string{"convert"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("convert %v: exit %d, stderr %q; want 1 and %q", tc.args, code, stderr, tc.msg)
		}
	}
}
