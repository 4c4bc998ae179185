package speculative

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.self",
		Placement: node.Host,
		In:        []node.Port{historyPort, priorPort},
		Out:       []node.Port{draftOut},
		Params: []node.Param{kParam,
			{Name: "layers", Kind: node.Int, Default: int64(0), Min: bound(0), Max: bound(1024),
				Doc: "leading blocks of the target that draft (0 = half of them, at least 1); fewer than the model has"},
		},
		Summary: "Draft tokens with an early exit of the target: its first `layers` blocks, final norm and LM head.",
		Doc: "Self-speculation without extra weights: each draft token is the argmax of the target's first " +
			"`layers` blocks followed by its final norm and output projection, one pass per draft token, batched " +
			"across sequences. The passes write K/V only into those layers' cache at the positions the verify " +
			"forward rewrites with the same values, and read the target's cache for earlier positions, so no " +
			"second cache is needed.",
		New: func(p node.Params) (any, error) { return &Self{K: p.Int("k"), Layers: p.Int("layers")}, nil },
	})
}

// Self is the speculative.self node. Bind must be called before RunHost.
type Self struct {
	K, Layers int // Layers as given: 0 means half the model's

	cfg    *model.Config
	layers int // resolved
	name   string
}

// DraftTokens implements exec.Proposer.
func (s *Self) DraftTokens() int { return s.K }

// DraftsWithTargetState implements exec.StateRollbacker: the draft passes
// run the target's first layers, so on a model with recurrent state they
// would advance it.
func (s *Self) DraftsWithTargetState() bool { return true }

// Bind implements exec.Binder: it resolves the early-exit depth against the
// model, which must have more blocks than it.
func (s *Self) Bind(f *weights.File) error {
	c, err := model.ReadConfig(f)
	if err != nil {
		return err
	}
	s.cfg, s.layers = c, s.Layers
	if s.layers == 0 {
		s.layers = max(1, c.Layers/2)
	}
	if s.layers >= c.Layers {
		return fmt.Errorf("speculative.self: layers %d must be fewer than the model's %d blocks", s.layers, c.Layers)
	}
	s.name = fmt.Sprintf("speculative.self/%d", s.layers)
	return nil
}

// ExitLayers is the resolved early-exit depth (after Bind).
func (s *Self) ExitLayers() int { return s.layers }

func (s *Self) record(b *tensor.Builder, tokens, positions tensor.Tensor) (tensor.Tensor, error) {
	return model.RecordLayers(b, s.cfg, tokens, positions, s.layers)
}

// RunHost implements exec.HostNode: history (and prior) -> draft, running
// up to k early-exit passes on hc.Device.
func (s *Self) RunHost(hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.self", hc, in)
	if err != nil {
		return nil, err
	}
	out := make(exec.Drafts, len(hc.Rows))
	var active []int // rows still drafting
	for i, need := range keepPrior(hc, prior, out) {
		if need {
			active = append(active, i)
		}
	}
	if len(active) == 0 {
		return map[string]any{"draft": out}, nil
	}
	if s.cfg == nil || hc.Device == nil || hc.Batch == nil {
		return nil, errors.New("speculative.self: needs a bound model and the engine's device")
	}
	b := &exec.Batch{}
	for _, i := range active {
		h := history[i]
		b.Tokens = append(b.Tokens, h[len(h)-1])
		b.Positions = append(b.Positions, int32(len(h)-1))
	}
	for len(active) > 0 {
		n := len(active)
		b.RowSeq, b.LogitRows, b.Tables = make([]int32, n), make([]int32, n), make([][]int32, n)
		for j, i := range active {
			b.RowSeq[j], b.LogitRows[j], b.Tables[j] = int32(j), int32(j), hc.Batch.SeqTable(i)
		}
		logits, err := hc.Device.Forward(hc.Ctx, s.name, s.record, b)
		if err != nil {
			return nil, fmt.Errorf("speculative.self: %w", err)
		}
		next := &exec.Batch{}
		var still []int
		for j, i := range active {
			t := sample.Argmax(logits.Row(j))
			out[i] = append(out[i], t)
			if len(out[i]) < min(s.K, hc.Rows[i].Lookahead) {
				still = append(still, i)
				next.Tokens = append(next.Tokens, t)
				next.Positions = append(next.Positions, b.Positions[j]+1)
			}
		}
		active, b = still, next
	}
	return map[string]any{"draft": out}, nil
}
