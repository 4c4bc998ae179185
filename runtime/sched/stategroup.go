package sched

import (
	"slices"

	"github.com/ninfer/ninfer-go/runtime/kv"
)

// StateGroup is a hybrid model's recurrent state as a cache group: a
// running sequence holds one state slot (Seq.StateSlot) and, when the plan
// speculates, snapshots further slots (Seq.Snapshots) that a verify step
// writes the state after each of its rows into; committing keeps the
// snapshot of the last accepted row by swapping slot ids (no copy). The
// state does not grow with the tokens.
//
// With a checkpoint pool (EnableCheckpoints) the group caches prefixes: a
// checkpoint is a slot holding the state after a block-aligned prefix,
// keyed by the chain hash (kv.BlockHash) of the prefix's last KV block. A
// step that ends at a checkpoint position (see Target) writes its state
// into a fresh pool slot instead of the sequence's own, and the
// sequence's next row reads it back (exec.Batch.StateFrom), so a
// checkpoint costs one slot copy. A waiting sequence adopts the longest
// prefix whose KV blocks are cached and that ends at a checkpoint: its
// first row reads the checkpoint. Without one, a sequence that loses its
// state recomputes from position 0, which starts from a zeroed state.
type StateGroup struct {
	slots     int // slot ids: sequence slots, then pool slots
	snapshots int
	free      []int32 // a stack
	seqSlots  int     // slots reserved for running sequences
	seqHeld   int

	// The checkpoint pool; kv is nil without one.
	kv       *kv.Manager
	every    int // blocks between a prompt's periodic checkpoints; 0: none
	capacity int // most checkpoints held at once (the memory budget)
	held     int // checkpoints holding a slot: indexed, rolling or pinned
	index    map[kv.BlockHash]*checkpoint
	clock    uint64
	// hidden says that a checkpoint is adopted only once it holds the
	// target's hidden state before its end (KeepHidden): the plan drafts
	// from it (the mtp graph).
	hidden bool
	// inner says that a step takes the prompt's checkpoints inside it
	// (Config.InnerCheckpoints) instead of being cut at them.
	inner bool
}

// checkpoint is one pool slot holding the state after Blocks whole KV
// blocks of a prefix whose last block hashes to Key; Chain holds the hashes
// of all its blocks [Blocks] (Chain[Blocks-1] == Key).
type checkpoint struct {
	Slot   int32
	Blocks int
	end    int // Blocks whole blocks' tokens
	Key    kv.BlockHash
	Chain  []kv.BlockHash
	// used orders the indexed checkpoints for eviction (least recently
	// taken or adopted first); pins counts the sequences whose next row
	// reads the slot; indexed says it is in the index; rolling that a
	// running sequence holds it as its latest generated-block checkpoint,
	// indexed when the sequence stops running.
	used    uint64
	pins    int
	indexed bool
	rolling bool
	// Hidden is the target's hidden state at the prefix's last position
	// [E], when the group keeps them (StateGroup.hidden): set once the
	// sequence that computed the prefix entered it into its drafter, so
	// the drafter's KV entries of the prefix's blocks are written too.
	Hidden []float32
}

// NewStateGroup returns a group of slots state slots, of which each
// running sequence holds 1 + snapshots.
func NewStateGroup(slots, snapshots int) *StateGroup {
	g := &StateGroup{slots: slots, snapshots: snapshots, seqSlots: slots}
	for i := slots - 1; i >= 0; i-- {
		g.free = append(g.free, int32(i)) // pop order 0, 1, 2, ...
	}
	return g
}

// EnableCheckpoints adds a pool of checkpoints pool slots (slot ids
// after the sequences' ones) over the block manager m, whose prefix cache
// must be on: a checkpoint is taken at the last block boundary of every
// prompt, every every blocks of a prompt (0: no periodic ones) and at the
// last block boundary a sequence reaches while generating (published when
// it stops running). Call it before any sequence is admitted.
func (g *StateGroup) EnableCheckpoints(m *kv.Manager, pool, every int) {
	g.kv, g.capacity, g.every = m, pool, every
	g.index = map[kv.BlockHash]*checkpoint{}
	for i := g.slots + pool - 1; i >= g.slots; i-- {
		g.free = append([]int32{int32(i)}, g.free...) // popped after the sequence slots
	}
	g.slots += pool
}

// Checkpoints reports the checkpoints held (indexed, rolling or being
// read) and the pool's capacity.
func (g *StateGroup) Checkpoints() (held, capacity int) { return g.held, g.capacity }

