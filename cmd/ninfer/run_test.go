package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/suites/golden"
)

func sharedPath(t *testing.T, parts ...string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(append([]string{filepath.Dir(file), "..", "..", "..", "shared"}, parts...)...)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared file not found: %s", p)
	}
	return p
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = dispatch(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestRunJSONContract checks the --json output other tools depend on,
// against llama.cpp's golden ids.
func TestRunJSONContract(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	code, stdout, stderr := runCLI("run", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "8",
		"--temperature", "0", "--ignore-eos", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		PromptIDs []int32 `json:"prompt_ids"`
		IDs       []int32 `json:"ids"`
		Text      string  `json:"text"`
		Timings   struct {
			Prefill *float64 `json:"prefill_seconds"`
			Decode  *float64 `json:"decode_seconds"`
		} `json:"timings"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	gold, err := golden.Load(sharedPath(t, "golden", "stories260K.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, wantIDs := gold.Results[0].PromptTokens, gold.Results[0].GeneratedTokens[:8]
	if gold.Results[0].Prompt != "Once upon a time" {
		t.Fatalf("golden case 0 is %q", gold.Results[0].Prompt)
	}
	if diff := cmp.Diff(want, out.PromptIDs); diff != "" {
		t.Errorf("prompt_ids (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantIDs, out.IDs); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(out.Text, ", there was a") || out.Timings.Prefill == nil || out.Timings.Decode == nil {
		t.Errorf("text %q, timings %+v", out.Text, out.Timings)
	}

	// --prompt-ids bypasses the tokenizer and gives the same continuation.
	code, stdout, stderr = runCLI("run", "--model", model, "--prompt-ids", strings.Trim(strings.Join(strings.Fields(fmt.Sprint(want)), ","), "[]"), "--max-tokens", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	out.IDs = nil
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantIDs, out.IDs); diff != "" {
		t.Errorf("ids from --prompt-ids (-want +got):\n%s", diff)
	}
}

// TestRunStreamsText checks the default (non-JSON) output.
func TestRunStreamsText(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	code, stdout, stderr := runCLI("run", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.HasPrefix(stdout, ", there was a little girl") {
		t.Errorf("stdout = %q", stdout)
	}
}

// corruptOffset copies a GGUF and sets the data offset of the named tensor
// far past the end of the file.
func corruptOffset(t *testing.T, src, tensor string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	name := append(binary.LittleEndian.AppendUint64(nil, uint64(len(tensor))), tensor...)
	i := bytes.Index(b, name)
	if i < 0 {
		t.Fatalf("tensor %q not found in %s", tensor, src)
	}
	p := i + len(name)
	nd := int(binary.LittleEndian.Uint32(b[p:]))
	off := p + 4 + 8*nd + 4
	binary.LittleEndian.PutUint64(b[off:], 1<<40)
	path := filepath.Join(t.TempDir(), "oob.gguf")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunBadInputs(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	dir := t.TempDir()
	full, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.gguf")
	if err := os.WriteFile(truncated, full[:len(full)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	notGGUF := filepath.Join(dir, "text.gguf")
	if err := os.WriteFile(notGGUF, []byte("hello, not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	badGraph := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badGraph, []byte(`graph: bad
params:
  chunk: {type: int, default: 0, min: 1, max: 64}
nodes:
  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}, colour: red}
  - {id: pick, op: sample.tokn, in: {logits: fwd.logits}}
out: {tokens: pick.tokens}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := []string{"--model", model, "--prompt", "hi"}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of stderr
	}{
		{"missing model file", []string{"--model", filepath.Join(dir, "nope.gguf"), "--prompt", "hi"}, []string{"nope.gguf", "no such file"}},
		{"truncated gguf", []string{"--model", truncated, "--prompt", "hi"}, []string{"truncated.gguf", "tensor", "extends past end of file"}},
		{"out of bounds tensor offset", []string{"--model", corruptOffset(t, model, "output.weight"), "--prompt", "hi"}, []string{`tensor "output.weight"`, "past end of file"}},
		{"not a gguf", []string{"--model", notGGUF, "--prompt", "hi"}, []string{"text.gguf"}},
		{"negative max tokens", append(ok, "--max-tokens", "-1"), []string{"--max-tokens -1 must be >= 1"}},
		{"negative temperature", append(ok, "--temperature", "-1"), []string{"--temperature"}},
		{"top-p out of range", append(ok, "--top-p", "1.5"), []string{"--top-p"}},
		{"both prompts", append(ok, "--prompt-ids", "1,2"), []string{"exactly one of --prompt and --prompt-ids"}},
		{"bad prompt ids", []string{"--model", model, "--prompt-ids", "1,x"}, []string{`"x" is not a token id`}},
		{"prompt id out of vocab", []string{"--model", model, "--prompt-ids", "1,99999"}, []string{"out of vocabulary"}},
		{"context overflow", append(ok, "--max-tokens", "100000"), []string{"context length exceeded"}},
		{"graph with three mistakes", append(ok, "--graph", badGraph), []string{
			"bad.yaml:3:", "0 is out of range [1, 64]", "bad.yaml:6:", `unknown key "colour"`, "bad.yaml:7:", `unknown op "sample.tokn"`, `did you mean "sample.token"`}},
		{"unknown graph", append(ok, "--graph", "nosuch"), []string{"nosuch"}},
		{"logit bias without a bias", append(ok, "--logit-bias", "5"), []string{`"5": want TOKEN_ID=BIAS`}},
		{"logit bias of +inf", append(ok, "--logit-bias", "5=inf"), []string{"must be a number or -inf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"run"}, tc.args...)...)
			if code == 0 {
				t.Fatalf("exit 0, want failure")
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine") {
				t.Errorf("stderr shows a panic:\n%s", stderr)
			}
		})
	}
}

