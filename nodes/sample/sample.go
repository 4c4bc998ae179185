// Package sample implements sample.token: greedy and stochastic next-token
// selection (presence, frequency and repetition penalties, temperature,
// top-k, top-p, min-p), deterministic given the request's seed.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

func init() {
	node.Register(node.Spec{
		Op:        "sample.token",
		Placement: node.Host,
		In:        []node.Port{{Name: "logits", Type: node.Logits, Doc: "next-token logits [R, vocab]"}},
		Out:       []node.Port{{Name: "tokens", Type: node.Tokens, Doc: "one chosen token per logit row [R]"}},
		Summary:   "Pick the next token of each sequence with its request's sampling parameters.",
		Doc: "Penalties apply first (the request's logit bias, then presence and frequency over generated tokens, as OpenAI; " +
			"repetition over prompt and generated tokens, as Hugging Face; then, until min_tokens are generated, " +
			"end-of-generation and stop tokens are masked; last a request's grammar masks the tokens that may not follow). Temperature 0 (or top_k 1) is " +
			"greedy: the argmax, ties to the lower id. Otherwise the filters run in llama.cpp's order: " +
			"top_k, top_p, min_p, then temperature, then a draw from the request's seeded generator.",
		NewHost: func(node.Params) (node.HostNode, error) { return Token{}, nil },
	})
	node.Register(node.Spec{
		Op:        "sample.argmax",
		Placement: node.Host,
		In:        []node.Port{{Name: "logits", Type: node.Logits, Doc: "logits [R, vocab]"}},
		Out:       []node.Port{{Name: "tokens", Type: node.Tokens, Doc: "the argmax of each row [R], ties to the lower id"}},
		Summary:   "Pick each row's argmax, whatever the request's sampling parameters: a greedy draft.",
		Doc: "The pick of a greedy draft pass (a draft loop's body): the argmax of each logits row, ties to the lower id, " +
			"with no penalties, grammar or temperature. When every consumer of the logits is an argmax, the engine has " +
			"the device reduce the rows and copies back only the ids.",
		NewHost: func(node.Params) (node.HostNode, error) { return ArgmaxNode{}, nil },
	})
}

// ArgmaxNode is the sample.argmax node.
type ArgmaxNode struct{}

// ReadsArgmaxOnly implements exec.ArgmaxReader.
func (ArgmaxNode) ReadsArgmaxOnly(*node.HostContext) bool { return true }

// RunHost implements node.HostNode: logits [R, vocab] -> tokens [R].
func (ArgmaxNode) RunHost(_ *node.HostContext, in map[string]any) (map[string]any, error) {
	l, ok := in["logits"].(exec.Logits)
	if !ok {
		return nil, fmt.Errorf("sample.argmax: logits input is %T", in["logits"])
	}
	if l.Data == nil && len(l.Argmax) == l.Rows { // reduced on the device
		return map[string]any{"tokens": append([]int32(nil), l.Argmax...)}, nil
	}
	out := make([]int32, l.Rows)
	for i := range out {
		out[i] = Argmax(l.Row(i))
	}
	return map[string]any{"tokens": out}, nil
}

// Token is the sample.token node.
type Token struct{}

// RunHost implements node.HostNode.
func (Token) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	l, ok := in["logits"].(exec.Logits)
	if !ok {
		return nil, fmt.Errorf("sample.token: logits input is %T", in["logits"])
	}
	if l.Rows != len(hc.Rows) {
		return nil, fmt.Errorf("sample.token: %d logit rows for %d sequences", l.Rows, len(hc.Rows))
	}
	out := make([]int32, l.Rows)
	if l.Data == nil && l.Argmax != nil { // reduced on the device
		for i, row := range hc.Rows {
			if !row.Sampling.Greedy() || row.Sampling.Penalized() {
				return nil, fmt.Errorf("sample.token: row %d samples with %+v from device argmax ids", i, row.Sampling)
			}
		}
		return map[string]any{"tokens": append(out[:0], l.Argmax...)}, nil
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	for i, row := range hc.Rows {
		logits := l.Row(i)
		if row.Sampling.Penalized() {
			sc.penalized = penalizeInto(resized(sc.penalized, len(logits)), logits, row.Sampling, row.History, row.Prompt)
			logits = sc.penalized
		}
		out[i] = sc.pick(logits, row.Sampling, row.RNG)
	}
	return map[string]any{"tokens": out}, nil
}

