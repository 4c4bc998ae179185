package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/executor"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/sched"
	"github.com/ninfer/ninfer-go/runtime/vec"
)

// step is one engine step as it is built and run: the scheduler's work,
// the batch the plan runs over, and the sampled sequences.
type step struct {
	work    []sched.Work
	batch   *exec.Batch
	hc      *node.HostContext
	sampled []*inflight // the requests of the work items that sample, in batch order
	// sampledAt[i] is the work index of sampled[i]; decodeRow[si] says
	// work[si] feeds its sequence's last generated token; decoding[i] says
	// sampled[i]'s token is not its first.
	sampledAt []int
	decodeRow []bool
	decoding  []bool
	info      StepInfo
}

// Step runs one engine step: schedule, build the batch, run the plan
// (executor.Run), hand the tokens to the scheduler (sched.Update), which
// appends them and decides stop and length, draft ahead for the next
// step; then publish the new load and emit the events. It is called by
// the loop goroutine; tests may call it on an engine they drive.
func (e *Engine) Step(ctx context.Context) error {
	e.abortCancelled()
	work := e.sched.Schedule()
	e.dropCarry()
	e.publish() // admitted and preempted sequences, while the step runs
	if len(work) == 0 {
		if !e.sched.Idle() && e.sched.Running() == 0 {
			return errors.New("engine: no request fits the kv cache")
		}
		return nil
	}
	s := e.buildStep(ctx, work)
	out, err := e.x.Run(ctx, e.executorBatch(s))
	if err != nil {
		return err
	}
	res, err := e.accept(s, out)
	if err != nil {
		return err
	}
	e.x.KeepCarry(e.kept(s, res))
	e.keepHidden(s) // before Update releases a sequence that ends
	outcomes := e.sched.Update(work, res)
	if err := e.draftAhead(ctx, s, outcomes); err != nil {
		return err
	}
	e.publish() // before any event: a reader of an event sees the load after it
	e.observe(s, outcomes)
	return e.emit(s, out, outcomes)
}

// abortCancelled finishes the requests whose context was cancelled.
func (e *Engine) abortCancelled() {
	for _, r := range e.reqs {
		if r.ctx.Err() != nil {
			e.finish(r, FinishAbort, r.ctx.Err())
		}
	}
}

// dropCarry forgets the carried values of the sequences that hold no KV
// (waiting, or preempted to be recomputed): their next rows start over.
func (e *Engine) dropCarry() {
	for _, r := range e.reqs {
		if len(r.seq.KV.Blocks) == 0 {
			e.x.DropCarry(r.seq.ID)
		}
	}
}

// buildStep builds the step's batch from work: each item's rows, block
// table and state slots, and a host row per item that samples.
func (e *Engine) buildStep(ctx context.Context, work []sched.Work) *step {
	now := time.Now()
	s := &step{work: work, batch: &exec.Batch{}, decodeRow: make([]bool, len(work)), info: e.runningInfo(now)}
	s.hc = &node.HostContext{Ctx: ctx}
	b := s.batch
	for si, w := range work {
		r := e.reqs[w.Seq]
		if r.started.IsZero() {
			r.started = now
		}
		s.info.Tags = append(s.info.Tags, r.Tag)
		s.decodeRow[si] = w.Seq.Pending() == 1 && w.Seq.Generated() > 0
		if s.decodeRow[si] {
			s.info.DecodeRows++
		} else {
			s.info.PrefillTokens += w.N
		}
		b.Tables = append(b.Tables, w.Seq.KV.Blocks)
		if h := w.Seq.TakeResumeHidden(); h != nil {
			e.x.ResumeHidden(w.Seq.ID, w.Start, h)
		}
		if e.state.Slots > 0 {
			read, write := w.Seq.StateFrom(), w.Seq.StateSlot
			if to := w.StateTo(); to >= 0 {
				// The step takes a checkpoint: its rows write the pool
				// slot, the first reading the sequence's state.
				if read < 0 {
					read = write
				}
				write = to
			}
			b.StateSlots = append(b.StateSlots, write)
			b.StateFrom = append(b.StateFrom, read)
			if e.state.CheckpointDType != "" {
				b.StateRound = append(b.StateRound, w.AtCheckpoint())
			}
			var snaps []int32
			if w.Draft > 0 {
				snaps = w.Seq.Snapshots
			} else if takes := w.InnerTakes(); len(takes) > 0 {
				snaps = innerSnapshots(takes, w.N, write)
			}
			b.StateSnapshots = append(b.StateSnapshots, snaps)
		}
		for i := 0; i < w.N; i++ {
			b.Tokens = append(b.Tokens, w.Seq.Tokens[w.Start+i])
			b.Positions = append(b.Positions, int32(w.Start+i))
			b.RowSeq = append(b.RowSeq, int32(si))
		}
		if w.Sample {
			b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
			r.state.History = w.Seq.Tokens
			r.state.Lookahead = e.lookahead(r, w.Draft)
			s.hc.Rows = append(s.hc.Rows, &r.state)
			s.sampled = append(s.sampled, r)
			s.sampledAt = append(s.sampledAt, si)
		}
	}
	if e.images {
		e.bindImages(s, s.batch, &e.feedImages)
	}
	return s
}

