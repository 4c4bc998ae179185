// Package executor runs a compiled plan for one batch: its device segments
// (recorded once per batch shape and prepared on the backend), its host
// nodes, its loops (a loop holds a sub-plan of its own, run by the same
// functions), the values the plan carries from one step of a sequence to
// its next, and the loops that draft ahead for the next step. It binds the
// plan's nodes to the model (and the further models they run) and owns
// the prepared graphs; the engine owns the scheduler and the KV cache and
// hands the executor one batch a step.
//
// An Executor is used by one goroutine (the engine's loop).
package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Config configures an Executor.
type Config struct {
	Plan    *plan.Plan
	Model   *weights.File // the target
	Backend exec.Backend  // the target's, constructed; Start loads and reserves it
	// Models are further models by alias, for the plan's nodes that run a
	// model of their own (exec.ModelBinder); NewBackend constructs each
	// one's backend (required when a node runs one).
	Models     exec.Models
	NewBackend func() (exec.Backend, error)
	// Tower is the vision tower file (an mmproj) of a plan that encodes
	// images (exec.TowerBinder, vision.encode); nil for none. Start runs
	// it on a backend of its own from NewBackend.
	Tower *weights.File
}

// Shape is what the bound plan needs of the target's caches: the KV
// layers and row width of its forwards (a step with fewer layers uses the
// leading ones) and the recurrent state of a hybrid model (zero without
// one; the engine sizes its slots and format).
type Shape struct {
	Layers, KVDim int
	State         exec.StateLayout
}

// Executor runs one plan on one backend.
type Executor struct {
	cfg      Config
	plan     *plan.Plan
	backend  exec.Backend
	planHash string
	execs    map[execKey]exec.Executable
	// binders are the nodes that run a model of their own, bound to it,
	// attached to their devices (models, by alias) by Start.
	binders []modelBinding
	models  map[string]*modelDevice
	// tower is the plan's vision.encode step, bound to Config.Tower; nil
	// in a plan that encodes no images.
	tower exec.TowerBinder
	// imageToken is the token drafters are fed at an image row
	// (node.FedToken): imagePlaceholder of the target.
	imageToken int32
	// modelLoops are the plan's draft loops over a draft model, by step id;
	// loopHidden is the row width of $loop.hidden in each loop that reads
	// a carried value (in.hidden).
	modelLoops map[string]*modelLoop
	loopHidden map[string]loopWidths
	// seqs holds each sequence's carried values and ahead drafts, by
	// node.SeqState.ID; stepCarry, while a step runs, the carried values
	// its device segments computed, by name.
	seqs      map[uint64]*seqValues
	stepCarry map[string]carryRows
	entered   []EnteredHidden // since TakeEnteredHidden
	// stepEmbeds is set while a step runs whose hidden rows are read back.
	stepEmbeds bool
	// carried and passReads are facts of the plan that each step reads:
	// its carried values (takeCarry) and the outputs each pass of a loop
	// reads back (runPass).
	carried   []carried
	passReads map[string][][]passRead
}

// New binds the plan's nodes to cfg's models and returns the executor and
// the cache shape the plan needs.
func New(cfg Config) (*Executor, Shape, error) {
	p := cfg.Plan
	x := &Executor{cfg: cfg, plan: p, backend: cfg.Backend, planHash: p.Hash(), execs: map[execKey]exec.Executable{},
		models: map[string]*modelDevice{}, modelLoops: map[string]*modelLoop{}, loopHidden: map[string]loopWidths{},
		seqs: map[uint64]*seqValues{}, stepCarry: map[string]carryRows{}}
	shape, err := BindTarget(p, cfg.Model)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("engine: %w", err)
	}
	if x.tower, err = BindTower(p, cfg.Tower, cfg.Model); err != nil {
		return nil, Shape{}, fmt.Errorf("engine: %w", err)
	}
	if p.Reads(plan.Ref{Node: plan.InputNode, Port: node.BindImages}) {
		x.imageToken = imagePlaceholder(cfg.Model)
	}
	if err := x.bindModelLoops(); err != nil {
		return nil, Shape{}, err
	}
	for _, st := range TargetSteps(p) {
		if err := x.bindRunner(st); err != nil {
			return nil, Shape{}, err
		}
	}
	if err := x.resolveLoopHidden(); err != nil {
		return nil, Shape{}, err
	}
	x.carried, x.passReads = x.carriedValues(), x.loopPassReads()
	return x, shape, nil
}

