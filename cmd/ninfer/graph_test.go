package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/node"
)

// graphTestRegistry holds stand-ins for the specs plain.yaml uses, so these
// tests do not depend on the nodes/* packages.
func graphTestRegistry() *node.Registry {
	one, most := 1.0, 65536.0
	r := node.NewRegistry()
	r.Register(node.Spec{
		Op: "prefill.chunk", Placement: node.Policy, Summary: "Chunk prefill.",
		Params:    []node.Param{{Name: "size", Kind: node.Int, Default: int64(512), Min: &one, Max: &most}},
		NewPolicy: func(p node.Params) (node.PolicyNode, error) { return graphTestChunk(p.Int("size")), nil },
	})
	r.Register(node.Spec{
		Op: "model.forward", Placement: node.Device, Summary: "Forward.",
		In:        []node.Port{{Name: "tokens", Type: node.Tokens}, {Name: "positions", Type: node.Positions}},
		Out:       []node.Port{{Name: "logits", Type: node.Logits}},
		NewDevice: func(node.Params) (node.DeviceNode, error) { return nil, nil },
	})
	r.Register(node.Spec{
		Op: "sample.token", Placement: node.Host, Summary: "Sample.",
		In:      []node.Port{{Name: "logits", Type: node.Logits}},
		Out:     []node.Port{{Name: "tokens", Type: node.Tokens}},
		NewHost: func(node.Params) (node.HostNode, error) { return nil, nil },
	})
	return r
}

type graphTestChunk int

func (c graphTestChunk) Fold(p *node.PlanPolicy) error { p.PrefillChunk = int(c); return nil }

