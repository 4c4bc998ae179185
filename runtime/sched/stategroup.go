package sched

import "slices"

// StateGroup is a hybrid model's recurrent state as a cache group: a
// running sequence holds one state slot (Seq.StateSlot) and, when the plan
// speculates, snapshots further slots (Seq.Snapshots) that a verify step
// writes the state after each of its rows into; committing keeps the
// snapshot of the last accepted row by swapping slot ids (no copy). The
// state does not grow with the tokens, and a sequence that loses it
// recomputes from position 0, which starts from a zeroed state.
type StateGroup struct {
	slots     int
	snapshots int
	free      []int32 // a stack
}

// NewStateGroup returns a group of slots state slots, of which each
// running sequence holds 1 + snapshots.
func NewStateGroup(slots, snapshots int) *StateGroup {
	g := &StateGroup{slots: slots, snapshots: snapshots}
	for i := slots - 1; i >= 0; i-- {
		g.free = append(g.free, int32(i)) // pop order 0, 1, 2, ...
	}
	return g
}

// CanAdmit implements Group: 1 + snapshots slots are free.
func (g *StateGroup) CanAdmit(*Seq) bool { return len(g.free) > g.snapshots }

// Admit implements Group: s takes its slot and snapshots; the state caches
// no prefixes.
func (g *StateGroup) Admit(s *Seq) (int, bool) {
	take := len(g.free) - 1 - g.snapshots
	s.StateSlot = g.free[len(g.free)-1]
	s.Snapshots = slices.Clone(g.free[take : len(g.free)-1])
	g.free = g.free[:take]
	return 0, false
}

// CanGrow implements Group: the state holds any number of tokens.
func (g *StateGroup) CanGrow(*Seq, int) bool { return true }

// Grow implements Group.
func (g *StateGroup) Grow(*Seq, int) {}

// Commit implements Group: after a verify step, which wrote the state
// after its row a into snapshot a, s keeps the one after its last accepted
// row; the others are rolled back for free.
func (g *StateGroup) Commit(s *Seq, w Work, accepted int) {
	if w.Draft > 0 && len(s.Snapshots) > accepted {
		s.StateSlot, s.Snapshots[accepted] = s.Snapshots[accepted], s.StateSlot
	}
}

// Publish implements Group: the state is not shared.
func (g *StateGroup) Publish(*Seq) {}

// Release implements Group: s's slot and snapshots go back.
func (g *StateGroup) Release(s *Seq) {
	g.free = append(g.free, s.StateSlot)
	g.free = append(g.free, s.Snapshots...)
	s.Snapshots = nil
}

// Usage implements Group: used and total slots.
func (g *StateGroup) Usage() (used, total int) { return g.slots - len(g.free), g.slots }
