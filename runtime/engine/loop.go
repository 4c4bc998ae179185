package engine

import (
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
func (e *Engine) runLoop(st *plan.Step, l *plan.Loop, hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	drafts, probs := map[string]exec.Drafts{}, map[string]exec.DraftProbs{}
	for _, p := range st.Spec.Out {
		if p.Type == node.DraftProbs {
			probs[p.Name] = make(exec.DraftProbs, len(hc.Rows))
		} else {
			drafts[p.Name] = make(exec.Drafts, len(hc.Rows))
		}
	}
	var active, want []int // hc rows that draft, and their drafts
	var prior exec.Drafts
	if v, wired := in["prior"]; wired {
		var ok bool
		if prior, ok = v.(exec.Drafts); !ok || len(prior) != len(hc.Rows) {
			return nil, fmt.Errorf("engine: loop %s: prior input is %T for %d sequences", st.ID, v, len(hc.Rows))
		}
	}
	for i, row := range hc.Rows {
		if prior != nil && len(prior[i]) > 0 {
			for name := range drafts {
				drafts[name][i] = prior[i][:min(len(prior[i]), row.Lookahead)]
			}
			continue
		}
		if row.Lookahead > 0 && len(row.History) > 0 {
			active = append(active, i)
			want = append(want, min(l.Repeat, row.Lookahead))
		}
	}
	if l.Block {
		if err := e.runBlockLoop(st, l, hc, in, active, want, drafts, probs); err != nil {
			return nil, err
		}
		return loopResult(drafts, probs), nil
	}
	ml := e.modelLoops[st.ID]
	var b *exec.Batch
	var tables [][]int32 // each active row's block table
	switch hidden, carried := in["hidden"]; {
	case carried:
		c, ok := hidden.([]exec.Carried)
		if !ok || len(c) != len(hc.Rows) {
			return nil, fmt.Errorf("engine: loop %s: hidden input is %T for %d sequences", st.ID, hidden, len(hc.Rows))
		}
		table := func(i, _, _, _, _ int, _ bool) ([]int32, bool) { return hc.Batch.SeqTable(i), true }
		if ml != nil {
			ml.beginStep(hc)
			table = func(i, q0, end, off, want int, fromZero bool) ([]int32, bool) {
				return ml.enterTable(hc.Rows[i], q0, end, off, want, fromZero)
			}
		}
		var err error
		if b, active, want, tables, err = carriedFirstPass(hc, c, active, want, e.loopHidden[st.ID].enter, enteredAtHidden(l), table); err != nil {
			return nil, fmt.Errorf("engine: loop %s: %w", st.ID, err)
		}
	case ml != nil:
		b, active, tables = ml.firstPass(hc, active, want)
	default:
		b = &exec.Batch{}
		for _, i := range active {
			h := hc.Rows[i].History
			b.Tokens = append(b.Tokens, h[len(h)-1])
			b.Positions = append(b.Positions, int32(len(h)-1))
			b.RowSeq = append(b.RowSeq, int32(len(tables)))
			b.LogitRows = append(b.LogitRows, int32(len(tables)))
			tables = append(tables, hc.Batch.SeqTable(i))
		}
		b.Tables = tables
	}
	for pass := 0; len(active) > 0; pass++ {
		n := len(active)
		rows := make([]*exec.SeqState, n)
		for j, i := range active {
			rows[j] = hc.Rows[i]
		}
		phc := &exec.HostContext{Ctx: hc.Ctx, Rows: rows, Batch: b}
		vals := map[plan.Ref]any{
			{Node: plan.LoopNode, Port: "tokens"}:    b.Tokens,
			{Node: plan.LoopNode, Port: "positions"}: b.Positions,
		}
		if err := e.runPass(st, l, phc, vals, pass == 0); err != nil {
			return nil, err
		}
		for name, ref := range l.Out {
			if d, ok := probs[name]; ok {
				p, ok := vals[ref].(exec.DraftProbs)
				if !ok || len(p) != n {
					return nil, fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
				}
				for j, i := range active {
					if want[j] > 0 {
						d[i] = append(d[i], p[j]...)
					}
				}
				continue
			}
			t, err := passTokens(st, vals, ref, n)
			if err != nil {
				return nil, err
			}
			for j, i := range active {
				if want[j] > 0 {
					drafts[name][i] = append(drafts[name][i], t[j])
				}
			}
		}
		fed, err := passTokens(st, vals, l.Next["tokens"], n)
		if err != nil {
			return nil, err
		}
		var fedHidden exec.Logits // [n, width]: the rows next.hidden gave
		if ref, ok := l.Next["hidden"]; ok {
			if fedHidden, ok = vals[ref].(exec.Logits); !ok || fedHidden.Rows != n {
				return nil, fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
			}
		}
		last := make([]int32, n) // each row's position in this pass: its last row's
		for j := range last {
			last[j] = b.Positions[b.LogitRows[j]]
		}
		next := &exec.Batch{}
		var still, stillWant []int
		var stillTables [][]int32
		for j, i := range active {
			if pass+1 >= want[j] {
				continue
			}
			next.Tokens = append(next.Tokens, fed[j])
			next.Positions = append(next.Positions, last[j]+1)
			if fedHidden.Rows > 0 {
				if next.Floats == nil {
					next.Floats = map[string][]float32{}
				}
				next.Floats[loopHiddenInput] = append(next.Floats[loopHiddenInput], fedHidden.Row(j)...)
			}
			next.RowSeq = append(next.RowSeq, int32(len(still)))
			next.LogitRows = append(next.LogitRows, int32(len(still)))
			still, stillWant, stillTables = append(still, i), append(stillWant, want[j]), append(stillTables, tables[j])
			if ml != nil && fedHidden.Rows == 0 { // a loop entering hidden states tracks positions, not tokens
				ml.fed(hc.Rows[i], fed[j])
			}
		}
		next.Tables = stillTables
		active, want, tables, b = still, stillWant, stillTables, next
	}
	return loopResult(drafts, probs), nil
}

// loopResult is a loop step's outputs: its drafts and draft_probs.
func loopResult(drafts map[string]exec.Drafts, probs map[string]exec.DraftProbs) map[string]any {
	res := map[string]any{}
	for name, d := range drafts {
		res[name] = d
	}
	for name, p := range probs {
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
func (e *Engine) runBlockLoop(st *plan.Step, l *plan.Loop, hc *exec.HostContext, in map[string]any, active, want []int,
	drafts map[string]exec.Drafts, probs map[string]exec.DraftProbs) error {
	ml, bd := e.modelLoops[st.ID], blockDrafter(l)
	c, ok := in["hidden"].([]exec.Carried)
	if ml == nil || bd == nil || !ok || len(c) != len(hc.Rows) {
		return fmt.Errorf("engine: block loop %s: needs a block drafter on a model of its own and a carried in.hidden (%T for %d sequences)",
			st.ID, in["hidden"], len(hc.Rows))
	}
	ml.beginStep(hc)
	enter, entered, wants, _, err := carriedFirstPass(hc, c, active, want, e.loopHidden[st.ID].enter, enteredAtHidden(l),
		func(i, q0, end, off, want int, fromZero bool) ([]int32, bool) {
			return ml.enterTable(hc.Rows[i], q0, end, off, want, fromZero)
		})
	if err != nil {
		return fmt.Errorf("engine: loop %s: %w", st.ID, err)
	}
	if len(enter.Tokens) > 0 {
		for si, seg := range l.Segments {
			if seg.Placement != node.Device {
				continue
			}
			x, err := e.loopSegment(st, l, si, enter, true)
			if err != nil {
				return err
			}
			if err := x.Run(hc.Ctx, enter); err != nil {
				return err
			}
		}
	}
	k, mask := l.Repeat, bd.MaskToken()
	block := &exec.Batch{}
	var maskRows []*exec.SeqState // one per mask row
	var drafting, drafted []int   // hc rows with a block, and the drafts each wants
	for j, i := range entered {
		row := hc.Rows[i]
		h := row.History
		if wants[j] == 0 || !ml.reserve(row, len(h)+k) {
			continue
		}
		block.Tables = append(block.Tables, ml.seq(row.ID).kv.Blocks)
		for m := range k + 1 {
			t := mask
			if m == 0 {
				t = h[len(h)-1]
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
	if len(drafting) == 0 {
		return nil
	}
	vals := map[plan.Ref]any{
		{Node: plan.LoopNode, Port: "tokens"}:    block.Tokens,
		{Node: plan.LoopNode, Port: "positions"}: block.Positions,
	}
	if err := e.runPass(st, l, &exec.HostContext{Ctx: hc.Ctx, Rows: maskRows, Batch: block}, vals, false); err != nil {
		return err
	}
	n := len(maskRows)
	for name, ref := range l.Out {
		if d, ok := probs[name]; ok {
			p, ok := vals[ref].(exec.DraftProbs)
			if !ok || len(p) != n {
				return fmt.Errorf("engine: loop %s: %s is %T for %d rows", st.ID, ref, vals[ref], n)
			}
			for j, i := range drafting {
				for _, q := range p[j*k : j*k+drafted[j]] {
					d[i] = append(d[i], q...)
				}
			}
			continue
		}
		t, err := passTokens(st, vals, ref, n)
		if err != nil {
			return err
		}
		for j, i := range drafting {
			drafts[name][i] = append(drafts[name][i], t[j*k:j*k+drafted[j]]...)
		}
	}
	return nil
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
func (e *Engine) runPass(st *plan.Step, l *plan.Loop, phc *exec.HostContext, vals map[plan.Ref]any, first bool) error {
	for si, seg := range l.Segments {
		if seg.Placement == node.Host {
			for _, idx := range seg.Steps {
				if err := e.runHost(l.Steps[idx], phc, vals); err != nil {
					return err
				}
			}
			continue
		}
		x, err := e.loopSegment(st, l, si, phc.Batch, first)
		if err != nil {
			return err
		}
		if err := x.Run(phc.Ctx, phc.Batch); err != nil {
			return err
		}
		ax, reduces := x.(exec.ArgmaxOutputter)
		for _, idx := range seg.Steps {
			s := l.Steps[idx]
			for _, p := range s.Spec.Out {
				ref := plan.Ref{Node: s.ID, Port: p.Name}
				readers := hostReaders(l, ref)
				if len(readers) == 0 && !slices.Contains(slices.Collect(maps.Values(l.Next)), ref) {
					continue // not read outside the segment
				}
				name := s.ID + "." + p.Name
				argmaxOnly := !slices.ContainsFunc(readers, func(r *plan.Step) bool {
					ar, ok := r.Node.(exec.ArgmaxReader)
					return !ok || !ar.ReadsArgmaxOnly(phc)
				})
				if reduces && p.Type == node.Logits && ax.HasArgmax(name) && argmaxOnly {
					ids, err := ax.OutputArgmax(name) // ids, not [rows, vocab] floats, come back
					if err != nil {
						return err
					}
					vals[ref] = exec.Logits{Rows: len(ids), Argmax: ids}
					continue
				}
				data, rows, cols, err := x.Output(name)
				if err != nil {
					return fmt.Errorf("engine: loop %s: %w", st.ID, err)
				}
				vals[ref] = exec.Logits{Data: data, Rows: rows, Vocab: cols}
			}
		}
	}
	return nil
}

// loopSegment is the executable of device segment si of loop l (plan step
// st) at batch b's shape, prepared on the device of the loop's model. In
// a loop that enters carried hidden states, pass 0 (first) has an
// executable of its own ("draft.seg0/enter"): its $loop.hidden rows are
// the carried ones, a later pass's the body's own, which may be narrower.
func (e *Engine) loopSegment(st *plan.Step, l *plan.Loop, si int, b *exec.Batch, first bool) (exec.Executable, error) {
	be, execs, f := e.backend, e.execs, e.cfg.Model
	if ml := e.modelLoops[st.ID]; ml != nil {
		be, execs, f = ml.dev.backend, ml.dev.execs, ml.dev.file
	}
	name, width := loopSegmentName(st.ID, si), 0
	if w, ok := e.loopHidden[st.ID]; ok {
		width = w.draft
		if first {
			name, width = name+"/enter", w.enter
		}
	}
	key := newExecKey(be, name, b)
	return prepare(be, execs, key, func() (*tensor.Graph, error) { return e.record(f, l.Steps, l.Segments[si], key, width) })
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
func (e *Engine) resolveLoopHidden() error {
	for _, st := range e.plan.Steps {
		ref, ok := st.In["hidden"]
		if _, loop := st.Node.(*plan.Loop); !ok || !loop {
			continue
		}
		cref := e.plan.Source(ref) // an ahead loop's ref is this step's rows
		width := func(steps []*plan.Step, ref plan.Ref) int {
			for _, src := range steps {
				if rw, ok := src.Node.(exec.RowWidther); ok && src.ID == ref.Node {
					return rw.RowWidth(ref.Port)
				}
			}
			return 0
		}
		l := st.Node.(*plan.Loop)
		w := loopWidths{enter: width(e.plan.Steps, cref), draft: width(l.Steps, l.Next["hidden"])}
		if w.enter <= 0 || w.draft <= 0 && !l.Block { // a block pass reads no $loop.hidden
			return fmt.Errorf("engine: loop %s: the carried %s (%s) or next.hidden (%s) has no known row width", st.ID, ref, cref, l.Next["hidden"])
		}
		e.loopHidden[st.ID] = w
	}
	return nil
}

// carriedFirstPass builds pass 0 of a loop with a carried in.hidden: every
// sequence of hc with carried rows (c[i], the target's hidden states of
// positions c[i].Pos, Pos+1, ... that the steps since its last pass kept)
// enters token indices q after the first of those rows up to its last
// token, each with the hidden state of q-1 (zeros for q = 0), at position
// q, or q-1 with atHidden (exec.HiddenEntry: EAGLE-3, which has no entry
// for token 0); the pass before entered the tokens up to the first row's.
// The sequence's entries go through table(i, q0, end, off, want,
// fromZero), which gives the block table to write them to (or false to
// leave the sequence out), also for a sequence that does not draft. A
// drafting sequence (drafting, wanting want drafts) drafts when its last
// entry is its last token. It returns the batch, the hc rows in it with
// the drafts each wants (0 for a row that only enters), and each one's
// block table.
func carriedFirstPass(hc *exec.HostContext, c []exec.Carried, drafting, want []int, width int, atHidden bool,
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
			b.Tokens = append(b.Tokens, h[q])
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
func (e *Engine) warmLoops(bk exec.Bucketer) error {
	for _, st := range e.plan.Steps {
		l, ok := st.Node.(*plan.Loop)
		if !ok {
			continue
		}
		lbk := bk
		if ml := e.modelLoops[st.ID]; ml != nil {
			if lbk, ok = ml.dev.backend.(exec.Bucketer); !ok {
				continue
			}
		}
		shapes := bucketShapes(lbk, e.maxRunning)
		later := shapes // of the passes after the first
		if l.Block {
			later = blockShapes(lbk, e.maxRunning, l.Repeat)
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
					if _, err := e.loopSegment(st, l, si, b, first); err != nil {
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
