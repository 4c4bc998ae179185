// Package sched decides what each engine step computes and applies what it
// computed. It is a pure state machine (no I/O, no clocks): the engine adds
// sequences, asks for a step (Schedule), runs it, and hands the step's
// tokens back (Update), which is the one place where tokens are appended,
// drafts accepted or rolled back, stop and length decided, and the blocks
// of finished sequences freed. The step's currency is tokens per sequence:
// a prefill chunk or one decode token are the same kind of work.
package sched

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/kv"
)

// Seq is the scheduler's view of one sequence.
type Seq struct {
	ID       uint64
	Tokens   []int32 // prompt then generated tokens
	Computed int     // leading tokens whose K/V are in the cache
	KV       kv.Seq
	// Preempted counts how often the sequence lost its cache and was requeued.
	Preempted int
	// Cached is how many leading tokens the prefix cache held when the
	// sequence was first admitted (their prefill was skipped).
	Cached int
	// StateSlot is the recurrent state slot the sequence holds while it
	// runs (Config.StateSlots > 0); a preempted sequence gives it up and
	// recomputes from position 0, which starts from a zeroed state.
	StateSlot int32
	// Snapshots are the Config.Snapshots further slots a running sequence
	// holds when the model has state and the plan speculates: a verify
	// step writes the state after each of its rows into them
	// (exec.Batch.StateSnapshots), and Update makes the one after the last
	// accepted row the sequence's StateSlot by swapping slot ids (no copy).
	Snapshots []int32
	// from is the checkpoint the sequence's next row reads (adopted at
	// admission, or taken by its last step); take the one its scheduled
	// step writes; rolling its latest generated block's, published when it
	// stops running (StateGroup).
	from, take, rolling *checkpoint
	// inner are the checkpoints its scheduled step takes at prompt
	// positions inside the step (Config.InnerCheckpoints), in order.
	inner []*checkpoint
	// entered is how many leading tokens the drafter's own K/V entries
	// cover (Config.DrafterEntries; Scheduler.KeepHidden).
	entered int
	// resumeHidden is the hidden state the checkpoint adopted at
	// admission holds (checkpoint.Hidden), until the engine takes it.
	resumeHidden []float32
	// verified is the rows of the verify step Update is applying (its
	// first position and accepted rows + 1), for StateGroup.Publish.
	verified verifiedRows
	// Marks are offsets into the prompt (ascending) where the recurrent
	// state is checkpointed at the block boundary at or before each (chat
	// message ends; StateGroup.Target).
	Marks []int
	// Prompt is how many leading Tokens are the prompt: a sequence drafts
	// only once it holds generated tokens (it decodes).
	Prompt int
	// Limit is the most tokens (prompt + generated) the sequence will hold;
	// drafts are never reserved past it, and Update ends the sequence with
	// Length when it is reached. 0 means no limit.
	Limit int
	// Stop reports whether a generated token ends the sequence (an
	// end-of-generation token, a completed stop sequence). Update calls it
	// exactly once per appended token, in order, so it may keep state; nil
	// never stops.
	Stop func(id int32) bool
}

// Pending is the number of known tokens not yet in the cache.
func (s *Seq) Pending() int { return len(s.Tokens) - s.Computed }

// decodes reports whether the sequence's next step feeds one generated
// token (it decodes) rather than prompt tokens or a recomputed prefix.
func (s *Seq) decodes() bool { return s.Pending() == 1 && len(s.Tokens) > s.Prompt }

// StateFrom is the state slot the sequence's next row reads when it is
// not its own (a checkpoint: exec.Batch.StateFrom), else -1.
func (s *Seq) StateFrom() int32 {
	if s.from == nil {
		return -1
	}
	return s.from.Slot
}

// TakeResumeHidden returns, once after each admission that adopted a
// checkpoint keeping hidden states (Config.DrafterEntries), the
// target's hidden state [E] at position Computed-1, where the sequence
// resumes; nil otherwise.
func (s *Seq) TakeResumeHidden() []float32 {
	h := s.resumeHidden
	s.resumeHidden = nil
	return h
}

// Generated is the number of tokens after the prompt.
func (s *Seq) Generated() int { return len(s.Tokens) - s.Prompt }

