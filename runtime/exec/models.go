package exec

import (
	"context"
	"fmt"
	"regexp"

	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// AliasPattern is what a model alias looks like ("draft", "small-1").
var AliasPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// CheckAlias reports, as an error, a model alias (a node's model param)
// that AliasPattern does not match.
func CheckAlias(alias string) error {
	if !AliasPattern.MatchString(alias) {
		return fmt.Errorf("model alias %q: want %s", alias, AliasPattern)
	}
	return nil
}

// Models are model files by alias.
type Models map[string]*weights.File

// ModelBinder is implemented by nodes that run a model other than the
// plan's own forward on a device of their own, with a KV cache of their
// own (a draft loop over a draft model, speculative.dflash). The engine
// binds such a node in three steps:
// BindModel when it is constructed, then, once it has sized the target's
// KV cache, Attach with a device that has the model loaded and a cache of
// the same token capacity, block size and format as the target's.
type ModelBinder interface {
	// ModelAlias names the model the node runs: a key of the engine's
	// models.
	ModelAlias() string
	// BindModel binds the node to its model f; target is the plan's model
	// (to check that both share a vocabulary). It returns the KV cache
	// shape f needs: layers, and K (or V) row width per layer.
	BindModel(f, target *weights.File) (layers, kvDim int, err error)
	// Attach hands the node the device that runs its model. It is called
	// once, after BindModel and before the node's first RunHost.
	Attach(d ModelDevice)
}

// WeightBorrower is implemented by ModelBinders whose model reads tensors
// of the target (a block drafter without token embeddings or an output
// head of its own): the engine loads the node's device with its model and
// the target's tensors of these names (weights.File.With).
type WeightBorrower interface {
	TargetWeights() []string
}

// ModelDevice is the device of one model besides the target: a backend of
// its own, over a paged KV cache of its own in which the node keeps each
// running sequence's entries as its share (kv.Shares; the scheduler's
// cache group sched.DraftKVGroup frees a sequence's shares when it stops
// running). The block tables of the batches its passes run over must be
// ones of its shares. It is used by the engine's goroutine only.
type ModelDevice interface {
	KV() *kv.Shares
}

// TargetChecker is implemented by the body nodes of a draft loop over a
// model of their own (an EAGLE-3 drafter) that check, before Bind, that
// the model f can draft for target (widths, vocabulary), reading what
// they need of f.
type TargetChecker interface {
	BindTarget(f, target *weights.File) error
}

// TowerBinder is implemented by a device node that runs a vision tower on
// a device of its own (vision.encode): the engine encodes each image of a
// request with it once, before the request's prefill, and binds its rows
// where the node's output feeds the step (node.BindImageEmbeddings). The
// engine binds it in two steps: BindTower when the plan is bound, then
// AttachTower with a backend of the target's kind once the target is
// loaded.
type TowerBinder interface {
	// BindTower binds the node to the vision tower file tower (an mmproj)
	// for the text model target, refusing a tower whose output rows do not
	// fit target's embeddings.
	BindTower(tower, target *weights.File) error
	// AttachTower loads the tower into be, a backend the node owns from
	// then on, and prepares its graph once, so that a backend that cannot
	// run one of its ops refuses it here, naming the op.
	AttachTower(be Backend) error
	// EncodeImage runs the tower over one preprocessed image: its rows
	// [p.Grid.Tokens(), E], row-major. It is safe for concurrent use
	// (images are encoded one at a time).
	EncodeImage(ctx context.Context, p *vision.Preprocessed) ([]float32, error)
	// Workspace is the scratch memory of the tower's backend, false when
	// it does not account it (exec.WorkspaceReporter).
	Workspace() (Workspace, bool)
	// Close releases the backend AttachTower gave the node.
	Close() error
}
