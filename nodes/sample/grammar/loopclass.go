package grammar

import (
	"encoding/binary"
	"slices"
	"sort"
	"unicode/utf8"
)

// A state's loop class is the set of code points that take it back to
// itself: inside a JSON string every character but '"', '\\' and the
// controls does. A token whose piece is made only of such code points
// leads back to the state, so its fate is the state's own (allowed, or cut
// by the budget). Vocab precomputes, per loop class, the bitset of those
// tokens and the places where a piece first leaves the class (exits); a
// mask is then that bitset and a walk from each exit, instead of a walk of
// the whole trie. The tokens allowed are exactly those the walk of the
// trie allows.

// maxLoopClassRanges bounds the code point intervals loopClass examines:
// a state whose classes cut the code points finer is walked in full.
const maxLoopClassRanges = 128

// maxClassSets bounds the loop classes a Vocab keeps precomputed.
const maxClassSets = 64

// loopClass is s's loop class as sorted disjoint ranges; empty when s is
// inside a UTF-8 sequence, has more than maxLoopClassRanges intervals of
// code points that its classes treat alike, or loops on nothing.
func (s *State) loopClass() []rng {
	if s.loop != nil {
		return *s.loop
	}
	class := s.computeLoopClass()
	if s.c.work.Err() == nil {
		s.loop = &class
	}
	return class
}

