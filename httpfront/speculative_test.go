package httpfront_test

import (
	"testing"

	"github.com/ninfer/ninfer-go/httpfront"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// startGraph serves model with the named graph, like start.
func startGraph(t *testing.T, model, graph string) *server {
	t.Helper()
	return startWith(t, instance.Options{Model: modelPath(t, model), Graph: graph, Threads: 1, MaxRunning: 2}, httpfront.Config{})
}

// A speculative graph answers with plain decoding's text and reports its
// draft counts in timings (llama.cpp's draft_n, draft_n_accepted); a plain
// graph's timings have neither.
func TestSpeculativeTimings(t *testing.T) {
	body := `{"model":"stories260K","prompt":"the cat sat on the mat. the cat sat on the mat. the cat sat","max_tokens":32,"temperature":0}`
	plain := start(t, "stories260K.gguf", httpfront.Config{}, 2).completion(t, "/v1/completions", body)
	spec := startGraph(t, "stories260K.gguf", "ngram").completion(t, "/v1/completions", body)
	if got, want := choices(spec)[0]["text"], choices(plain)[0]["text"]; got != want {
		t.Errorf("ngram text %q, plain %q", got, want)
	}
	if tm := plain["timings"].(map[string]any); tm["draft_n"] != nil || tm["draft_n_accepted"] != nil {
		t.Errorf("plain timings %v have draft counts", tm)
	}
	tm := spec["timings"].(map[string]any)
	n, okN := tm["draft_n"].(float64)
	a, okA := tm["draft_n_accepted"].(float64)
	if !okN || !okA || n < 1 || a < 1 || a > n {
		t.Errorf("ngram timings %v: want 1 <= draft_n_accepted <= draft_n", tm)
	}
}