// innerSnapshots are the slots the n rows of a step that takes checkpoints
// inside it write (exec.Batch.StateSnapshots): the rows before each take's
// position its pool slot, so the row there reads it back, and the rows
// after the last one last (the sequence's slot, or the pool slot of a
// checkpoint at the step's end).
func innerSnapshots(takes []sched.InnerTake, n int, last int32) []int32 {
	snaps := make([]int32, n)
	k := 0
	for i := range snaps {
		for k < len(takes) && i >= takes[k].Rows {
			k++
		}
		snaps[i] = last
		if k < len(takes) {
			snaps[i] = takes[k].Slot
		}
	}
	return snaps
}

// runningInfo starts a step's StepInfo: the load when it was scheduled.
func (e *Engine) runningInfo(start time.Time) StepInfo {
	info := StepInfo{Start: start}
	for _, r := range e.reqs {
		if len(r.seq.KV.Blocks) == 0 {
			continue // waiting: holds no KV
		}
		info.Running++
		switch p := r.seq.Pending(); {
		case p == 1 && r.seq.Generated() > 0:
			info.DecodeReady++
		case p > 0:
			info.Prefilling++
		}
	}
	return info
}

// executorBatch is what the executor runs the plan over for step s.
func (e *Engine) executorBatch(s *step) executor.Batch {
	b := executor.Batch{Host: s.hc, Feed: s.batch, Greedy: e.greedyStep(s.hc),
		Embeds: slices.ContainsFunc(s.sampled, func(r *inflight) bool { return r.Embed })}
	if e.images {
		b.BindRows = func(feed *exec.Batch) { e.bindImages(s, feed, &e.draftImages) }
	}
	return b
}

// greedyStep reports whether a step's logits may be reduced to argmax ids
// on the device: the plan does not speculate (verify reads whole rows) and
// every sampled sequence picks greedily, without penalties, and asks for
// no logprobs.
func (e *Engine) greedyStep(hc *node.HostContext) bool {
	if e.draftK > 0 || len(hc.Rows) == 0 {
		return false
	}
	for _, row := range hc.Rows {
		if !row.Sampling.Greedy() || row.Sampling.Penalized() {
			return false
		}
	}
	for _, r := range e.reqs {
		if r.seq.KV.Blocks != nil && r.readsLogits() {
			return false
		}
	}
	return true
}

