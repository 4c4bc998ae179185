package node

import (
	"context"
	"math/rand/v2"

	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// SeqState is what host nodes know of one sequence that needs a token this step.
type SeqState struct {
	// ID identifies the sequence: unique among an engine's sequences for
	// the engine's lifetime (sched.Seq.ID).
	ID       uint64
	Sampling request.Sampling
	RNG      *rand.Rand // seeded from Sampling.Seed when the request is admitted
	History  []int32    // prompt and generated tokens so far
	Prompt   int        // how many leading History tokens are the prompt
	// Lookahead is how many draft tokens the sequence may be given this
	// step (KV is reserved for them); 0 when it does not speculate.
	Lookahead int
}

// HostContext is the per-step context of host nodes. Rows has one SeqState
// per sampled sequence (a sequence that gets tokens this step), in the
// order of the batch's logit rows (exec.Batch.LogitRows). Without drafts a
// logits value has one row per sequence; after a proposer, a sequence's
// rows are its last token and each draft (exec.Drafts.Spans).
type HostContext struct {
	Ctx  context.Context
	Rows []*SeqState
}

// DeviceNode is implemented by nodes of Device placement: they record ops
// into the step's device graph. in maps input port names to recorded
// tensors; the result maps output port names.
type DeviceNode interface {
	Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error)
}

// HostNode is implemented by nodes of Host placement: Go code run between
// device segments. Values are exec.Logits for logits ports, []int32 (one
// token per logit row) for tokens ports and [][]int32 (one per sequence) for
// history ports.
type HostNode interface {
	RunHost(hc *HostContext, in map[string]any) (map[string]any, error)
}
