// Package kv is the paged KV cache block manager: a pure state machine that
// hands out fixed-size blocks of token slots to sequences. It owns no memory;
// the backend stores K and V at the slots the manager assigns.
package kv

import (
	"errors"
	"fmt"
)

// ErrNoSpace is returned when not enough free blocks are left.
var ErrNoSpace = errors.New("kv: out of blocks")

// Seq is one sequence's block table. Its zero value is an empty sequence.
type Seq struct {
	Blocks []int32 // block ids in position order
	Len    int     // tokens whose slots are reserved
}

// Manager allocates blocks. It is not safe for concurrent use: the engine's
// goroutine owns it.
type Manager struct {
	blockTokens int
	free        []int32 // stack of free block ids
	total       int
}

// New returns a manager of blocks blocks of blockTokens slots each.
func New(blocks, blockTokens int) (*Manager, error) {
	if blocks <= 0 || blockTokens <= 0 {
		return nil, fmt.Errorf("kv: need positive blocks (%d) and block size (%d)", blocks, blockTokens)
	}
	m := &Manager{blockTokens: blockTokens, total: blocks, free: make([]int32, blocks)}
	for i := range m.free {
		m.free[i] = int32(blocks - 1 - i) // pop order 0, 1, 2, ...
	}
	return m, nil
}

// BlockTokens is the number of token slots per block.
func (m *Manager) BlockTokens() int { return m.blockTokens }

// Total is the number of blocks.
func (m *Manager) Total() int { return m.total }

// Free is the number of unallocated blocks.
func (m *Manager) Free() int { return len(m.free) }

// Used is the number of allocated blocks.
func (m *Manager) Used() int { return m.total - len(m.free) }

// BlocksFor is the number of blocks n tokens occupy.
func (m *Manager) BlocksFor(n int) int { return (n + m.blockTokens - 1) / m.blockTokens }

// CanGrow reports whether s can grow to n tokens with the free blocks left.
func (m *Manager) CanGrow(s *Seq, n int) bool {
	return m.BlocksFor(n)-len(s.Blocks) <= len(m.free)
}

// Grow reserves slots so that s holds n tokens. On ErrNoSpace nothing changes.
func (m *Manager) Grow(s *Seq, n int) error {
	need := m.BlocksFor(n) - len(s.Blocks)
	if need > len(m.free) {
		return fmt.Errorf("%w: need %d, %d free", ErrNoSpace, need, len(m.free))
	}
	for ; need > 0; need-- {
		last := len(m.free) - 1
		s.Blocks = append(s.Blocks, m.free[last])
		m.free = m.free[:last]
	}
	if n > s.Len {
		s.Len = n
	}
	return nil
}

// Truncate shrinks s to n tokens (a rolled-back draft), returning whole
// blocks past n to the free list.
func (m *Manager) Truncate(s *Seq, n int) {
	if n >= s.Len {
		return
	}
	keep := m.BlocksFor(n)
	for i := len(s.Blocks) - 1; i >= keep; i-- {
		m.free = append(m.free, s.Blocks[i])
	}
	s.Blocks = s.Blocks[:keep]
	s.Len = n
}

// Release frees all of s's blocks.
func (m *Manager) Release(s *Seq) { m.Truncate(s, 0) }