func (s *State) computeLoopClass() []rng {
	if s.need > 0 {
		return nil
	}
	// Every code point of an interval between two cuts is admitted by the
	// same stacks, so it reaches the same state: one probe per interval.
	cuts := []rune{0, 0x80, 0x800, 0xD800, 0xE000, 0x10000, utf8.MaxRune + 1}
	for _, st := range s.stacks {
		if st == nil {
			continue
		}
		for _, r := range s.g.class(st.top).ranges {
			cuts = append(cuts, min(max(r.lo, 0), utf8.MaxRune+1), min(max(r.hi+1, 0), utf8.MaxRune+1))
		}
		if len(cuts) > 2*maxLoopClassRanges {
			return nil
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	if len(cuts) > maxLoopClassRanges+1 {
		return nil
	}
	var class []rng
	var buf [utf8.UTFMax]byte
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := cuts[i], cuts[i+1]-1
		if lo >= 0xD800 && lo <= 0xDFFF {
			continue
		}
		if s.AdvanceBytes(buf[:utf8.EncodeRune(buf[:], lo)]) != s {
			continue
		}
		if n := len(class); n > 0 && class[n-1].hi+1 == lo {
			class[n-1].hi = hi
			continue
		}
		class = append(class, rng{lo, hi})
	}
	return class
}

func inClass(class []rng, c rune) bool {
	k := sort.Search(len(class), func(i int) bool { return class[i].hi >= c })
	return k < len(class) && class[k].lo <= c
}

func classKey(class []rng) string {
	b := make([]byte, 0, 8*len(class))
	for _, r := range class {
		b = binary.LittleEndian.AppendUint32(b, uint32(r.lo))
		b = binary.LittleEndian.AppendUint32(b, uint32(r.hi))
	}
	return string(b)
}

// classTokens is what Vocab precomputes for a loop class.
type classTokens struct {
	inside []uint64 // tokens whose pieces are code points of the class only
	any    bool     // inside holds a token
	// insideByFirst[b] are inside's tokens whose piece starts with b, an
	// ASCII byte.
	insideByFirst [0x80][]int32
	exits         []exitGroup // by first
	exitsByFirst  [257]int    // exits[exitsByFirst[b]:exitsByFirst[b+1]] start with b
}

// exitGroup is where pieces starting with the byte first leave the class
// with the same bytes: after a prefix of class code points, seq (a code
// point outside the class, an invalid sequence, or the start of a code
// point a piece ends in).
type exitGroup struct {
	first byte
	seq   []byte
	nodes []exitNode
}

// exitNode is the trie node reached by seq after one prefix; for the
// start of a code point (tokensOnly), only the tokens that end there are
// the group's: the nodes below continue the code point, in other groups.
type exitNode struct {
	node       int32
	tokensOnly bool
}

// classTokensFor returns the precomputed tokens of class, computing them
// under w (one unit per trie edge); nil when w stopped or the Vocab keeps
// maxClassSets classes already.
func (v *Vocab) classTokensFor(class []rng, w *Work) *classTokens {
	key := classKey(class)
	v.mu.Lock()
	ct, ok := v.classes[key]
	full := len(v.classes) >= maxClassSets
	v.mu.Unlock()
	if ok {
		return ct
	}
	if full {
		return nil
	}
	b := classBuilder{v: v, class: class, w: w, groups: map[string]int{},
		ct: &classTokens{inside: make([]uint64, (v.size+63)/64)}}
	b.inside(0, true)
	if w.Err() != nil {
		return nil
	}
	slices.SortStableFunc(b.ct.exits, func(x, y exitGroup) int { return int(x.first) - int(y.first) })
	k := 0
	for first := range 257 {
		for k < len(b.ct.exits) && int(b.ct.exits[k].first) < first {
			k++
		}
		b.ct.exitsByFirst[first] = k
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if got, ok := v.classes[key]; ok {
		return got
	}
	if len(v.classes) >= maxClassSets {
		return nil
	}
	if v.classes == nil {
		v.classes = map[string]*classTokens{}
	}
	v.classes[key] = b.ct
	return b.ct
}

type classBuilder struct {
	v      *Vocab
	class  []rng
	w      *Work
	ct     *classTokens
	groups map[string]int // first byte and seq -> index in ct.exits
	first  byte           // of the pieces being visited
}

func (b *classBuilder) exit(seq []byte, node int32, tokensOnly bool) {
	first := b.first
	key := string(append([]byte{first}, seq...))
	k, ok := b.groups[key]
	if !ok {
		k = len(b.ct.exits)
		b.groups[key] = k
		b.ct.exits = append(b.ct.exits, exitGroup{first: first, seq: slices.Clone(seq)})
	}
	b.ct.exits[k].nodes = append(b.ct.exits[k].nodes, exitNode{node, tokensOnly})
}

// inside visits node n, reached by class code points only (the root
// when root).
func (b *classBuilder) inside(n int32, root bool) {
	node := &b.v.nodes[n]
	for _, id := range node.tokens {
		b.ct.inside[id/64] |= 1 << (id % 64)
		b.ct.any = true
		if b.first < 0x80 {
			b.ct.insideByFirst[b.first] = append(b.ct.insideByFirst[b.first], id)
		}
	}
	var seq [utf8.UTFMax]byte
	for _, e := range node.kids {
		if !b.w.charge(1) {
			return
		}
		if root {
			b.first = e.b
		}
		seq[0] = e.b
		b.codePoint(seq[:1], e.node)
	}
}

// codePoint continues the code point seq (its bytes so far) at node n.
// Bytes no state accepts at that position (a continuation byte or an
// invalid lead byte starting a code point, any other byte inside one)
// lead nowhere: the trie walk rejects them whatever the state.
func (b *classBuilder) codePoint(seq []byte, n int32) {
	length := 0
	switch lead := seq[0]; {
	case lead < 0x80:
		length = 1
	case lead >= 0xC2 && lead <= 0xDF:
		length = 2
	case lead >= 0xE0 && lead <= 0xEF:
		length = 3
	case lead >= 0xF0 && lead <= 0xF4:
		length = 4
	default:
		return
	}
	if len(seq) < length {
		if len(b.v.nodes[n].tokens) > 0 {
			b.exit(seq, n, true)
		}
		for _, e := range b.v.nodes[n].kids {
			if !b.w.charge(1) {
				return
			}
			if e.b&0xC0 == 0x80 {
				b.codePoint(append(seq, e.b), e.node)
			}
		}
		return
	}
	if c, size := utf8.DecodeRune(seq); size == length && inClass(b.class, c) { // an invalid sequence decodes one byte
		b.inside(n, false)
		return
	}
	b.exit(seq, n, false)
}

// maskByClass sets in bits the tokens Allow allows from s and reports
// whether the budget cut some. A state with a loop class takes its class
// tokens; otherwise each first byte of a piece is taken alone: an ASCII
// byte leading to a state that loops on it takes that state's class
// tokens starting with the byte, and the pieces starting with any other
// byte are walked.
func (v *Vocab) maskByClass(s *State, budget int, bits []uint64) (cut bool) {
	w := s.c.work
	if class := s.loopClass(); len(class) > 0 {
		if ct := v.classTokensFor(class, w); ct != nil {
			return v.allowClass(ct, s, budget, bits, -1)
		}
	}
	allow := func(id int32) { bits[id/64] |= 1 << (id % 64) }
	for _, e := range v.nodes[0].kids {
		if !w.charge(1) {
			return cut
		}
		next := s.Advance(e.b)
		if next == nil {
			continue
		}
		if e.b < 0x80 {
			if class := next.loopClass(); inClass(class, rune(e.b)) {
				if ct := v.classTokensFor(class, w); ct != nil {
					if v.allowClass(ct, next, budget, bits, int(e.b)) {
						cut = true
					}
					continue
				}
			}
		}
		if v.allowAt(e.node, next, budget, allow) {
			cut = true
		}
		if v.walk(int(e.node), next, budget, allow) {
			cut = true
		}
	}
	return cut
}

// allowClass allows the tokens ct's class leads to from s, a state that
// loops on the class: all of them (first < 0), or those starting with the
// byte first, which is in the class. The pieces leaving the class are
// walked from where they leave it.
func (v *Vocab) allowClass(ct *classTokens, s *State, budget int, bits []uint64, first int) (cut bool) {
	w := s.c.work
	inBudget := budget <= 0 || s.Remaining() <= budget-1
	exits := ct.exits
	switch {
	case first >= 0:
		ids := ct.insideByFirst[first]
		exits = exits[ct.exitsByFirst[first]:ct.exitsByFirst[first+1]]
		if len(ids) > 0 && !inBudget {
			cut = true
		} else if len(ids) > 0 {
			if !w.charge(len(ids) / 64) {
				return cut
			}
			for _, id := range ids {
				bits[id/64] |= 1 << (id % 64)
			}
		}
	case ct.any && !inBudget:
		cut = true
	case ct.any:
		if !w.charge(len(bits) / 16) {
			return cut
		}
		for i, x := range ct.inside {
			bits[i] |= x
		}
	}
	allow := func(id int32) { bits[id/64] |= 1 << (id % 64) }
	for _, g := range exits {
		if !w.charge(1) {
			return cut
		}
		next := s.AdvanceBytes(g.seq)
		if next == nil {
			continue
		}
		for _, x := range g.nodes {
			if !w.charge(1) {
				return cut
			}
			if v.allowAt(x.node, next, budget, allow) {
				cut = true
			}
			if !x.tokensOnly && v.walk(int(x.node), next, budget, allow) {
				cut = true
			}
		}
	}
	return cut
}
