package executor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// runLoop runs draft loop l (plan step st) for the step's sampled
// sequences: each sequence with a lookahead and no prior draft gets
// min(l.Repeat, lookahead) passes. Pass 0 feeds its last token at its
// position; each later pass feeds the token l.Next["tokens"] picked, one
// position further. A loop over the target runs on the target's KV cache
// through each sequence's block table, which the scheduler reserved for
// the drafts; a loop over a draft model (modelLoop) on that model's own
// cache, its pass 0 feeding the tokens the cache lacks. Each output of l
// collects what its body output gave each row in every pass: a token, or
// the distribution it was drawn from.
func (x *Executor) runLoop(st *plan.Step, l *plan.Loop, hc *hostStep, in map[string]any) (map[string]any, error) {
	out := newLoopOutputs(st, len(hc.Rows))
	active, want, err := out.takePrior(st, l, hc, in)
	if err != nil {
		return nil, err
	}
	if l.Block {
		if err := x.runBlockLoop(st, l, hc, in, active, want, out); err != nil {
			return nil, err
		}
		return out.result(), nil
	}
	ml := x.modelLoops[st.ID]
	b, active, want, tables, err := x.loopFirstPass(st, l, hc, in, active, want)
	if err != nil {
		return nil, err
	}
	for pass := 0; len(active) > 0; pass++ {
		n := len(active)
		rows := make([]*node.SeqState, n)
		for j, i := range active {
			rows[j] = hc.Rows[i]
		}
		phc := &hostStep{HostContext: &node.HostContext{Ctx: hc.Ctx, Rows: rows}, Batch: b}
		vals := passInputs(b)
		if err := x.runPass(st, l, phc, vals, pass == 0); err != nil {
			return nil, err
		}
		var spans []span // a row that still wants drafts drafts one
		for j, i := range active {
			if want[j] > 0 {
				spans = append(spans, span{i, j, j + 1})
			}
		}
		if err := out.collect(st, l, vals, n, spans); err != nil {
			return nil, err
		}
		fed, err := passTokens(st, vals, l.Next[node.BindTokens], n)
		if err != nil {
			return nil, err
		}
		var fedHidden exec.Logits // [n, width]: the rows next.hidden gave
		if ref, ok := l.Next[node.BindHidden]; ok {
			if fedHidden, ok = vals[ref].(exec.Logits); !ok || fedHidden.Rows != n {
				return nil, fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
			}
		}
		p := nextPass{b: b, fed: fed, fedHidden: fedHidden, active: active, want: want, tables: tables}
		b, active, want, tables = p.next(pass, func(j, i int) {
			if ml != nil && fedHidden.Rows == 0 { // a loop entering hidden states tracks positions, not tokens
				ml.fed(hc.Rows[i], fed[j])
			}
		})
	}
	return out.result(), nil
}

// passInputs are a loop pass's $loop.tokens and $loop.positions: b's rows.
func passInputs(b *exec.Batch) map[plan.Ref]any {
	return map[plan.Ref]any{
		{Node: plan.LoopNode, Port: node.BindTokens}:    b.Tokens,
		{Node: plan.LoopNode, Port: node.BindPositions}: b.Positions,
	}
}

// nextPass is what a pass over b gave (fed, the token next.tokens picked
// per row, and fedHidden, next.hidden's rows), for the rows it ran
// (active, wanting want drafts, writing through tables).
type nextPass struct {
	b         *exec.Batch
	fed       []int32
	fedHidden exec.Logits
	active    []int
	want      []int
	tables    [][]int32
}

// next builds pass pass+1: each row that wants more drafts is fed its fed
// token (and hidden row) one position further; fedRow(j, i) is called for
// each, j its row in this pass, i its hc row.
func (p nextPass) next(pass int, fedRow func(j, i int)) (*exec.Batch, []int, []int, [][]int32) {
	last := make([]int32, len(p.active)) // each row's position in this pass: its last row's
	for j := range last {
		last[j] = p.b.Positions[p.b.LogitRows[j]]
	}
	next := &exec.Batch{}
	var still, stillWant []int
	var stillTables [][]int32
	for j, i := range p.active {
		if pass+1 >= p.want[j] {
			continue
		}
		next.Tokens = append(next.Tokens, p.fed[j])
		next.Positions = append(next.Positions, last[j]+1)
		if p.fedHidden.Rows > 0 {
			if next.Floats == nil {
				next.Floats = map[string][]float32{}
			}
			next.Floats[loopHiddenInput] = append(next.Floats[loopHiddenInput], p.fedHidden.Row(j)...)
		}
		next.RowSeq = append(next.RowSeq, int32(len(still)))
		next.LogitRows = append(next.LogitRows, int32(len(still)))
		still, stillWant, stillTables = append(still, i), append(stillWant, p.want[j]), append(stillTables, p.tables[j])
		fedRow(j, i)
	}
	next.Tables = stillTables
	return next, still, stillWant, stillTables
}

