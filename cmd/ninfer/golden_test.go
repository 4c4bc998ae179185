package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestGoldenDrafts checks llama-server's speculative goldens through the
// CLI: EAGLE-3 and the hybrid's MTP head draft and accept exactly what the
// server did at k = 3 (read from the golden), and a different k, which
// drafts differently, fails with the counts.
func TestGoldenDrafts(t *testing.T) {
	eagle := []string{"--graph", "eagle3", "--model", "draft=" + sharedPath(t, "models", "tiny-qwen3-eagle3-f32.gguf"),
		sharedPath(t, "golden", "spec-tiny-qwen3-eagle3.json")}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"eagle3", eagle, 0, "8/8 cases draft as llama-server"},
		{"mtp", []string{"--graph", "mtp", sharedPath(t, "golden", "spec-tiny-qwen35-mtp.json")}, 0, "8/8 cases draft as llama-server"},
		{"eagle3 at k 2", append([]string{"--set", "k=2"}, eagle...), 1, "llama-server drafted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"golden", "drafts"}, c.args...)...)
			if code != c.code || !strings.Contains(out, c.want) {
				t.Errorf("exit %d, want %d; stdout %q (want %q), stderr %q", code, c.code, out, c.want, errOut)
			}
		})
	}
}

// golden verify and drafts resolve a golden's model in --models when it is
// given: the golden's own model then loads from there, and a directory
// without it fails naming the path it looked at.
func TestGoldenModelsDirectory(t *testing.T) {
	models, empty := sharedPath(t, "models"), t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or in stderr when the command fails
	}{
		{"verify in --models", []string{"verify", "--models", models, sharedPath(t, "golden", "stories260K.json")}, 0, "cases match"},
		{"verify in a directory without the model", []string{"verify", "--models", empty, sharedPath(t, "golden", "stories260K.json")}, 1, filepath.Join(empty, "stories260K.gguf")},
		{"drafts in --models", []string{"drafts", "--graph", "mtp", "--models", models, sharedPath(t, "golden", "spec-tiny-qwen35-mtp.json")}, 0, "8/8 cases draft as llama-server"},
		{"drafts in a directory without the model", []string{"drafts", "--graph", "mtp", "--models", empty, sharedPath(t, "golden", "spec-tiny-qwen35-mtp.json")}, 1, filepath.Join(empty, "tiny-qwen35-f32.gguf")},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCLI(append([]string{"golden"}, c.args...)...)
			got := out
			if c.code != 0 {
				got = errOut
			}
			if code != c.code || !strings.Contains(got, c.want) {
				t.Errorf("exit %d, want %d; stdout %q, stderr %q, want %q", code, c.code, out, errOut, c.want)
			}
		})
	}
}
