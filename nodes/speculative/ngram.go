package speculative

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.ngram",
		Placement: node.Host,
		In:        []node.Port{historyPort, priorPort},
		Out:       []node.Port{draftOut},
		Params: []node.Param{kParam,
			{Name: "min_match", Kind: node.Int, Default: int64(2), Min: bound(1), Max: bound(16),
				Doc: "shortest suffix of the history that must match earlier tokens"},
			{Name: "max_match", Kind: node.Int, Default: int64(5), Min: bound(1), Max: bound(16),
				Doc: "longest suffix tried first"},
		},
		Summary: "Draft tokens by prompt lookup: copy what followed the latest earlier occurrence of the history's suffix.",
		Doc: "For n from `max_match` down to `min_match`, the last n tokens of the sequence (prompt and output) " +
			"are looked up in its earlier tokens, latest occurrence first; the up to `k` tokens that followed the " +
			"first match found are the draft. No match, no draft (the step decodes one token). No extra model: " +
			"it pays off when the output repeats its context (editing, code, extraction).",
		NewHost: func(p node.Params) (node.HostNode, error) {
			n := &NGram{K: p.Int("k"), MinMatch: p.Int("min_match"), MaxMatch: p.Int("max_match")}
			if n.MinMatch > n.MaxMatch {
				return nil, fmt.Errorf("min_match %d > max_match %d", n.MinMatch, n.MaxMatch)
			}
			return n, nil
		},
	})
}

// NGram is the speculative.ngram node.
type NGram struct{ K, MinMatch, MaxMatch int }

// DraftTokens implements exec.Proposer.
func (n *NGram) DraftTokens() int { return n.K }

// RunHost implements node.HostNode: history [S][] (and prior) -> draft.
func (n *NGram) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.ngram", hc, in)
	if err != nil {
		return nil, err
	}
	out := make(exec.Drafts, len(hc.Rows))
	for i, need := range keepPrior(hc, prior, out) {
		if need {
			out[i] = Lookup(history[i], min(n.K, hc.Rows[i].Lookahead), n.MinMatch, n.MaxMatch)
		}
	}
	return map[string]any{"draft": out}, nil
}

// Lookup is prompt lookup over h: for n from maxMatch down to minMatch, it
// finds the latest earlier occurrence of h's last n tokens and returns the
// up to k tokens that followed it (fewer where h ends, or where an image
// row's key, a negative id and no token, follows); a match followed at once
// by an image row gives way to an earlier one; nil when no suffix of those
// lengths occurs earlier with a token after it.
func Lookup(h []int32, k, minMatch, maxMatch int) []int32 {
	if k <= 0 {
		return nil
	}
	for n := min(maxMatch, len(h)-1); n >= minMatch; n-- {
		suffix := h[len(h)-n:]
		for s := len(h) - n - 1; s >= 0; s-- {
			if slices.Equal(h[s:s+n], suffix) {
				end := s + n
				next := h[end:min(end+k, len(h))]
				if i := slices.IndexFunc(next, func(t int32) bool { return t < 0 }); i >= 0 {
					next = next[:i]
				}
				if len(next) == 0 {
					continue // an image row follows: try an earlier match
				}
				return slices.Clone(next)
			}
		}
	}
	return nil
}