// loopFirstPass builds pass 0 of loop l over the hc rows active (wanting
// want drafts each): from a carried in.hidden (carriedFirstPass), from a
// draft model's cache (modelLoop.firstPass), or each row's last token on
// the target's cache. It returns the pass's batch, the hc rows in it, the
// drafts each wants and each one's block table.
func (x *Executor) loopFirstPass(st *plan.Step, l *plan.Loop, hc *hostStep, in map[string]any, active, want []int) (*exec.Batch, []int, []int, [][]int32, error) {
	ml := x.modelLoops[st.ID]
	hidden, carried := in[node.BindHidden]
	switch {
	case carried:
		c, ok := hidden.([]exec.Carried)
		if !ok || len(c) != len(hc.Rows) {
			return nil, nil, nil, nil, fmt.Errorf("engine: loop %s: hidden input is %T for %d sequences", st.ID, hidden, len(hc.Rows))
		}
		table := func(i, _, _, _, _ int, _ bool) ([]int32, bool) { return hc.Batch.SeqTable(i), true }
		if ml != nil {
			ml.beginStep(hc)
			table = func(i, q0, end, off, want int, fromZero bool) ([]int32, bool) {
				return ml.enterTable(hc.Rows[i], q0, end, off, want, fromZero)
			}
		}
		b, active, want, tables, err := carriedFirstPass(hc, c, active, want, x.loopHidden[st.ID].enter, enteredAtHidden(l), x.imageToken, table)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("engine: loop %s: %w", st.ID, err)
		}
		if ml == nil && !enteredAtHidden(l) {
			x.noteEntered(hc, c, active)
		}
		return b, active, want, tables, nil
	case ml != nil:
		b, active, tables := ml.firstPass(hc, active, want)
		return b, active, want, tables, nil
	}
	b := &exec.Batch{}
	var tables [][]int32
	for _, i := range active {
		h := hc.Rows[i].History
		b.Tokens = append(b.Tokens, node.FedToken(h[len(h)-1], x.imageToken))
		b.Positions = append(b.Positions, int32(len(h)-1))
		b.RowSeq = append(b.RowSeq, int32(len(tables)))
		b.LogitRows = append(b.LogitRows, int32(len(tables)))
		tables = append(tables, hc.Batch.SeqTable(i))
	}
	b.Tables = tables
	return b, active, want, tables, nil
}

// loopOutputs collects a loop step's outputs over its passes, one entry
// per hc row: drafts for its draft outputs, distributions for its
// draft_probs outputs.
type loopOutputs struct {
	drafts map[string]exec.Drafts
	probs  map[string]exec.DraftProbs
}

// newLoopOutputs are loop step st's empty outputs for rows sequences.
func newLoopOutputs(st *plan.Step, rows int) loopOutputs {
	out := loopOutputs{drafts: map[string]exec.Drafts{}, probs: map[string]exec.DraftProbs{}}
	for _, p := range st.Spec.Out {
		if p.Type == node.DraftProbs {
			out.probs[p.Name] = make(exec.DraftProbs, rows)
		} else {
			out.drafts[p.Name] = make(exec.Drafts, rows)
		}
	}
	return out
}

// takePrior gives each hc row with a prior draft (the loop's in.prior)
// that draft, cut to its lookahead, and returns the rows that draft
// (active: a lookahead, a history and no prior) and how many each wants.
func (out loopOutputs) takePrior(st *plan.Step, l *plan.Loop, hc *hostStep, in map[string]any) (active, want []int, err error) {
	var prior exec.Drafts
	if v, wired := in["prior"]; wired {
		var ok bool
		if prior, ok = v.(exec.Drafts); !ok || len(prior) != len(hc.Rows) {
			return nil, nil, fmt.Errorf("engine: loop %s: prior input is %T for %d sequences", st.ID, v, len(hc.Rows))
		}
	}
	for i, row := range hc.Rows {
		if prior != nil && len(prior[i]) > 0 {
			for name := range out.drafts {
				out.drafts[name][i] = prior[i][:min(len(prior[i]), row.Lookahead)]
			}
			continue
		}
		if row.Lookahead > 0 && len(row.History) > 0 {
			active = append(active, i)
			want = append(want, min(l.Repeat, row.Lookahead))
		}
	}
	return active, want, nil
}

