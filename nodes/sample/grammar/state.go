package grammar

import (
	"encoding/binary"
	"slices"
	"unicode/utf8"
)

// frame points at the next symbol of a rule's alternative.
type frame struct {
	rule, alt, idx int32
}

// stack is an immutable pushdown stack: its top points at a code point
// class to match; next is what follows once the top's alternative ends.
// rem is the fewest bytes that empty it.
type stack struct {
	top  frame
	next *stack
	rem  int
	id   int32 // interned stacks: unique per Cache
}

// State is where a grammar stands after some bytes: every stack the bytes
// can have reached (nil: the input so far is a complete sentence), and a
// code point cut short inside a UTF-8 sequence. A State is immutable;
// Advance returns a new one.
type State struct {
	g      *Grammar
	stacks []*stack
	need   int  // continuation bytes still due
	cp     rune // the code point's bits so far
	lo, hi rune // the code points the pending sequence can still become

	// Interned states (Cache.Start) share equal stacks and are unique per
	// Cache, so transitions and Remaining are computed once.
	c    *Cache
	next *[256]*State // transitions computed so far; dead for a rejected byte
	rem  int          // Remaining, once computed (-1 before)
}

// dead marks a rejected transition in State.next.
var dead = &State{}

// Cache interns a grammar's states, so that each state's transitions,
// shortest completion and anything a caller keys by the state (a token
// mask) are computed once. A Cache is not safe for concurrent use: use
// one per generated sequence.
type Cache struct {
	g      *Grammar
	stacks map[stackKey]*stack
	states map[string]*State
	masks  map[*State]maskEntry // Vocab.Mask's
}

type stackKey struct {
	top  frame
	next *stack
}

// NewCache returns an empty cache of g's states.
func (g *Grammar) NewCache() *Cache {
	return &Cache{g: g, stacks: map[stackKey]*stack{}, states: map[string]*State{}}
}

// Len is the number of states the cache holds.
func (c *Cache) Len() int { return len(c.states) }

// Start is the interned state before any byte.
func (c *Cache) Start() *State {
	s := &State{g: c.g, c: c}
	for a := range c.g.rules[0] {
		s.stacks = c.g.expand(c, s.stacks, frame{0, int32(a), 0}, nil)
	}
	return c.intern(s)
}

// newStack returns the stack top over next (interned with a Cache).
func (g *Grammar) newStack(c *Cache, top frame, next *stack) *stack {
	if c != nil {
		if st, ok := c.stacks[stackKey{top, next}]; ok {
			return st
		}
	}
	rem := g.suffixLen(top)
	if next != nil {
		rem += next.rem
	}
	st := &stack{top: top, next: next, rem: rem}
	if c != nil {
		st.id = int32(len(c.stacks) + 1)
		c.stacks[stackKey{top, next}] = st
	}
	return st
}

