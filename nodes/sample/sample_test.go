package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

func TestArgmaxTiesToLowerID(t *testing.T) {
	for _, tc := range []struct {
		logits []float32
		want   int32
	}{
		{[]float32{1, 3, 3, 2}, 1},
		{[]float32{-1, -1}, 0},
		{[]float32{0, 0, 5}, 2},
	} {
		if got := Argmax(tc.logits); got != tc.want {
			t.Errorf("Argmax(%v) = %d, want %d", tc.logits, got, tc.want)
		}
	}
}

// Argmax's four chains choose what one scan does, for ties, NaNs, signed
// zeros and infinities anywhere, at every length around the chain width.
func TestArgmaxEqualsOneScan(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nan := float32(math.NaN())
	special := []float32{nan, float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), 1, 1, -1}
	for n := 0; n < 40; n++ {
		for range 300 {
			l := make([]float32, n)
			for i := range l {
				if r.IntN(3) == 0 {
					l[i] = special[r.IntN(len(special))]
				} else {
					l[i] = float32(r.IntN(5)) // many ties
				}
			}
			if got, want := Argmax(l), argmaxScan(l); got != want {
				t.Fatalf("Argmax(%v) = %d, one scan gives %d", l, got, want)
			}
		}
	}
	l := make([]float32, 151936)
	for i := range l {
		l[i] = float32(r.NormFloat64())
	}
	l[151935] = 9
	if got := Argmax(l); got != 151935 {
		t.Errorf("Argmax of a vocabulary whose last logit is largest = %d", got)
	}
}

// qwen3Logits returns a Qwen3-sized vocabulary's logits, normal with
// standard deviation 3, drawn from PCG(seed1, seed2).
func qwen3Logits(seed1, seed2 uint64) []float32 {
	r := rand.New(rand.NewPCG(seed1, seed2))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	return logits
}

// BenchmarkArgmax times greedy sampling's scan of a Qwen3-sized
// vocabulary: Argmax against one scan.
func BenchmarkArgmax(b *testing.B) {
	logits := qwen3Logits(5, 6)
	b.Run("chains", func(b *testing.B) {
		for range b.N {
			Argmax(logits)
		}
	})
	b.Run("scan", func(b *testing.B) {
		for range b.N {
			argmaxScan(logits)
		}
	})
}

func TestPick(t *testing.T) {
	logits := []float32{0, 2, 1.9, -5, 1}
	draw := func(s request.Sampling, n int) []int32 {
		rng := rand.New(rand.NewPCG(s.Seed, 1))
		var out []int32
		for range n {
			out = append(out, Pick(logits, s, rng))
		}
		return out
	}
	if got := draw(request.Sampling{Temperature: 0}, 3); !cmp.Equal(got, []int32{1, 1, 1}) {
		t.Errorf("greedy = %v", got)
	}
	if got := draw(request.Sampling{Temperature: 1, TopK: 1}, 3); !cmp.Equal(got, []int32{1, 1, 1}) {
		t.Errorf("top_k 1 = %v", got)
	}
	a, b := draw(request.Sampling{Temperature: 1, Seed: 7}, 50), draw(request.Sampling{Temperature: 1, Seed: 7}, 50)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed differs:\n%s", diff)
	}
	for _, id := range draw(request.Sampling{Temperature: 1, TopK: 2, Seed: 3}, 200) {
		if id != 1 && id != 2 {
			t.Fatalf("top_k 2 drew %d", id)
		}
	}
	for _, id := range draw(request.Sampling{Temperature: 1, TopP: 0.3, Seed: 3}, 200) {
		if id != 1 {
			t.Fatalf("top_p 0.3 drew %d (only the top token has >= 0.3 mass)", id)
		}
	}
	for _, id := range draw(request.Sampling{Temperature: 1, MinP: 0.5, Seed: 3}, 200) {
		if id != 1 && id != 2 {
			t.Fatalf("min_p 0.5 drew %d", id)
		}
	}
	seen := map[int32]bool{}
	for _, id := range draw(request.Sampling{Temperature: 2, Seed: 9}, 500) {
		seen[id] = true
	}
	if len(seen) < 4 {
		t.Errorf("temperature 2 drew only %v", seen)
	}
}

