package node

// PlanPolicy is the per-plan configuration that policy nodes fold into at
// compile time; the engine reads it once when it loads a plan. (It cannot be
// called Policy: that name is the Placement constant.)
type PlanPolicy struct {
	// PrefillChunk is the largest number of prompt tokens a request feeds in
	// one step.
	PrefillChunk int
	// KVDType is the KV cache page format ("f32", "f16", ...).
	KVDType string
	// KVBlockTokens is the number of tokens per KV cache block.
	KVBlockTokens int
	// StateDType is how a hybrid model's recurrent state slots are stored
	// ("f32", or "bf16": half the memory, computed in f32 and rounded back
	// after every step).
	StateDType string
}

// DefaultPolicy returns the policy of a graph with no policy nodes:
// {PrefillChunk: 512, KVDType: "f32", KVBlockTokens: 16, StateDType: "f32"}.
func DefaultPolicy() PlanPolicy {
	return PlanPolicy{PrefillChunk: 512, KVDType: "f32", KVBlockTokens: 16, StateDType: "f32"}
}

// PolicyNode is what Spec.NewPolicy builds for specs
// with Placement Policy. The compiler calls Fold once per policy node, in plan
// step order, starting from DefaultPolicy; Fold sets the fields it owns and
// returns an error (reported at the node) if its params cannot be honoured.
type PolicyNode interface {
	Fold(p *PlanPolicy) error
}
