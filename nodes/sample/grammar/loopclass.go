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
		targets[i] = dead
		if t := s.afterRune(cuts[i]); t != nil {
			targets[i] = t
		}
	}
	if targets[i] == dead {
		return nil
	}
	return targets[i]
}

func (s *State) computeLoopClass() []rng {
	if !s.mayLoopOnSome() {
		return nil
	}
	cuts := s.cuts()
	var class []rng
	for i := 0; i+1 < len(cuts); i++ {
		lo, hi := cuts[i], cuts[i+1]-1
		if lo >= 0xD800 && lo <= 0xDFFF {
			continue
		}
		if s.afterRune(lo) != s {
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
	// By length in code points (for chains of states, chain.go): the
	// code points of each piece of ordered (while it is built); inside's
	// tokens by length (byLen[lenStart[L]:lenStart[L+1]] have L code
	// points); the most code points a piece of ordered or an exit's
	// class prefix has.
	orderedLen []uint16
	byLen      []int32
	lenStart   []int32
	maxLen     int
	// The first code point of each piece of ordered, and of the path to
	// each exitFrom node (-1 for the root): both ascending, as the nodes
	// are in depth-first order, which is the byte order of the pieces.
	orderedFirst, exitFirst []rune
}

type exitAt struct {
	group int32 // in exits
	exitNode
	depth int32 // the class code points before the group's seq
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
	b.inside(0, -1, 0)
	if w.Err() != nil {
		return nil
	}
	ct = b.ct
	sort.Stable(byFrom{ct})
	ct.sortByLen()
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
	x.ct.exitFirst[i], x.ct.exitFirst[j] = x.ct.exitFirst[j], x.ct.exitFirst[i]
}

type classBuilder struct {
	v      *Vocab
	class  []rng
	w      *Work
	ct     *classTokens
	groups map[string]int // seq -> index in ct.exits
}

// exit records that seq leads from node from (reached by depth class
// code points, the first of them first; -1 for the root) to node.
func (b *classBuilder) exit(seq []byte, from int32, first rune, node int32, tokensOnly bool, depth int32) {
	k, ok := b.groups[string(seq)]
	if !ok {
		k = len(b.ct.exits)
		b.groups[string(seq)] = k
		b.ct.exits = append(b.ct.exits, exitGroup{seq: slices.Clone(seq)})
	}
	x := exitNode{node, tokensOnly}
	b.ct.exits[k].nodes = append(b.ct.exits[k].nodes, x)
	b.ct.exitFrom = append(b.ct.exitFrom, from)
	b.ct.exitFirst = append(b.ct.exitFirst, first)
	b.ct.exitAt = append(b.ct.exitAt, exitAt{int32(k), x, depth})
	b.ct.maxLen = max(b.ct.maxLen, int(depth))
}

// inside visits node n, reached by depth class code points only, the
// first of them first (-1 for the root).
func (b *classBuilder) inside(n int32, first rune, depth int32) {
	node := &b.v.nodes[n]
	b.ct.allInside[n/64] |= 1 << (n % 64)
	for _, id := range node.tokens {
		b.ct.inside[id/64] |= 1 << (id % 64)
		b.ct.ordered = append(b.ct.ordered, id)
		b.ct.orderedNode = append(b.ct.orderedNode, n)
		b.ct.orderedFirst = append(b.ct.orderedFirst, first)
		b.ct.orderedLen = append(b.ct.orderedLen, uint16(min(depth, 1<<16-1)))
	}
	b.ct.maxLen = max(b.ct.maxLen, int(depth))
	var seq [utf8.UTFMax]byte
	for _, e := range node.kids {
		if !b.w.charge(1) {
			return
		}
		seq[0] = e.b
		b.codePoint(seq[:1], n, first, e.node, depth)
	}
}

// codePoint continues the code point seq (its bytes so far, from node
// from) at node n. Bytes no state accepts at that position (a
// continuation byte or an invalid lead byte starting a code point, any
// other byte inside one) lead nowhere: the trie walk rejects them
// whatever the state.
func (b *classBuilder) codePoint(seq []byte, from int32, first rune, n int32, depth int32) {
	length := seqLen(seq[0])
	if length == 0 {
		return
	}
	if len(seq) < length {
		if len(b.v.nodes[n].tokens) > 0 {
			b.exit(seq, from, first, n, true, depth)
		}
		for _, e := range b.v.nodes[n].kids {
			if !b.w.charge(1) {
				return
			}
			if e.b&0xC0 == 0x80 {
				b.codePoint(append(seq, e.b), from, first, e.node, depth)
			}
		}
		return
	}
	if c, size := utf8.DecodeRune(seq); size == length && inClass(b.class, c) { // an invalid sequence decodes one byte
		if first < 0 {
			first = c
		}
		b.inside(n, first, depth+1)
		return
	}
	b.exit(seq, from, first, n, false, depth)
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
	if ok, cut := v.maskByChain(s, cuts, budget, bits); ok {
		return cut
	}
	f := firstCodePoints{v: v, s: s, budget: budget, bits: bits, cuts: cuts, targets: make([]*State, len(cuts)), admit: make([]int8, len(cuts))}
	f.bulk()
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
	covered []rng  // first code points bulk has taken (sorted, disjoint)
	admit   []int8 // per interval of cuts: 1 when some stack admits it, -1 when none, 0 before asked
}

// admits reports whether some stack of s admits a code point in [lo, hi]
// (asking each interval of cuts it meets once).
func (f *firstCodePoints) admits(lo, hi rune) bool {
	cuts := f.cuts
	k := sort.Search(len(cuts), func(i int) bool { return cuts[i] > lo }) - 1
	for ; k >= 0 && k+1 < len(cuts) && cuts[k] <= hi; k++ {
		if f.admit[k] == 0 {
			f.admit[k] = -1
			for _, st := range f.s.stacks {
				if st != nil && f.s.g.class(st.top).matches(cuts[k]) {
					f.admit[k] = 1
					break
				}
			}
		}
		if f.admit[k] > 0 {
			return true
		}
	}
	return false
}

// prefixRange is the code points whose UTF-8 sequence of length bytes
// starts with seq (the ones not valid UTF-8 included).
func prefixRange(seq []byte, length int) (lo, hi rune) {
	c := rune(seq[0] & (0x7F >> length))
	for _, b := range seq[1:] {
		c = c<<6 | rune(b&0x3F)
	}
	shift := 6 * (length - len(seq))
	return c << shift, c<<shift | (1<<shift - 1)
}

// classSpan is the pieces whose first code point is in [lo, hi], a
// range of the loop class of t, the state that code point leads to.
type classSpan struct {
	t      *State
	ct     *classTokens
	lo, hi rune
}

// bulk takes the pieces whose first code point leads to a state that
// loops on a class holding it: those made of the class's code points
// lead to that state (their tokens are taken by ranges of the class's
// ordered tokens, or as a copy of its bitset when one class holds most
// of them), the others are walked from where they leave the class. It
// records the code points taken in f.covered; codePoint skips them.
func (f *firstCodePoints) bulk() {
	s, v := f.s, f.v
	var spans []classSpan
	for k := 0; k+1 < len(f.cuts); k++ {
		lo, hi := f.cuts[k], f.cuts[k+1]-1
		if lo >= 0xD800 && lo <= 0xDFFF {
			continue
		}
		t := s.afterCodePoint(lo, f.cuts, f.targets)
		if t == nil || t.need > 0 {
			continue
		}
		// Most targets (after the first letter of a listed name) do not
		// loop: one transition tells, where the loop class probes every
		// interval. A target looping on part of the interval only is left
		// to the walk.
		if !t.mayLoopOnSome() || t.afterRune(lo) != t {
			continue
		}
		class := t.loopClass()
		if len(class) == 0 {
			continue
		}
		ct := v.loopTokens(t)
		if ct == nil {
			continue
		}
		for _, r := range class {
			if a, b := max(r.lo, lo), min(r.hi, hi); a <= b {
				spans = append(spans, classSpan{t, ct, a, b})
			}
		}
	}
	if len(spans) == 0 || s.c.work.Err() != nil {
		return
	}
	w := s.c.work
	// The class most pieces are taken from may be copied whole, then the
	// tokens of the ranges not taken cleared; it goes first, while bits
	// is empty.
	taken := map[*classTokens]int{}
	best := spans[0].ct
	for _, sp := range spans {
		i, j := sp.ct.firstRange(sp.lo, sp.hi)
		if taken[sp.ct] += j - i; taken[sp.ct] > taken[best] {
			best = sp.ct
		}
	}
	copied := false
	if n := taken[best]; n > len(best.ordered)/2 && !f.cutBy(spans, best) {
		if !w.charge(len(f.bits)/16 + (len(best.ordered)-n)/16) {
			return
		}
		copy(f.bits, best.inside)
		prev := 0
		for _, sp := range spans { // spans are in code point order
			if sp.ct != best {
				continue
			}
			i, j := best.firstRange(sp.lo, sp.hi)
			f.clear(best.ordered[prev:i])
			prev = j
		}
		f.clear(best.ordered[prev:])
		copied = true
	}
	for _, sp := range spans {
		i, j := sp.ct.firstRange(sp.lo, sp.hi)
		switch {
		case i == j || copied && sp.ct == best:
		case f.budget > 0 && sp.t.Remaining() > f.budget-1:
			f.cut = true
		default:
			if !w.charge((j - i) / 16) {
				return
			}
			for _, id := range sp.ct.ordered[i:j] {
				f.allow(id)
			}
		}
		i, _ = slices.BinarySearch(sp.ct.exitFirst, sp.lo)
		j, _ = slices.BinarySearch(sp.ct.exitFirst, sp.hi+1)
		if !f.exits(sp.ct, sp.ct.exitAt[i:j], sp.t) {
			return
		}
		if n := len(f.covered); n > 0 && f.covered[n-1].hi+1 == sp.lo {
			f.covered[n-1].hi = sp.hi
		} else {
			f.covered = append(f.covered, rng{sp.lo, sp.hi})
		}
	}
}

// cutBy reports whether the budget cuts the tokens of some span of ct.
func (f *firstCodePoints) cutBy(spans []classSpan, ct *classTokens) bool {
	if f.budget <= 0 {
		return false
	}
	for _, sp := range spans {
		if sp.ct == ct && sp.t.Remaining() > f.budget-1 {
			return true
		}
	}
	return false
}

func (f *firstCodePoints) clear(ids []int32) {
	for _, id := range ids {
		f.bits[id/64] &^= 1 << (id % 64)
	}
}

// firstRange is the range of ct.ordered whose pieces start with a code
// point in [lo, hi].
func (ct *classTokens) firstRange(lo, hi rune) (i, j int) {
	i, _ = slices.BinarySearch(ct.orderedFirst, lo)
	j, _ = slices.BinarySearch(ct.orderedFirst, hi+1)
	return i, j
}

// coveredPrefix reports whether every code point that seq, the first
// bytes of a sequence of length bytes, can become has been taken by bulk.
func (f *firstCodePoints) coveredPrefix(seq []byte, length int) bool {
	if len(f.covered) == 0 {
		return false
	}
	cp := rune(seq[0] & (0xFF >> (length + 1)))
	for _, b := range seq[1:] {
		cp = cp<<6 | rune(b&0x3F)
	}
	rest := uint(6 * (length - len(seq)))
	lo := max(cp<<rest, [...]rune{0, 0, 0x80, 0x800, 0x10000}[length])
	hi := min(cp<<rest|(1<<rest-1), [...]rune{0, 0x7F, 0x7FF, 0xFFFF, utf8.MaxRune}[length])
	if lo > hi {
		return false
	}
	k := sort.Search(len(f.covered), func(i int) bool { return f.covered[i].hi >= lo })
	return k < len(f.covered) && f.covered[k].lo <= lo && f.covered[k].hi >= hi
}

// partial allows the tokens of node n, whose pieces are seq, the start of
// a code point cut short, as allowAt would from s.AdvanceBytes(seq),
// without making that state.
func (f *firstCodePoints) partial(seq []byte, n int32) {
	if f.v.allowPartialAt(n, f.s, seq, f.budget, f.allow) {
		f.cut = true
	}
}

// partials allows the tokens of node n's subtree whose pieces end inside
// their first code point, every code point of which bulk has taken: s
// admits them all, so without a budget no stack need be asked.
func (f *firstCodePoints) partials(n int32) {
	v := f.v
	i, _ := slices.BinarySearchFunc(v.partials, n, func(p partialNode, n int32) int { return int(p.node - n) })
	for _, p := range v.partials[i:] {
		if p.node >= v.end[n] {
			return
		}
		if !f.s.c.work.charge(1) {
			return
		}
		if f.budget > 0 {
			f.partial(p.seq, p.node)
			continue
		}
		for _, id := range v.nodes[p.node].tokens {
			f.allow(id)
		}
	}
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
		// No piece below a prefix no stack admits is allowed, whole or
		// cut short.
		if !f.admits(prefixRange(seq, length)) {
			return
		}
		if f.coveredPrefix(seq, length) {
			f.partials(n)
			return
		}
		if len(v.nodes[n].tokens) > 0 {
			f.partial(seq, n)
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
	if size != length || inClass(f.covered, c) {
		return
	}
	next := s.afterCodePoint(c, f.cuts, f.targets)
	if next == nil {
		return
	}
	if f.subtree(n, next, c) {
		return
	}
	if v.allowAt(n, next, f.budget, f.allow) {
		f.cut = true
	}
	f.walk(n, next)
}

// walk is Vocab.walk, taking the subtrees that loop classes cover whole,
// and multi-byte code points whole (inCodePoint).
func (f *firstCodePoints) walk(n int32, s *State) {
	v := f.v
	for _, e := range v.nodes[n].kids {
		if !s.c.work.charge(1) {
			return
		}
		if e.b >= utf8.RuneSelf && s.need == 0 {
			var seq [utf8.UTFMax]byte
			seq[0] = e.b
			f.inCodePoint(s, seq[:1], e.node)
			continue
		}
		next := s.Advance(e.b)
		last := rune(-1) // the code point the path ends with, when known
		if e.b < utf8.RuneSelf {
			last = rune(e.b)
		}
		if next == nil || f.subtree(e.node, next, last) {
			continue
		}
		if v.allowAt(e.node, next, f.budget, f.allow) {
			f.cut = true
		}
		f.walk(e.node, next)
	}
}

// inCodePoint continues at node n the multi-byte code point seq (its
// bytes so far) of pieces that reach s (between code points) before it,
// as walk would byte by byte, without making the states inside the code
// point: they would be made anew for every state walked.
func (f *firstCodePoints) inCodePoint(s *State, seq []byte, n int32) {
	v := f.v
	length := seqLen(seq[0])
	if length == 0 {
		return
	}
	if len(seq) < length {
		rem, ok := s.partialRemaining(seq)
		if !ok {
			return
		}
		if len(v.nodes[n].tokens) > 0 {
			if f.budget > 0 && rem > f.budget-1 {
				f.cut = true
			} else {
				for _, id := range v.nodes[n].tokens {
					f.allow(id)
				}
			}
		}
		for _, e := range v.nodes[n].kids {
			if !s.c.work.charge(1) {
				return
			}
			if e.b&0xC0 == 0x80 {
				f.inCodePoint(s, append(seq, e.b), e.node)
			}
		}
		return
	}
	c, size := utf8.DecodeRune(seq)
	if size != length {
		return
	}
	next := s.afterRune(c)
	if next == nil || f.subtree(n, next, c) {
		return
	}
	if v.allowAt(n, next, f.budget, f.allow) {
		f.cut = true
	}
	f.walk(n, next)
}

// subtree allows the tokens of node n's subtree, reached in state s
// after code point last, when s loops on a class and n is reached from
// the root by code points of the class: the pieces that stay in it lead back to s, the others are walked
// from where they leave it. It reports whether it did.
func (f *firstCodePoints) subtree(n int32, s *State, last rune) bool {
	if s.need > 0 || !s.mayLoopOnSome() {
		return false
	}
	// The path to n ends with code point last (-1: unknown); a state
	// that does not loop on it has no loop class holding the path.
	// Probing that one transition is cheaper than computing the loop
	// class of every state walked.
	if last >= 0 {
		if s.afterRune(last) != s {
			return false
		}
	}
	if len(s.loopClass()) == 0 {
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
	f.exits(ct, ct.exitAt[i:j], s)
	return true
}

// exits walks the exits xs of ct's class from s, a state looping on it
// (their pieces' class prefixes lead to s); false when the Work stopped.
func (f *firstCodePoints) exits(ct *classTokens, xs []exitAt, s *State) bool {
	for _, x := range xs {
		if !s.c.work.charge(1) {
			return false
		}
		seq := ct.exits[x.group].seq
		if s.cutShort(seq) {
			if f.v.allowPartialAt(x.node, s, seq, f.budget, f.allow) {
				f.cut = true
			}
			continue
		}
		next := s.afterSeq(seq)
		if next == nil {
			continue
		}
		if f.v.allowAt(x.node, next, f.budget, f.allow) {
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
	f := firstCodePoints{v: v, s: s, budget: budget, bits: bits}
	defer func() { cut = cut || f.cut }()
	for _, g := range ct.exits {
		if !w.charge(1) {
			return cut
		}
		if s.cutShort(g.seq) {
			for _, x := range g.nodes {
				if !w.charge(1) {
					return cut
				}
				if v.allowPartialAt(x.node, s, g.seq, budget, f.allow) {
					cut = true
				}
			}
			continue
		}
		next := s.afterSeq(g.seq)
		if next == nil {
			continue
		}
		for _, x := range g.nodes {
			if !w.charge(1) {
				return cut
			}
			if v.allowAt(x.node, next, budget, f.allow) {
				cut = true
			}
			if !x.tokensOnly {
				f.walk(x.node, next)
			}
		}
	}
	return cut
}

// afterSeq is s.AdvanceBytes(seq) for seq a code point's bytes (or an
// invalid sequence) from s between code points, by afterRune where seq
// is one whole code point: its states inside the code point are not
// made.
func (s *State) afterSeq(seq []byte) *State {
	if c, size := utf8.DecodeRune(seq); s.need == 0 && size == len(seq) && c != utf8.RuneError {
		return s.afterRune(c)
	}
	return s.AdvanceBytes(seq)
}
