// Package request holds what a client asks of one generation, above the
// engine and the nodes that honour it: its sampling parameters.
package request

// Sampling holds one request's sampling parameters. The zero value with
// Temperature 0 is greedy decoding without penalties.
//
// Penalties change the logits before any token is chosen, greedy or not:
// PresencePenalty and FrequencyPenalty follow OpenAI (logit -= presence if
// the token was generated before, and -= frequency x its count), counting
// generated tokens only; RepetitionPenalty follows the CTRL paper and
// Hugging Face (a positive logit of a token seen in the prompt or output is
// divided by it, a negative one multiplied).
//
// LogitBias and Suppress also change the logits before any token is
// chosen: LogitBias is added first (OpenAI's logit_bias, llama.cpp's
// order: before the penalties), and while fewer than SuppressUntil tokens
// have been generated the Suppress ids get -Inf last (vLLM's min_tokens:
// end-of-generation and stop tokens cannot be chosen yet).
type Sampling struct {
	Temperature       float32 // 0 = greedy (argmax, ties -> lower id)
	TopK              int     // 0 = off
	TopP              float32 // 1 (or 0) = off
	MinP              float32 // 0 = off
	PresencePenalty   float32 // 0 = off
	FrequencyPenalty  float32 // 0 = off
	RepetitionPenalty float32 // 1 (or 0) = off
	Seed              uint64
	// LogitBias is added to the logits of its token ids; ids outside the
	// vocabulary are ignored. nil = off. It is shared, never modified.
	LogitBias map[int32]float32
	// SuppressUntil is how many tokens must be generated before a Suppress
	// id may be chosen; 0 = off. Suppress is shared, never modified.
	SuppressUntil int
	Suppress      []int32
	// Mask, when not nil, constrains the next token (grammar-constrained
	// decoding): it sets to -Inf the logits of the tokens that may not
	// follow generated, the tokens generated so far. It runs after the
	// penalties, once per chosen position (speculative verify calls it for
	// each draft position, with that position's prefix), on the engine's
	// goroutine; it may keep state between calls.
	Mask func(generated []int32, logits []float32)
}

// Greedy reports whether s always picks the argmax (of the penalized logits).
func (s Sampling) Greedy() bool { return s.Temperature <= 0 || s.TopK == 1 }

// Penalized reports whether s changes logits before choosing.
func (s Sampling) Penalized() bool {
	return s.PresencePenalty != 0 || s.FrequencyPenalty != 0 || (s.RepetitionPenalty != 0 && s.RepetitionPenalty != 1) ||
		len(s.LogitBias) > 0 || (s.SuppressUntil > 0 && len(s.Suppress) > 0) || s.Mask != nil
}
