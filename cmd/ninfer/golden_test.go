package main

import (
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
