// Package sample implements sample.token: greedy and stochastic next-token
// selection (presence, frequency and repetition penalties, temperature,
// top-k, top-p, min-p), deterministic given the request's seed.
package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

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
	for i, row := range hc.Rows {
		logits := l.Row(i)
		if row.Sampling.Penalized() {
			logits = Penalize(logits, row.Sampling, row.History, row.Prompt)
		}
		out[i] = Pick(logits, row.Sampling, row.RNG)
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
	out := append([]float32(nil), logits...)
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

type cand struct {
	id int32
	p  float64 // logit, then probability
}

// Pick chooses one token from logits under s, drawing from rng when s is
// not greedy.
func Pick(logits []float32, s request.Sampling, rng *rand.Rand) int32 {
	if s.Greedy() || rng == nil {
		return Argmax(logits)
	}
	ids, probs := Dist(logits, s)
	return Draw(ids, probs, rng.Float64())
}

// Dist is the distribution Pick draws from when s is not greedy: the
// candidate ids after top_k, top_p and min_p, by descending logit (ties in
// id order), and their probabilities at s's temperature, summing to 1.
// For a greedy s it is the argmax with probability 1.
func Dist(logits []float32, s request.Sampling) ([]int32, []float64) {
	if s.Greedy() {
		return []int32{Argmax(logits)}, []float64{1}
	}
	cs := candidates(logits, s.TopK)
	if s.TopP > 0 && s.TopP < 1 {
		probs := softmax(cs, 1)
		var cum float64
		for i, p := range probs {
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

// candidates returns the logits as candidates by descending logit, ties in
// id order, keeping only the first k when 0 < k < len(logits). That is the
// stable sort of all of them cut to k (NaN logits, which have no order,
// last); for k > 0 it is found in one pass that keeps the k best so far,
// otherwise by a radix sort (a comparison sort of a 150k vocabulary costs
// about 150 ms per token).
func candidates(logits []float32, k int) []cand {
	if k <= 0 || k >= len(logits) {
		return sortedCandidates(logits)
	}
	top := make([]cand, 0, k+1)
	for i, v := range logits {
		p := float64(v)
		if len(top) == k && !(p > top[k-1].p) {
			continue // an equal logit with a higher id sorts after the k-th
		}
		// After every kept candidate not below p: equal logits keep id order.
		j := sort.Search(len(top), func(j int) bool { return top[j].p < p })
		top = append(top, cand{})
		copy(top[j+1:], top[j:])
		top[j] = cand{int32(i), p}
		top = top[:min(len(top), k)]
	}
	return top
}

// sortedCandidates is every logit as a candidate, by descending logit, ties
// in id order, NaN last: a stable least-significant-digit radix sort, one
// byte per pass, on keys whose unsigned order is the logits' descending
// order (-0 and +0 equal).
func sortedCandidates(logits []float32) []cand {
	n := len(logits)
	if n == 0 {
		return nil
	}
	keys, ids := make([]uint32, n), make([]int32, n)
	for i, v := range logits {
		b := math.Float32bits(v)
		switch {
		case v != v:
			b = 0 // NaN: the largest key, after every number
		case v == 0:
			b = 0x80000000
		case b&0x80000000 != 0:
			b = ^b
		default:
			b |= 0x80000000
		}
		keys[i], ids[i] = ^b, int32(i) // ascending keys: descending logits
	}
	k2, i2 := make([]uint32, n), make([]int32, n)
	for shift := 0; shift < 32; shift += 8 {
		var count [257]int
		for _, key := range keys {
			count[(key>>shift)&0xff+1]++
		}
		if count[(keys[0]>>shift)&0xff+1] == n {
			continue // every key has this byte: the pass would not move anything
		}
		for d := 1; d < 257; d++ {
			count[d] += count[d-1]
		}
		for j, key := range keys {
			d := (key >> shift) & 0xff
			k2[count[d]], i2[count[d]] = key, ids[j]
			count[d]++
		}
		keys, k2, ids, i2 = k2, keys, i2, ids
	}
	cs := make([]cand, n)
	for j, id := range ids {
		cs[j] = cand{id, float64(logits[id])}
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

// softmax returns the probabilities of sorted candidates at temperature t.
func softmax(cs []cand, t float64) []float64 {
	out := make([]float64, len(cs))
	m := cs[0].p
	var sum float64
	for i, c := range cs {
		out[i] = math.Exp((c.p - m) / t)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}
