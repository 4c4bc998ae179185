// Package kv is the paged KV cache block manager: a pure state machine that
// hands out fixed-size blocks of token slots to sequences. It owns no memory;
// the backend stores K and V at the slots the manager assigns.
package kv

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrNoSpace is returned when not enough free blocks are left.
var ErrNoSpace = errors.New("kv: out of blocks")

// Seq is one sequence's block table. Its zero value is an empty sequence.
type Seq struct {
	Blocks []int32 // block ids in position order
	Len    int     // tokens whose slots are reserved
	// Hashed is how many leading Blocks are full and have their chain
	// hash computed (Publish); only those may be shared.
	Hashed int
}

// Manager allocates blocks. It is not safe for concurrent use: the engine's
// goroutine owns it.
//
// With a prefix cache (EnablePrefixCache), a full block whose K/V are
// computed is identified by a chained hash of its tokens (BlockHash), and
// sequences whose tokens begin the same way share it (reference counts).
// A block no sequence holds any more keeps its hash and its K/V: it is
// "cached", counts as free, and is reused (evicted, least recently freed
// first) only when no never-used or plain free block is left. Blocks are
// only shared while full, and a sequence writes only past its cached
// prefix, so a shared block is never written.
type Manager struct {
	blockTokens int
	free        []int32 // stack of free blocks without a cached hash
	total       int

	// Prefix cache state, per block id; nil without a prefix cache.
	salt   []byte
	refs   []int32 // sequences holding the block
	hash   []BlockHash
	cached map[BlockHash]int32 // registered full blocks, held or evictable
	lru    lruList             // evictable: refs 0, hash registered; front = oldest
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

// EnablePrefixCache turns on prefix caching; salt is hashed into every
// block's hash (BlockHash) and must name everything besides the tokens
// that changes a block's K/V: the model, the KV format, the graph. Call it
// before any block is allocated.
func (m *Manager) EnablePrefixCache(salt []byte) {
	m.salt = append([]byte(nil), salt...)
	m.refs = make([]int32, m.total)
	m.hash = make([]BlockHash, m.total)
	m.cached = map[BlockHash]int32{}
	m.lru = newLRU(m.total)
}

// PrefixCaching reports whether EnablePrefixCache was called.
func (m *Manager) PrefixCaching() bool { return m.cached != nil }

// BlockTokens is the number of token slots per block.
func (m *Manager) BlockTokens() int { return m.blockTokens }

// Total is the number of blocks.
func (m *Manager) Total() int { return m.total }

// Free is the number of blocks a sequence can take: never-used and
// released blocks, cached ones included.
func (m *Manager) Free() int { return len(m.free) + m.lru.len }

// Cached is the number of free blocks that still hold a cached prefix.
func (m *Manager) Cached() int { return m.lru.len }

// Used is the number of blocks held by sequences.
func (m *Manager) Used() int { return m.total - m.Free() }

// BlocksFor is the number of blocks n tokens occupy.
func (m *Manager) BlocksFor(n int) int { return (n + m.blockTokens - 1) / m.blockTokens }

// CanGrow reports whether s can grow to n tokens with the free blocks left.
func (m *Manager) CanGrow(s *Seq, n int) bool {
	return m.BlocksFor(n)-len(s.Blocks) <= m.Free()
}

// Grow reserves slots so that s holds n tokens. On ErrNoSpace nothing changes.
func (m *Manager) Grow(s *Seq, n int) error {
	need := m.BlocksFor(n) - len(s.Blocks)
	if need > m.Free() {
		return fmt.Errorf("%w: need %d, %d free", ErrNoSpace, need, m.Free())
	}
	for ; need > 0; need-- {
		s.Blocks = append(s.Blocks, m.take())
	}
	if n > s.Len {
		s.Len = n
	}
	return nil
}

// take allocates one block: a plain free one, else the least recently
// freed cached one, whose hash is forgotten.
func (m *Manager) take() int32 {
	var b int32
	if last := len(m.free) - 1; last >= 0 {
		b = m.free[last]
		m.free = m.free[:last]
	} else {
		b = m.lru.popFront()
		delete(m.cached, m.hash[b])
		m.hash[b] = BlockHash{}
	}
	if m.refs != nil {
		m.refs[b] = 1
	}
	return b
}

// Truncate shrinks s to n tokens (a rolled-back draft), returning whole
// blocks past n: a block no other sequence holds becomes free (cached, if
// its hash is registered).
func (m *Manager) Truncate(s *Seq, n int) {
	if n >= s.Len {
		return
	}
	keep := m.BlocksFor(n)
	// Latest blocks first: a released prefix's root is freed last, so it
	// is evicted last.
	for i := len(s.Blocks) - 1; i >= keep; i-- {
		m.drop(s.Blocks[i])
	}
	s.Blocks = s.Blocks[:keep]
	s.Len = n
	s.Hashed = min(s.Hashed, n/m.blockTokens)
}

// drop releases one reference to block b.
func (m *Manager) drop(b int32) {
	if m.refs == nil {
		m.free = append(m.free, b)
		return
	}
	if m.refs[b]--; m.refs[b] > 0 {
		return
	}
	if c, ok := m.cached[m.hash[b]]; ok && c == b {
		m.lru.pushBack(b)
		return
	}
	m.hash[b] = BlockHash{}
	m.free = append(m.free, b)
}

// Release frees all of s's blocks.
func (m *Manager) Release(s *Seq) { m.Truncate(s, 0) }

// Demote makes those of blocks (a released sequence's, in position order)
// that are cached and held by no sequence the next ones evicted, the last
// block first: their K/V are kept but worth less than any other cached
// block's (a hybrid model resumes only at a state checkpoint, and these
// lie past a sequence's last one).
func (m *Manager) Demote(blocks []int32) {
	if m.cached == nil {
		return
	}
	for _, b := range blocks {
		if m.lru.in[b] {
			m.lru.remove(b)
			m.lru.pushFront(b)
		}
	}
}

// Match returns the cached blocks that hold the longest prefix of tokens
// made of whole blocks, at most maxBlocks of them, in position order; nil
// without a prefix cache. It changes nothing: Adopt takes them.
func (m *Manager) Match(tokens []int32, maxBlocks int) []int32 {
	if m.cached == nil {
		return nil
	}
	var out []int32
	var parent BlockHash
	for i := 0; i < maxBlocks && (i+1)*m.blockTokens <= len(tokens); i++ {
		h := m.chain(parent, tokens[i*m.blockTokens:(i+1)*m.blockTokens])
		b, ok := m.cached[h]
		if !ok {
			break
		}
		out = append(out, b)
		parent = h
	}
	return out
}

// Hashes returns the chain hashes (BlockHash) of the first blocks whole
// blocks of tokens (fewer when tokens are shorter), under m's salt: the
// keys of the prefixes ending at each block.
func (m *Manager) Hashes(tokens []int32, blocks int) []BlockHash {
	blocks = min(blocks, len(tokens)/m.blockTokens)
	out := make([]BlockHash, 0, max(blocks, 0))
	var parent BlockHash
	for i := 0; i < blocks; i++ {
		parent = m.chain(parent, tokens[i*m.blockTokens:(i+1)*m.blockTokens])
		out = append(out, parent)
	}
	return out
}

// Holds reports whether a block with hash h is registered (held by a
// sequence or cached): a prefix ending at it can be adopted while the
// blocks before it are registered too.
func (m *Manager) Holds(h BlockHash) bool {
	_, ok := m.cached[h]
	return ok
}

// Registered returns the registered blocks (held or cached) of those of
// hashes that have one, in the order of hashes.
func (m *Manager) Registered(hashes []BlockHash) []int32 {
	var out []int32
	for _, h := range hashes {
		if b, ok := m.cached[h]; ok {
			out = append(out, b)
		}
	}
	return out
}

// Reusable is how many of blocks (from Match) are free now: adopting them
// takes them out of the free count.
func (m *Manager) Reusable(blocks []int32) int {
	n := 0
	for _, b := range blocks {
		if m.refs[b] == 0 {
			n++
		}
	}
	return n
}

// Adopt gives the empty sequence s the cached blocks (from Match, in
// order): s then holds their tokens, all hashed.
func (m *Manager) Adopt(s *Seq, blocks []int32) {
	for _, b := range blocks {
		if m.refs[b] == 0 {
			m.lru.remove(b)
		}
		m.refs[b]++
		s.Blocks = append(s.Blocks, b)
	}
	s.Len = len(blocks) * m.blockTokens
	s.Hashed = len(blocks)
}

// Publish registers the full blocks of s whose K/V are now computed
// (tokens[:computed] are in the cache), so later sequences can share them.
// A block whose hash another block already holds stays private.
func (m *Manager) Publish(s *Seq, tokens []int32, computed int) {
	if m.cached == nil {
		return
	}
	full := min(computed, len(tokens), s.Len) / m.blockTokens
	for i := s.Hashed; i < full; i++ {
		var parent BlockHash
		if i > 0 {
			parent = m.hash[s.Blocks[i-1]]
		}
		b := s.Blocks[i]
		m.hash[b] = m.chain(parent, tokens[i*m.blockTokens:(i+1)*m.blockTokens])
		if _, dup := m.cached[m.hash[b]]; !dup {
			m.cached[m.hash[b]] = b
		}
	}
	s.Hashed = max(s.Hashed, full)
}

// BlockHash identifies a full block of K/V: see Chain.
type BlockHash [16]byte

// chain is Chain with m's salt.
func (m *Manager) chain(parent BlockHash, tokens []int32) BlockHash {
	return Chain(m.salt, parent, tokens)
}

// Chain is the hash of a full block: the first 16 bytes of
// SHA-256(salt || parent || tokens as little-endian int32), where parent
// is the hash of the block before it (zero for the first block). Equal
// hashes mean equal token prefixes under equal salts, which is what a
// router needs to compute prefix affinity.
func Chain(salt []byte, parent BlockHash, tokens []int32) BlockHash {
	h := sha256.New()
	h.Write(salt)
	h.Write(parent[:])
	var buf [4]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint32(buf[:], uint32(t))
		h.Write(buf[:])
	}
	var out BlockHash
	copy(out[:], h.Sum(nil))
	return out
}

