package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGraphTestCommand(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	dir := t.TempDir()
	write := func(name, tests string) string {
		src := `graph: ` + strings.TrimSuffix(name, ".yaml") + `
params:
  chunk: {type: int, default: 3, min: 1, max: 64}
nodes:
  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}}
out: {tokens: pick.tokens}
tests:
` + tests
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("chunked.yaml", `  - {name: same as plain, prompt: "Once upon a time", max_tokens: 12, same_as: plain}
  - {name: sampled, prompt: "Lily", temperature: 0.7, max_tokens: 5}
`)
	bad := write("hot.yaml", `  - {name: hot same_as, prompt: "Once", temperature: 0.9, max_tokens: 4, same_as: plain}
`)
	code, stdout, stderr := runCLI("graph", "test", "--model", model, good)
	if code != 0 || !strings.Contains(stdout, `ok "same as plain": 12 tokens, same as plain`) || !strings.Contains(stdout, `ok "sampled": 5 tokens`) {
		t.Errorf("good graph: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("graph", "test", "--model", model, bad)
	if code != 1 || !strings.Contains(stdout, "hot.yaml:") || !strings.Contains(stdout, "same_as needs temperature 0") {
		t.Errorf("bad graph: exit %d\nstdout:\n%s", code, stdout)
	}
	if code, _, _ := runCLI("graph", "test", good); code != 2 {
		t.Errorf("missing --model: exit %d, want 2", code)
	}
}

// graph test --mmproj wires the tower into a graph that encodes no images,
// as serving does: plain then runs with a vision.encode step, which a
// text-only model refuses, and passes on the vision-language model.
func TestGraphTestWiresTheTower(t *testing.T) {
	vl, tower := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf"), sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dense := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	code, stdout, stderr := runCLI("graph", "test", "--threads", "2", "--model", vl, "--mmproj", tower, "plain")
	if code != 0 || !strings.Contains(stdout, `plain: ok "greedy story": 32 tokens, same as plain`) {
		t.Errorf("plain on the VL model: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("graph", "test", "--threads", "2", "--model", dense, "--mmproj", tower, "plain")
	if code != 1 || !strings.Contains(stdout, "step vision (vision.encode) cannot run the tower") {
		t.Errorf("plain on a text-only model with a tower: exit %d\nstdout:\n%s", code, stdout)
	}
}
