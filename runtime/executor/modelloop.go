package executor

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// modelLoop is a draft loop whose body runs a model other than the target
// (plan.Loop.Model, a draft model of the target's vocabulary): it binds
// the body to that model (exec.ModelBinder) and keeps each sequence's
// entries in its share of the model's own paged KV cache (kv.Shares; the
// scheduler's cache group sched.DraftKVGroup frees the share when the
// sequence stops running). Its methods run on the engine's goroutine.
type modelLoop struct {
	step string
	loop *plan.Loop
	dev  *modelDevice
	runs uint64 // steps that drafted, for eviction order
	// image is the token the model is fed at an image row (node.FedToken):
	// it sees the placeholder the prompt holds there, not the pixels.
	image int32
}

// ModelAlias implements exec.ModelBinder.
func (m *modelLoop) ModelAlias() string { return m.loop.Model }

// BindModel implements exec.ModelBinder: the body's steps bind to f, which
// must have target's vocabulary (weights.SameVocabulary, or what a body
// node's exec.TargetChecker checks) and keep no recurrent state; the KV
// shape is the body's forwards'.
func (m *modelLoop) BindModel(f, target *weights.File) (layers, kvDim int, err error) {
	checked := false // by a body node that knows the model's architecture
	for _, st := range m.loop.Steps {
		if tc, ok := st.Node.(exec.TargetChecker); ok {
			if err := tc.BindTarget(f, target); err != nil {
				return 0, 0, err
			}
			checked = true
		}
	}
	if !checked {
		if err := weights.SameVocabulary(target, f); err != nil {
			return 0, 0, err
		}
	}
	for _, st := range m.loop.Steps {
		if b, ok := st.Node.(exec.Binder); ok {
			if err := b.Bind(f); err != nil {
				return 0, 0, fmt.Errorf("bind %s (%s): %w", st.ID, st.Op, err)
			}
		}
		if s, ok := st.Node.(exec.StateShaper); ok && s.StateShape().Layers() > 0 {
			return 0, 0, fmt.Errorf("draft model %s keeps recurrent state (a hybrid model): a draft loop keeps only a paged KV cache of its own, rolled back to the target's accepted tokens, so its model must attend on every layer", f.Path)
		}
		if s, ok := st.Node.(exec.KVShaper); ok {
			l, d := s.KVShape()
			if layers != 0 && (l != layers || d != kvDim) {
				return 0, 0, fmt.Errorf("step %s wants kv %dx%d, another body step %dx%d", st.ID, l, d, layers, kvDim)
			}
			layers, kvDim = l, d
		}
	}
	if bd := blockDrafter(m.loop); m.loop.Block && bd != nil && m.loop.Repeat > bd.MaxBlock() {
		return 0, 0, fmt.Errorf("block loop %s drafts %d tokens a block, but the drafter %s fills at most %d (its block_size - 1)",
			m.step, m.loop.Repeat, f.Path, bd.MaxBlock())
	}
	return layers, kvDim, nil
}

// TargetWeights implements exec.WeightBorrower: the target tensors the
// body's nodes read (a drafter without token embeddings of its own).
func (m *modelLoop) TargetWeights() []string {
	var names []string
	for _, st := range m.loop.Steps {
		if wb, ok := st.Node.(exec.WeightBorrower); ok {
			names = append(names, wb.TargetWeights()...)
		}
	}
	return names
}

// enterTable is the block table of row's sequence for entering token
// indices [q0, end) of its carried rows (at positions shifted down by
// off), wanting want drafts after them: a sequence recomputed from the
// start (fromZero) is entered afresh, one whose entries have a gap is
// lost, and one whose entries and drafts do not fit the cache, after
// evicting idle sequences, drops out (false).
func (m *modelLoop) enterTable(row *node.SeqState, q0, end, off, want int, fromZero bool) ([]int32, bool) {
	s := m.seq(row.ID) // marked used by beginStep
	if fromZero {
		s.Lost = false
	} else if q0 > s.Next {
		s.Lost = true // entries the drafter never made
	}
	if s.Lost {
		return nil, false
	}
	if !m.reserve(row, end-off+max(0, want-1)) {
		return nil, false
	}
	s.Next = end
	return s.Seq.Blocks, true
}

// Attach implements exec.ModelBinder.
func (m *modelLoop) Attach(d exec.ModelDevice) { m.dev = d.(*modelDevice) }

// firstPass builds pass 0 over the sequences of hc rows active (each
// wanting want[j] drafts): each is fed the tokens of its history that the
// cache lacks, its cache first rolled back to the longest prefix of its
// cached tokens the history still holds, short of its last token, which
// every first pass feeds. An image row is fed m.image at its 1-D position
// (its index in the history); the cache keeps the row's key, so that a
// sequence with another image there is fed again from that row. A sequence whose drafts do not fit the cache,
// even after evicting every sequence idle in this step, least recently
// drafting first, drops out. It returns the pass's batch, the hc rows it
// drafts for, and each one's block table.
func (m *modelLoop) firstPass(hc *hostStep, active, want []int) (*exec.Batch, []int, [][]int32) {
	m.runs++
	for _, i := range active { // mark first, so that growing one never evicts another
		m.seq(hc.Rows[i].ID).Used = m.runs
	}
	b := &exec.Batch{}
	var rows []int
	for j, i := range active {
		h, s := hc.Rows[i].History, m.seq(hc.Rows[i].ID)
		p := 0
		for p < min(len(s.Tokens), len(h)-1) && s.Tokens[p] == h[p] {
			p++
		}
		m.dev.kv.Truncate(s, p)
		s.Tokens = s.Tokens[:p]
		if !m.grow(s, len(h)+want[j]-1) { // the history and every draft but the last
			continue
		}
		b.Tables = append(b.Tables, s.Seq.Blocks)
		for pos := p; pos < len(h); pos++ {
			b.Tokens = append(b.Tokens, node.FedToken(h[pos], m.image))
			b.Positions = append(b.Positions, int32(pos))
			b.RowSeq = append(b.RowSeq, int32(len(b.Tables)-1))
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		s.Tokens = append(s.Tokens, h[p:]...)
		rows = append(rows, i)
	}
	return b, rows, b.Tables
}

// reserve grows the cache of row's sequence to n tokens (evicting idle
// sequences, see grow); a sequence that does not fit is lost and its
// blocks are freed.
func (m *modelLoop) reserve(row *node.SeqState, n int) bool {
	s := m.seq(row.ID)
	if m.grow(s, n) {
		return true
	}
	s.Lost = true
	m.dev.kv.Truncate(s, 0)
	return false
}

// beginStep starts a step of a loop that enters carried hidden states:
// every sequence of hc is in it (none is evicted for another).
func (m *modelLoop) beginStep(hc *hostStep) {
	m.runs++
	for _, row := range hc.Rows {
		m.seq(row.ID).Used = m.runs
	}
}

// fed records that the sequence of row was fed token t in a later pass.
func (m *modelLoop) fed(row *node.SeqState, t int32) {
	s := m.seq(row.ID)
	s.Tokens = append(s.Tokens, t)
}

// seq returns the loop's share of sequence id, creating it empty.
func (m *modelLoop) seq(id uint64) *kv.Share { return m.dev.kv.Share(m.step, id) }

// grow reserves n tokens of cache for s, evicting the loop's shares idle
// in this step (see firstPass) when the cache is full; it reports whether
// s has the room.
func (m *modelLoop) grow(s *kv.Share, n int) bool {
	return m.dev.kv.Reserve(m.step, s, n, m.runs)
}