// Hit implements Group: the longest prefix of at most limit tokens that
// ends at an indexed checkpoint.
func (g *StateGroup) Hit(s *Seq, limit int) (int, bool) {
	if g.kv == nil {
		return 0, false
	}
	hashes := g.kv.Hashes(s.Tokens, limit/g.kv.BlockTokens())
	for k := len(hashes); k > 0; k-- {
		if c, ok := g.index[hashes[k-1]]; ok && (!g.hidden || c.Hidden != nil) {
			return k * g.kv.BlockTokens(), true
		}
	}
	return 0, true
}

// CanAdmit implements Group: 1 + snapshots of the sequence slots are free.
func (g *StateGroup) CanAdmit(*Seq, int) bool { return g.seqSlots-g.seqHeld > g.snapshots }

// Admit implements Group: s takes its slot and snapshots, and its first
// row reads the checkpoint of its first cached tokens.
func (g *StateGroup) Admit(s *Seq, cached int) {
	take := len(g.free) - 1 - g.snapshots
	s.StateSlot = g.free[len(g.free)-1]
	s.Snapshots = slices.Clone(g.free[take : len(g.free)-1])
	g.free = g.free[:take]
	g.seqHeld += 1 + g.snapshots
	s.from, s.resumeHidden = nil, nil
	if cached > 0 && g.kv != nil {
		hashes := g.kv.Hashes(s.Tokens, cached/g.kv.BlockTokens())
		c := g.index[hashes[len(hashes)-1]]
		c.pins++
		g.touch(c)
		s.from = c
		s.resumeHidden = c.Hidden
	}
}

// CanGrow implements Group: the state holds any number of tokens.
func (g *StateGroup) CanGrow(*Seq, int) bool { return true }

// Grow implements Group.
func (g *StateGroup) Grow(*Seq, int) {}

// Target reports whether the state after s's first end tokens is to be
// checkpointed: end is a block boundary and either the last one of the
// prompt, the last one at or before one of s's marks (a chat message's
// end), a whole number of periodic intervals past the last such mark
// boundary before it (or past the prompt's start), or the last one of s's
// known tokens past the prompt (a generated block, or one recomputed
// after preemption). So a prompt without marks (a raw completion) is
// checkpointed every interval, and a chat prompt every interval inside a
// long message, never in the first interval after a message's end, which
// holds a checkpoint already: a periodic one there would cut a step short
// for a prompt that diverges inside that message past it, and no other.
func (g *StateGroup) Target(s *Seq, end int) bool {
	if g.kv == nil || end <= 0 || end%g.kv.BlockTokens() != 0 {
		return false
	}
	b := g.kv.BlockTokens()
	if end > s.Prompt {
		return end == len(s.Tokens)/b*b
	}
	if end == s.Prompt/b*b {
		return true
	}
	from := 0 // the last mark's block boundary before end
	for _, m := range s.Marks {
		switch mb := m / b * b; {
		case mb == end:
			return true
		case mb < end:
			from = max(from, mb)
		}
	}
	return g.every > 0 && (end-from)%(g.every*b) == 0
}

// Split cuts a step of n tokens of s from start to end at the first
// checkpoint target inside it, so that the step lands there; with inner
// takes only at one past the prompt (Plan takes the prompt's in passing).
func (g *StateGroup) Split(s *Seq, start, n int) int {
	if g.kv == nil {
		return n
	}
	b := g.kv.BlockTokens()
	for end := (start/b + 1) * b; end < start+n; end += b {
		if g.Target(s, end) && (!g.inner || end > s.Prompt) {
			return end - start
		}
	}
	return n
}

// Plan arranges for w's step to take a checkpoint when it ends at a
// target (a step without drafts), the prefix is not checkpointed yet and
// the pool has or can free a slot: the step then writes the state into
// the pool slot (Work.StateTo) and s's next row reads it back.
//
// With inner takes, the step takes the prompt's targets inside it too
// (Work.InnerTakes), each under the same conditions.
func (g *StateGroup) Plan(w *Work) {
	s, end := w.Seq, w.Start+w.N
	if w.Draft > 0 {
		return
	}
	if g.inner {
		b := g.kv.BlockTokens()
		for at := (w.Start/b + 1) * b; at < end && at <= s.Prompt; at += b {
			if g.Target(s, at) {
				if c := g.take(s, at); c != nil {
					s.inner = append(s.inner, c)
				}
			}
		}
	}
	if !g.Target(s, end) {
		return
	}
	w.atCheckpoint = true
	s.take = g.take(s, end)
}