// span says that pass rows [lo, hi) drafted for hc row i.
type span struct{ i, lo, hi int }

// collect appends to each output of loop l what its body output gave a
// pass of n rows (vals): to each span's hc row, its rows' tokens or
// distributions, in order.
func (out loopOutputs) collect(st *plan.Step, l *plan.Loop, vals map[plan.Ref]any, n int, spans []span) error {
	for name, ref := range l.Out {
		if d, ok := out.probs[name]; ok {
			p, ok := vals[ref].(exec.DraftProbs)
			if !ok || len(p) != n {
				return fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
			}
			for _, sp := range spans {
				for _, q := range p[sp.lo:sp.hi] {
					d[sp.i] = append(d[sp.i], q...)
				}
			}
			continue
		}
		t, err := passTokens(st, vals, ref, n)
		if err != nil {
			return err
		}
		for _, sp := range spans {
			out.drafts[name][sp.i] = append(out.drafts[name][sp.i], t[sp.lo:sp.hi]...)
		}
	}
	return nil
}

// result is a loop step's outputs: its drafts and draft_probs.
func (out loopOutputs) result() map[string]any {
	res := map[string]any{}
	for name, d := range out.drafts {
		res[name] = d
	}
	for name, p := range out.probs {
		res[name] = p
	}
	return res
}

// runBlockLoop runs block loop l (plan step st, over a drafter model of
// its own) for hc rows active, wanting want drafts each. Pass 0 enters
// every sequence's carried rows into the drafter's cache: it runs the
// body's device segments, which write and pick nothing. The block pass
// then feeds each drafting sequence whose entries reach its last token
// that token and l.Repeat mask tokens (exec.BlockDrafter) at the
// positions that follow, and collects into each output of l what its
// body output gave the sequence's first want mask rows. The block pass's
// host context has one row per mask row.
func (x *Executor) runBlockLoop(st *plan.Step, l *plan.Loop, hc *hostStep, in map[string]any, active, want []int, out loopOutputs) error {
	ml, bd := x.modelLoops[st.ID], blockDrafter(l)
	c, ok := in[node.BindHidden].([]exec.Carried)
	if ml == nil || bd == nil || !ok || len(c) != len(hc.Rows) {
		return fmt.Errorf("engine: block loop %s: needs a block drafter on a model of its own and a carried in.hidden (%T for %d sequences)",
			st.ID, in[node.BindHidden], len(hc.Rows))
	}
	ml.beginStep(hc)
	enter, entered, wants, _, err := carriedFirstPass(hc, c, active, want, x.loopHidden[st.ID].enter, enteredAtHidden(l), x.imageToken,
		func(i, q0, end, off, want int, fromZero bool) ([]int32, bool) {
			return ml.enterTable(hc.Rows[i], q0, end, off, want, fromZero)
		})
	if err != nil {
		return fmt.Errorf("engine: loop %s: %w", st.ID, err)
	}
	if err := x.enterBlock(st, l, hc.Ctx, enter); err != nil {
		return err
	}
	block, maskRows, drafting, drafted := blockPass(hc, ml, l.Repeat, bd.MaskToken(), entered, wants)
	if len(drafting) == 0 {
		return nil
	}
	vals := passInputs(block)
	if err := x.runPass(st, l, &hostStep{HostContext: &node.HostContext{Ctx: hc.Ctx, Rows: maskRows}, Batch: block}, vals, false); err != nil {
		return err
	}
	spans := make([]span, len(drafting)) // each drafting row's first drafted mask rows
	for j, i := range drafting {
		spans[j] = span{i, j * l.Repeat, j*l.Repeat + drafted[j]}
	}
	return out.collect(st, l, vals, len(maskRows), spans)
}

// enterBlock runs block loop l's pass 0 over enter (when it enters rows):
// the body's device segments, which write the drafter's cache.
func (x *Executor) enterBlock(st *plan.Step, l *plan.Loop, ctx context.Context, enter *exec.Batch) error {
	if len(enter.Tokens) == 0 {
		return nil
	}
	for si, seg := range l.Segments {
		if seg.Placement != node.Device {
			continue
		}
		ex, err := x.loopSegment(st, l, si, enter, true)
		if err != nil {
			return err
		}
		if err := ex.Run(ctx, enter); err != nil {
			return err
		}
	}
	return nil
}