func TestPenalize(t *testing.T) {
	logits := []float32{1, 2, -1, 4}
	for _, tc := range []struct {
		name    string
		s       request.Sampling
		history []int32
		prompt  int
		want    []float32
	}{
		{"no penalty leaves logits alone", request.Sampling{}, []int32{0, 1}, 1, []float32{1, 2, -1, 4}},
		{"presence counts generated tokens once", request.Sampling{PresencePenalty: 0.5}, []int32{3, 1, 1}, 1, []float32{1, 1.5, -1, 4}},
		{"frequency scales with the count", request.Sampling{FrequencyPenalty: 0.5}, []int32{3, 1, 1}, 1, []float32{1, 1, -1, 4}},
		{"presence and frequency add", request.Sampling{PresencePenalty: 1, FrequencyPenalty: 1}, []int32{2}, 0, []float32{1, 2, -3, 4}},
		{"negative presence encourages", request.Sampling{PresencePenalty: -1}, []int32{0}, 0, []float32{2, 2, -1, 4}},
		{"repetition divides positive and multiplies negative logits, prompt included", request.Sampling{RepetitionPenalty: 2}, []int32{3, 2, 2}, 2, []float32{1, 2, -2, 2}},
		{"repetition 1 is off", request.Sampling{RepetitionPenalty: 1}, []int32{3}, 0, []float32{1, 2, -1, 4}},
		{"out of range ids are ignored", request.Sampling{PresencePenalty: 1, RepetitionPenalty: 2}, []int32{-1, 9}, 0, []float32{1, 2, -1, 4}},
		{"logit bias adds to its ids", request.Sampling{LogitBias: map[int32]float32{0: 5, 2: -100, 7: 3}}, nil, 0, []float32{6, 2, -101, 4}},
		{"logit bias applies before the repetition penalty", request.Sampling{LogitBias: map[int32]float32{3: -6}, RepetitionPenalty: 2}, []int32{3}, 0, []float32{1, 2, -1, -4}},
		{"suppressed ids are -Inf before SuppressUntil generated tokens", request.Sampling{SuppressUntil: 2, Suppress: []int32{3, 9}}, []int32{0, 1}, 1, []float32{1, 2, -1, inf(-1)}},
		{"suppressed ids come back once SuppressUntil tokens are generated", request.Sampling{SuppressUntil: 2, Suppress: []int32{3}}, []int32{0, 1, 2}, 1, []float32{1, 2, -1, 4}},
		{"suppression beats a positive bias", request.Sampling{LogitBias: map[int32]float32{3: 100}, SuppressUntil: 1, Suppress: []int32{3}}, []int32{0}, 1, []float32{1, 2, -1, inf(-1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]float32(nil), logits...)
			got := Penalize(in, tc.s, tc.history, tc.prompt)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Penalize (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(logits, in); diff != "" {
				t.Errorf("Penalize modified its input:\n%s", diff)
			}
		})
	}
}

func inf(sign int) float32 { return float32(math.Inf(sign)) }