// take returns a fresh checkpoint of s's state after its first end
// tokens, holding a pool slot, or nil when that prefix is checkpointed
// already (then marked used) or the pool has no slot it can free.
func (g *StateGroup) take(s *Seq, end int) *checkpoint {
	blocks := end / g.kv.BlockTokens()
	chain := g.kv.Hashes(s.Tokens, blocks)
	key := chain[blocks-1]
	if c, ok := g.index[key]; ok {
		g.touch(c)
		return nil
	}
	rolling := end > s.Prompt
	if rolling && s.rolling != nil {
		g.drop(s.rolling)
		s.rolling = nil
	}
	if g.held >= g.capacity && !g.evict() {
		return nil
	}
	c := &checkpoint{Slot: g.free[len(g.free)-1], Blocks: blocks, end: end, Key: key, Chain: chain, rolling: rolling}
	g.free = g.free[:len(g.free)-1]
	g.held++
	return c
}

// evict frees the slot of the indexed checkpoint no sequence reads that
// is worth least: one whose last KV block is no longer cached (it can
// never be adopted), else the least recently used. It reports whether
// there was one. The KV blocks only the victim made worth keeping go
// first in the KV cache's eviction order (demoteChain).
func (g *StateGroup) evict() bool {
	var victim *checkpoint
	for _, c := range g.index {
		if c.pins > 0 {
			continue
		}
		if !g.kv.Holds(c.Key) {
			victim = c
			break
		}
		if victim == nil || c.used < victim.used {
			victim = c
		}
	}
	if victim == nil {
		return false
	}
	delete(g.index, victim.Key)
	victim.indexed = false
	g.release(victim)
	g.demoteChain(victim)
	return true
}

// demoteChain puts the cached KV blocks of evicted checkpoint v's prefix
// past the longest one that ends at an indexed checkpoint first in the KV
// cache's eviction order (kv.Manager.Demote): no sequence can resume
// inside them any more. Blocks an indexed checkpoint further along the
// same chain still needs are left alone, and so are blocks a sequence
// holds (Demote moves only cached, unheld ones).
func (g *StateGroup) demoteChain(v *checkpoint) {
	for _, c := range g.index {
		if c.Blocks > v.Blocks && c.Chain[v.Blocks-1] == v.Key {
			return
		}
	}
	k := v.Blocks - 1
	for ; k > 0; k-- {
		if _, ok := g.index[v.Chain[k-1]]; ok {
			break
		}
	}
	g.kv.Demote(g.kv.Registered(v.Chain[k:]))
}

// touch marks c as just used.
func (g *StateGroup) touch(c *checkpoint) {
	g.clock++
	c.used = g.clock
}

// publish indexes c (the state after its prefix) unless another
// checkpoint of the same prefix is indexed, which makes c redundant.
func (g *StateGroup) publish(c *checkpoint) {
	c.rolling = false
	if _, dup := g.index[c.Key]; dup {
		g.release(c)
		return
	}
	c.indexed = true
	g.index[c.Key] = c
	g.touch(c)
}

// drop stops a sequence's rolling checkpoint c from being published.
func (g *StateGroup) drop(c *checkpoint) {
	c.rolling = false
	g.release(c)
}

// unpin ends a sequence's read of c.
func (g *StateGroup) unpin(c *checkpoint) {
	c.pins--
	g.release(c)
}

// release frees c's slot once it is neither indexed, rolling nor read.
func (g *StateGroup) release(c *checkpoint) {
	if c.pins == 0 && !c.indexed && !c.rolling {
		g.free = append(g.free, c.Slot)
		g.held--
	}
}

// Commit implements Group: after a verify step, which wrote the state
// after its row a into snapshot a, s keeps the one after its last accepted
// row; the others are rolled back for free. The checkpoint s's step read
// is unpinned, and the one it took is published (a prompt's) or kept as
// s's rolling checkpoint (a generated block's), and read by s's next row.
func (g *StateGroup) Commit(s *Seq, w Work, accepted int) {
	if w.Draft > 0 && len(s.Snapshots) > accepted {
		s.StateSlot, s.Snapshots[accepted] = s.Snapshots[accepted], s.StateSlot
		s.verified = verifiedRows{start: w.Start, rows: accepted + 1}
	}
	if s.from != nil {
		g.unpin(s.from)
		s.from = nil
	}
	for _, c := range s.inner {
		g.publish(c)
	}
	s.inner = nil
	if c := s.take; c != nil {
		s.take = nil
		c.pins++
		s.from = c
		if c.rolling {
			s.rolling = c
		} else {
			g.publish(c)
		}
	}
}

// verifiedRows are the rows of a verify step whose state is kept: row j
// (0 <= j < rows) fed position start+j, and the state after it is in
// snapshot j (j < rows-1) or the sequence's slot (the last).
type verifiedRows struct{ start, rows int }