// Work is one sequence's share of a step: feed Tokens[Start:Start+N] at
// positions Start..Start+N-1. Sample is set when the last fed token is the
// sequence's last known token, so the step yields its next-token logits.
//
// Draft is how many speculative tokens may follow the fed token: KV slots
// for positions Start+N..Start+N+Draft-1 are reserved and the step budget
// counts them, so a verify step is 1+Draft tokens of the sequence. Only a
// decode step (N == 1, Sample, a generated token fed) gets drafts.
type Work struct {
	Seq    *Seq
	Start  int
	N      int
	Sample bool
	Draft  int
	// atCheckpoint says that the step ends where s's state is to be
	// checkpointed (StateGroup.Target), taken by this step or cached.
	atCheckpoint bool
}

// AtCheckpoint reports whether w's step ends at a checkpoint position of
// its sequence (taken by the step, StateTo, or cached already).
func (w Work) AtCheckpoint() bool { return w.atCheckpoint }

// StateTo is the state slot w's step writes instead of its sequence's own
// (a checkpoint it takes, StateGroup.Plan), else -1.
func (w Work) StateTo() int32 {
	if w.Seq.take == nil {
		return -1
	}
	return w.Seq.take.Slot
}

// InnerTake is a checkpoint a step takes inside itself: the state after
// its first Rows rows goes to pool slot Slot (exec.Batch.StateSnapshots:
// those rows write Slot, the next one reads it back).
type InnerTake struct {
	Rows int
	Slot int32
}

// InnerTakes are the checkpoints w's step takes at positions inside it
// (Config.InnerCheckpoints), in row order; the one at its end, if any, is
// StateTo.
func (w Work) InnerTakes() []InnerTake {
	var out []InnerTake
	for _, c := range w.Seq.inner {
		out = append(out, InnerTake{Rows: c.end - w.Start, Slot: c.Slot})
	}
	return out
}

// Config bounds a step.
type Config struct {
	Chunk int // most prompt tokens of one sequence per step
	// StepTokens is the most tokens one step computes across sequences
	// (decode rows, their drafts, prefill chunks): the knob that trades
	// time to first token against inter-token latency.
	StepTokens int
	MaxRunning int // most sequences holding KV blocks at once
	// Draft is the most draft tokens a decoding sequence may verify per
	// step; 0 turns speculation off.
	Draft int
	// DraftMaxBatch turns speculation off for a step when more sequences
	// than this are running; 0 means no limit.
	DraftMaxBatch int
	// StateSlots is the number of recurrent state slots (a hybrid model's
	// state cache group); admission needs 1 + Snapshots free ones. 0: no
	// state.
	StateSlots int
	// Snapshots is how many snapshot slots each running sequence holds
	// besides its own (Draft + 1 when speculating on a model with state).
	Snapshots int
	// Checkpoints is how many recurrent state checkpoints the state group
	// keeps (slots besides StateSlots; StateGroup.EnableCheckpoints) when
	// the block manager caches prefixes; 0: none, and a model with state
	// caches no prefix. CheckpointEvery is the interval, in blocks, of a
	// long prompt's periodic checkpoints (0: none).
	Checkpoints, CheckpointEvery int
	// DrafterEntries says that the plan's drafter writes its own K/V
	// entries of a token into the target's blocks a step or more after the
	// target's (the mtp graph's MTP head, from the target's hidden state
	// before the token): a block is shared only once its entries are
	// written, and a checkpoint adopted only once it holds the hidden
	// state before its end (Scheduler.KeepHidden).
	DrafterEntries bool
	// InnerCheckpoints says that the backend takes a checkpoint inside a
	// step as cheaply as at its end (InnerTake): a prefill step is not cut
	// at the prompt's checkpoint positions but takes them in passing. Not
	// with speculation.
	InnerCheckpoints bool
}

// Scheduler holds waiting and running sequences. Not safe for concurrent use.
type Scheduler struct {
	cfg     Config
	groups  []Group // the cache groups every running sequence holds a share of
	state   *StateGroup
	kv      *KVGroup
	waiting []*Seq
	running []*Seq
	stats   PrefixStats
}

// PrefixStats count prefix cache lookups at admission, in tokens (vLLM's
// prefix_cache_queries and prefix_cache_hits).
type PrefixStats struct {
	Queries int64 // tokens of admitted sequences looked up
	Hits    int64 // of those, tokens found in cached blocks
}

// PrefixStats reports the lookups so far.
func (sc *Scheduler) PrefixStats() PrefixStats { return sc.stats }

