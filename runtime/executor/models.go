package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// modelBinding is a plan node that runs a model of its own, bound to it.
type modelBinding struct {
	node         exec.ModelBinder
	alias        string
	file         *weights.File
	layers, kvD  int
	step, opName string
}

// ErrNoModel is wrapped by New's error when a node runs a model alias that
// Config.Models does not hold.
var ErrNoModel = errors.New("model alias not given")

// bindModel resolves the alias st's node runs and binds the node to it.
func bindModel(cfg Config, st *plan.Step, b exec.ModelBinder) (modelBinding, error) {
	alias := b.ModelAlias()
	f := cfg.Models[alias]
	if alias == node.Target {
		f = cfg.Model
	}
	if f == nil {
		have := append([]string{node.Target}, slices.Sorted(maps.Keys(cfg.Models))...)
		return modelBinding{}, fmt.Errorf("engine: step %s (%s) runs the model %q: %w (have %s)",
			st.ID, st.Op, alias, ErrNoModel, strings.Join(have, ", "))
	}
	layers, kvDim, err := b.BindModel(f, cfg.Model)
	if err != nil {
		return modelBinding{}, fmt.Errorf("engine: bind %s (%s) to model %q: %w", st.ID, st.Op, alias, err)
	}
	if wb, ok := b.(exec.WeightBorrower); ok {
		var extra []*weights.Tensor
		for _, name := range wb.TargetWeights() {
			t, err := cfg.Model.Tensor(name)
			if err != nil {
				return modelBinding{}, fmt.Errorf("engine: step %s (%s) borrows the target's %s: %w", st.ID, st.Op, name, err)
			}
			extra = append(extra, t)
		}
		if f, err = f.With(extra...); err != nil {
			return modelBinding{}, fmt.Errorf("engine: step %s (%s): %w", st.ID, st.Op, err)
		}
	}
	if layers < 1 || kvDim < 1 {
		return modelBinding{}, fmt.Errorf("engine: step %s (%s): model %q has kv shape %dx%d", st.ID, st.Op, alias, layers, kvDim)
	}
	return modelBinding{node: b, alias: alias, file: f, layers: layers, kvD: kvDim, step: st.ID, opName: st.Op}, nil
}

// attachModels gives each bound node the device of its model: one backend
// per alias, with target's KV layout but the model's own layers and width.
func (x *Executor) attachModels(binders []modelBinding, target exec.KVLayout) error {
	for _, mb := range binders {
		d := x.models[mb.alias]
		if d == nil {
			if x.cfg.NewBackend == nil {
				return fmt.Errorf("engine: step %s (%s) runs model %q but the engine has no NewBackend", mb.step, mb.opName, mb.alias)
			}
			var err error
			if d, err = newModelDevice(x.cfg.NewBackend, mb, target); err != nil {
				return fmt.Errorf("engine: model %q: %w", mb.alias, err)
			}
			x.models[mb.alias] = d
		}
		if d.layout.Layers != mb.layers || d.layout.KVDim != mb.kvD {
			return fmt.Errorf("engine: steps disagree on model %q's kv shape: %dx%d and %dx%d",
				mb.alias, d.layout.Layers, d.layout.KVDim, mb.layers, mb.kvD)
		}
		mb.node.Attach(d)
	}
	return nil
}

// attachTower gives the plan's vision tower a backend of its own (the
// target's kind), which refuses at once a tower op it cannot run.
func (x *Executor) attachTower() error {
	if x.tower == nil {
		return nil
	}
	if x.cfg.NewBackend == nil {
		return errors.New("engine: the plan encodes images but the engine has no NewBackend")
	}
	be, err := x.cfg.NewBackend()
	if err != nil {
		return fmt.Errorf("engine: vision tower: %w", err)
	}
	if err := x.tower.AttachTower(be); err != nil {
		be.Close()
		return fmt.Errorf("engine: vision tower: %w", err)
	}
	return nil
}

// ErrNoTower is returned by EncodeImage for a plan that encodes no images.
var ErrNoTower = errors.New("the graph encodes no images (vision.encode)")

// EncodeImage runs the plan's vision tower (vision.encode) over one
// preprocessed image: its rows [p.Grid.Tokens(), E]. Unlike the rest of
// the Executor it may be called from any goroutine once Start returned:
// the tower runs on a device of its own, one image at a time.
func (x *Executor) EncodeImage(ctx context.Context, p *vision.Preprocessed) ([]float32, error) {
	if x.tower == nil {
		return nil, ErrNoTower
	}
	return x.tower.EncodeImage(ctx, p)
}

// TowerWorkspace is the scratch memory of the vision tower's backend;
// false without a tower or when the backend does not account it.
func (x *Executor) TowerWorkspace() (exec.Workspace, bool) {
	if x.tower == nil {
		return exec.Workspace{}, false
	}
	return x.tower.Workspace()
}

// CloseModels releases the devices of the models besides the target (Close
// does too; New's caller calls it alone when it gives up after Start).
func (x *Executor) CloseModels() error {
	var errs []error
	for _, d := range x.models {
		errs = append(errs, d.close())
	}
	if x.tower != nil {
		errs = append(errs, x.tower.Close())
	}
	return errors.Join(errs...)
}

// DraftCaches are the KV caches of the models the plan's nodes run
// besides the target, by alias (empty when there are none; the engine's
// scheduler holds each as a cache group, sched.DraftKVGroup). They exist
// once Start has returned.
func (x *Executor) DraftCaches() map[string]*kv.Shares {
	out := map[string]*kv.Shares{}
	for alias, d := range x.models {
		out[alias] = d.kv
	}
	return out
}

// modelDevice is the exec.ModelDevice of one model besides the target: its
// backend, prepared graphs and KV cache.
type modelDevice struct {
	file    *weights.File
	backend exec.Backend
	execs   map[execKey]exec.Executable
	layout  exec.KVLayout
	kv      *kv.Shares
}

func newModelDevice(newBackend func() (exec.Backend, error), mb modelBinding, target exec.KVLayout) (*modelDevice, error) {
	layout := target
	layout.Layers, layout.KVDim = mb.layers, mb.kvD
	layout.State = exec.StateLayout{} // the target's; a draft model keeps none
	m, err := kv.New(layout.Blocks, layout.BlockTokens)
	if err != nil {
		return nil, err
	}
	be, err := newBackend()
	if err != nil {
		return nil, err
	}
	if err := be.Load(mb.file); err != nil {
		be.Close()
		return nil, fmt.Errorf("load: %w", err)
	}
	if err := be.Reserve(layout); err != nil {
		be.Close()
		return nil, fmt.Errorf("reserve: %w", err)
	}
	return &modelDevice{file: mb.file, backend: be, execs: map[execKey]exec.Executable{}, layout: layout, kv: kv.NewShares(m)}, nil
}

// KV implements exec.ModelDevice.
func (d *modelDevice) KV() *kv.Shares { return d.kv }

func (d *modelDevice) close() error {
	for _, x := range d.execs {
		x.Close()
	}
	return d.backend.Close()
}
