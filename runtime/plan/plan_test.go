package plan

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func samplePlan() *Plan {
	return &Plan{
		Name: "plain", File: "graphs/plain.yaml",
		Params: node.Params{"chunk": int64(256), "alpha": 0.5},
		Policy: node.PlanPolicy{PrefillChunk: 256, KVDType: "f16", KVBlockTokens: 16},
		Steps: []*Step{
			{ID: "chunking", Op: "prefill.chunk", Placement: node.Policy, Params: node.Params{"size": int64(256)}},
			{ID: "fwd", Op: "model.forward", Placement: node.Device, Params: node.Params{"model": "target"},
				In: map[string]Ref{"tokens": {InputNode, "tokens"}, "positions": {InputNode, "positions"}}},
			{ID: "pick", Op: "sample.token", Placement: node.Host, Params: node.Params{"temperature": 1.0, "greedy": true},
				In: map[string]Ref{"logits": {"fwd", "logits"}}},
		},
		Segments: []Segment{{node.Device, []int{1}}, {node.Host, []int{2}}},
		Out:      map[string]Ref{"tokens": {"pick", "tokens"}},
		Tests:    []*graphdef.Test{{Name: "greedy story", Prompt: "Once upon a time", MaxTokens: 32, SameAs: "plain"}, {Name: "warm", Prompt: "Hi", Temperature: 0.7, MaxTokens: 4}},
	}
}

func TestString(t *testing.T) {
	want := `plan plain (graphs/plain.yaml)
params:
  alpha = 0.5
  chunk = 256
policy: prefill_chunk=256 kv_dtype=f16 kv_block_tokens=16
steps:
  0 chunking: prefill.chunk [policy]
      with size = 256
  1 fwd: model.forward [device]
      in  positions <- $in.positions
      in  tokens <- $in.tokens
      with model = "target"
  2 pick: sample.token [host]
      in  logits <- fwd.logits
      with greedy = true
      with temperature = 1.0
segments:
  0 device: fwd
  1 host: pick
out:
  tokens <- pick.tokens
tests:
  "greedy story": prompt="Once upon a time" temperature=0 max_tokens=32 same_as=plain
  "warm": prompt="Hi" temperature=0.7 max_tokens=4
`
	p := samplePlan()
	if diff := cmp.Diff(want, p.String()); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
	if again := samplePlan().String(); again != p.String() {
		t.Error("String is not deterministic: two equal plans print differently")
	}
}

func TestStepLookup(t *testing.T) {
	p := samplePlan()
	if s := p.Step("fwd"); s == nil || s.Op != "model.forward" {
		t.Errorf("Step(fwd) = %+v", s)
	}
	if s := p.Step("nope"); s != nil {
		t.Errorf("Step(nope) = %+v, want nil", s)
	}
}

func TestRefString(t *testing.T) {
	if got := (Ref{InputNode, "history"}).String(); got != "$in.history" {
		t.Errorf("got %q", got)
	}
}
