package executor

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// execKey names a prepared graph: a plan segment ("seg0", ...) or a loop
// body's ("draft.seg0", ...), at the shape it was recorded at (the
// backend's bucket of the step's shape, exec.BucketShape).
type execKey struct {
	name            string
	rows, logitRows int
}

// newExecKey is the key of pass name over b on be.
func newExecKey(be exec.Backend, name string, b *exec.Batch) execKey {
	rows, logitRows := exec.BucketShape(be, len(b.Tokens), len(b.LogitRows))
	return execKey{name, rows, logitRows}
}

// String renders k for logs: "seg0 rows 8 logits 8".
func (k execKey) String() string {
	return fmt.Sprintf("%s rows %d logits %d", k.name, k.rows, k.logitRows)
}

// segmentName names device segment si in exec keys: "seg0", "seg1", ...
func segmentName(si int) string { return fmt.Sprintf("seg%d", si) }

// maxExecs bounds the prepared graphs kept (one per name and batch shape).
const maxExecs = 32

// preparedSegment returns the executable of device segment seg of steps
// (the plan's or a loop body's) at key, recording and preparing it the
// first time.
func (x *Executor) preparedSegment(steps []*plan.Step, seg plan.Segment, key execKey) (exec.Executable, error) {
	return prepare(x.backend, x.execs, key, func() (*tensor.Graph, error) { return x.record(x.cfg.Model, steps, seg, key, 0) })
}

// prepare returns the executable of key in execs, recording it with build
// and preparing it on be the first time.
func prepare(be exec.Backend, execs map[execKey]exec.Executable, key execKey, build func() (*tensor.Graph, error)) (exec.Executable, error) {
	if ex, ok := execs[key]; ok {
		return ex, nil
	}
	g, err := build()
	if err != nil {
		return nil, err
	}
	ex, err := be.Prepare(g)
	if err != nil {
		return nil, err
	}
	if len(execs) >= maxExecs {
		for k, old := range execs {
			old.Close()
			delete(execs, k)
			break
		}
	}
	execs[key] = ex
	return ex, nil
}

// record records device segment seg of steps (the plan's, or a loop
// body's, whose $loop.tokens and $loop.positions are the pass's rows, and
// $loop.hidden, of hiddenWidth floats, the float input loopHiddenInput)
// at key's shape, over the weights of f (the target's, or a draft
// model's).
func (x *Executor) record(f *weights.File, steps []*plan.Step, seg plan.Segment, key execKey, hiddenWidth int) (*tensor.Graph, error) {
	b := tensor.NewBuilder(weightInfo(f))
	tokens, positions := b.Input(node.BindTokens, key.rows), b.Input(node.BindPositions, key.rows)
	vals := map[plan.Ref]tensor.Tensor{
		{Node: plan.InputNode, Port: node.BindTokens}: tokens, {Node: plan.InputNode, Port: node.BindPositions}: positions,
		{Node: plan.LoopNode, Port: node.BindTokens}: tokens, {Node: plan.LoopNode, Port: node.BindPositions}: positions,
	}
	if hiddenWidth > 0 {
		vals[loopHidden] = b.InputF32(loopHiddenInput, key.rows, hiddenWidth)
	}
	b.Input(node.BindLogitRows, key.logitRows)
	for _, idx := range seg.Steps {
		for _, ref := range steps[idx].In {
			if ref == stepImages {
				vals[ref] = b.Input(node.BindImages, key.rows)
			}
		}
	}
	for _, idx := range seg.Steps {
		if err := recordStep(b, steps[idx], vals); err != nil {
			return nil, err
		}
	}
	g, err := b.Finish()
	if err != nil {
		return nil, err
	}
	g.Origin = fmt.Sprintf("plan %.12s %s", x.planHash, key)
	return g, nil
}