// Mask runs last, with the generated tokens only, and its -Inf wins over
// the argmax.
func TestPenalizeAppliesTheMaskLast(t *testing.T) {
	var seen []int32
	s := request.Sampling{LogitBias: map[int32]float32{3: 10}, Mask: func(gen []int32, l []float32) {
		seen = append([]int32(nil), gen...)
		if l[3] != 14 {
			t.Errorf("mask saw logit %g for token 3, want the biased 14", l[3])
		}
		l[3] = inf(-1)
	}}
	got := Penalize([]float32{1, 2, -1, 4}, s, []int32{7, 8, 9}, 1)
	if diff := cmp.Diff([]float32{1, 2, -1, inf(-1)}, got); diff != "" {
		t.Errorf("Penalize (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{8, 9}, seen); diff != "" {
		t.Errorf("mask saw generated (-want +got):\n%s", diff)
	}
	if Pick(got, s, nil) != 1 {
		t.Errorf("greedy pick %d, want 1 once 3 is masked", Pick(got, s, nil))
	}
}

// A repetition penalty steers greedy decoding away from a token it would
// otherwise pick again.
func TestRunHostAppliesPenalties(t *testing.T) {
	logits := exec.Logits{Data: []float32{0, 3, 2.5, 1}, Rows: 1, Vocab: 4}
	for _, tc := range []struct {
		name string
		s    request.Sampling
		want int32
	}{
		{"plain greedy repeats", request.Sampling{}, 1},
		{"presence penalty avoids the repeat", request.Sampling{PresencePenalty: 1}, 2},
		{"repetition penalty avoids the repeat", request.Sampling{RepetitionPenalty: 1.5}, 2},
		{"a logit bias changes the argmax", request.Sampling{LogitBias: map[int32]float32{3: 2.5}}, 3},
		{"a suppressed argmax gives way to the next token", request.Sampling{SuppressUntil: 2, Suppress: []int32{1}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &node.HostContext{Rows: []*node.SeqState{{Sampling: tc.s, History: []int32{0, 1}, Prompt: 1}}}
			out, err := Token{}.RunHost(hc, map[string]any{"logits": logits})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int32{tc.want}, out["tokens"]); diff != "" {
				t.Errorf("tokens (-want +got):\n%s", diff)
			}
		})
	}
}

// Sampled rows, penalized or not, draw what Pick draws from Penalize's
// logits with the same generators.
func TestRunHostSamplesAsPickDoes(t *testing.T) {
	logits := exec.Logits{Data: append(qwen3Logits(17, 18)[:500], qwen3Logits(19, 20)[:500]...), Rows: 2, Vocab: 500}
	samplings := []request.Sampling{
		{Temperature: 0.9, PresencePenalty: 1.5, RepetitionPenalty: 1.3},
		{Temperature: 1.1, TopP: 0.8},
	}
	history := []int32{3, 4, 5, 4}
	rngs := func() []*rand.Rand { return []*rand.Rand{rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(3, 4))} }
	rows, picks := rngs(), rngs()
	hc := &node.HostContext{}
	for i, s := range samplings {
		hc.Rows = append(hc.Rows, &node.SeqState{Sampling: s, History: history, Prompt: 2, RNG: rows[i]})
	}
	for step := range 30 {
		out, err := Token{}.RunHost(hc, map[string]any{"logits": logits})
		if err != nil {
			t.Fatal(err)
		}
		var want []int32
		for i, s := range samplings {
			want = append(want, Pick(Penalize(logits.Row(i), s, history, 2), s, picks[i]))
		}
		if diff := cmp.Diff(want, out["tokens"]); diff != "" {
			t.Fatalf("step %d tokens (-Pick +RunHost):\n%s", step, diff)
		}
	}
}

// candidatesBySort is candidates by its definition: the stable sort of all
// logits by descending value, cut to k.
func candidatesBySort(logits []float32, k int) []cand {
	cs := make([]cand, len(logits))
	for i, v := range logits {
		cs[i] = cand{int32(i), v}
	}
	sort.SliceStable(cs, func(a, b int) bool { return cs[a].v > cs[b].v })
	if k > 0 && k < len(cs) {
		cs = cs[:k]
	}
	return cs
}

// The one-pass top_k equals the sorted cut, ties included (logits drawn
// from a few values so that many are equal, and -Inf from a mask).
func TestCandidatesTopK(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 7, 100, 5000} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.IntN(9)) - 4
			switch r.IntN(10) {
			case 0:
				logits[i] = float32(math.Inf(-1))
			case 1:
				logits[i] = float32(math.Copysign(0, -1)) // equal to the zeros
			case 2:
				logits[i] = float32(r.NormFloat64() * 1e3)
			}
		}
		for _, k := range []int{0, 1, 2, 3, 20, 40, n - 1, n, n + 5} {
			if diff := cmp.Diff(candidatesBySort(logits, k), new(scratch).candidates(logits, k), cmp.AllowUnexported(cand{})); diff != "" {
				t.Fatalf("n=%d k=%d (-sorted +one pass):\n%s", n, k, diff)
			}
		}
	}
}

