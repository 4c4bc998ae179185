package grammar

import "unicode/utf8"

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
}

// Start is the state before any byte.
func (g *Grammar) Start() *State {
	s := &State{g: g}
	for a := range g.rules[0] {
		s.stacks = g.expand(s.stacks, frame{0, int32(a), 0}, nil)
	}
	return s
}

// suffixLen is the fewest bytes the rest of f's alternative expands to.
func (g *Grammar) suffixLen(f frame) int { return g.altLen(g.rules[f.rule][f.alt], int(f.idx)) }

// expand adds to out the stacks f (on top of next) reaches without
// consuming input: references are replaced by their alternatives and
// ended alternatives pop. Stacks whose top is a class are added; an
// emptied stack is added as nil.
func (g *Grammar) expand(out []*stack, f frame, next *stack) []*stack {
	a := g.rules[f.rule][f.alt]
	if int(f.idx) == len(a) {
		if next == nil {
			return addStack(out, nil)
		}
		return g.expand(out, next.top, next.next)
	}
	s := a[f.idx]
	if !s.isRef() {
		rem := g.suffixLen(f)
		if next != nil {
			rem += next.rem
		}
		return addStack(out, &stack{top: f, next: next, rem: rem})
	}
	cont := next
	if int(f.idx)+1 < len(a) { // a reference in tail position pushes nothing
		c := frame{f.rule, f.alt, f.idx + 1}
		rem := g.suffixLen(c)
		if next != nil {
			rem += next.rem
		}
		cont = &stack{top: c, next: next, rem: rem}
	}
	for k := range g.rules[s.ref] {
		out = g.expand(out, frame{int32(s.ref), int32(k), 0}, cont)
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
	n := &State{g: s.g}
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
	n := &State{g: s.g}
	for _, st := range s.stacks {
		if st == nil || !s.g.class(st.top).matches(c) {
			continue
		}
		f := st.top
		f.idx++
		n.stacks = s.g.expand(n.stacks, f, st.next)
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
	return best
}