// intern returns the cache's state equal to s.
func (c *Cache) intern(s *State) *State {
	key := make([]byte, 0, 4*len(s.stacks)+16)
	ids := make([]int32, len(s.stacks))
	for i, st := range s.stacks {
		if st != nil {
			ids[i] = st.id
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		key = binary.LittleEndian.AppendUint32(key, uint32(id))
	}
	key = binary.LittleEndian.AppendUint32(key, uint32(s.need))
	key = binary.LittleEndian.AppendUint32(key, uint32(s.cp))
	key = binary.LittleEndian.AppendUint32(key, uint32(s.lo))
	key = binary.LittleEndian.AppendUint32(key, uint32(s.hi))
	if got, ok := c.states[string(key)]; ok {
		return got
	}
	s.c, s.rem = c, -1
	c.states[string(key)] = s
	return s
}

// Start is the state before any byte.
func (g *Grammar) Start() *State {
	s := &State{g: g, rem: -1}
	for a := range g.rules[0] {
		s.stacks = g.expand(nil, s.stacks, frame{0, int32(a), 0}, nil)
	}
	return s
}

// suffixLen is the fewest bytes the rest of f's alternative expands to.
func (g *Grammar) suffixLen(f frame) int { return g.altLen(g.rules[f.rule][f.alt], int(f.idx)) }

// expand adds to out the stacks f (on top of next) reaches without
// consuming input: references are replaced by their alternatives and
// ended alternatives pop. Stacks whose top is a class are added; an
// emptied stack is added as nil.
func (g *Grammar) expand(c *Cache, out []*stack, f frame, next *stack) []*stack {
	a := g.rules[f.rule][f.alt]
	if int(f.idx) == len(a) {
		if next == nil {
			return addStack(out, nil)
		}
		return g.expand(c, out, next.top, next.next)
	}
	s := a[f.idx]
	if !s.isRef() {
		return addStack(out, g.newStack(c, f, next))
	}
	cont := next
	if int(f.idx)+1 < len(a) { // a reference in tail position pushes nothing
		cont = g.newStack(c, frame{f.rule, f.alt, f.idx + 1}, next)
	}
	for k := range g.rules[s.ref] {
		out = g.expand(c, out, frame{int32(s.ref), int32(k), 0}, cont)
	}
	return out
}

// addStack appends s unless an equal stack (same top, same rest) is there.
func addStack(out []*stack, s *stack) []*stack {
	for _, o := range out {
		if o == s || (o != nil && s != nil && o.top == s.top && o.next == s.next) {
			return out
		}
	}
	return append(out, s)
}

func (g *Grammar) class(f frame) sym { return g.rules[f.rule][f.alt][f.idx] }

// Advance returns the state after byte b, or nil when the grammar cannot
// continue with it.
func (s *State) Advance(b byte) *State {
	if s.c == nil {
		return s.advance(b)
	}
	if s.next == nil {
		s.next = new([256]*State)
	}
	if n := s.next[b]; n != nil {
		if n == dead {
			return nil
		}
		return n
	}
	n := s.advance(b)
	if n == nil {
		s.next[b] = dead
		return nil
	}
	n = s.c.intern(n)
	s.next[b] = n
	return n
}

func (s *State) advance(b byte) *State {
	n := &State{g: s.g, rem: -1}
	if s.need == 0 {
		var length int
		switch {
		case b < 0x80:
			return s.complete(rune(b))
		case b >= 0xC2 && b <= 0xDF:
			length, n.cp, n.lo, n.hi = 2, rune(b&0x1F), 0x80, 0x7FF
		case b >= 0xE0 && b <= 0xEF:
			length, n.cp, n.lo, n.hi = 3, rune(b&0x0F), 0x800, 0xFFFF
		case b >= 0xF0 && b <= 0xF4:
			length, n.cp, n.lo, n.hi = 4, rune(b&0x07), 0x10000, 0x10FFFF
		default:
			return nil
		}
		n.need = length - 1
	} else {
		if b&0xC0 != 0x80 {
			return nil
		}
		n.need, n.cp, n.lo, n.hi = s.need-1, s.cp<<6|rune(b&0x3F), s.lo, s.hi
		if n.need == 0 {
			if n.cp < n.lo || n.cp > n.hi || !utf8.ValidRune(n.cp) {
				return nil
			}
			return s.complete(n.cp)
		}
	}
	// The code points this prefix can still become.
	shift := uint(6 * n.need)
	n.lo, n.hi = max(n.lo, n.cp<<shift), min(n.hi, n.cp<<shift|(1<<shift-1))
	if n.lo <= 0xDFFF && n.hi >= 0xD800 { // no surrogates: the range ends below them or starts above
		if n.lo >= 0xD800 {
			n.lo = 0xE000
		} else {
			n.hi = 0xD7FF
		}
	}
	if n.lo > n.hi {
		return nil
	}
	for _, st := range s.stacks {
		if st != nil && s.g.class(st.top).admitsRange(n.lo, n.hi) {
			n.stacks = append(n.stacks, st)
		}
	}
	if len(n.stacks) == 0 {
		return nil
	}
	return n
}

// complete is the state after code point c.
func (s *State) complete(c rune) *State {
	n := &State{g: s.g, rem: -1}
	for _, st := range s.stacks {
		if st == nil || !s.g.class(st.top).matches(c) {
			continue
		}
		f := st.top
		f.idx++
		n.stacks = s.g.expand(s.c, n.stacks, f, st.next)
	}
	if len(n.stacks) == 0 {
		return nil
	}
	return n
}

// AdvanceBytes is Advance over p, nil when a byte is rejected.
func (s *State) AdvanceBytes(p []byte) *State {
	for _, b := range p {
		if s = s.Advance(b); s == nil {
			return nil
		}
	}
	return s
}

// Accepting reports whether the bytes so far are a complete sentence.
func (s *State) Accepting() bool {
	if s.need > 0 {
		return false
	}
	for _, st := range s.stacks {
		if st == nil {
			return true
		}
	}
	return false
}

// More reports whether some byte may follow.
func (s *State) More() bool {
	for _, st := range s.stacks {
		if st != nil {
			return true
		}
	}
	return false
}

// Remaining is the fewest bytes that complete a sentence from s.
func (s *State) Remaining() int {
	if s.rem >= 0 {
		return s.rem
	}
	best := -1
	for _, st := range s.stacks {
		r := 0
		if st != nil {
			r = st.rem
			if s.need > 0 {
				r += s.need - s.g.class(st.top).minBytes()
				r = max(r, s.need)
			}
		}
		if best < 0 || r < best {
			best = r
		}
	}
	s.rem = best
	return best
}
