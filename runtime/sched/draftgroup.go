package sched

import "github.com/ninfer/ninfer-go/runtime/kv"

// DraftKVGroup is a draft model's paged KV cache as a cache group (one per
// model the plan's draft loops run besides the target). Each draft loop
// over the model keeps a running sequence's entries in a share of it
// (kv.Shares), fed and grown as the sequence drafts (runtime/executor): a
// loop grows a share to what it feeds, which includes drafts made at the
// end of a step for the next one, and a sequence whose drafts do not fit,
// after the loop evicts its shares idle in its step, drafts fewer or none
// rather than waiting or preempting. So the group holds back no admission
// or growth and the scheduler reserves nothing in it ahead of a step; a
// sequence that stops running (finished, aborted, preempted) loses its
// shares, and a preempted one refeeds its history when it next drafts.
type DraftKVGroup struct{ c *kv.Shares }

// NewDraftKVGroup returns the cache group of a draft model's cache c.
func NewDraftKVGroup(c *kv.Shares) *DraftKVGroup { return &DraftKVGroup{c} }

// Hit implements Group: a draft model's cache shares no prefix.
func (g *DraftKVGroup) Hit(*Seq, int) (int, bool) { return 0, false }

// CanAdmit implements Group: a sequence is admitted holding no share.
func (g *DraftKVGroup) CanAdmit(*Seq, int) bool { return true }

// Admit implements Group.
func (g *DraftKVGroup) Admit(*Seq, int) {}

// CanGrow implements Group: the draft loops grow shares as they draft.
func (g *DraftKVGroup) CanGrow(*Seq, int) bool { return true }

// Grow implements Group.
func (g *DraftKVGroup) Grow(*Seq, int) {}

// Commit implements Group: a share keeps rejected drafts' entries until
// its loop next drafts and rolls it back to the accepted prefix.
func (g *DraftKVGroup) Commit(*Seq, Work, int) {}

// Publish implements Group.
func (g *DraftKVGroup) Publish(*Seq) {}

// Release implements Group: s's shares of every loop are freed.
func (g *DraftKVGroup) Release(s *Seq) { g.c.ReleaseSeq(s.ID) }

// Usage implements Group: used and total blocks.
func (g *DraftKVGroup) Usage() (used, total int) { return g.c.Usage() }
