package sample

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	lo, hi := 0.0, 100.0
	node.Register(node.Spec{
		Op:        "sample.draft",
		Placement: node.Host,
		In:        []node.Port{{Name: "logits", Type: node.Logits, Doc: "a draft pass's logits [R, vocab], one row per drafting sequence"}},
		Out: []node.Port{
			{Name: "tokens", Type: node.Tokens, Doc: "each row's draft token [R]"},
			{Name: "probs", Type: node.DraftProbs, Doc: "the distribution each sampled row's token was drawn from (none for a greedy row): collected by a loop's out, wired to verify's draft_probs"},
		},
		Params: []node.Param{
			{Name: "sample", Kind: node.Bool, Default: true,
				Doc: "draw a sampling request's drafts from the logits' distribution under its temperature, top_k, top_p and min_p; false: every row's argmax"},
			{Name: "temperature", Kind: node.Float, Default: 0.0, Min: &lo, Max: &hi,
				Doc: "the drafts' temperature instead of the request's (0 = the request's)"},
		},
		Summary: "Pick each row's draft token: the argmax for a greedy request, else a draw from the row's distribution, reported with it.",
		Doc: "The pick of a draft pass whose drafts verify accepts with min(1, p/q): a greedy request's row (or every row " +
			"with sample: false) takes the argmax, ties to the lower id, and reports no distribution (a point mass); " +
			"a sampling request's row draws from the distribution its sampling parameters (no penalties or grammar) " +
			"give the logits, with the request's seeded generator, and reports that distribution. " +
			"When no row of a pass samples, the engine has the device reduce the logits to argmax ids.",
		NewHost: func(p node.Params) (node.HostNode, error) {
			return DraftNode{Sample: p.Bool("sample"), Temperature: float32(p.Float("temperature"))}, nil
		},
	})
}

// DraftNode is the sample.draft node.
type DraftNode struct {
	Sample      bool
	Temperature float32
}

// samples reports whether row draws its draft rather than taking the
// argmax.
func (d DraftNode) samples(row *node.SeqState) bool {
	return d.Sample && row.RNG != nil && !row.Sampling.Greedy()
}

// ReadsArgmaxOnly implements exec.ArgmaxReader: no row of the pass draws.
func (d DraftNode) ReadsArgmaxOnly(hc *node.HostContext) bool {
	for _, row := range hc.Rows {
		if d.samples(row) {
			return false
		}
	}
	return true
}

// RunHost implements node.HostNode: logits [R, vocab] -> tokens [R] and
// probs (one entry per row: nil or the row's one distribution).
func (d DraftNode) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	l, ok := in["logits"].(exec.Logits)
	if !ok {
		return nil, fmt.Errorf("sample.draft: logits input is %T", in["logits"])
	}
	if l.Rows != len(hc.Rows) {
		return nil, fmt.Errorf("sample.draft: %d logit rows for %d sequences", l.Rows, len(hc.Rows))
	}
	tokens, probs := make([]int32, l.Rows), make(exec.DraftProbs, l.Rows)
	for i, row := range hc.Rows {
		if l.Data == nil {
			if d.samples(row) || len(l.Argmax) != l.Rows {
				return nil, fmt.Errorf("sample.draft: row %d draws from device argmax ids", i)
			}
			tokens[i] = l.Argmax[i]
			continue
		}
		if !d.samples(row) {
			tokens[i] = Argmax(l.Row(i))
			continue
		}
		sp := row.Sampling
		if d.Temperature > 0 {
			sp.Temperature = d.Temperature
		}
		ids, ps := Dist(l.Row(i), sp)
		tokens[i] = Draw(ids, ps, row.RNG.Float64())
		probs[i] = []exec.DraftDist{{IDs: ids, Probs: ps}}
	}
	return map[string]any{"tokens": tokens, "probs": probs}, nil
}