// The full sort (no top_k) equals the stable sort on a vocabulary-sized
// row, and puts NaN logits last in id order.
func TestCandidatesSorted(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	logits := make([]float32, 151936)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	if diff := cmp.Diff(candidatesBySort(logits, 0), new(scratch).candidates(logits, 0), cmp.AllowUnexported(cand{})); diff != "" {
		t.Fatalf("(-sorted +radix):\n%s", diff)
	}
	nan := float32(math.NaN())
	got := new(scratch).candidates([]float32{nan, 1, nan, -2, 3}, 0)
	var ids []int32
	for _, c := range got {
		ids = append(ids, c.id)
	}
	if diff := cmp.Diff([]int32{4, 1, 3, 0, 2}, ids); diff != "" {
		t.Errorf("order with NaN (-want +got):\n%s", diff)
	}
	if len(new(scratch).candidates(nil, 0)) != 0 {
		t.Error("candidates of no logits are not empty")
	}
}

// distByDefinition is Dist as its contract reads: the stable sort of the
// logits cut to top_k, cut again at top_p and min_p by the softmax at
// temperature 1, then the softmax at s's temperature, each normalised by
// dividing by the sum of exp((logit - max) / t) in candidate order.
func distByDefinition(logits []float32, s request.Sampling) ([]int32, []float64) {
	softmax := func(cs []cand, t float64) []float64 {
		out := make([]float64, len(cs))
		m := float64(cs[0].v)
		var sum float64
		for i, c := range cs {
			out[i] = math.Exp((float64(c.v) - m) / t)
			sum += out[i]
		}
		for i := range out {
			out[i] /= sum
		}
		return out
	}
	cs := candidatesBySort(logits, s.TopK)
	if s.TopP > 0 && s.TopP < 1 {
		var cum float64
		for i, p := range softmax(cs, 1) {
			cum += p
			if cum >= float64(s.TopP) {
				cs = cs[:i+1]
				break
			}
		}
	}
	if s.MinP > 0 {
		probs := softmax(cs, 1)
		keep := 1
		for keep < len(cs) && probs[keep] >= float64(s.MinP)*probs[0] {
			keep++
		}
		cs = cs[:keep]
	}
	ids := make([]int32, len(cs))
	for i, c := range cs {
		ids[i] = c.id
	}
	return ids, softmax(cs, float64(s.Temperature))
}

// Dist is its definition bit for bit, and Pick draws what Draw does from
// it with the same generator, for every filter, on a vocabulary-sized row
// and on small rows with ties, -Inf (a mask) and signed zeros; the rows
// run largest first, so the pooled scratch is reused at smaller sizes.
func TestDistAndPickEqualTheirDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	rows := [][]float32{qwen3Logits(1, 2), qwen3Logits(3, 4)[:1000]}
	for _, n := range []int{300, 17, 2, 1} {
		l := make([]float32, n)
		for i := range l {
			l[i] = []float32{inf(-1), float32(math.Copysign(0, -1)), 0, 1, 2, 2.5}[r.IntN(6)]
		}
		l[r.IntN(n)] = 3 // a finite maximum
		rows = append(rows, l)
	}
	for _, s := range []request.Sampling{
		{Temperature: 0.7},
		{Temperature: 0.7, TopP: 1},
		{Temperature: 0.6, TopP: 0.95, TopK: 20},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1.3, MinP: 0.05},
		{Temperature: 0.8, TopK: 50, MinP: 0.1, TopP: 0.5},
		{Temperature: 2, TopK: 200000},
	} {
		for _, logits := range rows {
			t.Run(fmt.Sprintf("%+v/%d logits", s, len(logits)), func(t *testing.T) {
				wantIDs, wantProbs := distByDefinition(logits, s)
				ids, probs := Dist(logits, s)
				if diff := cmp.Diff(wantIDs, ids); diff != "" {
					t.Fatalf("Dist ids (-definition +got):\n%s", diff)
				}
				if diff := cmp.Diff(wantProbs, probs); diff != "" {
					t.Fatalf("Dist probs (-definition +got):\n%s", diff)
				}
				picks, draws := rand.New(rand.NewPCG(s.Seed, 5)), rand.New(rand.NewPCG(s.Seed, 5))
				for range 20 {
					if got, want := Pick(logits, s, picks), Draw(wantIDs, wantProbs, draws.Float64()); got != want {
						t.Fatalf("Pick drew %d, Draw from the definition %d", got, want)
					}
				}
			})
		}
	}
}

