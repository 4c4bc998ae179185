package speculative

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// headSeq is one sequence's state in a drafter's cache.
type headSeq struct {
	kv   kv.Seq
	next int // positions [0, next) hold the drafter's entries of accepted tokens
	// lost is set when the drafter missed positions (its cache was full):
	// the sequence drafts no more until it is recomputed from position 0.
	lost bool
}

// heads is the cache of a drafter that runs on a device of its own and
// reads the target's carried hidden states (speculative.dflash): each
// sequence's KV blocks and entry state. Attach and ReleaseSeq implement
// exec.ModelBinder's and exec.SeqReleaser's methods for the nodes that
// embed it.
type heads struct {
	dev  exec.ModelDevice
	seqs map[uint64]*headSeq
}

// Attach implements exec.ModelBinder.
func (h *heads) Attach(dev exec.ModelDevice) { h.dev = dev }

// ReleaseSeq implements exec.SeqReleaser: the sequence's blocks are freed.
func (h *heads) ReleaseSeq(id uint64) {
	if s, ok := h.seqs[id]; ok {
		h.dev.KV().Release(&s.kv)
		delete(h.seqs, id)
	}
}

// seq returns the state of sequence id, creating it empty.
func (h *heads) seq(id uint64) *headSeq {
	if h.seqs == nil {
		h.seqs = map[uint64]*headSeq{}
	}
	s, ok := h.seqs[id]
	if !ok {
		s = &headSeq{}
		h.seqs[id] = s
	}
	return s
}

// grow reserves n tokens of the cache for s, first evicting the sequences
// that are not in this step when the cache is full (a sequence the target
// preempted still holds blocks); an evicted sequence drafts no more until
// it is recomputed. It reports whether s has the room; if not, s is lost
// and its blocks are freed.
func (h *heads) grow(hc *exec.HostContext, s *headSeq, n int) bool {
	kvb := h.dev.KV()
	if kvb.Grow(&s.kv, n) == nil {
		return true
	}
	inStep := map[uint64]bool{}
	for _, row := range hc.Rows {
		inStep[row.ID] = true
	}
	for id, o := range h.seqs {
		if !inStep[id] && len(o.kv.Blocks) > 0 {
			kvb.Release(&o.kv)
			o.lost = true
			if kvb.Grow(&s.kv, n) == nil {
				return true
			}
		}
	}
	s.lost = true
	kvb.Release(&s.kv)
	return false
}

// meta reads a drafter GGUF's ARCH.KEY metadata, keeping every error.
type meta struct {
	f    *weights.File
	arch string
	errs []error
}

// uint is ARCH.key, or def when it is absent and def >= 0 (def < 0: the
// key is required).
func (m *meta) uint(key string, def int) int {
	if def >= 0 && !m.f.Has(m.arch+"."+key) {
		return def
	}
	v, err := m.f.Uint(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return int(v)
}

// float is ARCH.key, or def when it is absent.
func (m *meta) float(key string, def float32) float32 {
	if !m.f.Has(m.arch + "." + key) {
		return def
	}
	v, err := m.f.Float(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return float32(v)
}

// bool is ARCH.key, false when it is absent.
func (m *meta) bool(key string) bool {
	if !m.f.Has(m.arch + "." + key) {
		return false
	}
	v, err := m.f.Bool(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	return v
}

// ints is the required int array ARCH.key.
func (m *meta) ints(key string) []int {
	v, err := m.f.Int32s(m.arch + "." + key)
	if err != nil {
		m.errs = append(m.errs, err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// errorf records a problem with the drafter's shape.
func (m *meta) errorf(format string, args ...any) {
	m.errs = append(m.errs, fmt.Errorf(format, args...))
}
