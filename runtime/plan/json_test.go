package plan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/node"
)

func TestDoc(t *testing.T) {
	p := samplePlan()
	loop := &Loop{Repeat: 3, Model: "draft",
		Steps: []*Step{
			{ID: "eagle", Op: "speculative.eagle3", Placement: node.Device, Params: node.Params{"model": "draft"},
				In: map[string]Ref{"tokens": {LoopNode, "tokens"}, "hidden": {LoopNode, "hidden"}}},
			{ID: "pick", Op: "sample.argmax", Placement: node.Host, In: map[string]Ref{"logits": {"eagle", "logits"}}},
		},
		Segments: []Segment{{node.Device, []int{0}}, {node.Host, []int{1}}},
		Next:     map[string]Ref{"tokens": {"pick", "tokens"}, "hidden": {"eagle", "hidden"}},
		Out:      map[string]Ref{"draft": {"pick", "tokens"}},
	}
	p.Steps = append(p.Steps, &Step{ID: "draft", Op: LoopOp, Placement: node.Host, Node: loop,
		In: map[string]Ref{"hidden": {PrevNode, "f"}}})
	p.Segments[1].Steps = append(p.Segments[1].Steps, 3)
	p.Carry = map[string]Ref{"f": {"fwd", "taps"}}

	want := Doc{Name: "plain", File: "graphs/plain.yaml", Hash: p.Hash(),
		Params: map[string]string{"alpha": "0.5", "chunk": "256"},
		Policy: PolicyDoc{PrefillChunk: 256, KVDType: "f16", KVBlockTokens: 16},
		Steps: []StepDoc{
			{ID: "chunking", Op: "prefill.chunk", Placement: "policy", In: map[string]string{}, Params: map[string]string{"size": "256"}},
			{ID: "fwd", Op: "model.forward", Placement: "device", Model: node.Target,
				In: map[string]string{"tokens": "$in.tokens", "positions": "$in.positions"}, Params: map[string]string{"model": `"target"`}},
			{ID: "pick", Op: "sample.token", Placement: "host", In: map[string]string{"logits": "fwd.logits"},
				Params: map[string]string{"temperature": "1.0", "greedy": "true"}},
			{ID: "draft", Op: LoopOp, Placement: "host", Model: "draft", In: map[string]string{"hidden": "$prev.f"}, Params: map[string]string{},
				Loop: &LoopDoc{Repeat: 3, Model: "draft",
					Steps: []StepDoc{
						{ID: "eagle", Op: "speculative.eagle3", Placement: "device", Model: node.Target,
							In: map[string]string{"tokens": "$loop.tokens", "hidden": "$loop.hidden"}, Params: map[string]string{"model": `"draft"`}},
						{ID: "pick", Op: "sample.argmax", Placement: "host", In: map[string]string{"logits": "eagle.logits"}, Params: map[string]string{}},
					},
					Segments: []SegmentDoc{{"device", []string{"eagle"}}, {"host", []string{"pick"}}},
					Next:     map[string]string{"tokens": "pick.tokens", "hidden": "eagle.hidden"},
					Out:      map[string]string{"draft": "pick.tokens"}}},
		},
		Segments: []SegmentDoc{{"device", []string{"fwd"}}, {"host", []string{"pick", "draft"}}},
		Out:      map[string]string{"tokens": "pick.tokens"},
		Carry:    map[string]string{"f": "fwd.taps"},
	}
	got := p.Doc()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Doc (-want +got):\n%s", diff)
	}
	// The document round-trips through JSON unchanged (no field is lost
	// to a missing tag or an unexported type).
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var back Doc
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, back); diff != "" {
		t.Errorf("JSON round trip (-before +after):\n%s", diff)
	}
}