// bindModelLoops binds the plan's draft loops over a model of their own
// to it (with their body steps).
func (x *Executor) bindModelLoops() error {
	for _, st := range x.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if ok && l.Block && l.Model == node.Target {
			return fmt.Errorf("engine: block loop %s runs the target: a block drafter runs a model of its own (its model param)", st.ID)
		}
		if ok && l.Model != node.Target {
			ml := &modelLoop{step: st.ID, loop: l, image: x.imageToken}
			mb, err := bindModel(x.cfg, st, ml)
			if err != nil {
				return err
			}
			x.binders = append(x.binders, mb)
			x.modelLoops[st.ID] = ml
		}
	}
	return nil
}

// imagePlaceholder is the id of the token a prompt holds at an image's
// rows (vision.ImagePad, <|image_pad|>) in target's vocabulary, or 0 for
// a vocabulary without one (whose images come through the engine's API
// alone, never through a rendered prompt).
func imagePlaceholder(target *weights.File) int32 {
	tokens, err := target.Strings("tokenizer.ggml.tokens")
	if i := slices.Index(tokens, vision.ImagePad); err == nil && i >= 0 {
		return int32(i)
	}
	return 0
}

// bindRunner binds target step st, when it runs a model of its own, to
// that model.
func (x *Executor) bindRunner(st *plan.Step) error {
	if b, ok := st.Node.(exec.ModelBinder); ok {
		mb, err := bindModel(x.cfg, st, b)
		if err != nil {
			return err
		}
		x.binders = append(x.binders, mb)
	}
	return nil
}

// Start loads the target's backend, reserves its caches (layout) and
// gives each node that runs a model of its own its device, with a KV
// cache of the target's capacity, block size and format.
func (x *Executor) Start(layout exec.KVLayout) error {
	if err := x.backend.Load(x.cfg.Model); err != nil {
		return fmt.Errorf("engine: load: %w", err)
	}
	if err := x.backend.Reserve(layout); err != nil {
		return fmt.Errorf("engine: reserve: %w", err)
	}
	if err := x.attachModels(x.binders, layout); err != nil {
		x.CloseModels()
		return err
	}
	if err := x.attachTower(); err != nil {
		x.CloseModels()
		return err
	}
	return nil
}

// Close releases the prepared graphs, the further models' devices and the
// target's backend.
func (x *Executor) Close() error {
	for _, ex := range x.execs {
		ex.Close()
	}
	return errors.Join(x.CloseModels(), x.backend.Close())
}

// hostStep is a host node's context with the batch its rows were fed in:
// the step's feed before any drafts, or a loop pass's.
type hostStep struct {
	*node.HostContext
	Batch *exec.Batch
	// bindRows binds a feed's per-row inputs (Batch.BindRows).
	bindRows func(*exec.Batch)
}

// Batch is one step's input to Run.
type Batch struct {
	// Host has one row per sampled sequence, its History (the plan's
	// in.history) and Lookahead set.
	Host *node.HostContext
	// Feed is the step's feed before any drafts.
	Feed *exec.Batch
	// Greedy allows logits to be reduced to argmax ids on the device: every
	// sampled row picks greedily, unpenalized, and no logprobs are asked.
	Greedy bool
	// Embeds asks for the hidden rows to be read back (an embedding request
	// is sampled).
	Embeds bool
	// BindRows, when set, binds the per-row inputs beside the tokens
	// (exec.Batch.Ints and Floats: the image rows and their M-RoPE
	// positions) of a feed with drafts inserted, by each row's RowSeq and
	// position, as the engine bound them for Feed.
	BindRows func(*exec.Batch)
}

