package speculative

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.verify",
		Placement: node.Host,
		In: []node.Port{
			{Name: "draft", Type: node.Draft, Doc: "the drafts the forward verified"},
			{Name: "logits", Type: node.Logits, Doc: "the target's logits: each sequence's last token, then each draft [R, vocab]"},
			{Name: "draft_probs", Type: node.DraftProbs, Optional: true,
				Doc: "the distributions the drafts were drawn from (the same proposer's probs); unwired, drafts are point masses"},
		},
		Out: []node.Port{{Name: "tokens", Type: node.Tokens,
			Doc: "per sequence: the accepted drafts, then one token of the target's own (1 to k+1 tokens)"}},
		Params: []node.Param{{Name: "max_batch", Kind: node.Int, Default: int64(0), Min: bound(0), Max: bound(65536),
			Doc: "speculate only while at most this many sequences run (0 = always); above it steps decode one token"},
			{Name: "min_acceptance", Kind: node.Float, Default: 0.0, Min: bound(0), Max: bound(1),
				Doc: "when a sequence's recent acceptance (accepted/drafted, averaged over its last rounds) falls below this, it decodes without drafts for 1, 2, 4, ... up to 64 steps while its probe rounds keep failing; a new request starts where the latest round left off (0 = always draft)"}},
		Summary: "Accept the drafts the target agrees with, plus the target's next token; roll back the rest.",
		Doc: "Greedy requests (temperature 0 or top_k 1): draft i is accepted while it equals the target's choice " +
			"at its position (the argmax of the penalized logits, as sample.token picks), and the first " +
			"disagreement or the position after the last draft yields the target's own token, so the output is " +
			"exactly plain decoding's. Other requests: speculative rejection sampling; draft x, drawn from q, is " +
			"accepted with probability min(1, p(x)/q(x)), a rejection draws from max(0, p - q) renormalised, and a " +
			"fully accepted draft is followed by a draw from p. q is the proposer's distribution when `draft_probs` " +
			"is wired, otherwise a point mass on x (greedy drafts: accept with p(x), reject to p without x); p is the request's " +
			"sampling distribution (penalties, top_k, top_p, min_p, temperature), so the output distribution is " +
			"the target's. The engine truncates the KV cache after the last accepted draft.",
		NewHost: func(p node.Params) (node.HostNode, error) {
			return &Verify{Batch: p.Int("max_batch"), MinAccept: p.Float("min_acceptance")}, nil
		},
	})
}

// Verify is the speculative.verify node.
type Verify struct {
	Batch     int
	MinAccept float64
}

// MaxBatch implements exec.Verifier.
func (v *Verify) MaxBatch() int { return v.Batch }

// MinAcceptance implements exec.AdaptiveVerifier.
func (v *Verify) MinAcceptance() float64 { return v.MinAccept }

// RunHost implements node.HostNode: draft, logits -> tokens ([][]int32, one
// slice per sequence).
func (v *Verify) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	d, ok := in["draft"].(exec.Drafts)
	if !ok || len(d) != len(hc.Rows) {
		return nil, fmt.Errorf("speculative.verify: draft input is %T for %d sequences", in["draft"], len(hc.Rows))
	}
	l, ok := in["logits"].(exec.Logits)
	if !ok || l.Rows != len(d)+d.Total() {
		return nil, fmt.Errorf("speculative.verify: logits input %T with %d rows for %d sequences and %d drafts", in["logits"], l.Rows, len(d), d.Total())
	}
	var q exec.DraftProbs
	if v, wired := in["draft_probs"]; wired {
		if q, ok = v.(exec.DraftProbs); !ok || len(q) != len(d) {
			return nil, fmt.Errorf("speculative.verify: draft_probs input is %T for %d sequences", v, len(d))
		}
	}
	first, n := d.Spans()
	out := make([][]int32, len(hc.Rows))
	for i, row := range hc.Rows {
		rows := make([][]float32, n[i])
		for j := range rows {
			rows[j] = l.Row(first[i] + j)
		}
		var qi []exec.DraftDist
		if q != nil {
			if qi = q[i]; qi != nil && len(qi) != len(d[i]) {
				return nil, fmt.Errorf("speculative.verify: sequence %d: %d draft distributions for %d drafts", row.ID, len(qi), len(d[i]))
			}
		}
		out[i] = Accept(rows, d[i], qi, row)
	}
	return map[string]any{"tokens": out}, nil
}

// Accept verifies draft against the target's logits rows (rows[j] scores
// the token after draft[:j]; len(rows) == len(draft)+1) for the sequence s
// (its sampling, generator and history before the draft), and returns the
// accepted prefix of draft followed by one token of the target's own. q,
// when not nil, has the distribution each draft token was drawn from (a
// zero DraftDist is a point mass); nil means every draft is a point mass.
func Accept(rows [][]float32, draft []int32, q []exec.DraftDist, s *node.SeqState) []int32 {
	hist := slices.Clip(s.History)
	out := make([]int32, 0, len(draft)+1)
	greedy := s.Sampling.Greedy() || s.RNG == nil
	for j := 0; ; j++ {
		logits := rows[j]
		if s.Sampling.Penalized() {
			logits = sample.Penalize(logits, s.Sampling, hist, s.Prompt)
		}
		if j == len(draft) {
			return append(out, sample.Pick(logits, s.Sampling, s.RNG))
		}
		x := draft[j]
		if greedy {
			if t := sample.Argmax(logits); t != x {
				return append(out, t)
			}
		} else {
			ids, probs := sample.Dist(logits, s.Sampling)
			px := 0.0
			if k := slices.Index(ids, x); k >= 0 {
				px = probs[k]
			}
			var qj exec.DraftDist
			if q != nil {
				qj = q[j]
			}
			if len(qj.IDs) == 0 { // a point mass: accept with p(x), reject to p without x
				if s.RNG.Float64() >= px {
					return append(out, residual(ids, probs, x, px, s.RNG.Float64()))
				}
			} else if qx := qj.Prob(x); qx <= 0 || s.RNG.Float64()*qx >= px { // accept with min(1, p(x)/q(x))
				return append(out, residualOf(ids, probs, qj, s.RNG.Float64()))
			}
		}
		out = append(out, x)
		hist = append(hist, x)
	}
}

// residualOf draws (with r uniform in [0, 1)) from max(0, p - q)
// renormalised, p being ids/probs: the distribution of the target's token
// after it rejected a draft drawn from q. When p <= q everywhere (only
// rounding can make it so after a rejection) it draws from p.
func residualOf(ids []int32, probs []float64, q exec.DraftDist, r float64) int32 {
	w := make([]float64, len(ids))
	var sum float64
	for i, id := range ids {
		w[i] = max(0, probs[i]-q.Prob(id))
		sum += w[i]
	}
	if sum <= 0 {
		w, sum = probs, 1
	}
	r *= sum
	var cum float64
	for i, id := range ids {
		cum += w[i]
		if r < cum {
			return id
		}
	}
	return ids[len(ids)-1]
}

// residual draws (with r uniform in [0, 1)) from the distribution ids/probs
// without x, whose probability px < 1 is removed and the rest renormalised:
// max(0, p - q) normalised for a point-mass proposal q at x.
func residual(ids []int32, probs []float64, x int32, px, r float64) int32 {
	r *= 1 - px
	var cum float64
	last := ids[0]
	for i, id := range ids {
		if id == x {
			continue
		}
		cum += probs[i]
		last = id
		if r < cum {
			return id
		}
	}
	return last
}
