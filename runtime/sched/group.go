package sched

// Group is one cache group of the model: a cache every running sequence
// holds a share of (the paged KV cache, a hybrid model's recurrent state
// slots). The scheduler coordinates its groups without knowing their
// kinds: a waiting sequence is admitted when every group can hold it, a
// step's tokens are reserved in every group, a step's result is committed
// to every group, and a sequence that stops running releases its share of
// each. Groups are pure state machines, used by the scheduler's caller's
// goroutine only.
type Group interface {
	// Hit reports how many leading tokens of waiting sequence s, at most
	// limit, the group can restore from its prefix cache, and whether it
	// keeps one at all. Restoring fewer tokens than a hit must be possible
	// for the paged KV cache (any whole-block prefix of its hit) but not
	// for the recurrent state (only a checkpoint's position): the
	// scheduler asks every group again with the smallest hit as the limit
	// until they agree (see agree).
	Hit(s *Seq, limit int) (n int, caches bool)
	// CanAdmit reports whether waiting sequence s (holding nothing) fits
	// the group now with its first cached tokens restored, its prompt and
	// one more token included, so that an admitted sequence can finish its
	// prefill without preempting others.
	CanAdmit(s *Seq, cached int) bool
	// Admit gives s its share, its first cached tokens (an agreed hit)
	// restored from the group's prefix cache.
	Admit(s *Seq, cached int)
	// CanGrow reports whether s's share can hold n tokens; Grow makes it
	// so (after CanGrow said it can).
	CanGrow(s *Seq, n int) bool
	Grow(s *Seq, n int)
	// Commit applies a step that computed w for s: s.Computed tokens are
	// now in the cache, of which accepted were drafts; the share past them
	// (rejected drafts' slots, the snapshots of rejected rows) goes back.
	Commit(s *Seq, w Work, accepted int)
	// Publish tells the group that s's computed tokens (s.Tokens, the
	// step's tokens appended) may be shared with later sequences.
	Publish(s *Seq)
	// Release frees s's share; s holds nothing of the group after it.
	Release(s *Seq)
	// Usage reports the group's used and total units (blocks, slots).
	Usage() (used, total int)
}