func runGraphForTest(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	saved := graphRegistry
	graphRegistry = graphTestRegistry()
	defer func() { graphRegistry = saved }()
	var out, errOut bytes.Buffer
	code = runGraph(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

const graphTestBroken = `graph: broken
nodes:
  - {id: fwd, op: model.foward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}, wiht: {}}
out: {tokens: pick.logits}
`

func writeGraphFile(t *testing.T, name, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Graphs that type-check but could not run: the compiler rejects them with
// the position of the binding at fault (real node registry).
const (
	graphTestTwoDrafts = `graph: twodrafts
nodes:
  - {id: d1, op: speculative.ngram, with: {k: 4}, in: {history: $in.history}}
  - {id: d2, op: speculative.ngram, with: {k: 2}, in: {history: $in.history}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: d1.draft}}
  - {id: verify, op: speculative.verify, in: {draft: d2.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`
	graphTestHostFed = `graph: hostfed
nodes:
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}}
  - {id: fwd2, op: model.forward, in: {tokens: pick.tokens, positions: $in.positions}}
  - {id: pick2, op: sample.token, in: {logits: fwd2.logits}}
out: {tokens: pick2.tokens}
`
	graphTestSampledDraft = `graph: sampleddraft
nodes:
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}}
  - {id: fwd2, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: pick.tokens}}
  - {id: verify, op: speculative.verify, in: {draft: pick.tokens, logits: fwd2.logits}}
out: {tokens: verify.tokens}
`
	graphTestRowHistory = `graph: rowhistory
nodes:
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, in: {logits: fwd.logits}}
  - {id: draft, op: speculative.ngram, in: {history: pick.tokens}}
  - {id: fwd2, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: draft.draft}}
  - {id: verify, op: speculative.verify, in: {draft: draft.draft, logits: fwd2.logits}}
out: {tokens: verify.tokens}
`
)

func TestGraphCheck(t *testing.T) {
	broken := writeGraphFile(t, "broken.yaml", graphTestBroken)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string
	}{
		{
			name: "the embedded plain graph is ok", args: []string{"check", "plain"},
			wantCode: 0, wantStdout: "plain: ok\n",
		},
		{
			name: "every problem is printed with its position", args: []string{"check", "plain.yaml", broken},
			wantCode: 1, wantStdout: "plain.yaml: ok\n",
			wantStderr: []string{
				broken + `:3:19: unknown op "model.foward" (did you mean "model.forward"?)` + "\n" +
					broken + `:4:60: unknown key "wiht" in node (did you mean "with"?)` + "\n" +
					broken + `:5:15: node pick (sample.token) has no output "logits"` + "\n",
			},
		},
		{
			name: "a missing file is an error", args: []string{"check", "nowhere/g.yaml"},
			wantCode: 1, wantStderr: []string{"nowhere/g.yaml: no such file or embedded graph (embedded: ", "plain, "},
		},
		{
			name: "check needs a file", args: []string{"check"},
			wantCode: 2, wantStderr: []string{"want one or more FILEs"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runGraphForTest(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if diff := cmp.Diff(tt.wantStdout, stdout); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

func TestGraphPlan(t *testing.T) {
	code, stdout, stderr := runGraphForTest(t, "plan", "--set", "chunk=256", "plain")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"plan plain (graphs/plain.yaml)", "chunk = 256", "policy: prefill_chunk=256", "0 device: fwd", "tokens <- pick.tokens"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, stdout)
		}
	}
	code, _, stderr = runGraphForTest(t, "plan", "plain", "--set=chunk=0")
	if code != 1 || !strings.Contains(stderr, "override chunk=0: 0 is out of range [1, 65536]") {
		t.Errorf("bad override: exit %d, stderr %q", code, stderr)
	}
	file := writeGraphFile(t, "g.yaml", "graph: g\nnodes:\n  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions}}\n  - {id: pick, op: sample.token, in: {logits: fwd.logits}}\nout: {tokens: pick.tokens}\n")
	if code, stdout, _ := runGraphForTest(t, "plan", file); code != 0 || !strings.Contains(stdout, "plan g ("+file+")") {
		t.Errorf("plan of a file: exit %d, stdout %q", code, stdout)
	}
}

func TestGraphDot(t *testing.T) {
	code, stdout, stderr := runGraphForTest(t, "dot", "plain")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		`digraph "plain" {`,
		`"fwd" [shape=box, style="rounded,filled", fillcolor="#cfe2ff", label="fwd\nmodel.forward"];`,
		`"chunking" [shape=note, label="chunking\nprefill.chunk\nsize=512"];`,
		`"$in.tokens" -> "fwd" [label="tokens"];`,
		`"fwd" -> "pick" [label="logits"];`,
		`"pick" -> "out.tokens" [label="tokens"];`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("dot lacks %s:\n%s", want, stdout)
		}
	}
}

func TestGraphDocs(t *testing.T) {
	code, stdout, _ := runGraphForTest(t, "docs")
	if code != 0 || stdout != node.Docs(graphTestRegistry()) {
		t.Errorf("docs: exit %d, output:\n%s", code, stdout)
	}
}

func TestGraphUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "usage: ninfer graph"},
		{"a misspelt subcommand", []string{"chek", "plain"}, `unknown command "chek" (did you mean "check"?)`},
		{"an unknown flag", []string{"plan", "plain", "--verbose"}, "unknown flag --verbose"},
		{"a --set without a value", []string{"plan", "plain", "--set"}, "--set needs NAME=VALUE"},
		{"a --set without =", []string{"plan", "plain", "--set", "chunk"}, `--set wants NAME=VALUE, got "chunk"`},
		{"a repeated --set", []string{"plan", "plain", "--set", "a=1", "--set", "a=2"}, "--set a given twice"},
		{"plan with two files", []string{"plan", "plain", "plain"}, "want exactly one FILE"},
		{"docs with an argument", []string{"docs", "plain"}, "takes no arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runGraphForTest(t, tt.args...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and %q", code, stderr, tt.want)
			}
		})
	}
}