// --logit-bias ID=-inf bans a token: greedy decoding's first token, once
// banned, is not generated first, and the rest of the flags still apply.
func TestRunLogitBias(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	first := func(args ...string) int32 {
		t.Helper()
		code, stdout, stderr := runCLI(append([]string{"run", "--model", model, "--prompt", "Once upon a time", "--max-tokens", "2", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var out struct{ IDs []int32 }
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.IDs) == 0 {
			t.Fatalf("%v: %s", err, stdout)
		}
		return out.IDs[0]
	}
	greedy := first()
	if banned := first("--logit-bias", fmt.Sprintf("%d=-inf,1=0.5", greedy)); banned == greedy {
		t.Errorf("token %d was banned and still chosen", greedy)
	}
}

// TestGoldenRecordVerify records a golden with one build and verifies it,
// then checks that a tampered golden fails with a token-level diff.
func TestGoldenRecordVerify(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts.json")
	os.WriteFile(prompts, []byte(`[{"id":"a","text":"Once upon a time"},{"id":"b","text":"<|im_start|>user\nhi<|im_end|>"}]`), 0o644)
	out := filepath.Join(dir, "golden.json")
	if code, _, stderr := runCLI("golden", "record", "--model", model, "--prompts", prompts, "--n", "12", "--output", out); code != 0 {
		t.Fatalf("record: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI("golden", "verify", "--model", model, out); code != 0 || !strings.Contains(stdout, "2/2 cases match") {
		t.Fatalf("verify: exit %d: %s %s", code, stdout, stderr)
	}
	b, _ := os.ReadFile(out)
	var f map[string]any
	json.Unmarshal(b, &f)
	res := f["results"].([]any)[1].(map[string]any)
	gen := res["generated_tokens"].([]any)
	gen[5] = gen[5].(float64) + 1
	b, _ = json.Marshal(f)
	os.WriteFile(out, b, 0o644)
	code, stdout, _ := runCLI("golden", "verify", "--model", model, out)
	if code != 1 || !strings.Contains(stdout, "b: generated ids differ at 5") || !strings.Contains(stdout, "1/2 cases match") {
		t.Errorf("tampered golden: exit %d, stdout:\n%s", code, stdout)
	}
}