// accept turns the plan's tokens into the scheduler's results (by work
// index): each sampled sequence's tokens, checked to extend an accepted
// prefix of its drafts, teacher-forced where the request forces them
// (none for an embedding request); and counts the step's speculation.
func (e *Engine) accept(s *step, out executor.Result) ([]sched.Result, error) {
	res := make([]sched.Result, len(s.work))
	for i, si := range s.sampledAt {
		r, w := s.sampled[i], s.work[si]
		a, err := checkAccepted(out.Tokens[i], out.Drafts[i], w)
		if e.draftsChecked != nil && len(out.Drafts[i]) > 0 {
			e.draftsChecked(r.Tag, out.Drafts[i])
		}
		if err != nil {
			return nil, err
		}
		tokens := out.Tokens[i]
		if g := w.Seq.Generated(); g < len(r.Force) {
			tokens = r.Force[g : g+1] // teacher-forced (plans without drafts yield one token)
		}
		res[si] = sched.Result{Tokens: tokens, Accepted: a}
		if r.Embed {
			res[si].Tokens = nil // the prompt is computed: nothing to append
		}
	}
	s.decoding = make([]bool, len(s.sampled))
	for i, r := range s.sampled {
		r.rounds++
		w := s.work[s.sampledAt[i]]
		s.decoding[i] = w.Seq.Generated() > 0
		if s.decoding[i] && e.draftK > 0 && w.N == 1 {
			accepted := res[s.sampledAt[i]].Accepted
			r.spec.count(out.Drafts[i], accepted, min(e.draftK, r.seq.Limit-len(r.seq.Tokens)-1))
			e.observeRound(r, len(out.Drafts[i]), accepted)
			s.info.Drafted += len(out.Drafts[i])
			s.info.DraftAccepted += accepted
		}
	}
	return res, nil
}

// kept says, per work item, which of the rows it fed its sequence keeps
// (executor.KeepCarry): every one, but for a sequence that verified
// drafts only its last token's and its accepted drafts'.
func (e *Engine) kept(s *step, res []sched.Result) []executor.Kept {
	kept := make([]executor.Kept, len(s.work))
	for si, w := range s.work {
		if r := e.reqs[w.Seq]; r != nil {
			kept[si].ID = r.seq.ID
		}
		if w.Draft > 0 && w.Sample {
			kept[si].Rows = 1 + res[si].Accepted
		}
	}
	return kept
}

// draftAhead runs the plan's ahead loops (executor.DraftAhead) for the
// next step of every sampled sequence that goes on.
func (e *Engine) draftAhead(ctx context.Context, s *step, outcomes []sched.Outcome) error {
	var seqs []executor.AheadSeq
	for i, o := range outcomes {
		r := s.sampled[i]
		if o.Finish != sched.Running || r.Embed {
			continue
		}
		seqs = append(seqs, executor.AheadSeq{State: &r.state, History: r.seq.Tokens, Room: e.aheadRoom(r), KV: &r.seq.KV})
	}
	if err := e.x.DraftAhead(ctx, seqs, e.kv); err != nil {
		return err
	}
	e.keepHidden(s)
	return nil
}

// keepHidden tells the scheduler how far the step's sequences' drafter
// entries reach, for the loops over the target's cache that entered
// hidden rows since the last call (sched.Scheduler.KeepHidden).
func (e *Engine) keepHidden(s *step) {
	for _, en := range e.x.TakeEnteredHidden() {
		for _, w := range s.work {
			if w.Seq.ID == en.ID {
				e.sched.KeepHidden(w.Seq, en.Rows.Pos, en.Last, func(pos int) []float32 { return en.Rows.Row(pos - en.Rows.Pos) })
				break
			}
		}
	}
}

// aheadRoom is how many drafts r's next step may verify, as far as the
// engine knows at the end of this one (sched.NextDrafts, none while r
// backs off): the scheduler may grant fewer (its budget, free blocks),
// and the extra drafts are then dropped.
func (e *Engine) aheadRoom(r *inflight) int {
	if e.backingOff(r) {
		return 0
	}
	return e.sched.NextDrafts(r.seq)
}

// observe records the finished step: the prompt chunks it computed, the
// decode tokens it committed, the intervals and the Observer. Observers
// see the step before its events go out, so a caller that has read a
// request's last event also sees the steps that produced it.
func (e *Engine) observe(s *step, outcomes []sched.Outcome) {
	done := time.Now()
	for si, w := range s.work {
		if !s.decodeRow[si] {
			r := e.reqs[w.Seq]
			r.chunks = append(r.chunks, Chunk{At: done, Start: w.Start, Tokens: w.N})
		}
	}
	for i, o := range outcomes {
		if s.decoding[i] {
			s.info.DecodeTokens += len(o.Tokens)
		}
	}
	s.info.End, s.info.Rows = done, len(s.batch.Tokens)
	e.intervals.observe(s.info)
	if e.cfg.Observer != nil {
		e.cfg.Observer.ObserveStep(s.info)
	}
}