// stepImages marks the step's image rows, $in.images: declared only in
// the segments that read it, whose batches bind it and the inputs beside
// it (node.BindImageEmbeddings, node.BindMRoPE).
var stepImages = plan.Ref{Node: plan.InputNode, Port: node.BindImages}

// loopHidden is a loop pass's hidden-state rows, $loop.hidden.
var loopHidden = plan.Ref{Node: plan.LoopNode, Port: node.BindHidden}

// recordStep records device step st into b, its inputs from vals, and
// adds its outputs to vals and to the graph's outputs ("step.port").
func recordStep(b *tensor.Builder, st *plan.Step, vals map[plan.Ref]tensor.Tensor) error {
	dn, ok := st.Node.(node.DeviceNode)
	if !ok {
		return fmt.Errorf("engine: device step %s (%s) cannot record ops", st.ID, st.Op)
	}
	in := map[string]tensor.Tensor{}
	for port, ref := range st.In {
		if p := st.Spec.Input(port); p != nil && p.Type == node.Draft {
			continue // shapes the feed (see feed), recorded as tokens
		}
		t, ok := vals[ref]
		if !ok && ref == loopHidden {
			continue // a block pass enters no hidden rows: the input is absent
		}
		if !ok {
			return fmt.Errorf("engine: step %s: input %s from %s.%s is not a device value", st.ID, port, ref.Node, ref.Port)
		}
		in[port] = t
	}
	res, err := dn.Record(b, in)
	if err != nil {
		return err
	}
	for port, t := range res {
		vals[plan.Ref{Node: st.ID, Port: port}] = t
		b.Output(st.ID+"."+port, t)
	}
	return nil
}

// weightInfo resolves weight names to [rows, cols] for the tensor builder.
func weightInfo(f *weights.File) tensor.WeightInfo {
	return func(name string) (tensor.DType, int, int, bool) {
		t, err := f.Tensor(name)
		if err != nil {
			return 0, 0, 0, false
		}
		return t.DType, t.Rows(), t.RowLen(), true
	}
}

// Warmup prepares, on a Bucketer backend, every device segment at every
// bucket a step of up to maxRows rows that all sample can fall in, and
// each loop body's at every bucket a pass over 1 to maxSeqs sequences can
// fall in, so that graph capture happens (and is paid for) at start-up,
// not in the first requests. Larger shapes go first: a backend that
// shares scratch memory between its graphs sizes it once.
func (x *Executor) Warmup(maxRows, maxSeqs int) error {
	bk, ok := x.backend.(exec.Bucketer)
	if !ok {
		return nil
	}
	for _, s := range bucketShapes(bk, maxRows) {
		rows, logitRows := s[0], s[1]
		for si, seg := range x.plan.Segments {
			if seg.Placement != node.Device {
				continue
			}
			key := execKey{segmentName(si), rows, logitRows}
			if _, err := x.preparedSegment(x.plan.Steps, seg, key); err != nil {
				return fmt.Errorf("engine: warm-up %s: %w", key, err)
			}
		}
	}
	return x.warmLoops(bk, maxSeqs)
}

// bucketShapes are the distinct (rows, logit rows) buckets of steps of 1
// to maxRows rows that all sample, largest first.
func bucketShapes(bk exec.Bucketer, maxRows int) [][2]int { return seqShapes(bk, maxRows, 1, 1) }

// seqShapes are the distinct bucketed [rows, logit rows] of steps of 1 to
// maxSeqs sequences of rows rows and logitRows logit rows each, that fit
// the backend's largest bucket.
func seqShapes(bk exec.Bucketer, maxSeqs, rows, logitRows int) [][2]int {
	var shapes [][2]int
	for n := min(maxSeqs, bk.MaxBucket()/rows); n >= 1; n-- {
		r, lr := bk.Bucket(n*rows, n*logitRows)
		if s := [2]int{r, lr}; !slices.Contains(shapes, s) {
			shapes = append(shapes, s)
		}
	}
	return shapes
}