// lruList is a doubly linked list of block ids (the evictable blocks),
// with O(1) removal of any block.
type lruList struct {
	prev, next []int32 // -1 ends; in[b] says whether b is listed
	in         []bool
	head, tail int32
	len        int
}

func newLRU(n int) lruList {
	l := lruList{prev: make([]int32, n), next: make([]int32, n), in: make([]bool, n), head: -1, tail: -1}
	return l
}

func (l *lruList) pushBack(b int32) {
	l.prev[b], l.next[b], l.in[b] = l.tail, -1, true
	if l.tail >= 0 {
		l.next[l.tail] = b
	} else {
		l.head = b
	}
	l.tail = b
	l.len++
}

func (l *lruList) pushFront(b int32) {
	l.prev[b], l.next[b], l.in[b] = -1, l.head, true
	if l.head >= 0 {
		l.prev[l.head] = b
	} else {
		l.tail = b
	}
	l.head = b
	l.len++
}

func (l *lruList) remove(b int32) {
	if !l.in[b] {
		return
	}
	if p := l.prev[b]; p >= 0 {
		l.next[p] = l.next[b]
	} else {
		l.head = l.next[b]
	}
	if n := l.next[b]; n >= 0 {
		l.prev[n] = l.prev[b]
	} else {
		l.tail = l.prev[b]
	}
	l.in[b] = false
	l.len--
}

func (l *lruList) popFront() int32 {
	b := l.head
	l.remove(b)
	return b
}