// New returns a scheduler over the block manager m and the further cache
// groups drafts (draft models' caches, DraftKVGroup).
func New(cfg Config, m *kv.Manager, drafts ...*DraftKVGroup) (*Scheduler, error) {
	if cfg.Chunk <= 0 || cfg.MaxRunning <= 0 || cfg.Draft < 0 || cfg.DraftMaxBatch < 0 || cfg.StepTokens <= 0 {
		return nil, fmt.Errorf("sched: bad config %+v", cfg)
	}
	if cfg.StateSlots < 0 || cfg.Snapshots < 0 || (cfg.Snapshots > 0 && cfg.Snapshots < cfg.Draft+1) || cfg.Checkpoints < 0 || cfg.CheckpointEvery < 0 {
		return nil, fmt.Errorf("sched: bad config %+v", cfg)
	}
	sc := &Scheduler{cfg: cfg}
	if cfg.StateSlots > 0 {
		sc.state = NewStateGroup(cfg.StateSlots, cfg.Snapshots)
		if cfg.Checkpoints > 0 && m.PrefixCaching() {
			sc.state.EnableCheckpoints(m, cfg.Checkpoints, cfg.CheckpointEvery)
			sc.state.hidden = cfg.DrafterEntries
			sc.state.inner = cfg.InnerCheckpoints && cfg.Draft == 0
		}
		sc.groups = append(sc.groups, sc.state)
	}
	sc.kv = NewKVGroup(m)
	sc.kv.entries = cfg.DrafterEntries
	sc.groups = append(sc.groups, sc.kv)
	for _, g := range drafts {
		sc.groups = append(sc.groups, g)
	}
	if sc.state != nil && cfg.Checkpoints == 0 && m.PrefixCaching() {
		return nil, fmt.Errorf("sched: a model with recurrent state caches prefixes only with checkpoints: bad config %+v", cfg)
	}
	return sc, nil
}

// KeepHidden records that s's drafter has entered its tokens through
// last (Config.DrafterEntries): the full blocks before become shareable,
// and each checkpoint of a prefix of s that ends at a block boundary in
// (first, last] gets the target's hidden state before its end,
// hidden(end-1) (StateGroup.KeepHidden).
func (sc *Scheduler) KeepHidden(s *Seq, first, last int, hidden func(pos int) []float32) {
	s.entered = max(s.entered, last+1)
	sc.kv.Publish(s)
	if sc.state != nil {
		sc.state.KeepHidden(s, first, last, hidden)
	}
}

// Add queues s (FIFO). s must have at least one token.
func (sc *Scheduler) Add(s *Seq) { sc.waiting = append(sc.waiting, s) }

// Waiting is the number of queued sequences.
func (sc *Scheduler) Waiting() int { return len(sc.waiting) }

// Running is the number of admitted sequences.
func (sc *Scheduler) Running() int { return len(sc.running) }

// Idle reports whether there is nothing to schedule.
func (sc *Scheduler) Idle() bool { return len(sc.waiting) == 0 && len(sc.running) == 0 }

// StateSlotsFree is the number of free recurrent state slots of running
// sequences.
func (sc *Scheduler) StateSlotsFree() int {
	if sc.state == nil {
		return 0
	}
	used, total := sc.state.Usage()
	return total - used
}

// Checkpoints reports the recurrent state checkpoints held and the most
// the pool keeps (0, 0 without a pool).
func (sc *Scheduler) Checkpoints() (held, capacity int) {
	if sc.state == nil {
		return 0, 0
	}
	return sc.state.Checkpoints()
}

// Remove drops s wherever it is and frees its share of every cache group.
func (sc *Scheduler) Remove(s *Seq) {
	sc.waiting = without(sc.waiting, s)
	sc.stopRunning(s)
}

// stopRunning takes s out of the running sequences, releasing its share of
// every cache group; a no-op for a sequence that is not running (which
// holds none). With recurrent state checkpoints, its KV blocks past its
// last checkpoint are evicted before any other cached block
// (StateGroup.Uncheckpointed).
func (sc *Scheduler) stopRunning(s *Seq) {
	n := len(sc.running)
	sc.running = without(sc.running, s)
	if len(sc.running) < n {
		var tail []int32
		if sc.state != nil {
			tail = sc.state.Uncheckpointed(s)
		}
		for _, g := range sc.groups {
			g.Release(s)
		}
		sc.kv.m.Demote(tail)
	}
}

// canGrow reports whether every group can hold n tokens of s.
func (sc *Scheduler) canGrow(s *Seq, n int) bool {
	for _, g := range sc.groups {
		if !g.CanGrow(s, n) {
			return false
		}
	}
	return true
}

// grow reserves n tokens of s in every group (canGrow said they fit).
func (sc *Scheduler) grow(s *Seq, n int) {
	for _, g := range sc.groups {
		g.Grow(s, n)
	}
}