// Publish implements Group: after a verify step (its tokens appended), a
// generated block boundary that one of its kept rows reached becomes s's
// rolling checkpoint by handing the slot that holds the state there to the
// pool (a snapshot of a row before the last, or s's own slot, which s then
// reads back from). Other checkpoints are published by Commit and Release.
func (g *StateGroup) Publish(s *Seq) {
	v := s.verified
	s.verified = verifiedRows{}
	if g.kv == nil || v.rows == 0 {
		return
	}
	b := g.kv.BlockTokens()
	for j := v.rows - 1; j >= 0; j-- {
		end := v.start + 1 + j
		if end%b != 0 || end <= s.Prompt || end > len(s.Tokens) {
			continue
		}
		chain := g.kv.Hashes(s.Tokens, end/b)
		key := chain[end/b-1]
		if c, ok := g.index[key]; ok {
			g.touch(c)
			return
		}
		if s.rolling != nil {
			g.drop(s.rolling)
			s.rolling = nil
		}
		if g.held >= g.capacity && !g.evict() {
			return
		}
		fresh := g.free[len(g.free)-1]
		g.free = g.free[:len(g.free)-1]
		g.held++
		c := &checkpoint{Blocks: end / b, Key: key, Chain: chain, rolling: true}
		if j < v.rows-1 {
			c.Slot, s.Snapshots[j] = s.Snapshots[j], fresh
		} else {
			c.Slot, s.StateSlot = s.StateSlot, fresh
			c.pins++
			s.from = c
		}
		s.rolling = c
		return
	}
}

// Release implements Group: s's slot and snapshots go back, a checkpoint
// its unfinished step was to take is freed, and its rolling checkpoint is
// published.
func (g *StateGroup) Release(s *Seq) {
	g.free = append(g.free, s.StateSlot)
	g.free = append(g.free, s.Snapshots...)
	g.seqHeld -= 1 + len(s.Snapshots)
	s.Snapshots = nil
	if c := s.take; c != nil {
		s.take = nil
		g.drop(c)
	}
	for _, c := range s.inner {
		g.drop(c)
	}
	s.inner = nil
	if c := s.from; c != nil {
		s.from = nil
		g.unpin(c)
	}
	if c := s.rolling; c != nil {
		s.rolling = nil
		g.publish(c)
	}
}

// KeepHidden gives each checkpoint of a prefix of s that ends at a block
// boundary end, first < end <= last (indexed, or s's rolling one), the
// target's hidden state at position end-1 (hidden(end-1), [E]), once s's
// drafter has entered the tokens through last: the checkpoint can then be
// adopted (Hit) when the group keeps hidden states, and a sequence that
// adopts it resumes from it (Seq.TakeResumeHidden).
func (g *StateGroup) KeepHidden(s *Seq, first, last int, hidden func(pos int) []float32) {
	if g.kv == nil || !g.hidden {
		return
	}
	b := g.kv.BlockTokens()
	if last = min(last, len(s.Tokens)); first/b == last/b {
		return // no block boundary: most decode steps
	}
	hashes := g.kv.Hashes(s.Tokens, last/b)
	for k := first/b + 1; k <= len(hashes); k++ {
		c := g.index[hashes[k-1]]
		if c == nil && s.rolling != nil && s.rolling.Key == hashes[k-1] {
			c = s.rolling
		}
		if c != nil && c.Hidden == nil {
			c.Hidden = slices.Clone(hidden(k*b - 1))
		}
	}
}

// Uncheckpointed is running sequence s's KV blocks past the longest
// prefix of its registered blocks that ends at a checkpoint (indexed, or
// s's rolling one, which Release publishes); nil without a pool. No
// sequence can resume inside them until a checkpoint past them is taken,
// so they are the first cached blocks to evict once s releases them
// (kv.Manager.Demote).
func (g *StateGroup) Uncheckpointed(s *Seq) []int32 {
	if g.kv == nil {
		return nil
	}
	hashes := g.kv.Hashes(s.Tokens, s.KV.Hashed)
	k := len(hashes)
	for ; k > 0; k-- {
		if _, ok := g.index[hashes[k-1]]; ok || (s.rolling != nil && s.rolling.Key == hashes[k-1]) {
			break
		}
	}
	return slices.Clone(s.KV.Blocks[k:])
}

// Usage implements Group: used and total sequence slots (the checkpoint
// pool's are reported by Checkpoints).
func (g *StateGroup) Usage() (used, total int) { return g.seqHeld, g.seqSlots }
