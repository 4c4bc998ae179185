package httpfront

import (
	"math"
	"slices"
	"strings"

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
	// the reply's own opening (thinkOpening, ReasoningTagged).
	open bool
	// decode is the text of ids (tok.Tokenizer.Decode): the block's
	// opening and closing are found in text by the splitter's rules
	// (thinkOpening, thinkClose), however the model spelled them in tokens.
	decode  func(ids []int32) string
	closing []int32 // "</think>\n\n": what the budget forces
}

// newReasoningBudget is the budget mask of a reply whose reasoning mode is
// mode, or nil when the reply has no reasoning block to bound.
func newReasoningBudget(tk *tok.Tokenizer, mode Reasoning, budget int) *reasoningBudget {
	if budget <= 0 || mode == ReasoningOff {
		return nil
	}
	return &reasoningBudget{budget: budget, open: mode == ReasoningOpen, decode: tk.Decode, closing: tk.EncodeChat(thinkClose + "\n\n")}
}

// forced is the token the budget forces after generated, or -1 for none.
func (b *reasoningBudget) forced(generated []int32) int32 {
	from := 0
	if !b.open {
		// A reply that does not open a block has no reasoning to bound.
		if from = b.opened(generated); from < 0 {
			return -1
		}
	}
	end := from + b.budget
	if len(generated) < end {
		return -1
	}
	done := generated[end:] // the closing forced so far
	if len(done) >= len(b.closing) || !slices.Equal(done, b.closing[:len(done)]) {
		return -1
	}
	if strings.Contains(b.decode(generated[from:end]), thinkClose) {
		return -1 // the model closed the block itself within the budget
	}
	return b.closing[len(done)]
}

// opened is how many of a tagged reply's first tokens open its <think>
// block (thinkOpening), or -1 when they open none, or none yet.
func (b *reasoningBudget) opened(generated []int32) int {
	for k := 1; k <= len(generated); k++ {
		at, undecided := thinkOpening(b.decode(generated[:k]))
		switch {
		case at >= 0:
			return k
		case !undecided:
			return -1
		}
	}
	return -1
}

// mask forces the closing token due after generated: every other logit
// becomes -Inf. A forced token another mask already refused (-Inf) is
// left refused and the logits unchanged.
func (b *reasoningBudget) mask(generated []int32, logits []float32) {
	id := b.forced(generated)
	if id < 0 || int(id) >= len(logits) {
		return
	}
	keep := logits[id]
	if math.IsInf(float64(keep), -1) || math.IsNaN(float64(keep)) {
		return // another mask (a grammar) refused it: the budget never re-enables a token
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
