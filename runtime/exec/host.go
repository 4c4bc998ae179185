package exec

import (
	"context"
	"math/rand/v2"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Logits is a host view of [Rows, Vocab] logits, one row per logit row of a step.
type Logits struct {
	Data  []float32
	Rows  int
	Vocab int
	// Argmax, when Data is nil, is each row's argmax (ties to the lower
	// id) as the device reduced it (ArgmaxOutputter): the engine reduces
	// only for steps whose every row picks greedily, unpenalized, without
	// logprobs, so the rows themselves were never copied to the host.
	Argmax []int32
}

// Row returns row i, [Vocab].
func (l Logits) Row(i int) []float32 { return l.Data[i*l.Vocab : (i+1)*l.Vocab] }

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

// SeqState is what host nodes know of one sequence that needs a token this step.
type SeqState struct {
	// ID identifies the sequence: unique among an engine's sequences for
	// the engine's lifetime (SeqReleaser is told when it ends).
	ID       uint64
	Sampling Sampling
	RNG      *rand.Rand // seeded from Sampling.Seed when the request is admitted
	History  []int32    // prompt and generated tokens so far
	Prompt   int        // how many leading History tokens are the prompt
	// Lookahead is how many draft tokens the sequence may be given this
	// step (KV is reserved for them); 0 when it does not speculate.
	Lookahead int
}

// HostContext is the per-step context of host nodes. Rows has one SeqState
// per sampled sequence (a sequence that gets tokens this step), in the
// order of Batch.LogitRows. Without drafts a logits value has one row per
// sequence; after a proposer, a sequence's rows are its last token and each
// draft (Drafts.Spans).
type HostContext struct {
	Ctx   context.Context
	Rows  []*SeqState
	Batch *Batch // the step's feed before any drafts
}

// DeviceNode is implemented by nodes of Device placement: they record ops
// into the step's device graph. in maps input port names to recorded
// tensors; the result maps output port names.
type DeviceNode interface {
	Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error)
}

// HostNode is implemented by nodes of Host placement: Go code run between
// device segments. Values are Logits for logits ports and []int32 (one token
// per logit row) for tokens ports.
type HostNode interface {
	RunHost(hc *HostContext, in map[string]any) (map[string]any, error)
}

// Binder is implemented by nodes that need the target model's file
// (weights and metadata) before they can record ops. Nodes that run a
// model of their own implement ModelBinder.
type Binder interface {
	Bind(f *weights.File) error
}

// KVShaper is implemented by nodes that own KV cache layers.
type KVShaper interface {
	KVShape() (layers, kvDim int)
}