// TestGraphCheckRejectsGraphsThatCannotRun checks, with the registry the
// binary uses, the graphs that type-check but that the engine could not
// run: each fails graph check at the binding at fault.
func TestGraphCheckRejectsGraphsThatCannotRun(t *testing.T) {
	twoDrafts := writeGraphFile(t, "twodrafts.yaml", graphTestTwoDrafts)
	hostFed := writeGraphFile(t, "hostfed.yaml", graphTestHostFed)
	sampled := writeGraphFile(t, "sampleddraft.yaml", graphTestSampledDraft)
	rowHistory := writeGraphFile(t, "rowhistory.yaml", graphTestRowHistory)
	for _, tt := range []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{
			name: "a verify wired to other drafts than its forward's", args: []string{"check", twoDrafts},
			wantCode: 1, wantStderr: []string{twoDrafts + ":6:54: node verify verifies d2.draft, but its logits fwd.logits are fwd's, computed for d1.draft"},
		},
		{
			name: "a device input fed from a host node", args: []string{"check", hostFed},
			wantCode: 1, wantStderr: []string{hostFed + ":5:48: node fwd2 (model.forward) runs on the device, but its input tokens reads pick.tokens, a host value (sample.token)"},
		},
		{
			name: "sample.token output used as drafts", args: []string{"check", sampled},
			wantCode: 1, wantStderr: []string{sampled + ":5:93: type mismatch: pick.tokens is tokens, but input draft of model.forward wants draft"},
		},
		{
			name: "a proposer's history fed one token per row", args: []string{"check", rowHistory},
			wantCode: 1, wantStderr: []string{rowHistory + ":5:54: type mismatch: pick.tokens is tokens, but input history of speculative.ngram wants history"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runGraph(tt.args, &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, errOut.String())
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}

// TestGraphEmbeddedWithRealNodes checks every embedded graph against the
// registry the binary really uses (main.go imports the nodes/* packages).
func TestGraphEmbeddedWithRealNodes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runGraph([]string{"check", "plain"}, &out, &errOut); code != 0 {
		t.Errorf("ninfer graph check plain: exit %d\n%s", code, errOut.String())
	}
}

// graph check --model refuses, positioned at the node, a graph that would
// advance a hybrid model's recurrent state while drafting, and an MTP graph
// on a model without an MTP block; the same graphs are fine on the models
// they suit, and other speculative graphs are fine on both.
func TestGraphCheckOnAHybridModel(t *testing.T) {
	hybrid := sharedPath(t, "models", "tiny-qwen35-f32.gguf")
	dense := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	code, _, stderr := runCLI("graph", "check", "--model", hybrid, "self")
	if code != 1 || !strings.Contains(stderr, "self.yaml:15:5: node draft (loop) drafts with the target's own layers") {
		t.Errorf("self on a hybrid model: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI("graph", "check", "--model", dense, "mtp")
	if code != 1 || !strings.Contains(stderr, "mtp.yaml:21:9: node head (model.mtp) cannot run on tiny-qwen3-f32.gguf") ||
		!strings.Contains(stderr, "has no MTP block") {
		t.Errorf("mtp on a model without an MTP block: exit %d, stderr %q", code, stderr)
	}
	for _, tc := range []struct{ model, graph string }{{dense, "self"}, {hybrid, "ngram"}, {hybrid, "plain"}, {hybrid, "mtp"}} {
		if code, stdout, stderr := runCLI("graph", "check", "--model", tc.model, tc.graph); code != 0 || !strings.HasSuffix(strings.TrimSpace(stdout), ": ok") {
			t.Errorf("%s on %s: exit %d, stdout %q, stderr %q", tc.graph, tc.model, code, stdout, stderr)
		}
	}
}

// graph check --model refuses, at the vision.encode node, the vision graph
// without a tower (--mmproj) and with a tower the model cannot take; with
// a tower, graphs that encode no images get it wired in (plain, ngram
// and the drafters of a model of their own, draft, eagle3 and
// dflash, pass).
func TestGraphCheckVisionNeedsATower(t *testing.T) {
	vl, tower := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf"), sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dense := sharedPath(t, "models", "kq-qwen3-q4_k_m.gguf")
	for _, tc := range []struct {
		args     []string
		wantCode int
		want     string // in stderr, or in stdout when the check passes
	}{
		{[]string{"--model", vl, "vision"}, 1, "vision.yaml:11:5: node see (vision.encode) needs a vision tower: tiny-qwen35-vl-f32.gguf has none given (--mmproj FILE)"},
		{[]string{"--model", vl, "--mmproj", tower, "vision"}, 0, "vision: ok"},
		{[]string{"--model", dense, "--mmproj", tower, "vision"}, 1, "vision.yaml:11:5: node see (vision.encode) cannot run the tower: model " + dense + " is not a vision-language model"},
		{[]string{"--model", vl, "--mmproj", tower, "plain"}, 0, "plain: ok"}, // the tower wired in, as in vision
		{[]string{"--model", vl, "--mmproj", tower, "ngram"}, 0, "ngram: ok"},
		{[]string{"--model", vl, "--mmproj", tower, "draft"}, 0, "draft: ok"},
		{[]string{"--model", vl, "--mmproj", tower, "eagle3"}, 0, "eagle3: ok"},
		{[]string{"--model", vl, "--mmproj", tower, "dflash"}, 0, "dflash: ok"},
		{[]string{"--mmproj", tower, "vision"}, 2, "--mmproj needs --model"},
	} {
		code, stdout, stderr := runCLI(append([]string{"graph", "check"}, tc.args...)...)
		if code != tc.wantCode || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("graph check %v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, stdout, stderr, tc.wantCode, tc.want)
		}
	}
}

// graph plan --mmproj shows, in the plan's header, that the tower was wired
// into a graph that encodes no images, and run --mmproj keeps the graph
// the user named (the tower is wired into it, not swapped for vision).
func TestGraphPlanShowsTheWiredTower(t *testing.T) {
	vl, tower := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf"), sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	code, stdout, stderr := runCLI("graph", "plan", "--model", vl, "--mmproj", tower, "plain")
	if code != 0 || !strings.Contains(stdout, "plan plain (graphs/plain.yaml)\nrewritten: --mmproj wired the vision tower in: node vision (vision.encode on $in.images) feeds the images of fwd\n") {
		t.Errorf("exit %d, stdout:\n%s\nstderr %q", code, stdout, stderr)
	}
	o, err := (&modelFlags{model: vl, mmproj: tower, graph: "plain"}).options()
	if err != nil || o.Graph != "plain" {
		t.Errorf("--graph plain --mmproj: options graph %q, err %v; want plain", o.Graph, err)
	}
}

// graph plan --model prints the plan's cache groups on the model: paged KV
// for the attending layers, and a hybrid model's recurrent state slots
// with its prefix cache's checkpoint policy (bf16 checkpoints under the
// state-bf16 graph).
func TestGraphPlanCacheGroups(t *testing.T) {
	code, stdout, stderr := runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "plain")
	if code != 0 || !strings.Contains(stdout, "kv (paged, step fwd): layers [3 7], kv dim 64, f32, 16 tokens per block, 1024 bytes per token") ||
		!strings.Contains(stdout, "layers [0 1 2 4 5 6], f32, 33792 bytes per slot") ||
		!strings.Contains(stdout, "checkpoints (the prefix cache: a state slot's copy, 33792 bytes each") ||
		!strings.Contains(stdout, "every --checkpoint-every blocks of a prompt (default 32: 512 tokens) counted from the last message end") {
		t.Errorf("exit %d, stdout:\n%s\nstderr %q", code, stdout, stderr)
	}
	code, stdout, _ = runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "state-bf16")
	if code != 0 || !strings.Contains(stdout, "checkpoints (the prefix cache: a state slot's copy, 16896 bytes each") {
		t.Errorf("state-bf16: exit %d, stdout:\n%s", code, stdout)
	}
	// --checkpoint-dtype as serve's: bf16 checkpoints beside f32 state,
	// refused as the engine refuses them.
	code, stdout, _ = runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "--checkpoint-dtype", "bf16", "plain")
	if code != 0 || !strings.Contains(stdout, "layers [0 1 2 4 5 6], f32, 33792 bytes per slot") ||
		!strings.Contains(stdout, "checkpoints (the prefix cache: a state slot's copy in bf16, the f32 state rounded where one is taken, 16896 bytes each") {
		t.Errorf("--checkpoint-dtype bf16: exit %d, stdout:\n%s", code, stdout)
	}
	for _, c := range []struct{ graph, dtype, err string }{
		{"mtp", "bf16", "bf16 checkpoints (--checkpoint-dtype bf16) need a graph without speculation"},
		{"state-bf16", "f32", "f32 checkpoints (--checkpoint-dtype f32) of bf16 state"},
		{"plain", "f16", `checkpoint dtype "f16" (--checkpoint-dtype): want f32 or bf16`},
	} {
		code, _, stderr = runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "--checkpoint-dtype", c.dtype, c.graph)
		if code != 1 || !strings.Contains(stderr, c.err) {
			t.Errorf("%s --checkpoint-dtype %s: exit %d, stderr %q; want 1 and %q", c.graph, c.dtype, code, stderr, c.err)
		}
	}
	if code, _, stderr = runCLI("graph", "plan", "--checkpoint-dtype", "bf16", "plain"); code != 2 || !strings.Contains(stderr, "--checkpoint-dtype is graph plan's, with --model") {
		t.Errorf("--checkpoint-dtype without --model: exit %d, stderr %q; want 2", code, stderr)
	}
	code, stdout, _ = runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "mtp")
	if code != 0 || !strings.Contains(stdout, "kv (paged, step head: the MTP block's attention): KV layer 2, after the trunk's, on each sequence's block table, kv dim 64, f32, 512 bytes per token") {
		t.Errorf("mtp: exit %d, stdout:\n%s", code, stdout)
	}
	code, stdout, _ = runCLI("graph", "plan", "--model", sharedPath(t, "models", "tiny-qwen3-f32.gguf"), "plain")
	if code != 0 || !strings.Contains(stdout, "kv (paged, step fwd): layers [0 1]") || strings.Contains(stdout, "state (") || strings.Contains(stdout, "checkpoints (") {
		t.Errorf("a transformer: exit %d, stdout:\n%s", code, stdout)
	}
}
