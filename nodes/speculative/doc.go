// Package speculative implements speculative decoding as graph nodes:
// a proposer that drafts tokens (speculative.ngram: prompt lookup), the
// drafters that read the target's hidden states and run in draft loops
// (speculative.eagle3, and the block drafter speculative.dflash), and
// speculative.verify,
// which checks the drafts against the target's logits in one forward pass
// and keeps exactly the tokens the target would have produced (greedy) or
// its output distribution (rejection sampling). Early-exit
// self-speculation and draft-model speculation are graphs (graphs/self.yaml
// and draft.yaml: draft loops over model.forward and sample.argmax or
// sample.draft), not nodes.
//
// Proposers draft greedily, so a draft token's proposal distribution is a
// point mass; verify relies on that.
package speculative

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func bound(v float64) *float64 { return &v }

// Ports and params shared by the proposers.
var (
	historyPort = node.Port{Name: "history", Type: node.History, Doc: "each sequence's tokens so far ($in.history)"}
	priorPort   = node.Port{Name: "prior", Type: node.Draft, Optional: true,
		Doc: "an earlier proposer's drafts: a sequence that has one keeps it and is not drafted for again"}
	draftOut = node.Port{Name: "draft", Type: node.Draft, Doc: "up to k drafted tokens per sequence"}
	kParam   = node.Param{Name: "k", Kind: node.Int, Default: int64(4), Min: bound(1), Max: bound(16),
		Doc: "most tokens drafted per sequence and step"}
)

// proposerInputs reads the history and optional prior inputs of a proposer
// node op for hc's rows.
func proposerInputs(op string, hc *node.HostContext, in map[string]any) (history [][]int32, prior exec.Drafts, err error) {
	history, ok := in["history"].([][]int32)
	if !ok || len(history) != len(hc.Rows) {
		return nil, nil, fmt.Errorf("%s: history input is %T for %d sequences", op, in["history"], len(hc.Rows))
	}
	if v, wired := in["prior"]; wired {
		prior, ok = v.(exec.Drafts)
		if !ok || len(prior) != len(hc.Rows) {
			return nil, nil, fmt.Errorf("%s: prior input is %T for %d sequences", op, v, len(hc.Rows))
		}
	}
	return history, prior, nil
}

// keepPrior copies into out the prior drafts (clipped to each sequence's
// lookahead) and reports which sequences still need a draft: those with a
// lookahead and no prior draft.
func keepPrior(hc *node.HostContext, prior exec.Drafts, out exec.Drafts) []bool {
	need := make([]bool, len(hc.Rows))
	for i, row := range hc.Rows {
		if prior != nil && len(prior[i]) > 0 {
			out[i] = prior[i][:min(len(prior[i]), row.Lookahead)]
			continue
		}
		need[i] = row.Lookahead > 0
	}
	return need
}
