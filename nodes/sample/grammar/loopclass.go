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

// cuts are the starts of the intervals of code points that s's classes
// treat alike (every code point of one is admitted by the same stacks, so
// it reaches the same state), and the end of the last; nil when s is
// inside a UTF-8 sequence or has more than maxLoopClassRanges intervals.
func (s *State) cuts() []rune {
	if s.need > 0 {
		return nil
	}
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
	return cuts
}

// afterCodePoint is the state after code point c of s (nil: rejected),
// probed once per interval of cuts (s.cuts()) and kept in targets.
func (s *State) afterCodePoint(c rune, cuts []rune, targets []*State) *State {
	i := sort.Search(len(cuts), func(i int) bool { return cuts[i] > c }) - 1
	if targets[i] == nil {
		var buf [utf8.UTFMax]byte
		targets[i] = dead
		if t := s.AdvanceBytes(buf[:utf8.EncodeRune(buf[:], cuts[i])]); t != nil {
			targets[i] = t
		}
	}
	if targets[i] == dead {
		return nil
	}
	return targets[i]
}

func (s *State) computeLoopClass() []rng {
	cuts := s.cuts()
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

// seqLen is the length of the UTF-8 sequence that lead starts, 0 when no
// valid one starts with it.
func seqLen(lead byte) int {
	switch {
	case lead < 0x80:
		return 1
	case lead >= 0xC2 && lead <= 0xDF:
		return 2
	case lead >= 0xE0 && lead <= 0xEF:
		return 3
	case lead >= 0xF0 && lead <= 0xF4:
		return 4
	}
	return 0
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
	inside []uint64    // tokens whose pieces are code points of the class only
	exits  []exitGroup // all of them, by seq
	// The same by trie node: inside's tokens in depth-first order of the
	// nodes their pieces end at (ordered, ascending); the exits by the
	// node their seq starts from (exitFrom, ascending); and the nodes
	// reached by class code points only (a bitset).
	ordered, orderedNode []int32
	exitFrom             []int32
	exitAt               []exitAt
	allInside            []uint64
}

type exitAt struct {
	group int32 // in exits
	exitNode
}

// exitGroup is where pieces leave the class with the same bytes: after a
// prefix of class code points, seq (a code point outside the class, an
// invalid sequence, or the start of a code point a piece ends in).
type exitGroup struct {
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

// loopTokens is classTokensFor s's loop class, kept in s.
func (v *Vocab) loopTokens(s *State) *classTokens {
	if s.loopTok != nil && s.loopTok.v == v {
		return s.loopTok.ct
	}
	ct := v.classTokensFor(s.loopClass(), s.c.work)
	if s.c.work.Err() == nil {
		s.loopTok = &stateTokens{v, ct}
	}
	return ct
}

type stateTokens struct {
	v  *Vocab
	ct *classTokens
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
		ct: &classTokens{inside: make([]uint64, (v.size+63)/64), allInside: make([]uint64, (len(v.nodes)+63)/64)}}
	b.inside(0)
	if w.Err() != nil {
		return nil
	}
	ct = b.ct
	sort.Stable(byFrom{ct})
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
	v.classes[key] = ct
	return ct
}

type byFrom struct{ ct *classTokens }

func (x byFrom) Len() int           { return len(x.ct.exitFrom) }
func (x byFrom) Less(i, j int) bool { return x.ct.exitFrom[i] < x.ct.exitFrom[j] }
func (x byFrom) Swap(i, j int) {
	x.ct.exitFrom[i], x.ct.exitFrom[j] = x.ct.exitFrom[j], x.ct.exitFrom[i]
	x.ct.exitAt[i], x.ct.exitAt[j] = x.ct.exitAt[j], x.ct.exitAt[i]
}

type classBuilder struct {
	v      *Vocab
	class  []rng
	w      *Work
	ct     *classTokens
	groups map[string]int // seq -> index in ct.exits
}

// exit records that seq leads from node from (reached by class code
// points) to node.
func (b *classBuilder) exit(seq []byte, from, node int32, tokensOnly bool) {
	k, ok := b.groups[string(seq)]
	if !ok {
		k = len(b.ct.exits)
		b.groups[string(seq)] = k
		b.ct.exits = append(b.ct.exits, exitGroup{seq: slices.Clone(seq)})
	}
	x := exitNode{node, tokensOnly}
	b.ct.exits[k].nodes = append(b.ct.exits[k].nodes, x)
	b.ct.exitFrom = append(b.ct.exitFrom, from)
	b.ct.exitAt = append(b.ct.exitAt, exitAt{int32(k), x})
}

// inside visits node n, reached by class code points only.
func (b *classBuilder) inside(n int32) {
	node := &b.v.nodes[n]
	b.ct.allInside[n/64] |= 1 << (n % 64)
	for _, id := range node.tokens {
		b.ct.inside[id/64] |= 1 << (id % 64)
		b.ct.ordered = append(b.ct.ordered, id)
		b.ct.orderedNode = append(b.ct.orderedNode, n)
	}
	var seq [utf8.UTFMax]byte
	for _, e := range node.kids {
		if !b.w.charge(1) {
			return
		}
		seq[0] = e.b
		b.codePoint(seq[:1], n, e.node)
	}
}

// codePoint continues the code point seq (its bytes so far, from node
// from) at node n. Bytes no state accepts at that position (a
// continuation byte or an invalid lead byte starting a code point, any
// other byte inside one) lead nowhere: the trie walk rejects them
// whatever the state.
func (b *classBuilder) codePoint(seq []byte, from, n int32) {
	length := seqLen(seq[0])
	if length == 0 {
		return
	}
	if len(seq) < length {
		if len(b.v.nodes[n].tokens) > 0 {
			b.exit(seq, from, n, true)
		}
		for _, e := range b.v.nodes[n].kids {
			if !b.w.charge(1) {
				return
			}
			if e.b&0xC0 == 0x80 {
				b.codePoint(append(seq, e.b), from, e.node)
			}
		}
		return
	}
	if c, size := utf8.DecodeRune(seq); size == length && inClass(b.class, c) { // an invalid sequence decodes one byte
		b.inside(n)
		return
	}
	b.exit(seq, from, n, false)
}

// maskByClass sets in bits the tokens Allow allows from s and reports
// whether the budget cut some. A state with a loop class takes its class
// tokens; otherwise the trie is walked from the first code point of the
// pieces (probed once per interval of code points the state's classes
// treat alike), and a node reached by class code points in a state that
// loops on the class takes that state's class tokens below the node.
func (v *Vocab) maskByClass(s *State, budget int, bits []uint64) (cut bool) {
	if class := s.loopClass(); len(class) > 0 {
		if ct := v.loopTokens(s); ct != nil {
			return v.allowClass(ct, s, budget, bits)
		}
	}
	cuts := s.cuts()
	if cuts == nil { // pieces start inside a code point, or s's classes are too fine
		return v.walk(0, s, budget, func(id int32) { bits[id/64] |= 1 << (id % 64) })
	}
	f := firstCodePoints{v: v, s: s, budget: budget, bits: bits, cuts: cuts, targets: make([]*State, len(cuts))}
	var seq [utf8.UTFMax]byte
	for _, e := range v.nodes[0].kids {
		if !s.c.work.charge(1) {
			return f.cut
		}
		seq[0] = e.b
		f.codePoint(seq[:1], e.node)
	}
	return f.cut
}

// firstCodePoints is maskByClass of a state without a loop class: the
// pieces by their first code point.
type firstCodePoints struct {
	v       *Vocab
	s       *State
	budget  int
	bits    []uint64
	cuts    []rune
	targets []*State
	cut     bool
}

func (f *firstCodePoints) allow(id int32) { f.bits[id/64] |= 1 << (id % 64) }

// codePoint continues the first code point seq of the pieces at trie
// node n. A sequence no state accepts (see classBuilder.codePoint) is
// left out, as the walk rejects it.
func (f *firstCodePoints) codePoint(seq []byte, n int32) {
	v, s := f.v, f.s
	length := seqLen(seq[0])
	if length == 0 {
		return
	}
	if len(seq) < length {
		if len(v.nodes[n].tokens) > 0 {
			if next := s.AdvanceBytes(seq); next != nil && v.allowAt(n, next, f.budget, f.allow) {
				f.cut = true
			}
		}
		for _, e := range v.nodes[n].kids {
			if !s.c.work.charge(1) {
				return
			}
			if e.b&0xC0 == 0x80 {
				f.codePoint(append(seq, e.b), e.node)
			}
		}
		return
	}
	c, size := utf8.DecodeRune(seq)
	if size != length {
		return
	}
	next := s.afterCodePoint(c, f.cuts, f.targets)
	if next == nil {
		return
	}
	if f.subtree(n, next) {
		return
	}
	if v.allowAt(n, next, f.budget, f.allow) {
		f.cut = true
	}
	f.walk(n, next)
}

// walk is Vocab.walk, taking the subtrees that loop classes cover whole.
func (f *firstCodePoints) walk(n int32, s *State) {
	v := f.v
	for _, e := range v.nodes[n].kids {
		if !s.c.work.charge(1) {
			return
		}
		next := s.Advance(e.b)
		if next == nil || f.subtree(e.node, next) {
			continue
		}
		if v.allowAt(e.node, next, f.budget, f.allow) {
			f.cut = true
		}
		f.walk(e.node, next)
	}
}

// subtree allows the tokens of node n's subtree, reached in state s, when
// s loops on a class and n is reached from the root by code points of the
// class: the pieces that stay in it lead back to s, the others are walked
// from where they leave it. It reports whether it did.
func (f *firstCodePoints) subtree(n int32, s *State) bool {
	if s.need > 0 || len(s.loopClass()) == 0 {
		return false
	}
	v := f.v
	ct := v.loopTokens(s)
	if ct == nil || ct.allInside[n/64]&(1<<(n%64)) == 0 {
		return false
	}
	w := s.c.work
	lo, hi := n, v.end[n]
	i, _ := slices.BinarySearch(ct.orderedNode, lo)
	j, _ := slices.BinarySearch(ct.orderedNode, hi)
	if i < j {
		if budget := f.budget; budget > 0 && s.Remaining() > budget-1 {
			f.cut = true
		} else {
			if !w.charge((j - i) / 16) {
				return true
			}
			for _, id := range ct.ordered[i:j] {
				f.allow(id)
			}
		}
	}
	i, _ = slices.BinarySearch(ct.exitFrom, lo)
	j, _ = slices.BinarySearch(ct.exitFrom, hi)
	for _, x := range ct.exitAt[i:j] {
		if !w.charge(1) {
			return true
		}
		next := s.AdvanceBytes(ct.exits[x.group].seq)
		if next == nil {
			continue
		}
		if v.allowAt(x.node, next, f.budget, f.allow) {
			f.cut = true
		}
		if !x.tokensOnly {
			f.walk(x.node, next)
		}
	}
	return true
}

// allowClass allows from s, a state that loops on ct's class, the tokens
// made of the class's code points (they lead back to s), and walks the
// exits from s.
func (v *Vocab) allowClass(ct *classTokens, s *State, budget int, bits []uint64) (cut bool) {
	w := s.c.work
	switch {
	case len(ct.ordered) == 0:
	case budget > 0 && s.Remaining() > budget-1:
		cut = true
	default:
		if !w.charge(len(bits) / 16) {
			return cut
		}
		for i, x := range ct.inside {
			bits[i] |= x
		}
	}
	allow := func(id int32) { bits[id/64] |= 1 << (id % 64) }
	for _, g := range ct.exits {
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