// Result is what a step's plan gave each sampled sequence.
type Result struct {
	Tokens [][]int32   // one or more tokens per sampled sequence (out.tokens)
	Drafts exec.Drafts // the drafts the verify step checked; empty when the plan does not speculate
	// Logits are the rows the tokens were chosen from, one per token (each
	// sequence's rows: Drafts.Spans), or empty when they are not.
	Logits exec.Logits
	// Hidden are the hidden rows of the step whose logits were sampled
	// (when Batch.Embeds asked).
	Hidden exec.Logits
}

// Run runs the plan over b and returns its result. Loops that draft ahead
// do not run here: DraftAhead runs them once the tokens are accepted.
func (x *Executor) Run(ctx context.Context, b Batch) (Result, error) {
	x.stepEmbeds = b.Embeds
	hs := &hostStep{HostContext: b.Host, Batch: b.Feed, bindRows: b.BindRows}
	values := map[plan.Ref]any{
		{Node: plan.InputNode, Port: node.BindTokens}:    b.Feed.Tokens,
		{Node: plan.InputNode, Port: node.BindPositions}: b.Feed.Positions,
		{Node: plan.InputNode, Port: node.BindHistory}:   histories(b.Host.Rows),
	}
	clear(x.stepCarry) // a failed step's
	x.takeCarry(b.Host.Rows, values)
	for si, seg := range x.plan.Segments {
		if err := x.runSegment(ctx, si, seg, hs, b.Greedy, values); err != nil {
			return Result{}, err
		}
	}
	n := len(b.Host.Rows)
	tokens, err := stepTokens(values[x.plan.Out[node.BindTokens]], n)
	if err != nil {
		return Result{}, err
	}
	res := Result{Tokens: tokens, Drafts: x.verifiedDrafts(values, n)}
	res.Logits, _ = values[x.sampledFrom()].(exec.Logits)
	if res.Logits.Rows != len(res.Drafts)+res.Drafts.Total() {
		res.Logits = exec.Logits{} // not one row per token: no logprobs
	}
	res.Hidden, _ = values[x.hiddenOf()].(exec.Logits)
	return res, nil
}

// histories are rows' tokens so far, the plan's in.history: one per
// sampled sequence.
func histories(rows []*node.SeqState) [][]int32 {
	out := make([][]int32, len(rows))
	for i, row := range rows {
		out[i] = row.History
	}
	return out
}

// runSegment runs segment si of the plan over hs (greedy: Batch.Greedy).
func (x *Executor) runSegment(ctx context.Context, si int, seg plan.Segment, hs *hostStep, greedy bool, values map[plan.Ref]any) error {
	if seg.Placement == node.Device {
		return x.runDevice(ctx, si, seg, hs, greedy, values)
	}
	for _, idx := range seg.Steps {
		if l, ok := x.plan.Steps[idx].Node.(*plan.Loop); ok && l.Ahead {
			continue // runs once the step's tokens are accepted (DraftAhead)
		}
		if err := x.runHost(x.plan.Steps[idx], hs, values); err != nil {
			return err
		}
	}
	return nil
}

// runHost runs host step st (a host node, or a loop) with its inputs
// from values and stores its outputs there.
func (x *Executor) runHost(st *plan.Step, hc *hostStep, values map[plan.Ref]any) error {
	in := map[string]any{}
	for port, ref := range st.In {
		v, ok := values[ref]
		if !ok {
			return fmt.Errorf("engine: step %s: input %s has no value", st.ID, port)
		}
		in[port] = v
	}
	var res map[string]any
	var err error
	switch n := st.Node.(type) {
	case *plan.Loop:
		res, err = x.runLoop(st, n, hc, in)
	case node.HostNode:
		res, err = n.RunHost(hc.HostContext, in)
	default:
		return fmt.Errorf("engine: host step %s (%s) has no host implementation", st.ID, st.Op)
	}
	if err != nil {
		return err
	}
	for port, v := range res {
		values[plan.Ref{Node: st.ID, Port: port}] = v
	}
	return nil
}