// agree is the longest prefix of s's tokens, short of the last token (the
// step must compute at least that one to sample), that every group that
// caches prefixes can restore (Group.Hit, asked again with the smallest
// hit until all agree), and whether any group caches.
func agree(groups []Group, s *Seq) (cached int, caching bool) {
	cached = len(s.Tokens) - 1
	for changed := true; changed; {
		changed = false
		for _, g := range groups {
			if n, caches := g.Hit(s, cached); caches {
				caching = true
				if n < cached {
					cached, changed = n, true
				}
			}
		}
	}
	if !caching {
		return 0, false
	}
	return cached, true
}

// admit moves the first waiting sequence to the running ones when every
// group can hold it, and reports whether it did. Its computed prefix is
// the one the groups that cache prefixes agree to restore.
func (sc *Scheduler) admit() bool {
	s := sc.waiting[0]
	computed, caching := agree(sc.groups, s)
	for _, g := range sc.groups {
		if !g.CanAdmit(s, computed) {
			return false
		}
	}
	sc.waiting = sc.waiting[1:]
	sc.running = append(sc.running, s)
	for _, g := range sc.groups {
		g.Admit(s, computed)
	}
	if caching {
		s.Computed = computed
		sc.stats.Queries += int64(len(s.Tokens))
		sc.stats.Hits += int64(s.Computed)
		if s.Preempted == 0 {
			s.Cached = s.Computed
		}
	}
	return true
}

