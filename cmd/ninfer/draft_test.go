package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// `ninfer run` with --model target=A --model draft=B and the draft graph
// gives plain decoding's ids and reports the draft model's speculation; a
// plain --model A is the target too.
func TestRunWithDraftModel(t *testing.T) {
	target, draft := sharedPath(t, "models", "tiny-qwen3-f32.gguf"), sharedPath(t, "models", "tiny-qwen3-q8_0.gguf")
	type out struct {
		IDs         []int32 `json:"ids"`
		Speculative struct {
			Backend  string `json:"backend"`
			Drafted  int    `json:"drafted_tokens"`
			Accepted int    `json:"accepted_tokens"`
		} `json:"speculative"`
	}
	run := func(args ...string) out {
		t.Helper()
		args = append([]string{"run", "--prompt", "<|im_start|>user\nhi<|im_end|>", "--max-tokens", "24", "--temperature", "0",
			"--ignore-eos", "--json", "--threads", "2"}, args...)
		code, stdout, stderr := runCLI(args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var o out
		if err := json.Unmarshal([]byte(stdout), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	plain := run("--model", target)
	for _, m := range [][]string{
		{"--model", "target=" + target, "--model", "draft=" + draft},
		{"--model", "draft=" + draft, "--model", target},
	} {
		got := run(append(m, "--graph", "draft", "--set", "k=3")...)
		if diff := cmp.Diff(plain.IDs, got.IDs); diff != "" {
			t.Errorf("%v: ids differ from plain (-plain +draft):\n%s", m, diff)
		}
		if s := got.Speculative; s.Backend != "draft" || s.Drafted == 0 || s.Accepted == 0 {
			t.Errorf("%v: speculative block %+v", m, s)
		}
	}
}

// Draft model mistakes on the command line are clear errors.
func TestDraftModelFlagErrors(t *testing.T) {
	stories, qwen := sharedPath(t, "models", "stories260K.gguf"), sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	hybrid := sharedPath(t, "models", "tiny-qwen35-f32.gguf")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"a vocabulary mismatch", []string{"--model", "target=" + stories, "--model", "draft=" + qwen, "--graph", "draft"}, 1,
			[]string{"vocabulary mismatch", "draft model " + qwen, "target model " + stories, "2048 token embeddings in the draft, 512 in the target"}},
		{"no draft model", []string{"--model", qwen, "--graph", "draft"}, 1, []string{`runs the model "draft"`, "--model ALIAS=FILE"}},
		{"a hybrid draft model", []string{"--model", hybrid, "--model", "draft=" + hybrid, "--graph", "draft"}, 1,
			[]string{"draft model " + hybrid + " keeps recurrent state (a hybrid model)"}},
		{"two targets", []string{"--model", qwen, "--model", "target=" + qwen}, 2, []string{"the target model is given twice"}},
		{"two drafts", []string{"--model", qwen, "--model", "draft=" + qwen, "--model", "draft=" + stories}, 2, []string{`model "draft" is given twice`}},
		{"an empty path", []string{"--model", "draft="}, 2, []string{`model "draft": empty path`}},
		{"only a draft", []string{"--model", "draft=" + qwen}, 1, []string{"--model is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"run", "--prompt", "hi", "--max-tokens", "2"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// `ninfer graph test` runs a draft graph with --model draft=FILE, and with
// the target itself as the draft model when none is given.
func TestGraphTestDraftModel(t *testing.T) {
	target, draft := sharedPath(t, "models", "tiny-qwen3-f32.gguf"), sharedPath(t, "models", "tiny-qwen3-q8_0.gguf")
	graph := "../../graphs/draft.yaml"
	code, stdout, stderr := runCLI("graph", "test", "--threads", "2", "--model", target, "--model", "draft="+draft, graph)
	if code != 0 || strings.Count(stdout, "(draft=tiny-qwen3-q8_0.gguf), same as ../../graphs/plain.yaml") < 2 {
		t.Errorf("with a draft model: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI("graph", "test", "--threads", "2", "--model", target, graph)
	if code != 0 || !strings.Contains(stdout, "(draft=tiny-qwen3-f32.gguf), same as") {
		t.Errorf("defaulting to the target: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// `ninfer bench` measures a draft graph and reports its speculation.
func TestBenchWithDraftModel(t *testing.T) {
	target, draft := sharedPath(t, "models", "tiny-qwen3-f32.gguf"), sharedPath(t, "models", "tiny-qwen3-q8_0.gguf")
	r := benchJSON(t, "--model", "target="+target, "--model", "draft="+draft, "--graph", "draft", "-p", "0", "-n", "12",
		"-r", "2", "--warmup", "0", "--peak-bandwidth", "-1", "--threads", "2")
	if r.Config.SpeculativeBackend == nil || *r.Config.SpeculativeBackend != "draft" || r.Config.DraftTokens != 4 {
		t.Errorf("config: speculative backend %v, draft tokens %d", r.Config.SpeculativeBackend, r.Config.DraftTokens)
	}
	for _, rep := range r.Tests[0].Reps {
		if s := rep.Speculative; !s.Enabled || s.Rounds == 0 || s.DraftedTokens == 0 {
			t.Errorf("rep speculative block %+v", s)
		}
	}
}