// emit sends each sampled request its events: a token event per committed
// token (with logprobs and top logits when asked), an embedding request's
// embedding, and the final event of the requests that finished.
func (e *Engine) emit(s *step, out executor.Result, outcomes []sched.Outcome) error {
	first, _ := out.Drafts.Spans() // each sequence's first logit row
	for i, o := range outcomes {
		r := s.sampled[i]
		if r.Embed {
			if err := e.emitEmbedding(s, r, out.Hidden, first[i]); err != nil {
				return err
			}
			continue
		}
		if r.firstTok.IsZero() {
			r.firstTok = s.info.End
		}
		for j, tok := range o.Tokens {
			ev := Event{Token: tok}
			if r.readsLogits() && out.Logits.Rows > 0 {
				row := out.Logits.Row(first[i] + j)
				if r.Logits {
					ev.Logits = slices.Clone(row)
				}
				if r.TopLogits > 0 {
					ev.Top = topLogits(row, r.TopLogits)
				}
				ev.LogZ = vec.LogSumExp(row)
				ev.Logprob = row[tok] - ev.LogZ
			}
			r.events.put(ev)
		}
		switch o.Finish {
		case sched.Stopped:
			e.finish(r, FinishStop, nil)
		case sched.Length:
			e.finish(r, FinishLength, nil)
		}
	}
	return nil
}

// readsLogits reports whether r's events carry anything of its logit
// rows (top logits, logprobs, whole rows), so that its steps read rows back
// rather than argmax ids.
func (r *Request) readsLogits() bool { return r.TopLogits > 0 || r.Logprobs || r.Logits }

// emitEmbedding finishes embedding request r with its prompt's embedding:
// the hidden row of its last prompt token (the step's first logit row of
// the sequence, first), L2-normalised.
func (e *Engine) emitEmbedding(s *step, r *inflight, hidden exec.Logits, first int) error {
	if hidden.Data == nil || first >= hidden.Rows {
		return fmt.Errorf("engine: the plan's %s gave no hidden rows for an embedding request", e.x.HiddenStep())
	}
	row := first
	if hidden.Rows == len(s.batch.Tokens) && hidden.Rows != len(s.batch.LogitRows) {
		row = int(s.batch.LogitRows[first]) // hidden_rows: all (an embedding step verifies no drafts)
	}
	r.embedding = normalized(hidden.Row(row))
	e.finish(r, FinishStop, nil)
	return nil
}

// checkAccepted returns how many of w's drafts the step's tokens accepted:
// all tokens but the last must be the draft's prefix (their K/V are in the
// cache), within the slots the scheduler reserved.
func checkAccepted(tokens, draft []int32, w sched.Work) (int, error) {
	a := len(tokens) - 1
	if a > len(draft) || a > w.Draft || !slices.Equal(tokens[:a], draft[:a]) {
		return 0, fmt.Errorf("engine: sequence %d: step tokens %v do not extend an accepted prefix of draft %v (room %d)",
			w.Seq.ID, tokens, draft, w.Draft)
	}
	return a, nil
}

// normalized returns v / |v| (float64 norm), or v itself when it is zero.
func normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		copy(out, v)
		return out
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// topLogits returns the n largest logits of row, descending, ties to the lower id.
func topLogits(row []float32, n int) []TokenLogit {
	n = min(n, len(row))
	top := make([]TokenLogit, 0, n+1)
	for id, v := range row {
		if len(top) == n && v <= top[n-1].Logit {
			continue
		}
		i := len(top)
		for i > 0 && v > top[i-1].Logit {
			i--
		}
		top = append(top, TokenLogit{})
		copy(top[i+1:], top[i:])
		top[i] = TokenLogit{ID: int32(id), Logit: v}
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}
