package sched

import "github.com/ninfer/ninfer-go/runtime/kv"

// KVGroup is the paged KV cache as a cache group: each sequence holds a
// block table (Seq.KV) in the block manager, grown as it computes tokens,
// truncated to its computed tokens after each step, and with a prefix
// cache (kv.Manager.EnablePrefixCache) admitted onto the cached blocks of
// its prompt's longest cached prefix.
//
// With entries set (Config.DrafterEntries) a block becomes shareable only
// once the drafter's entries of its tokens are written too (Seq.entered).
type KVGroup struct {
	m       *kv.Manager
	entries bool
}

// NewKVGroup returns the cache group of the block manager m.
func NewKVGroup(m *kv.Manager) *KVGroup { return &KVGroup{m: m} }

// Hit implements Group: the longest cached prefix of s's tokens made of
// whole blocks, at most limit tokens.
func (g *KVGroup) Hit(s *Seq, limit int) (int, bool) {
	return len(g.m.Match(s.Tokens, limit/g.m.BlockTokens())) * g.m.BlockTokens(), g.m.PrefixCaching()
}

// CanAdmit implements Group.
func (g *KVGroup) CanAdmit(s *Seq, cached int) bool {
	hit := g.m.Match(s.Tokens, cached/g.m.BlockTokens())
	return g.m.BlocksFor(len(s.Tokens)+1)-len(hit) <= g.m.Free()-g.m.Reusable(hit)
}

// Admit implements Group: with a prefix cache, s adopts the blocks of its
// first cached tokens.
func (g *KVGroup) Admit(s *Seq, cached int) {
	if g.m.PrefixCaching() {
		g.m.Adopt(&s.KV, g.m.Match(s.Tokens, cached/g.m.BlockTokens()))
	}
	s.entered = cached
}

// CanGrow implements Group.
func (g *KVGroup) CanGrow(s *Seq, n int) bool { return g.m.CanGrow(&s.KV, n) }

// Grow implements Group.
func (g *KVGroup) Grow(s *Seq, n int) {
	g.m.Grow(&s.KV, n) //nolint:errcheck // checked by CanGrow
}

// Commit implements Group: the slots past the computed tokens are freed.
func (g *KVGroup) Commit(s *Seq, _ Work, _ int) { g.m.Truncate(&s.KV, s.Computed) }

// Publish implements Group: full computed blocks become shareable (with
// entries, those the drafter's entries cover).
func (g *KVGroup) Publish(s *Seq) {
	computed := s.Computed
	if g.entries {
		computed = min(computed, s.entered)
	}
	g.m.Publish(&s.KV, s.Tokens, computed)
}

// Release implements Group.
func (g *KVGroup) Release(s *Seq) { g.m.Release(&s.KV) }

// Usage implements Group: used and total blocks.
func (g *KVGroup) Usage() (used, total int) { return g.m.Used(), g.m.Total() }