// Penalize returns a copy of logits with s's logit bias, presence,
// frequency and repetition penalties applied, in that order, for a
// sequence whose tokens so far are history, of which the first prompt are
// the prompt (see request.Sampling); then, while fewer than s.SuppressUntil
// tokens have been generated, s.Suppress ids get -Inf, and last s.Mask
// constrains the next token. Ids in history,
// LogitBias and Suppress outside logits are ignored; logits is not
// modified.
func Penalize(logits []float32, s request.Sampling, history []int32, prompt int) []float32 {
	return penalizeInto(make([]float32, len(logits)), logits, s, history, prompt)
}

// penalizeInto is Penalize writing into out, which has logits' length.
func penalizeInto(out, logits []float32, s request.Sampling, history []int32, prompt int) []float32 {
	copy(out, logits)
	prompt = max(0, min(prompt, len(history)))
	for id, b := range s.LogitBias {
		if id >= 0 && int(id) < len(out) {
			out[id] += b
		}
	}
	if s.PresencePenalty != 0 || s.FrequencyPenalty != 0 {
		counts := map[int32]int{}
		for _, id := range history[prompt:] {
			if id >= 0 && int(id) < len(out) {
				counts[id]++
			}
		}
		for id, c := range counts {
			out[id] -= s.PresencePenalty + s.FrequencyPenalty*float32(c)
		}
	}
	if r := s.RepetitionPenalty; r > 0 && r != 1 {
		seen := map[int32]bool{}
		for _, id := range history {
			if id < 0 || int(id) >= len(out) || seen[id] {
				continue
			}
			seen[id] = true
			if out[id] > 0 {
				out[id] /= r
			} else {
				out[id] *= r
			}
		}
	}
	if len(history)-prompt < s.SuppressUntil {
		for _, id := range s.Suppress {
			if id >= 0 && int(id) < len(out) {
				out[id] = float32(math.Inf(-1))
			}
		}
	}
	if s.Mask != nil {
		s.Mask(history[prompt:], out)
	}
	return out
}

// Argmax returns the index of the largest logit; ties go to the lower id.
// NaNs are never chosen, except that a NaN at index 0 is returned (no
// logit compares greater than it): argmaxScan's result, in four
// independent chains (ids i%4 over a vocabulary of 150k in about 60% of
// one chain's time) that all start from logit 0.
func Argmax(logits []float32) int32 {
	n := len(logits)
	if n < 8 {
		return argmaxScan(logits)
	}
	b0 := logits[0]
	if b0 != b0 {
		return 0
	}
	v0, v1, v2, v3 := b0, b0, b0, b0
	i0, i1, i2, i3 := 0, 0, 0, 0
	i := 0
	for ; i+4 <= n; i += 4 {
		x := logits[i : i+4 : i+4]
		if x[0] > v0 {
			v0, i0 = x[0], i
		}
		if x[1] > v1 {
			v1, i1 = x[1], i+1
		}
		if x[2] > v2 {
			v2, i2 = x[2], i+2
		}
		if x[3] > v3 {
			v3, i3 = x[3], i+3
		}
	}
	for ; i < n; i++ { // the tail joins chain 0: its ids are above all of chain 0's
		if x := logits[i]; x > v0 {
			v0, i0 = x, i
		}
	}
	// Each chain holds its first maximum (or logit 0); the first maximum
	// overall is the lowest id among the chains holding the largest value.
	best, bv := i0, v0
	for _, c := range [3]struct {
		v  float32
		id int
	}{{v1, i1}, {v2, i2}, {v3, i3}} {
		if c.v > bv || c.v == bv && c.id < best {
			best, bv = c.id, c.v
		}
	}
	return int32(best)
}

