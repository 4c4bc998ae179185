package grammar

import (
	"encoding/binary"
	"slices"
	"sort"
	"unicode/utf8"
)

// frame points at the next symbol of a rule's alternative.
type frame struct {
	rule, alt, idx int32
	set            uint64 // in a member set's rule: the members written before this alternative
}

// stack is an immutable pushdown stack: its top points at a code point
// class to match; next is what follows once the top's alternative ends.
// rem is the fewest bytes that empty it.
type stack struct {
	top  frame
	next *stack
	rem  int
	id   int32 // interned stacks: unique per Cache

	// The epoch of the last expansion (Cache.epoch) that expanded top
	// over next (seen), and that expanded the reference before top (at
	// top.idx-1) over next (refSeen): an expansion expands each once.
	seen, refSeen uint32

	// What expand resolved pairs to, once computed: top over next
	// (inner), top.idx+1 over next (succ), and the alternatives of the
	// reference before top over this stack (kids).
	inner, succ *stack
	kids        *[]resolved
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

	// States are interned in a Cache (Cache.Start): they share equal
	// stacks and are unique per Cache, so transitions and Remaining are
	// computed once.
	c       *Cache
	next    transitions     // computed so far; dead for a rejected byte
	rem     int             // Remaining, once computed (-1 before)
	loop    *[]rng          // loopClass, once computed
	loopTok *stateTokens    // Vocab.loopTokens, once computed
	runes   map[rune]*State // afterRune's multi-byte code points so far; dead for a rejected one
	mayLoop int8            // mayLoopOn's answer once computed: 1 yes, -1 no, 0 before

	// Between code points: the intervals of code points s's classes treat
	// alike (cuts, once computed; nil when too fine) and the state after
	// each (nil before probed, dead for rejected), so that the code points
	// of an interval share one transition.
	cutsDone bool
	cutList  []rune
	cutTo    []*State
}

// dead marks a rejected transition in State.next.
var dead = &State{}

// Cache interns a grammar's states, so that each state's transitions,
// shortest completion and anything a caller keys by the state (a token
// mask) are computed once. Operations on its states charge the Work it
// is bound to (Bind). A Cache is not safe for concurrent use: use one per
// generated sequence, or guard it.
type Cache struct {
	g      *Grammar
	stacks map[stackKey]*stack
	states map[string]*State
	masks  map[*State]maskEntry // Vocab.Mask's
	start  *State
	held   int // stacks held by states, summed
	work   *Work

	// The (frame, rest) pairs with a tail reference on top that a large
	// expansion has expanded: those stamped with the current expansion's
	// epoch. One map for all expansions, so that none makes and grows its
	// own. Other pairs are stamped on their stacks (stack.seen).
	expanded map[stackKey]uint32
	epoch    uint32 // the last expansion's

	scratch []*stack // the stacks complete collects, reused
}

// stackKey is a frame over the stack with id next (0: none), packed
// without padding so that a map hashes it in one pass.
type stackKey struct {
	rule, alt, idx, next int32
	set                  uint64
}

func keyOf(top frame, next *stack) stackKey {
	k := stackKey{rule: top.rule, alt: top.alt, idx: top.idx, set: top.set}
	if next != nil {
		k.next = next.id
	}
	return k
}

// NewCache returns an empty cache of g's states, bound to a Work without
// a limit.
func (g *Grammar) NewCache() *Cache {
	return &Cache{g: g, stacks: map[stackKey]*stack{}, states: map[string]*State{}, work: &Work{}}
}

// Bind makes w the Work that later operations on the cache's states
// charge; nil binds a fresh Work without a limit.
func (c *Cache) Bind(w *Work) {
	if w == nil {
		w = &Work{}
	}
	c.work = w
}

// Len is the number of states the cache holds.
func (c *Cache) Len() int { return len(c.states) }

// Size is the number of stacks the cache's states hold, summed: a
// measure of its memory.
func (c *Cache) Size() int { return c.held + len(c.stacks) }

// Start is the interned state before any byte. It charges no Work: Parse
// has checked that it is within MaxStacks.
func (c *Cache) Start() *State {
	if c.start == nil {
		w := c.work
		c.work = &Work{}
		c.start, _ = c.startState()
		c.work = w
	}
	return c.start
}

