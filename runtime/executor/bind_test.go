package executor_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
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

// BindTarget returns the cache shape of the target's steps, and names the
// step of each thing the plan cannot do on the model (a *StepError), which
// the engine refuses and graph check --model positions at its node.
func TestBindTarget(t *testing.T) {
	dense, hybrid := openModel(t, "tiny-qwen3-f32.gguf"), openModel(t, "tiny-qwen35-f32.gguf")
	visionNgram := filepath.Join(t.TempDir(), "vision-ngram.yaml")
	if err := os.WriteFile(visionNgram, []byte(`graph: vision-ngram
nodes:
  - {id: chunking, op: prefill.chunk}
  - {id: draft, op: speculative.ngram, in: {history: $in.history}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, images: $in.images, draft: draft.draft}}
  - {id: verify, op: speculative.verify, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`), 0o644); err != nil {
		t.Fatal(err)
	}
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
		{visionNgram, hybrid, executor.Shape{}, false, []string{"draft"}},
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