// argmaxScan is Argmax as one scan: the first logit that no later one
// exceeds, starting from logit 0.
func argmaxScan(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return int32(best)
}

// cand is a candidate token: its id and its logit.
type cand struct {
	id int32
	v  float32
}

// scratch is the working memory of a row's pick, sized to the vocabulary
// by its first use and reused through scratchPool, so that a pick
// allocates nothing.
type scratch struct {
	penalized   []float32 // [vocab] the row's logits after Penalize
	keys, spare []uint64  // [vocab] the radix sort's sortKey<<32 | id
	cands       []cand    // [vocab] the candidates in order
	weights     []float64 // [candidates] their softmax weights
	counts      [radixPasses][radixBuckets + 1]int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// resized returns buf with length n, reallocated only when its capacity is
// short.
func resized[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// Pick chooses one token from logits under s, drawing from rng when s is
// not greedy. It allocates nothing once the pooled scratch it works in is
// sized to the vocabulary.
func Pick(logits []float32, s request.Sampling, rng *rand.Rand) int32 {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	return sc.pick(logits, s, rng)
}

// pick is Pick in sc's memory.
func (sc *scratch) pick(logits []float32, s request.Sampling, rng *rand.Rand) int32 {
	if s.Greedy() || rng == nil {
		return Argmax(logits)
	}
	cs, w, sum := sc.dist(logits, s)
	r := rng.Float64()
	var cum float64
	for i, c := range cs { // Draw, dividing each weight only as far as the draw reaches
		cum += w[i] / sum
		if r < cum {
			return c.id
		}
	}
	return cs[len(cs)-1].id
}

// Dist is the distribution Pick draws from when s is not greedy: the
// candidate ids after top_k, top_p and min_p, by descending logit (ties in
// id order), and their probabilities at s's temperature, summing to 1.
// For a greedy s it is the argmax with probability 1. The slices are the
// caller's.
func Dist(logits []float32, s request.Sampling) ([]int32, []float64) {
	if s.Greedy() {
		return []int32{Argmax(logits)}, []float64{1}
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	cs, w, sum := sc.dist(logits, s)
	ids, probs := make([]int32, len(cs)), make([]float64, len(cs))
	for i, c := range cs {
		ids[i], probs[i] = c.id, w[i]/sum
	}
	return ids, probs
}

// dist is Dist in sc's memory: the candidates, their softmax weights at
// s's temperature and the weights' sum (a candidate's probability is its
// weight / sum). The slices are sc's, valid until its next use.
func (sc *scratch) dist(logits []float32, s request.Sampling) ([]cand, []float64, float64) {
	cs := sc.candidates(logits, s.TopK)
	if s.TopP > 0 && s.TopP < 1 {
		w, sum := sc.softmax(cs, 1)
		var cum float64
		for i := range cs {
			cum += w[i] / sum
			if cum >= float64(s.TopP) {
				cs = cs[:i+1]
				break
			}
		}
	}
	if s.MinP > 0 {
		w, sum := sc.softmax(cs, 1)
		keep := 1
		for keep < len(cs) && w[keep]/sum >= float64(s.MinP)*(w[0]/sum) {
			keep++
		}
		cs = cs[:keep]
	}
	w, sum := sc.softmax(cs, float64(s.Temperature))
	return cs, w, sum
}

// softmax returns the unnormalised softmax weights of sorted candidates at
// temperature t, exp((logit - max) / t), in sc's weights, and their sum.
func (sc *scratch) softmax(cs []cand, t float64) ([]float64, float64) {
	w := resized(sc.weights, len(cs))
	sc.weights = w
	m := float64(cs[0].v)
	var sum float64
	for i, c := range cs {
		w[i] = math.Exp((float64(c.v) - m) / t)
		sum += w[i]
	}
	return w, sum
}

// candidates returns the logits as candidates by descending logit, ties in
// id order, keeping only the first k when 0 < k < len(logits), in sc's
// memory. That is the stable sort of all of them cut to k (NaN logits,
// which have no order, last); for k > 0 it is found in one pass that keeps
// the k best so far, otherwise by a radix sort (a comparison sort of a 150k
// vocabulary costs about 150 ms per token).
func (sc *scratch) candidates(logits []float32, k int) []cand {
	if k <= 0 || k >= len(logits) {
		return sc.sorted(logits)
	}
	sc.cands = resized(sc.cands, k+1)
	top := sc.cands[:0]
	for i, v := range logits {
		if len(top) == k && !(v > top[k-1].v) {
			continue // an equal logit with a higher id sorts after the k-th
		}
		// After every kept candidate not below v: equal logits keep id order.
		j := sort.Search(len(top), func(j int) bool { return top[j].v < v })
		top = append(top, cand{})
		copy(top[j+1:], top[j:])
		top[j] = cand{int32(i), v}
		top = top[:min(len(top), k)]
	}
	return top
}

const (
	radixBits    = 11
	radixBuckets = 1 << radixBits
	radixPasses  = (32 + radixBits - 1) / radixBits
)

// sortKey is v's key in sorted's radix sort: the unsigned order of keys is
// the logits' descending order, -0 and +0 equal, NaN after every number.
// A negative logit's bits already order so; a positive one's are flipped
// below the sign bit.
func sortKey(v float32) uint32 {
	b := math.Float32bits(v)
	key := b ^ (^uint32(int32(b)>>31) & 0x7fffffff)
	if v == 0 {
		key = 0x7fffffff
	}
	if v != v {
		key = 0xffffffff
	}
	return key
}

// sorted is every logit as a candidate, by descending logit, ties in id
// order, NaN last, in sc's memory: a stable least-significant-digit radix
// sort of sortKey<<32 | id, radixBits of the key per pass, with every
// pass's counts taken in one read of the logits.
func (sc *scratch) sorted(logits []float32) []cand {
	n := len(logits)
	sc.keys, sc.spare, sc.cands = resized(sc.keys, n), resized(sc.spare, n), resized(sc.cands, n)
	src, dst := sc.keys, sc.spare
	counts := &sc.counts
	*counts = [radixPasses][radixBuckets + 1]int{}
	for i, v := range logits {
		key := sortKey(v)
		src[i] = uint64(key)<<32 | uint64(i)
		counts[0][key%radixBuckets+1]++
		counts[1][(key>>radixBits)%radixBuckets+1]++
		counts[2][(key>>(2*radixBits))%radixBuckets+1]++
	}
	for p := range counts {
		shift, count := 32+p*radixBits, &counts[p]
		if n == 0 || count[(src[0]>>shift)%radixBuckets+1] == n {
			continue // every key has this digit: the pass would not move anything
		}
		for d := 1; d <= radixBuckets; d++ {
			count[d] += count[d-1]
		}
		for _, x := range src {
			d := (x >> shift) % radixBuckets
			dst[count[d]] = x
			count[d]++
		}
		src, dst = dst, src
	}
	cs := sc.cands
	for j, x := range src {
		id := int32(uint32(x))
		cs[j] = cand{id, logits[id]}
	}
	return cs
}

// Draw returns the id whose cumulative probability first exceeds r (a
// uniform draw in [0, 1)), or the last id when rounding leaves r above the
// total.
func Draw(ids []int32, probs []float64, r float64) int32 {
	var cum float64
	for i, p := range probs {
		cum += p
		if r < cum {
			return ids[i]
		}
	}
	return ids[len(ids)-1]
}