// blockPass builds a block loop's block pass over the hc rows entered
// (wanting wants drafts each): each that wants drafts and whose drafter
// cache holds its block feeds its last token and k mask tokens. It
// returns the batch, one host row per mask row, the hc rows drafting and
// the drafts each wants.
func blockPass(hc *hostStep, ml *modelLoop, k int, mask int32, entered, wants []int) (*exec.Batch, []*node.SeqState, []int, []int) {
	block := &exec.Batch{}
	var maskRows []*node.SeqState // one per mask row
	var drafting, drafted []int   // hc rows with a block, and the drafts each wants
	for j, i := range entered {
		row := hc.Rows[i]
		h := row.History
		if wants[j] == 0 || !ml.reserve(row, len(h)+k) {
			continue
		}
		block.Tables = append(block.Tables, ml.seq(row.ID).Seq.Blocks)
		for m := range k + 1 {
			t := mask
			if m == 0 {
				t = node.FedToken(h[len(h)-1], ml.image)
			} else {
				block.LogitRows = append(block.LogitRows, int32(len(block.Tokens)))
				maskRows = append(maskRows, row)
			}
			block.Tokens = append(block.Tokens, t)
			block.Positions = append(block.Positions, int32(len(h)-1+m))
			block.RowSeq = append(block.RowSeq, int32(len(block.Tables)-1))
		}
		drafting, drafted = append(drafting, i), append(drafted, wants[j])
	}
	return block, maskRows, drafting, drafted
}

// blockDrafter is the body step of loop l that drafts a block
// (exec.BlockDrafter; a block loop has one), or nil.
func blockDrafter(l *plan.Loop) exec.BlockDrafter {
	for _, st := range l.Steps {
		if bd, ok := st.Node.(exec.BlockDrafter); ok {
			return bd
		}
	}
	return nil
}

// passTokens is the token per row that body output ref gave in a pass of
// n rows.
func passTokens(st *plan.Step, vals map[plan.Ref]any, ref plan.Ref, n int) ([]int32, error) {
	t, ok := vals[ref].([]int32)
	if !ok || len(t) != n {
		return nil, fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
	}
	return t, nil
}

// runPass runs one pass of loop l's body over phc.Batch (first: pass 0),
// with vals holding the pass's inputs; it leaves the body's outputs in
// vals. A device output whose every reader reads only its argmax
// (exec.ArgmaxReader) this pass is reduced on the device.
func (x *Executor) runPass(st *plan.Step, l *plan.Loop, phc *hostStep, vals map[plan.Ref]any, first bool) error {
	for si, seg := range l.Segments {
		if seg.Placement == node.Host {
			for _, idx := range seg.Steps {
				if err := x.runHost(l.Steps[idx], phc, vals); err != nil {
					return err
				}
			}
			continue
		}
		ex, err := x.loopSegment(st, l, si, phc.Batch, first)
		if err != nil {
			return err
		}
		if err := ex.Run(phc.Ctx, phc.Batch); err != nil {
			return err
		}
		for _, r := range x.passReads[st.ID][si] {
			argmaxOnly := r.logits && !slices.ContainsFunc(r.readers, func(r *plan.Step) bool {
				ar, ok := r.Node.(exec.ArgmaxReader)
				return !ok || !ar.ReadsArgmaxOnly(phc.HostContext)
			})
			v, err := readOutput(ex, r.ref, argmaxOnly)
			if errors.As(err, new(argmaxError)) {
				return errors.Unwrap(err)
			}
			if err != nil {
				return fmt.Errorf("engine: loop %s: %w", st.ID, err)
			}
			vals[r.ref] = v
		}
	}
	return nil
}

// passRead is an output of a loop body's device segment that a pass reads
// back: one a host step of the body reads (readers) or that the loop's
// next feeds to the following pass.
type passRead struct {
	ref     plan.Ref
	logits  bool // a logits port, which argmax ids may stand for
	readers []*plan.Step
}

