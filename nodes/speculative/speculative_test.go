package speculative

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		name          string
		h             []int32
		k, minN, maxN int
		want          []int32
	}{
		{"the latest earlier occurrence wins", []int32{1, 2, 3, 9, 1, 2, 4, 5, 1, 2}, 3, 2, 2, []int32{4, 5, 1}},
		{"a longer suffix is tried first", []int32{7, 1, 2, 8, 5, 1, 2, 9, 5, 1, 2}, 2, 2, 3, []int32{9, 5}},
		{"the continuation stops at the end of the history", []int32{1, 2, 3, 1, 2}, 4, 2, 2, []int32{3, 1, 2}},
		{"a self-overlapping run continues itself", []int32{4, 4, 4, 4}, 3, 2, 3, []int32{4}},
		{"no match below min_match gives no draft", []int32{1, 2, 3, 4, 5, 3}, 3, 2, 4, nil},
		{"a single-token match needs min_match 1", []int32{1, 2, 3, 4, 5, 3}, 3, 1, 4, []int32{4, 5, 3}},
		{"k 0 drafts nothing", []int32{1, 2, 1, 2}, 0, 1, 2, nil},
		{"a history shorter than the match drafts nothing", []int32{1}, 3, 1, 2, nil},
		{"the continuation stops before an image row's key", []int32{1, 2, 3, -7, -8, 4, 1, 2}, 4, 2, 2, []int32{3}},
		{"a match followed by an image row gives way to an earlier one", []int32{1, 2, 3, 9, 1, 2, -7, -8, 5, 1, 2}, 4, 2, 2, []int32{3, 9, 1, 2}},
		{"only matches followed by image rows draft nothing", []int32{1, 2, -7, -8, 1, 2}, 4, 1, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Lookup(tt.h, tt.k, tt.minN, tt.maxN)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lookup(%v, k=%d, %d..%d) (-want +got):\n%s", tt.h, tt.k, tt.minN, tt.maxN, diff)
			}
		})
	}
}

func TestNGramRespectsLookaheadAndPrior(t *testing.T) {
	n := &NGram{K: 4, MinMatch: 1, MaxMatch: 3}
	h := []int32{1, 2, 3, 4, 5, 6, 1, 2}
	hc := &node.HostContext{Rows: []*node.SeqState{{Lookahead: 2}, {Lookahead: 0}, {Lookahead: 4}, {Lookahead: 1}}}
	prior := exec.Drafts{nil, nil, nil, {9, 9}}
	res, err := n.RunHost(hc, map[string]any{"history": [][]int32{h, h, h, h}, "prior": prior})
	if err != nil {
		t.Fatal(err)
	}
	want := exec.Drafts{{3, 4}, nil, {3, 4, 5, 6}, {9}}
	if diff := cmp.Diff(want, res["draft"]); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
}

// rows returns logits rows [len(draft)+1][vocab] from per-row values.
func logitRows(vals ...[]float32) [][]float32 { return vals }