// startState computes the state before any byte under the bound Work.
func (c *Cache) startState() (*State, error) {
	s := &State{g: c.g}
	e := c.newExpansion()
	for a := range c.g.rules[0] {
		if c.g.takes(0, a, 0) {
			e.expand(frame{0, int32(a), 0, 0}, nil)
		}
	}
	if err := c.work.Err(); err != nil {
		return nil, err
	}
	s.stacks = e.out
	return c.intern(s), nil
}

// newStack returns the interned stack top over next.
func (c *Cache) newStack(top frame, next *stack) *stack {
	key := keyOf(top, next)
	if st, ok := c.stacks[key]; ok {
		return st
	}
	rem := c.g.suffixLen(top)
	if next != nil {
		rem += next.rem
	}
	st := &stack{top: top, next: next, rem: rem, id: int32(len(c.stacks) + 1)}
	c.stacks[key] = st
	return st
}

// intern returns the cache's state equal to s.
func (c *Cache) intern(s *State) *State {
	c.work.charge(len(s.stacks))
	var keyBuf [4*64 + 16]byte
	var idBuf [64]int32
	key, ids := keyBuf[:0], idBuf[:0]
	for _, st := range s.stacks {
		if st != nil {
			ids = append(ids, st.id)
		} else {
			ids = append(ids, 0)
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
	s.stacks = slices.Clone(s.stacks) // complete's are in the cache's scratch
	c.states[string(key)] = s
	c.held += len(s.stacks)
	return s
}

// Cache is the cache s is interned in; the states Advance returns are in
// it too.
func (s *State) Cache() *Cache { return s.c }

// Start is the state before any byte, in a cache of its own.
func (g *Grammar) Start() *State { return g.NewCache().Start() }

// suffixLen is the fewest bytes the rest of f's alternative expands to.
func (g *Grammar) suffixLen(f frame) int {
	if g.members[f.rule] != nil {
		return g.frameLen(f)
	}
	return g.partLen(int(f.rule), int(f.alt), int(f.idx), len(g.rules[f.rule][f.alt]))
}

// expansion collects the stacks that frames reach without consuming input
// (references replaced by their alternatives, ended alternatives popped):
// stacks whose top is a class, and nil for an emptied stack. Each (frame,
// rest) pair is expanded once, so chains of nullable rules cost their
// size, not the number of ways through them.
type expansion struct {
	c       *Cache
	epoch   uint32 // stamped on the stacks it has expanded
	out     []*stack
	outHint int                     // the capacity out starts with
	emptied bool                    // nil is in out
	small   [maxSmallTails]stackKey // the tail-reference pairs expanded, while few
	nSmall  int
	big     bool // many: those pairs stamped in c.expanded
}

// newExpansion starts an expansion with an epoch of its own.
func (c *Cache) newExpansion() expansion {
	if c.epoch++; c.epoch == 0 { // wrapped: old stamps would read as current
		for _, st := range c.stacks {
			st.seen, st.refSeen = 0, 0
		}
		clear(c.expanded)
		c.epoch = 1
	}
	return expansion{c: c, epoch: c.epoch}
}

// firstTail records the pair k (a tail reference over a stack) and
// reports whether it is new.
func (e *expansion) firstTail(k stackKey) bool {
	c := e.c
	if e.big {
		if c.expanded[k] == e.epoch {
			return false
		}
		c.expanded[k] = e.epoch
		return true
	}
	small := e.small[:e.nSmall]
	if slices.Contains(small, k) {
		return false
	}
	if e.nSmall < maxSmallTails {
		e.small[e.nSmall] = k
		e.nSmall++
		return true
	}
	if c.expanded == nil || len(c.expanded) > maxExpanded {
		c.expanded = make(map[stackKey]uint32, 256)
	}
	e.big = true
	for _, s := range small {
		c.expanded[s] = e.epoch
	}
	c.expanded[k] = e.epoch
	return true
}

// maxSmallTails is how many tail-reference pairs an expansion lists
// before it stamps them in Cache.expanded.
const maxSmallTails = 16

// maxExpanded bounds Cache.expanded: past it the map is dropped before
// the next large expansion.
const maxExpanded = 1 << 16

// expand adds the stacks f on top of next reaches. It stops once the
// cache's Work has. It returns the interned stack the pair resolves to,
// for expandResolved to take it again without looking it up: for a class
// on top the stack f over next, for a reference not in tail position the
// stack under its alternatives (f.idx+1 over next); nil otherwise.
func (e *expansion) expand(f frame, next *stack) *stack {
	c := e.c
	if !c.work.charge(1) {
		return nil
	}
	a := c.g.rules[f.rule][f.alt]
	if int(f.idx) == len(a) {
		e.pop(next)
		return nil
	}
	s := a[f.idx]
	if !s.isRef() {
		st := c.newStack(f, next)
		e.addOnce(st)
		return st
	}
	if int(f.idx)+1 == len(a) { // a reference in tail position pushes nothing
		if e.firstTail(keyOf(f, next)) {
			set := c.g.childSet(f, s.ref, true)
			for k := range c.g.rules[s.ref] {
				if c.g.takes(s.ref, k, set) {
					e.expand(frame{int32(s.ref), int32(k), 0, set}, next)
				}
			}
		}
		return nil
	}
	cont := c.newStack(frame{f.rule, f.alt, f.idx + 1, f.set}, next)
	e.expandUnder(cont)
	return cont
}

// expandResolved is expand of a pair whose frame's index is idx and that
// expand resolved to r before.
func (e *expansion) expandResolved(idx int32, r *stack) {
	if !e.c.work.charge(1) {
		return
	}
	if r.top.idx == idx {
		e.addOnce(r)
		return
	}
	e.expandUnder(r)
}

// pop expands the pair next's frames continue with once an alternative
// above them ends (nil next: the stack is emptied).
func (e *expansion) pop(next *stack) {
	switch {
	case next == nil:
		if !e.emptied {
			e.emptied = true
			e.add(nil)
		}
	case next.inner != nil:
		e.expandResolved(next.top.idx, next.inner)
	default:
		next.inner = e.expand(next.top, next.next)
	}
}

// after expands the pair st's top continues with once its class is
// matched.
func (e *expansion) after(st *stack) {
	if st.succ != nil {
		e.expandResolved(st.top.idx+1, st.succ)
		return
	}
	f := st.top
	f.idx++
	st.succ = e.expand(f, st.next)
}

// expandUnder expands the alternatives of the reference just below
// cont's top (not in tail position) over cont, once per expansion.
func (e *expansion) expandUnder(cont *stack) {
	if cont.refSeen == e.epoch {
		return
	}
	cont.refSeen = e.epoch
	if cont.kids != nil {
		for _, k := range *cont.kids {
			if k.r != nil {
				e.expandResolved(0, k.r)
			} else {
				e.expand(frame{k.rule, k.alt, 0, k.set}, cont)
			}
		}
		return
	}
	c := e.c
	f := cont.top
	f.idx--
	ref := c.g.rules[f.rule][f.alt][f.idx].ref
	set := c.g.childSet(f, ref, false)
	kids := []resolved{}
	for k := range c.g.rules[ref] {
		if c.g.takes(ref, k, set) {
			kf := frame{int32(ref), int32(k), 0, set}
			kids = append(kids, resolved{rule: kf.rule, alt: kf.alt, set: set, r: e.expand(kf, cont)})
		}
	}
	cont.kids = &kids
}

// resolved is an alternative a reference expands to, and the stack expand
// resolved it to over the reference's continuation (nil: none).
type resolved struct {
	rule, alt int32
	set       uint64
	r         *stack
}

// addOnce adds st unless the expansion has.
func (e *expansion) addOnce(st *stack) {
	if st.seen != e.epoch {
		st.seen = e.epoch
		e.add(st)
	}
}

func (e *expansion) add(s *stack) {
	if len(e.out) == MaxStacks {
		e.c.work.fail(ErrTooAmbiguous)
		return
	}
	if e.out == nil {
		e.out = make([]*stack, 0, max(e.outHint, 4))
	}
	e.out = append(e.out, s)
}

func (g *Grammar) class(f frame) sym { return g.rules[f.rule][f.alt][f.idx] }

// newTransitionCost is the Work units a transition computed for the first
// time costs beyond the stacks it examines: the new state's allocation
// and interning.
const newTransitionCost = 8

// Advance returns the state after byte b, or nil when the grammar cannot
// continue with it or the cache's Work has stopped (see Work.Err).
func (s *State) Advance(b byte) *State {
	c := s.c
	if c.work.Err() != nil {
		return nil
	}
	if n := s.next.get(b); n != nil {
		if n == dead {
			return nil
		}
		return n
	}
	interval := -1
	if s.need == 0 && b < utf8.RuneSelf {
		var t *State
		if t, interval = s.sameAs(rune(b)); t != nil {
			s.next.set(b, t)
			if t == dead {
				return nil
			}
			return t
		}
	}
	c.work.charge(newTransitionCost)
	n := s.advance(b)
	if c.work.Err() != nil { // stopped part way: keep nothing
		return nil
	}
	if n == nil {
		s.next.set(b, dead)
		s.keepInterval(interval, dead)
		return nil
	}
	n = c.intern(n)
	s.next.set(b, n)
	s.keepInterval(interval, n)
	return n
}

// sameAs is the state after code point c when a code point of its
// interval (s.cuts()) has been taken before (dead: rejected; one Work
// unit), else nil and the interval's index (-1: s has no intervals). s
// must be between code points.
func (s *State) sameAs(c rune) (*State, int) {
	if !s.cutsDone {
		s.cutList, s.cutsDone = s.cuts(), true
		if s.cutList != nil {
			s.cutTo = make([]*State, len(s.cutList))
		}
	}
	if s.cutList == nil {
		return nil, -1
	}
	i := sort.Search(len(s.cutList), func(i int) bool { return s.cutList[i] > c }) - 1
	if i < 0 || i+1 >= len(s.cutList) {
		return nil, -1
	}
	if t := s.cutTo[i]; t != nil {
		s.c.work.charge(1)
		return t, i
	}
	return nil, i
}

// keepInterval records t as the state after every code point of
// interval i of s.cuts() (i < 0: none).
func (s *State) keepInterval(i int, t *State) {
	if i >= 0 {
		s.cutTo[i] = t
	}
}

// afterRune is the state after code point c, as AdvanceBytes of its
// UTF-8 returns it (nil: rejected), without making the states inside a
// multi-byte code point. s must be between code points (need 0).
func (s *State) afterRune(c rune) *State {
	if c < utf8.RuneSelf {
		return s.Advance(byte(c))
	}
	cc := s.c
	if cc.work.Err() != nil || !utf8.ValidRune(c) {
		return nil
	}
	if n, ok := s.runes[c]; ok {
		if n == dead {
			return nil
		}
		return n
	}
	t, interval := s.sameAs(c)
	if t != nil {
		if t == dead {
			return nil
		}
		return t
	}
	cc.work.charge(newTransitionCost + len(s.stacks))
	n := s.complete(c)
	if cc.work.Err() != nil {
		return nil
	}
	if s.runes == nil {
		s.runes = map[rune]*State{}
	}
	if n == nil {
		s.runes[c] = dead
		s.keepInterval(interval, dead)
		return nil
	}
	n = cc.intern(n)
	s.runes[c] = n
	s.keepInterval(interval, n)
	return n
}

// mayLoopOnSome reports whether some code point could take s back to
// itself, by a test that makes no state: a code point remakes every
// stack of s or none loops, and a stack whose top is past the start of
// its alternative is remade only from a stack of s over the same rest
// whose top is earlier in the same alternative (advanced), from the
// rests of the stacks of s (returned to), or afresh when the symbols
// before its top all expand to nothing. A state inside a literal (a
// listed property name) fails it at once, where probing each code point
// would make a state per probe.
func (s *State) mayLoopOnSome() bool {
	if s.mayLoop != 0 {
		return s.mayLoop > 0
	}
	may := s.need == 0 && s.computeMayLoop()
	s.mayLoop = -1
	if may {
		s.mayLoop = 1
	}
	return may
}

func (s *State) computeMayLoop() bool {
	var rests map[*stack]bool
	for _, st := range s.stacks {
		if st == nil || st.top.idx == 0 || s.g.partLen(int(st.top.rule), int(st.top.alt), 0, int(st.top.idx)) == 0 {
			continue
		}
		advanced := false
		for _, o := range s.stacks {
			if o != nil && o.next == st.next && o.top.rule == st.top.rule && o.top.alt == st.top.alt && o.top.idx < st.top.idx {
				advanced = true
				break
			}
		}
		if advanced {
			continue
		}
		if rests == nil {
			rests = map[*stack]bool{}
			for _, o := range s.stacks {
				for r := o; r != nil; r = r.next {
					if r != o {
						if rests[r] {
							break
						}
						rests[r] = true
					}
				}
			}
		}
		if !rests[st] {
			return false
		}
	}
	return true
}

// transitions maps bytes to states: a short list while few bytes have
// been tried (most states see a handful), a table of 256 once many.
type transitions struct {
	bytes  []byte
	states []*State
	table  *[256]*State
}

// maxListed is how many transitions a list holds before it becomes a
// table.
const maxListed = 8

func (t *transitions) get(b byte) *State {
	if t.table != nil {
		return t.table[b]
	}
	for i, x := range t.bytes {
		if x == b {
			return t.states[i]
		}
	}
	return nil
}

func (t *transitions) set(b byte, n *State) {
	if t.table == nil && len(t.bytes) < maxListed {
		t.bytes, t.states = append(t.bytes, b), append(t.states, n)
		return
	}
	if t.table == nil {
		t.table = new([256]*State)
		for i, x := range t.bytes {
			t.table[x] = t.states[i]
		}
		t.bytes, t.states = nil, nil
	}
	t.table[b] = n
}

func (s *State) advance(b byte) *State {
	if !s.c.work.charge(len(s.stacks)) {
		return nil
	}
	if s.need == 0 && b < utf8.RuneSelf {
		return s.complete(rune(b))
	}
	n := &State{g: s.g, rem: -1}
	if s.need == 0 {
		length := seqLen(b)
		switch length {
		case 2:
			n.cp, n.lo, n.hi = rune(b&0x1F), 0x80, 0x7FF
		case 3:
			n.cp, n.lo, n.hi = rune(b&0x0F), 0x800, 0xFFFF
		case 4:
			n.cp, n.lo, n.hi = rune(b&0x07), 0x10000, 0x10FFFF
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

// partialRemaining is, for seq the first bytes of a code point (fewer
// than its UTF-8 length), what AdvanceBytes(seq).Remaining() is, without
// making the state: ok false when AdvanceBytes would return nil. s must
// be between code points (need 0); the Work is charged as advance
// charges it.
func (s *State) partialRemaining(seq []byte) (rem int, ok bool) {
	if s.need > 0 || len(seq) == 0 || len(seq) >= seqLen(seq[0]) || !s.c.work.charge(len(s.stacks)*len(seq)) {
		return 0, false
	}
	var cp, lo, hi rune
	need := seqLen(seq[0]) - 1
	switch need {
	case 1:
		cp, lo, hi = rune(seq[0]&0x1F), 0x80, 0x7FF
	case 2:
		cp, lo, hi = rune(seq[0]&0x0F), 0x800, 0xFFFF
	case 3:
		cp, lo, hi = rune(seq[0]&0x07), 0x10000, 0x10FFFF
	}
	for i := 0; ; i++ {
		if i > 0 {
			if seq[i]&0xC0 != 0x80 {
				return 0, false
			}
			need, cp = need-1, cp<<6|rune(seq[i]&0x3F)
		}
		shift := uint(6 * need)
		lo, hi = max(lo, cp<<shift), min(hi, cp<<shift|(1<<shift-1))
		if lo <= 0xDFFF && hi >= 0xD800 {
			if lo >= 0xD800 {
				lo = 0xE000
			} else {
				hi = 0xD7FF
			}
		}
		if lo > hi {
			return 0, false
		}
		if i == len(seq)-1 {
			break
		}
	}
	best := -1
	for _, st := range s.stacks {
		if st == nil {
			continue
		}
		class := s.g.class(st.top)
		if !class.admitsRange(lo, hi) {
			continue
		}
		r := max(st.rem+need-class.minBytes(), need)
		if best < 0 || r < best {
			best = r
		}
	}
	return best, best >= 0
}

// complete is the state after code point c (nil: rejected). A rejection
// allocates nothing: masks try many bytes that states reject.
//
// The state's stacks are in the cache's scratch until it is interned:
// a state found interned already allocates no stacks.
func (s *State) complete(c rune) *State {
	e := s.c.newExpansion()
	e.out, e.outHint = s.c.scratch[:0], len(s.stacks)
	for _, st := range s.stacks {
		if st == nil || !s.g.class(st.top).matches(c) {
			continue
		}
		e.after(st)
	}
	s.c.scratch = e.out[:0]
	if len(e.out) == 0 {
		return nil
	}
	return &State{g: s.g, rem: -1, stacks: e.out}
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