// loopPassReads are, for each loop of the plan (by step id), the outputs
// each device segment of its body reads back (by segment index), worked
// out once when the executor is made.
func (x *Executor) loopPassReads() map[string][][]passRead {
	out := map[string][][]passRead{}
	for _, st := range x.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok {
			continue
		}
		next := slices.Collect(maps.Values(l.Next))
		reads := make([][]passRead, len(l.Segments))
		for si, seg := range l.Segments {
			if seg.Placement != node.Device {
				continue
			}
			for _, idx := range seg.Steps {
				s := l.Steps[idx]
				for _, p := range s.Spec.Out {
					ref := plan.Ref{Node: s.ID, Port: p.Name}
					readers := hostReaders(l, ref)
					if len(readers) == 0 && !slices.Contains(next, ref) {
						continue // not read outside the segment
					}
					reads[si] = append(reads[si], passRead{ref: ref, logits: p.Type == node.Logits, readers: readers})
				}
			}
		}
		out[st.ID] = reads
	}
	return out
}

// loopSegment is the executable of device segment si of loop l (plan step
// st) at batch b's shape, prepared on the device of the loop's model. In
// a loop that enters carried hidden states, pass 0 (first) has an
// executable of its own ("draft.seg0/enter"): its $loop.hidden rows are
// the carried ones, a later pass's the body's own, which may be narrower.
func (x *Executor) loopSegment(st *plan.Step, l *plan.Loop, si int, b *exec.Batch, first bool) (exec.Executable, error) {
	be, execs, f := x.backend, x.execs, x.cfg.Model
	if ml := x.modelLoops[st.ID]; ml != nil {
		be, execs, f = ml.dev.backend, ml.dev.execs, ml.dev.file
	}
	name, width := loopSegmentName(st.ID, si), 0
	if w, ok := x.loopHidden[st.ID]; ok {
		width = w.draft
		if first {
			name, width = name+"/enter", w.enter
		}
	}
	key := newExecKey(be, name, b)
	return prepare(be, execs, key, func() (*tensor.Graph, error) { return x.record(f, l.Steps, l.Segments[si], key, width) })
}

// loopHiddenInput names the float input of a pass that is $loop.hidden.
const loopHiddenInput = "loop.hidden"

// loopWidths are the row widths of a loop's $loop.hidden: in pass 0 the
// carried value's, in later passes next.hidden's.
type loopWidths struct{ enter, draft int }

// enteredAtHidden reports whether loop l's entries sit at their hidden
// state's position (exec.HiddenEntry).
func enteredAtHidden(l *plan.Loop) bool {
	return slices.ContainsFunc(l.Steps, func(s *plan.Step) bool {
		he, ok := s.Node.(exec.HiddenEntry)
		return ok && he.EntersAtHidden()
	})
}

// resolveLoopHidden finds the row widths of $loop.hidden for each loop
// with a carried in.hidden (a $prev value, as the compiler checks): those
// of the device outputs the carry keeps and next.hidden names
// (exec.RowWidther).
func (x *Executor) resolveLoopHidden() error {
	for _, st := range x.plan.Steps {
		ref, ok := st.In["hidden"]
		if _, loop := st.Node.(*plan.Loop); !ok || !loop {
			continue
		}
		cref := x.plan.Source(ref) // an ahead loop's ref is this step's rows
		width := func(steps []*plan.Step, ref plan.Ref) int {
			for _, src := range steps {
				if rw, ok := src.Node.(exec.RowWidther); ok && src.ID == ref.Node {
					return rw.RowWidth(ref.Port)
				}
			}
			return 0
		}
		l := st.Node.(*plan.Loop)
		w := loopWidths{enter: width(x.plan.Steps, cref), draft: width(l.Steps, l.Next["hidden"])}
		if w.enter <= 0 || w.draft <= 0 && !l.Block { // a block pass reads no $loop.hidden
			return fmt.Errorf("engine: loop %s: the carried %s (%s) or next.hidden (%s) has no known row width", st.ID, ref, cref, l.Next["hidden"])
		}
		x.loopHidden[st.ID] = w
	}
	return nil
}