func TestAcceptGreedy(t *testing.T) {
	r0 := []float32{0, 5, 1, 0} // argmax 1
	r1 := []float32{0, 0, 7, 0} // argmax 2
	r2 := []float32{9, 0, 0, 0} // argmax 0
	r3 := []float32{0, 0, 0, 3} // argmax 3
	tests := []struct {
		name  string
		draft []int32
		rows  [][]float32
		s     request.Sampling
		hist  []int32
		want  []int32
	}{
		{"all drafts accepted, then the bonus token", []int32{1, 2, 0}, logitRows(r0, r1, r2, r3), request.Sampling{}, []int32{0}, []int32{1, 2, 0, 3}},
		{"the first disagreement yields the target's token", []int32{1, 3, 0}, logitRows(r0, r1, r2, r3), request.Sampling{}, []int32{0}, []int32{1, 2}},
		{"a wrong first draft still yields one token", []int32{2}, logitRows(r0, r1), request.Sampling{}, []int32{0}, []int32{1}},
		{"no draft is a plain greedy step", nil, logitRows(r2), request.Sampling{}, []int32{0}, []int32{0}},
		// The penalty sees accepted drafts: after draft 1 is accepted, token
		// 1's logit 5 - 6 drops below token 2's 1 at the next position too.
		{"penalties count accepted drafts", []int32{1, 2}, logitRows(r0, []float32{0, 5, 1, 0}, r3),
			request.Sampling{FrequencyPenalty: 6}, []int32{0}, []int32{1, 2, 3}},
		{"top_k 1 is greedy", []int32{1, 2}, logitRows(r0, r1, r3), request.Sampling{Temperature: 1, TopK: 1}, []int32{0}, []int32{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &node.SeqState{Sampling: tt.s, History: tt.hist, Prompt: 1, RNG: rand.New(rand.NewPCG(1, 2))}
			got := Accept(tt.rows, tt.draft, nil, s)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Accept (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAcceptSamplesTheTargetDistribution checks rejection sampling: over
// many seeds, the first token after verification follows the target's
// sampling distribution whatever the draft, and so does the second given
// the first (total-variation distance within a bound that a 1% error in
// any probability would exceed at this sample size).
func TestAcceptSamplesTheTargetDistribution(t *testing.T) {
	rows := logitRows(
		[]float32{1.0, 2.0, 0.5, 1.5, -1, 0.2},
		[]float32{0.3, -0.4, 2.2, 1.1, 0.9, 0.0},
	)
	const n = 40000
	for _, tc := range []struct {
		name  string
		s     request.Sampling
		draft []int32
	}{
		{"a likely draft", request.Sampling{Temperature: 1}, []int32{1}},
		{"an unlikely draft", request.Sampling{Temperature: 0.7}, []int32{4}},
		{"a draft outside top_k", request.Sampling{Temperature: 1.3, TopK: 3}, []int32{5}},
		{"top_p and a penalty", request.Sampling{Temperature: 1, TopP: 0.9, PresencePenalty: 0.8}, []int32{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist := []int32{0, 3}
			s := &node.SeqState{Sampling: tc.s, History: hist, Prompt: 1}
			first := make([]float64, 6)
			second := make([]float64, 6) // given first == draft
			var accepted float64
			for seed := range uint64(n) {
				s.RNG = rand.New(rand.NewPCG(seed, 7))
				out := Accept(rows, tc.draft, nil, s)
				first[out[0]]++
				if len(out) == 2 {
					accepted++
					second[out[1]]++
				}
			}
			want := target(rows[0], tc.s, hist)
			if tv := tvDistance(want, first); tv > 0.012 {
				t.Errorf("first token: TV distance %.4f from the target; got %v want %v", tv, norm(first), want)
			}
			if want[tc.draft[0]] > 0.05 {
				want2 := target(rows[1], tc.s, append(hist, tc.draft[0]))
				if tv := tvDistance(want2, second); tv > 0.03 {
					t.Errorf("second token: TV distance %.4f from the target; got %v want %v", tv, norm(second), want2)
				}
			}
			if got, want := accepted/n, want[tc.draft[0]]; math.Abs(got-want) > 0.012 {
				t.Errorf("acceptance %.4f, want p(draft) = %.4f", got, want)
			}
		})
	}
}

// With a proposal distribution q wired (a drafter that samples), a draft x
// drawn from q is accepted with min(1, p(x)/q(x)) and a rejection draws
// from max(0, p - q): the first token is distributed as the target's p,
// the acceptance rate is sum min(p, q), and after an accepted draft the
// next token follows the target again.
func TestAcceptWithAProposalDistribution(t *testing.T) {
	rows := logitRows(
		[]float32{1.0, 2.0, 0.5, 1.5, -1, 0.2},
		[]float32{0.3, -0.4, 2.2, 1.1, 0.9, 0.0},
	)
	const n = 60000
	for _, tc := range []struct {
		name string
		s    request.Sampling
		q    exec.DraftDist
	}{
		{"q close to p", request.Sampling{Temperature: 1}, exec.DraftDist{IDs: []int32{1, 3, 0, 2}, Probs: []float64{0.4, 0.3, 0.2, 0.1}}},
		{"q far from p", request.Sampling{Temperature: 0.8}, exec.DraftDist{IDs: []int32{4, 5, 2}, Probs: []float64{0.5, 0.3, 0.2}}},
		{"q beyond top_k", request.Sampling{Temperature: 1.2, TopK: 3}, exec.DraftDist{IDs: []int32{5, 1, 3}, Probs: []float64{0.3, 0.3, 0.4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hist := []int32{0, 3}
			s := &node.SeqState{Sampling: tc.s, History: hist, Prompt: 1}
			first := make([]float64, 6)
			second := make([]float64, 6)
			var accepted float64
			drawQ := func(r float64) int32 {
				var cum float64
				for i, id := range tc.q.IDs {
					if cum += tc.q.Probs[i]; r < cum {
						return id
					}
				}
				return tc.q.IDs[len(tc.q.IDs)-1]
			}
			for seed := range uint64(n) {
				s.RNG = rand.New(rand.NewPCG(seed, 11))
				x := drawQ(s.RNG.Float64())
				out := Accept(rows, []int32{x}, []exec.DraftDist{tc.q}, s)
				first[out[0]]++
				if len(out) == 2 {
					accepted++
					if out[0] == 1 {
						second[out[1]]++
					}
				}
			}
			want := target(rows[0], tc.s, hist)
			if tv := tvDistance(want, first); tv > 0.01 {
				t.Errorf("first token: TV distance %.4f from the target; got %v want %v", tv, norm(first), want)
			}
			var overlap float64
			for id, p := range want {
				overlap += min(p, tc.q.Prob(int32(id)))
			}
			if got := accepted / n; math.Abs(got-overlap) > 0.01 {
				t.Errorf("acceptance %.4f, want sum min(p, q) = %.4f", got, overlap)
			}
			if want[1]*tc.q.Prob(1) > 0.05 {
				want2 := target(rows[1], tc.s, append(hist, 1))
				if tv := tvDistance(want2, second); tv > 0.03 {
					t.Errorf("second token after an accepted 1: TV distance %.4f; got %v want %v", tv, norm(second), want2)
				}
			}
		})
	}
}

// target is the exact sampling distribution of logits under s after hist.
func target(logits []float32, s request.Sampling, hist []int32) []float64 {
	if s.Penalized() {
		logits = sample.Penalize(logits, s, hist, 1)
	}
	ids, probs := sample.Dist(logits, s)
	out := make([]float64, len(logits))
	for i, id := range ids {
		out[id] = probs[i]
	}
	return out
}

func norm(counts []float64) []float64 {
	var sum float64
	for _, c := range counts {
		sum += c
	}
	out := make([]float64, len(counts))
	for i, c := range counts {
		out[i] = c / sum
	}
	return out
}

func tvDistance(p, counts []float64) float64 {
	q := norm(counts)
	var d float64
	for i := range p {
		d += math.Abs(p[i] - q[i])
	}
	return d / 2
}
