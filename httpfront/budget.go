package httpfront

import (
	"math"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tok"
)

// reasoningBudget ends a reply's reasoning after budget tokens (Anthropic's
// thinking.budget_tokens): once the <think> block holds budget tokens and
// the model has not closed it, the reply is teacher-forced through
// closing, the tokens of "</think>\n\n", one mask at a time; the model then
// writes its answer. It is a request.Sampling.Mask and a pure function of
// the tokens generated so far (speculative verify calls it with drafts it
// may then reject): it looks at the reasoning only during the few calls
// that may force a token.
type reasoningBudget struct {
	budget int
	// open: the prompt opened the <think> block (ReasoningOpen), so the
	// reasoning starts at the first generated token; else it starts after
	// the reply's own opening (openIDs, ReasoningTagged).
	open     bool
	openIDs  []int32 // "<think>"
	closeIDs []int32 // "</think>": the model closing the block itself
	closing  []int32 // "</think>\n\n": what the budget forces
}

// newReasoningBudget is the budget mask of a reply whose reasoning mode is
// mode, or nil when the reply has no reasoning block to bound.
func newReasoningBudget(tk *tok.Tokenizer, mode Reasoning, budget int) *reasoningBudget {
	if budget <= 0 || mode == ReasoningOff {
		return nil
	}
	return &reasoningBudget{budget: budget, open: mode == ReasoningOpen, openIDs: tk.EncodeChat(thinkOpen),
		closeIDs: tk.EncodeChat(thinkClose), closing: tk.EncodeChat(thinkClose + "\n\n")}
}

// forced is the token the budget forces after generated, or -1 for none.
func (b *reasoningBudget) forced(generated []int32) int32 {
	from := 0
	if !b.open {
		// A reply that does not open a block has no reasoning to bound.
		if len(generated) < len(b.openIDs) || !slices.Equal(generated[:len(b.openIDs)], b.openIDs) {
			return -1
		}
		from = len(b.openIDs)
	}
	end := from + b.budget
	if len(generated) < end {
		return -1
	}
	done := generated[end:] // the closing forced so far
	if len(done) >= len(b.closing) || !slices.Equal(done, b.closing[:len(done)]) {
		return -1
	}
	for i := from; i+len(b.closeIDs) <= end; i++ {
		if slices.Equal(generated[i:i+len(b.closeIDs)], b.closeIDs) {
			return -1 // the model closed the block itself within the budget
		}
	}
	return b.closing[len(done)]
}

// mask forces the closing token due after generated: every other logit
// becomes -Inf.
func (b *reasoningBudget) mask(generated []int32, logits []float32) {
	id := b.forced(generated)
	if id < 0 || int(id) >= len(logits) {
		return
	}
	keep := logits[id]
	if math.IsInf(float64(keep), -1) || math.IsNaN(float64(keep)) {
		keep = 0
	}
	for i := range logits {
		logits[i] = float32(math.Inf(-1))
	}
	logits[id] = keep
}

// masks is a Sampling.Mask applying each of ms in order (nil ones
// skipped), or nil when there are none.
func masks(ms ...func(generated []int32, logits []float32)) func(generated []int32, logits []float32) {
	ms = slices.DeleteFunc(ms, func(m func([]int32, []float32)) bool { return m == nil })
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0]
	}
	return func(generated []int32, logits []float32) {
		for _, m := range ms {
			m(generated, logits)
		}
	}
}