// carriedFirstPass builds pass 0 of a loop with a carried in.hidden: every
// sequence of hc with carried rows (c[i], the target's hidden states of
// positions c[i].Pos, Pos+1, ... that the steps since its last pass kept)
// enters token indices q after the first of those rows up to its last
// token (an image row's key as image, node.FedToken), each with the
// hidden state of q-1 (zeros for q = 0), at position q, or q-1 with
// atHidden (exec.HiddenEntry: EAGLE-3, which has no entry for token 0);
// the pass before entered the tokens up to the first row's.
// The sequence's entries go through table(i, q0, end, off, want,
// fromZero), which gives the block table to write them to (or false to
// leave the sequence out), also for a sequence that does not draft. A
// drafting sequence (drafting, wanting want drafts) drafts when its last
// entry is its last token. It returns the batch, the hc rows in it with
// the drafts each wants (0 for a row that only enters), and each one's
// block table.
func carriedFirstPass(hc *hostStep, c []exec.Carried, drafting, want []int, width int, atHidden bool, image int32,
	table func(i, q0, end, off, want int, fromZero bool) ([]int32, bool)) (*exec.Batch, []int, []int, [][]int32, error) {
	wants := map[int]int{}
	for j, i := range drafting {
		wants[i] = want[j]
	}
	off := 0
	if atHidden {
		off = 1
	}
	b := &exec.Batch{Floats: map[string][]float32{}}
	var active, activeWant []int
	var tables [][]int32
	for i, row := range hc.Rows {
		ci, h := c[i], row.History
		if ci.Rows() == 0 {
			continue
		}
		if ci.Width != width {
			return nil, nil, nil, nil, fmt.Errorf("sequence %d: carried rows of %d floats, $loop.hidden has %d", row.ID, ci.Width, width)
		}
		q0 := ci.Pos + 1
		if ci.Pos == 0 && !atHidden {
			q0 = 0
		}
		end := min(ci.Pos+ci.Rows(), len(h)-1) + 1 // token indices [q0, end)
		if q0 >= end {
			continue
		}
		w := wants[i]
		if end != len(h) {
			w = 0
		}
		t, ok := table(i, q0, end, off, w, ci.Pos == 0)
		if !ok {
			continue
		}
		for q := q0; q < end; q++ {
			b.Tokens = append(b.Tokens, node.FedToken(h[q], image))
			b.Positions = append(b.Positions, int32(q-off))
			b.RowSeq = append(b.RowSeq, int32(len(tables)))
			if q == 0 {
				b.Floats[loopHiddenInput] = append(b.Floats[loopHiddenInput], make([]float32, width)...)
			} else {
				b.Floats[loopHiddenInput] = append(b.Floats[loopHiddenInput], ci.Row(q-1-ci.Pos)...)
			}
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		tables = append(tables, t)
		active, activeWant = append(active, i), append(activeWant, w)
	}
	b.Tables = tables
	return b, active, activeWant, tables, nil
}

// hostReaders are loop l's host steps that read ref.
func hostReaders(l *plan.Loop, ref plan.Ref) []*plan.Step {
	var steps []*plan.Step
	for _, s := range l.Steps {
		if s.Placement == node.Host && slices.Contains(slices.Collect(maps.Values(s.In)), ref) {
			steps = append(steps, s)
		}
	}
	return steps
}

// loopSegmentName names device segment si of loop id's body in exec
// keys: "draft.seg0", ...
func loopSegmentName(id string, si int) string { return id + "." + segmentName(si) }

// warmLoops prepares, like warmup, each loop body's device segments at
// every bucket a pass over 1 to maxRunning sequences can fall in (a block
// pass: their blocks of 1 + Repeat rows), on the
// device of the loop's model when that is a Bucketer too. (A draft
// model's pass 0, which catches up on a sequence's unseen tokens, may
// need larger shapes; those are prepared when first run.)
func (x *Executor) warmLoops(bk exec.Bucketer, maxSeqs int) error {
	for _, st := range x.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok {
			continue
		}
		lbk := bk
		if ml := x.modelLoops[st.ID]; ml != nil {
			if lbk, ok = ml.dev.backend.(exec.Bucketer); !ok {
				continue
			}
		}
		shapes := bucketShapes(lbk, maxSeqs)
		later := shapes // of the passes after the first
		if l.Block {
			later = blockShapes(lbk, maxSeqs, l.Repeat)
		}
		for _, first := range []bool{false, true} {
			pass := later
			if first {
				pass = shapes
			}
			for _, s := range pass {
				b := &exec.Batch{Tokens: make([]int32, s[0]), LogitRows: make([]int32, s[1])}
				for si, seg := range l.Segments {
					if seg.Placement != node.Device {
						continue
					}
					if _, err := x.loopSegment(st, l, si, b, first); err != nil {
						return fmt.Errorf("engine: warm-up %s: %w", execKey{loopSegmentName(st.ID, si), s[0], s[1]}, err)
					}
				}
			}
		}
	}
	return nil
}

// blockShapes are the bucketed [rows, logit rows] of block passes over 1
// to maxSeqs sequences, each a block of 1 + k rows with k logit rows.
func blockShapes(bk exec.Bucketer, maxSeqs, k int) [][2]int { return seqShapes(bk, maxSeqs, k+1, k) }