// Dist's slices are the caller's: a later pick does not change them.
func TestDistResultsAreTheCallers(t *testing.T) {
	s := request.Sampling{Temperature: 1}
	ids, probs := Dist([]float32{1, 2, 3}, s)
	wantIDs, wantProbs := slices.Clone(ids), slices.Clone(probs)
	Pick([]float32{9, 8, 7, 6}, s, rand.New(rand.NewPCG(1, 2)))
	Dist([]float32{4, 5, 6}, s)
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("ids changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(wantProbs, probs); diff != "" {
		t.Errorf("probs changed (-before +after):\n%s", diff)
	}
}

// A stochastic pick allocates nothing once its scratch is sized (Pick's
// scratch comes from a sync.Pool, which the race detector makes drop some
// of what is put back, so the scratch is held here).
func TestPickAllocatesNothing(t *testing.T) {
	logits := qwen3Logits(15, 16)
	rng := rand.New(rand.NewPCG(1, 2))
	sc := new(scratch)
	for _, s := range []request.Sampling{{Temperature: 0.7}, {Temperature: 0.6, TopP: 0.95, TopK: 20}, {Temperature: 1, MinP: 0.05}} {
		sc.pick(logits, s, rng)
		if a := testing.AllocsPerRun(20, func() { sc.pick(logits, s, rng) }); a != 0 {
			t.Errorf("a pick with %+v: %g allocations per token", s, a)
		}
	}
}

// BenchmarkPick times one stochastic token's pick on a Qwen3-sized
// vocabulary, the seed's settings and an OpenAI client's default.
func BenchmarkPick(b *testing.B) {
	logits := qwen3Logits(7, 8)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []request.Sampling{
		{Temperature: 0.6, TopP: 0.95, TopK: 20},
		{Temperature: 0.7, TopP: 1},
	} {
		b.Run(fmt.Sprintf("top_k=%d/top_p=%g", s.TopK, s.TopP), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				Pick(logits, s, rng)
			}
		})
	}
}

// BenchmarkDist times the seed's stochastic settings (top_k 20, top_p
// 0.95, temperature 0.6) on a Qwen3-sized vocabulary.
func BenchmarkDist(b *testing.B) {
	logits := qwen3Logits(7, 8)
	for _, s := range []request.Sampling{
		{Temperature: 0.6, TopP: 0.95, TopK: 20},
		{Temperature: 0.7, TopP: 1}, // an OpenAI client's default: no filter, the whole vocabulary sorted
	} {
		b.Run(fmt.Sprintf("top_k=%d/top_p=%g", s.TopK, s.TopP), func(b *testing.B) {
			for range b.N {
				Dist(logits, s)
			}
		})
	}
}

// BenchmarkCandidates times ordering a Qwen3-sized vocabulary without
// top_k: the radix sort against the stable comparison sort it replaces.
func BenchmarkCandidates(b *testing.B) {
	logits := qwen3Logits(11, 12)
	b.Run("radix", func(b *testing.B) {
		sc := new(scratch)
		for range b.N {
			sc.candidates(logits, 0)
		}
	})
	b.Run("sort.SliceStable", func(b *testing.B) {
		for range b.N {
			candidatesBySort(logits, 0)
		}
	})
}
