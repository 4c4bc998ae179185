package executor_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	_ "github.com/ninfer/ninfer-go/nodes/vision"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/executor"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func openModel(t *testing.T, name string) *weights.File {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	f, err := weights.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// writeGraph writes the graph src to a file of its own and returns its path.
func writeGraph(t *testing.T, src string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "graph.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// BindTarget returns the cache shape of the target's steps, and names the
// step of each thing the plan cannot do on the model (a *StepError), which
// the engine refuses and graph check --model positions at its node.
func TestBindTarget(t *testing.T) {
	dense, hybrid := openModel(t, "tiny-qwen3-f32.gguf"), openModel(t, "tiny-qwen35-f32.gguf")
	visionNgram := writeGraph(t, `graph: vision-ngram
nodes:
  - {id: chunking, op: prefill.chunk}
  - {id: draft, op: speculative.ngram, in: {history: $in.history}}
  - {id: see, op: vision.encode, in: {images: $in.images}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, images: see.embeddings, draft: draft.draft}}
  - {id: verify, op: speculative.verify, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`)
	visionDraft := writeGraph(t, `graph: vision-draft
nodes:
  - {id: chunking, op: prefill.chunk}
  - id: draft
    repeat: 2
    nodes:
      - {id: small, op: model.forward, with: {model: draft}, in: {tokens: $loop.tokens, positions: $loop.positions}}
      - {id: pick, op: sample.argmax, in: {logits: small.logits}}
    next: {tokens: pick.tokens}
    out: {draft: pick.tokens}
  - {id: see, op: vision.encode, in: {images: $in.images}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, images: see.embeddings, draft: draft.draft}}
  - {id: verify, op: speculative.verify, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`)
	tests := []struct {
		graph     string
		model     *weights.File
		wantShape executor.Shape
		wantState bool     // the shape has recurrent state
		wantSteps []string // the steps of the errors, in order
	}{
		{"plain", dense, executor.Shape{Layers: 2, KVDim: 64}, false, nil},
		{"self", dense, executor.Shape{Layers: 2, KVDim: 64}, false, nil},
		{"plain", hybrid, executor.Shape{Layers: 2, KVDim: 64}, true, nil},
		{"mtp", hybrid, executor.Shape{Layers: 3, KVDim: 64}, true, nil},
		{"self", hybrid, executor.Shape{}, false, []string{"draft"}},
		{"mtp", dense, executor.Shape{}, false, []string{"head"}},
		{"vision", hybrid, executor.Shape{Layers: 2, KVDim: 64}, true, nil},
		{visionNgram, hybrid, executor.Shape{Layers: 2, KVDim: 64}, true, nil},
		{visionDraft, hybrid, executor.Shape{Layers: 2, KVDim: 64}, true, nil}, // a draft model drafts beside images
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.graph)+" on "+filepath.Base(tt.model.Path), func(t *testing.T) {
			p, err := instance.LoadPlan(tt.graph, node.Default, nil)
			if err != nil {
				t.Fatal(err)
			}
			shape, err := executor.BindTarget(p, tt.model)
			var steps []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var se *executor.StepError
					if !errors.As(e, &se) {
						t.Fatalf("error %v is not a StepError", e)
					}
					steps = append(steps, se.Step)
				}
			}
			if diff := cmp.Diff(tt.wantSteps, steps); diff != "" {
				t.Errorf("error steps (-want +got):\n%s\nerror: %v", diff, err)
			}
			if tt.wantSteps == nil {
				if got := shape.State.Layers() > 0; got != tt.wantState {
					t.Errorf("recurrent state %v, want %v", got, tt.wantState)
				}
				shape.State = exec.StateLayout{} // its sizes are the model's
				if diff := cmp.Diff(tt.wantShape, shape); diff != "" {
					t.Errorf("shape (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// BindTower binds the plan's vision.encode step to the mmproj and refuses,
// naming the step, a vision graph without a tower and a tower the model
// cannot take (no M-RoPE sections; another width is
// vision.TestCheckTextModel's); a tower for a graph
// that encodes no images is refused about the plan.
func TestBindTower(t *testing.T) {
	vl, dense := openModel(t, "tiny-qwen35-vl-f32.gguf"), openModel(t, "tiny-qwen3-f32.gguf")
	tower := openModel(t, "tiny-qwen35-mmproj-f32.gguf")
	tests := []struct {
		graph     string
		model     *weights.File
		tower     *weights.File
		wantBound bool
		wantSteps []string // the steps of the StepErrors, in order
		wantErr   string   // a part of the error
	}{
		{"vision", vl, tower, true, nil, ""},
		{"plain", vl, nil, false, nil, ""},
		{"vision", vl, nil, false, []string{"see"}, "needs a vision tower: tiny-qwen35-vl-f32.gguf has none given (--mmproj FILE)"},
		{"vision", dense, tower, false, []string{"see"}, "is not a vision-language model: it has no M-RoPE sections (qwen3.rope.dimension_sections)"},
		{"plain", vl, tower, false, nil, "given, but the graph encodes no images"},
	}
	for _, tt := range tests {
		name := tt.graph + " on " + filepath.Base(tt.model.Path)
		if tt.tower != nil {
			name += " with a tower"
		}
		t.Run(name, func(t *testing.T) {
			p, err := instance.LoadPlan(tt.graph, node.Default, nil)
			if err != nil {
				t.Fatal(err)
			}
			bound, err := executor.BindTower(p, tt.tower, tt.model)
			var steps []string
			var se *executor.StepError
			if errors.As(err, &se) {
				steps = append(steps, se.Step)
			}
			if diff := cmp.Diff(tt.wantSteps, steps); diff != "" {
				t.Errorf("error steps (-want +got):\n%s\nerror: %v", diff, err)
			}
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
			if got := bound != nil; got != tt.wantBound {
				t.Errorf("bound %v, want %v", got, tt.wantBound)
			}
		})
	}
}