func without(list []*Seq, s *Seq) []*Seq {
	for i, x := range list {
		if x == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// Schedule returns the next step's work, reserving KV slots for it. An
// empty result with work queued means nothing fits until a sequence ends.
//
// The step's token budget (Config.StepTokens) goes first to the running
// sequences that decode (one token each, plus drafts), then to the prefill
// chunks of running sequences, then to admitting waiting ones, each group
// oldest first (vLLM's chunked-prefill policy): a long prompt never delays
// the sequences that are already generating. KV blocks go by age: a
// sequence that cannot grow preempts the youngest running one, even one
// already given work this step. The work is listed in running order.
func (sc *Scheduler) Schedule() []Work {
	budget := sc.cfg.StepTokens
	var out []Work
	speculate := sc.speculating()
	for _, decoding := range []bool{true, false} {
		for i := 0; i < len(sc.running) && budget > 0; i++ {
			s := sc.running[i]
			if s.decodes() != decoding {
				continue
			}
			n := sc.split(s, min(s.Pending(), sc.cfg.Chunk, budget))
			if n <= 0 {
				continue
			}
			for !sc.canGrow(s, s.Computed+n) {
				// Preempt the youngest other running sequence to make room.
				victim := sc.running[len(sc.running)-1]
				if victim == s {
					break
				}
				if k := slices.IndexFunc(out, func(w Work) bool { return w.Seq == victim }); k >= 0 {
					budget += out[k].N + out[k].Draft
					out = slices.Delete(out, k, k+1)
				}
				sc.preempt(victim)
			}
			if !sc.canGrow(s, s.Computed+n) {
				continue
			}
			d := 0
			if speculate && decoding {
				d = sc.drafts(s, budget-n)
			}
			sc.grow(s, s.Computed+n+d)
			out = append(out, sc.plan(Work{Seq: s, Start: s.Computed, N: n, Sample: s.Computed+n == len(s.Tokens), Draft: d}))
			budget -= n + d
		}
	}
	order := func(s *Seq) int { return slices.Index(sc.running, s) }
	slices.SortStableFunc(out, func(a, b Work) int { return order(a.Seq) - order(b.Seq) })
	// Admit waiting sequences while the cache groups and budget last.
	for len(sc.waiting) > 0 && budget > 0 && len(sc.running) < sc.cfg.MaxRunning && sc.admit() {
		s := sc.running[len(sc.running)-1]
		n := sc.split(s, min(s.Pending(), sc.cfg.Chunk, budget))
		sc.grow(s, s.Computed+n) // admission checked the room
		out = append(out, sc.plan(Work{Seq: s, Start: s.Computed, N: n, Sample: s.Computed+n == len(s.Tokens)}))
		budget -= n
	}
	return out
}

// split cuts n tokens of s's next step to end at its first recurrent
// state checkpoint position (StateGroup.Split).
func (sc *Scheduler) split(s *Seq, n int) int {
	if sc.state == nil {
		return n
	}
	return sc.state.Split(s, s.Computed, n)
}

// plan lets the state group arrange for w to take a checkpoint
// (StateGroup.Plan) and returns w.
func (sc *Scheduler) plan(w Work) Work {
	if sc.state != nil && sc.state.kv != nil {
		sc.state.Plan(&w)
	}
	return w
}

// drafts is how many draft slots s's decode step gets: at most Config.Draft
// and budget, none past s.Limit (see capDrafts), and only as many as fit
// the free blocks without preempting.
func (sc *Scheduler) drafts(s *Seq, budget int) int {
	d := s.capDrafts(min(sc.cfg.Draft, budget))
	for d > 0 && !sc.canGrow(s, s.Computed+1+d) {
		d--
	}
	return d
}

// speculating reports whether a step gives decoding sequences draft
// slots: the plan drafts and at most Config.DraftMaxBatch sequences run.
func (sc *Scheduler) speculating() bool {
	return sc.cfg.Draft > 0 && (sc.cfg.DraftMaxBatch == 0 || len(sc.running) <= sc.cfg.DraftMaxBatch)
}

// NextDrafts is how many draft slots s's next decode step gets if the
// step budget and the free blocks allow: drafts made for that step ahead
// of time (at the end of this one) need no more.
func (sc *Scheduler) NextDrafts(s *Seq) int {
	if !sc.speculating() {
		return 0
	}
	return s.capDrafts(sc.cfg.Draft)
}

// capDrafts cuts d draft slots to none past s.Limit: the last token a
// step may yield is the limit's.
func (s *Seq) capDrafts(d int) int {
	if s.Limit > 0 {
		d = min(d, s.Limit-len(s.Tokens)-1)
	}
	return max(d, 0)
}

// preempt frees a running sequence's cache and requeues it at the front:
// its tokens are recomputed when it is admitted again.
func (sc *Scheduler) preempt(s *Seq) {
	sc.stopRunning(s)
	s.Computed = 0
	s.Preempted++
	sc.waiting = append([]*Seq{s}, sc.waiting...)
}

// Result is what a step computed for one Work: the tokens it yields for
// the sequence, in order (none unless Work.Sample; with drafts, the
// accepted drafts then the token after them), and how many leading Tokens
// are accepted drafts (0 without speculation).
type Result struct {
	Tokens   []int32
	Accepted int
}

// Finish says why Update ended a sequence.
type Finish uint8

// Finish values.
const (
	Running Finish = iota // the sequence goes on
	Stopped               // Seq.Stop matched a token
	Length                // Seq.Limit was reached
)

// Outcome is what Update did to one sampled sequence.
type Outcome struct {
	Seq *Seq
	// Tokens are the tokens appended to Seq.Tokens: a prefix of the
	// result's tokens, cut after the token that stopped the sequence or
	// reached its limit (later ones are dropped, never counted).
	Tokens []int32
	Finish Finish // not Running: the sequence was removed and its blocks freed
}

// Update applies a step's results (res[i] is work[i]'s): the fed tokens
// and the accepted drafts are now in the cache, the slots of rejected
// drafts go back to the block manager, each sampled sequence's tokens are
// appended up to a stop or its limit, and sequences that ended are removed.
// It returns one Outcome per sampled Work, in work order.
func (sc *Scheduler) Update(work []Work, res []Result) []Outcome {
	var out []Outcome
	for i, w := range work {
		s := w.Seq
		s.Computed = w.Start + w.N + res[i].Accepted
		for _, g := range sc.groups {
			g.Commit(s, w, res[i].Accepted)
		}
		if !w.Sample {
			sc.publish(s)
			continue
		}
		o := Outcome{Seq: s, Tokens: res[i].Tokens}
		for n, tok := range res[i].Tokens {
			s.Tokens = append(s.Tokens, tok)
			switch {
			case s.Stop != nil && s.Stop(tok):
				o.Finish = Stopped
			case s.Limit > 0 && len(s.Tokens) >= s.Limit:
				o.Finish = Length
			default:
				continue
			}
			o.Tokens = res[i].Tokens[:n+1]
			break
		}
		// Full blocks whose K/V are computed become shareable, also those
		// of a sequence that just ended (a later turn may extend it).
		sc.publish(s)
		if o.Finish != Running {
			sc.Remove(s)
		}
		out = append(out, o)
	}
	return out
}

// publish tells every group that s's computed tokens may be shared.
func (sc *Scheduler) publish(s *Seq) {
	for _, g := range sc.groups {
		g.Publish(s)
	}
}