// runDevice records the segment's device steps for this batch shape (once
// per shape), runs it, and stores the outputs later segments read. A
// segment whose steps verify drafts (an input of type draft) runs over the
// batch with those drafts inserted (exec.Batch.WithDrafts).
func (x *Executor) runDevice(ctx context.Context, si int, seg plan.Segment, hs *hostStep, greedy bool, values map[plan.Ref]any) error {
	feed, err := x.feed(seg, hs, values)
	if err != nil {
		return err
	}
	ex, err := x.preparedSegment(x.plan.Steps, seg, newExecKey(x.backend, segmentName(si), feed))
	if err != nil {
		return err
	}
	if err := ex.Run(ctx, feed); err != nil {
		return err
	}
	for _, idx := range seg.Steps {
		st := x.plan.Steps[idx]
		for _, p := range st.Spec.Out {
			ref := plan.Ref{Node: st.ID, Port: p.Name}
			if p.Type == node.Hidden {
				if err := x.recordCarry(ex, ref, feed); err != nil {
					return err
				}
			}
			if p.Type == node.Hidden && x.stepEmbeds {
				if v, err := readOutput(ex, ref, false); err == nil {
					values[ref] = v
				}
				continue
			}
			if p.Type != node.Logits {
				continue
			}
			v, err := readOutput(ex, ref, greedy)
			if errors.As(err, new(argmaxError)) {
				return errors.Unwrap(err)
			}
			if err == nil { // else not consumed outside the segment
				values[ref] = v
			}
		}
	}
	return nil
}

// argmaxError is the error of reading argmax ids back: unlike a missing
// output, it fails the step.
type argmaxError struct{ err error }

func (e argmaxError) Error() string { return e.err.Error() }
func (e argmaxError) Unwrap() error { return e.err }

// readOutput reads device output ref of ex back to the host: each row's
// argmax id when argmaxOnly allows and ex reduced the output
// (exec.ArgmaxOutputter), else its [rows, cols] floats.
func readOutput(ex exec.Executable, ref plan.Ref, argmaxOnly bool) (exec.Logits, error) {
	name := ref.Node + "." + ref.Port
	if ax, ok := ex.(exec.ArgmaxOutputter); ok && argmaxOnly && ax.HasArgmax(name) {
		ids, err := ax.OutputArgmax(name) // ids, not [rows, vocab] floats, come back
		if err != nil {
			return exec.Logits{}, argmaxError{err}
		}
		return exec.Logits{Rows: len(ids), Argmax: ids}, nil
	}
	data, rows, cols, err := ex.Output(name)
	if err != nil {
		return exec.Logits{}, err
	}
	return exec.Logits{Data: data, Rows: rows, Vocab: cols}, nil
}

// hiddenOf is the hidden output of the step whose logits the plan samples
// from (model.forward's "hidden"), which embedding requests read.
func (x *Executor) hiddenOf() plan.Ref {
	return plan.Ref{Node: x.sampledFrom().Node, Port: node.BindHidden}
}

// HiddenStep names the step whose hidden rows Result.Hidden holds.
func (x *Executor) HiddenStep() string { return x.hiddenOf().Node }

// sampledFrom is the logits value the plan's output tokens were chosen from:
// the "logits" input of the step that produces out.tokens.
func (x *Executor) sampledFrom() plan.Ref {
	if st := x.plan.Step(x.plan.Out[node.BindTokens].Node); st != nil {
		return st.In["logits"]
	}
	return plan.Ref{}
}
