package executor

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// StepError is what one plan step cannot do on a model. Step and Op name
// the step, so that a caller holding the graph's text positions the error
// at its node (ninfer graph check --model); Err says what, as a predicate
// of the step ("cannot run on m.gguf: ...").
type StepError struct {
	Step, Op string
	Err      error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s (%s) %v", e.Step, e.Op, e.Err) }

func (e *StepError) Unwrap() error { return e.Err }

// BindTarget binds the steps of p that run the target model (its steps
// and the body steps of its loops over the target) to target (exec.Binder)
// and returns the cache shape they need: the KV layers and row width of
// its forwards and a hybrid model's recurrent state. It refuses what the
// plan cannot do on that model: a step that does not bind to it, steps
// that disagree on the KV row width, no step that owns a KV cache, and,
// on a model that keeps recurrent state, a loop that drafts with the
// target's own layers (plan.Loop.DraftsWithTargetState), which would
// advance that state. It reports every problem it finds, each about one
// step a *StepError. New calls it, and so does `ninfer graph check
// --model`: check ok on a model means the engine binds the plan to it.
func BindTarget(p *plan.Plan, target *weights.File) (Shape, error) {
	model := filepath.Base(target.Path)
	var shape Shape
	var errs []error
	for _, st := range TargetSteps(p) {
		if b, ok := st.Node.(exec.Binder); ok {
			if err := b.Bind(target); err != nil {
				errs = append(errs, &StepError{st.ID, st.Op, fmt.Errorf("cannot run on %s: %w", model, err)})
				continue
			}
		}
		if s, ok := st.Node.(exec.StateShaper); ok && s.StateShape().Layers() > 0 {
			shape.State = s.StateShape()
		}
		if s, ok := st.Node.(exec.KVShaper); ok {
			l, d := s.KVShape()
			if shape.Layers != 0 && d != shape.KVDim {
				errs = append(errs, &StepError{st.ID, st.Op, fmt.Errorf("wants kv %dx%d, another step %dx%d", l, d, shape.Layers, shape.KVDim)})
				continue
			}
			shape.Layers, shape.KVDim = max(shape.Layers, l), d
		}
	}
	if len(errs) > 0 {
		return Shape{}, errors.Join(errs...)
	}
	if shape.Layers == 0 {
		return Shape{}, errors.New("the plan has no step that owns a KV cache (model.forward)")
	}
	if shape.State.Layers() > 0 {
		for _, st := range p.Steps {
			if l, ok := st.Node.(*plan.Loop); ok && l.DraftsWithTargetState() {
				errs = append(errs, &StepError{st.ID, st.Op, fmt.Errorf("drafts with the target's own layers, which would advance the recurrent state of %s (a hybrid model): use a proposer that does not run the target (ngram, draft)", model)})
			}
		}
	}
	return shape, errors.Join(errs...)
}

// BindTower binds p's step that encodes images (exec.TowerBinder,
// vision.encode) to the vision tower file tower for target and returns it
// (nil when p has none). It refuses, each about its step a *StepError, a
// step that encodes images when no tower is given and a tower that does
// not fit target, and, about the plan, a second such step and a tower
// given to a plan that encodes no images. New calls it, and so does
// `ninfer graph check --model [--mmproj]`.
func BindTower(p *plan.Plan, tower, target *weights.File) (exec.TowerBinder, error) {
	var bound exec.TowerBinder
	var errs []error
	for _, st := range p.AllSteps() {
		tb, ok := st.Node.(exec.TowerBinder)
		switch {
		case !ok:
			continue
		case bound != nil:
			errs = append(errs, &StepError{st.ID, st.Op, errors.New("encodes images a second time: a plan runs one vision tower")})
		case tower == nil:
			errs = append(errs, &StepError{st.ID, st.Op, fmt.Errorf("needs a vision tower: %s has none given (--mmproj FILE)", filepath.Base(target.Path))})
		default:
			if err := tb.BindTower(tower, target); err != nil {
				errs = append(errs, &StepError{st.ID, st.Op, fmt.Errorf("cannot run the tower: %w", err)})
				continue
			}
			bound = tb
		}
	}
	if bound == nil && tower != nil && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("vision tower %s given, but the graph encodes no images (a vision.encode node feeding model.forward's images; the graph vision does)", tower.Path))
	}
	return bound, errors.Join(errs...)
}

// TargetSteps are p's steps and the body steps of its loops over the
// target: the steps that run the target model (a loop over a model of its
// own binds its body to that model).
func TargetSteps(p *plan.Plan) []*plan.Step {
	out := slices.Clone(p.Steps)
	for _, st := range p.Steps {
		if l, ok := st.Node.(*plan.Loop); ok && l.Model == node.Target {
			out = append(out, l.Steps...)
		}
	}
	return out
}
