package engine_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

// TestSpeculativeSamplingDistribution checks end to end, on stories260K at
// temperature 0.8 with top_k 5, that ngram.yaml's rejection sampler keeps the
// target's output distribution. It compares the distribution of the second
// generated token, conditioned on the first one, between plain.yaml and
// ngram.yaml, for the first token after which ngram drafts most often: there
// the second token goes through verify, and a sampler that kept drafts
// without the accept test would pile mass on the drafted token.
func TestSpeculativeSamplingDistribution(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("statistical test: too slow with -short or -race")
	}
	samplingTV(t, instance.Options{Model: modelPath(t, "stories260K.gguf"), Graph: "ngram"},
		"the cat sat on the mat. the cat sat on the mat. the cat sat on the", 0.8)
}

// TestSampledDraftsKeepTheDistribution is the same check for a drafter
// that samples (draft.yaml with sample: true: tiny-qwen3-q8_0 draws its
// drafts from its own distribution at temperature 5, much flatter than
// the target's at 2, and verify accepts with min(1, p/q) and resamples from
// max(0, p - q)). That the acceptance is the most a correct verifier can
// have, sum min(p, q), is TestAcceptWithAProposalDistribution's part.
func TestSampledDraftsKeepTheDistribution(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("statistical test: too slow with -short or -race")
	}
	samplingTV(t, instance.Options{Model: modelPath(t, "tiny-qwen3-f32.gguf"), Graph: "../../graphs/draft.yaml",
		Models: map[string]string{"draft": modelPath(t, "tiny-qwen3-q8_0.gguf")}, Set: node.Params{"sample": true, "k": int64(2), "draft_temperature": 5.0}},
		"Once upon a time", 2)
}

// The same drafter drafting ahead (its drafts and their distributions
// carried to the next step) keeps the distribution too.
func TestSampledDraftsAheadKeepTheDistribution(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("statistical test: too slow with -short or -race")
	}
	src, err := os.ReadFile("../../graphs/draft.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(src), "draft: draft.draft", "draft: $prev.draft")
	s = strings.Replace(s, "draft_probs: draft.probs", "draft_probs: $prev.probs", 1)
	s = strings.Replace(s, "out: {tokens: verify.tokens}\n", "out: {tokens: verify.tokens}\ncarry: {draft: draft.draft, probs: draft.probs}\n", 1)
	if strings.Count(s, "$prev.") != 3 || !strings.Contains(s, "carry:") {
		t.Fatalf("draft.yaml: not the expected wiring:\n%s", s)
	}
	graph := filepath.Join(t.TempDir(), "draft-ahead.yaml")
	if err := os.WriteFile(graph, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	samplingTV(t, instance.Options{Model: modelPath(t, "tiny-qwen3-f32.gguf"), Graph: graph,
		Models: map[string]string{"draft": modelPath(t, "tiny-qwen3-q8_0.gguf")}, Set: node.Params{"sample": true, "k": int64(2), "draft_temperature": 5.0}},
		"Once upon a time", 2)
}

// samplingTV compares, at temperature temp with top_k 5, the distribution
// of the second generated token, conditioned on the first one, between
// plain.yaml and the speculative instance o, for the first token after
// which o drafts most often: there the second token goes through verify,
// and a verifier that kept drafts without the right accept test would
// move mass to the drafted tokens.
func samplingTV(t *testing.T, o instance.Options, text string, temp float32) {
	const runs = 4000
	type run struct {
		first, second int32
		drafted       bool
	}
	// Independent seeds per graph: with shared seeds, runs without drafts
	// would repeat plain's draws exactly and hide any difference.
	sample := func(o instance.Options, seedBase uint64) ([]run, engine.SpecStats) {
		o.Threads, o.MaxRunning = 1, 8
		in := open(t, o)
		prompt := in.Tokenizer.Encode(text, true, true)
		var out []run
		var spec engine.SpecStats
		for seed := range runs {
			res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 3,
				Sampling: request.Sampling{Temperature: temp, TopK: 5, Seed: seedBase + uint64(seed)}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			sp := res.Stats.Speculative
			out = append(out, run{res.IDs[0], res.IDs[1], sp.Drafted > 0})
			spec.Drafted += sp.Drafted
			spec.Accepted += sp.Accepted
		}
		return out, spec
	}
	plain, _ := sample(instance.Options{Model: o.Model, Graph: "plain"}, 0)
	spec, st := sample(o, 1<<32)
	name := o.Graph
	if st.Drafted == 0 || st.Accepted == 0 || st.Accepted == st.Drafted {
		t.Fatalf("%s drafted %d, accepted %d: the test needs both accepted and rejected drafts", name, st.Drafted, st.Accepted)
	}
	draftsAfter := map[int32]int{}
	for _, r := range spec {
		if r.drafted {
			draftsAfter[r.first]++
		}
	}
	var first int32
	for id, n := range draftsAfter {
		if n > draftsAfter[first] || n == draftsAfter[first] && id < first {
			first = id
		}
	}
	cond := func(rs []run) (map[int32]float64, int) {
		d, n := map[int32]float64{}, 0
		for _, r := range rs {
			if r.first == first {
				d[r.second]++
				n++
			}
		}
		for id := range d {
			d[id] /= float64(n)
		}
		return d, n
	}
	p, np := cond(plain)
	q, nq := cond(spec)
	if np < 200 || nq < 200 || draftsAfter[first] < nq/2 {
		t.Fatalf("too few samples after token %d: plain %d, %s %d (%d drafted)", first, np, name, nq, draftsAfter[first])
	}
	tv := 0.0
	for id := range p {
		tv += math.Abs(p[id] - q[id])
	}
	for id := range q {
		if _, ok := p[id]; !ok {
			tv += q[id]
		}
	}
	tv /= 2
	// Independent samples of a few hundred draws over <= 5 tokens differ by
	// TV ~0.05; keeping every draft moves the drafted token's mass to 1.
	if tv > 0.12 {
		t.Errorf("second token after %d: total variation between plain and %s sampling %.3f > 0.12", first, name, tv)
	}
	t.Logf("second token after %d: TV %.3f (plain n=%d, %s n=%d, %d drafted); drafted %d accepted %d",
		first, tv, np, name, nq, draftsAfter[first], st.Drafted, st.Accepted)
}
