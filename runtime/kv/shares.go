package kv

import (
	"cmp"
	"slices"
)

// Shares is a paged KV cache whose sequences' slots are held as shares,
// one per owner (a draft loop, named by its step) and sequence id: a draft
// model's cache, which each draft loop over the model fills as a sequence
// drafts. An owner that runs out of blocks evicts its own shares idle in
// its step (Reserve); a sequence that stops running loses its shares of
// every owner (ReleaseSeq).
type Shares struct {
	m      *Manager
	shares map[uint64]map[string]*Share // by sequence id, then owner
}

// Share is one sequence's slots in a Shares cache as one owner fills them,
// with the owner's record of what they hold, which goes with them.
type Share struct {
	Seq    Seq
	Tokens []int32 // the tokens whose K/V the share holds, position order
	Used   uint64  // the owner's last step that used the share
	// An owner that enters carried hidden states (runtime/executor)
	// tracks, instead of Tokens, Next, the first token index it has not
	// entered, and Lost, set when it missed entries (its blocks were
	// evicted): the sequence drafts no more until it is recomputed from
	// position 0.
	Next int
	Lost bool
}

// NewShares returns the shares cache over the block manager m.
func NewShares(m *Manager) *Shares {
	return &Shares{m: m, shares: map[uint64]map[string]*Share{}}
}

// Share returns owner's share of sequence id, empty when it holds none.
func (c *Shares) Share(owner string, id uint64) *Share {
	byOwner := c.shares[id]
	if byOwner == nil {
		byOwner = map[string]*Share{}
		c.shares[id] = byOwner
	}
	sh := byOwner[owner]
	if sh == nil {
		sh = &Share{}
		byOwner[owner] = sh
	}
	return sh
}

// Reserve grows sh, owner's share of a sequence, to n tokens; when the
// cache is full it first evicts owner's shares not used in its step now
// (Used != now), least recently used first. It reports whether sh holds n
// tokens; on false sh is as it was.
func (c *Shares) Reserve(owner string, sh *Share, n int, now uint64) bool {
	if c.m.Grow(&sh.Seq, n) == nil {
		return true
	}
	var idle []uint64
	for id, byOwner := range c.shares {
		if o := byOwner[owner]; o != nil && o.Used != now {
			idle = append(idle, id)
		}
	}
	slices.SortFunc(idle, func(a, b uint64) int { return cmp.Compare(c.shares[a][owner].Used, c.shares[b][owner].Used) })
	for _, id := range idle {
		c.drop(owner, id)
		if c.m.Grow(&sh.Seq, n) == nil {
			return true
		}
	}
	return false
}

// Truncate shrinks sh to its first n tokens' slots (0: none), freeing
// whole blocks past them; the owner cuts sh.Tokens.
func (c *Shares) Truncate(sh *Share, n int) { c.m.Truncate(&sh.Seq, n) }

// ReleaseSeq frees sequence id's shares of every owner.
func (c *Shares) ReleaseSeq(id uint64) {
	for owner := range c.shares[id] {
		c.drop(owner, id)
	}
}

// drop frees owner's share of sequence id.
func (c *Shares) drop(owner string, id uint64) {
	byOwner := c.shares[id]
	if sh := byOwner[owner]; sh != nil {
		c.m.Release(&sh.Seq)
		delete(byOwner, owner)
	}
	if len(byOwner) == 0 {
		delete(c.shares, id)
	}
}

// Usage reports used and total blocks.
func (c *Shares) Usage() (used, total int) { return c.m.Used(), c.m.Total() }
