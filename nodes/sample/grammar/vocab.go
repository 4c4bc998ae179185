package grammar

import (
	"slices"
	"sort"
	"sync"
)

// Vocab is a vocabulary as a byte trie of its tokens' pieces, for
// computing which tokens a State allows. It is immutable and safe for
// concurrent use.
type Vocab struct {
	nodes []trieNode // nodes[0] is the root, in depth-first order
	end   []int32    // node n's subtree is the nodes [n, end[n])
	size  int
	// The nodes with tokens whose path is the start of a code point cut
	// short (a piece ending inside its first code point), in order.
	partials []partialNode

	mu      sync.Mutex
	classes map[string]*classTokens // by classKey of a loop class
}

type trieNode struct {
	kids   []trieEdge // by byte
	tokens []int32    // tokens whose piece ends here
}

type trieEdge struct {
	b    byte
	node int32
}

// NewVocab builds the trie of size tokens; piece returns a token's bytes,
// or nil for tokens the grammar never produces (control tokens, empty
// pieces).
func NewVocab(size int, piece func(id int32) []byte) *Vocab {
	v := &Vocab{nodes: []trieNode{{}}, size: size}
	for id := range int32(size) {
		p := piece(id)
		if len(p) == 0 {
			continue
		}
		n := 0
		for _, b := range p {
			kids := v.nodes[n].kids
			k := sort.Search(len(kids), func(i int) bool { return kids[i].b >= b })
			if k < len(kids) && kids[k].b == b {
				n = int(kids[k].node)
				continue
			}
			v.nodes = append(v.nodes, trieNode{})
			child := int32(len(v.nodes) - 1)
			kids = append(kids, trieEdge{})
			copy(kids[k+1:], kids[k:])
			kids[k] = trieEdge{b, child}
			v.nodes[n].kids = kids
			n = int(child)
		}
		v.nodes[n].tokens = append(v.nodes[n].tokens, id)
	}
	v.preorder()
	for _, e := range v.nodes[0].kids {
		v.findPartials([]byte{e.b}, e.node)
	}
	return v
}

type partialNode struct {
	node int32
	seq  []byte
}

// findPartials adds to v.partials the nodes with tokens at or below n,
// reached by seq, that end inside seq's code point.
func (v *Vocab) findPartials(seq []byte, n int32) {
	if len(seq) >= seqLen(seq[0]) {
		return
	}
	if len(v.nodes[n].tokens) > 0 {
		v.partials = append(v.partials, partialNode{n, slices.Clone(seq)})
	}
	for _, e := range v.nodes[n].kids {
		if e.b&0xC0 == 0x80 {
			v.findPartials(append(seq, e.b), e.node)
		}
	}
}

// preorder renumbers v's nodes in depth-first order and sets v.end.
func (v *Vocab) preorder() {
	nodes := make([]trieNode, 0, len(v.nodes))
	v.end = make([]int32, len(v.nodes))
	var visit func(old int32) int32
	visit = func(old int32) int32 {
		n := int32(len(nodes))
		nodes = append(nodes, v.nodes[old])
		kids := nodes[n].kids
		for i := range kids {
			kids[i].node = visit(kids[i].node)
		}
		v.end[n] = int32(len(nodes))
		return n
	}
	visit(0)
	v.nodes = nodes
}

// Nodes is the number of nodes of the vocabulary's trie: what a mask
// walks at most.
func (v *Vocab) Nodes() int { return len(v.nodes) }

// Size is the number of token ids.
func (v *Vocab) Size() int { return v.size }

// Allow calls allow for every token whose piece s accepts and after which
// a sentence can still be completed within budget-1 more tokens of one
// byte each (budget is how many tokens may still be generated, this one
// included; <= 0 means unbounded). End-of-generation tokens are the
// caller's: they are allowed when s.Accepting().
func (v *Vocab) Allow(s *State, budget int, allow func(id int32)) {
	v.walk(0, s, budget, allow)
}

func (v *Vocab) walk(n int, s *State, budget int, allow func(id int32)) (cut bool) {
	for _, e := range v.nodes[n].kids {
		if !s.c.work.charge(1) {
			return cut
		}
		next := s.Advance(e.b)
		if next == nil {
			continue
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

// allowAt allows the tokens whose piece ends at node n, reached in state
// s, unless the budget cuts them (then it reports true).
func (v *Vocab) allowAt(n int32, s *State, budget int, allow func(id int32)) (cut bool) {
	tokens := v.nodes[n].tokens
	if len(tokens) == 0 {
		return false
	}
	if budget > 0 && s.Remaining() > budget-1 {
		return true
	}
	for _, id := range tokens {
		allow(id)
	}
	return false
}

// allowPartialAt is allowAt(n, s.AdvanceBytes(seq), budget, allow) for
// seq the start of a code point cut short (a piece leaving a loop class
// inside a code point), without making that state: there are hundreds of
// such pieces, and their states would be made anew for every state that
// loops on the class.
func (v *Vocab) allowPartialAt(n int32, s *State, seq []byte, budget int, allow func(id int32)) (cut bool) {
	tokens := v.nodes[n].tokens
	if len(tokens) == 0 {
		return false
	}
	rem, ok := s.partialRemaining(seq)
	switch {
	case !ok:
		return false
	case budget > 0 && rem > budget-1:
		return true
	}
	for _, id := range tokens {
		allow(id)
	}
	return false
}

// cutShort reports whether seq is the start of a code point, fewer bytes
// than its UTF-8 length, that allowPartialAt can take from s.
func (s *State) cutShort(seq []byte) bool {
	return s.need == 0 && len(seq) > 0 && len(seq) < seqLen(seq[0])
}

// maxMasks bounds the masks a Cache keeps.
const maxMasks = 1024

type maskEntry struct {
	v      *Vocab
	budget int // the mask holds for every budget >= this one
	bits   []uint64
}

// Mask returns the tokens Allow allows as a bitset (bit id%64 of word
// id/64). The caller must not modify it. The mask is kept in s's cache
// and reused at larger budgets when the budget excluded no token. When
// the cache's Work stops the walk (Work.Err), the mask is incomplete and
// not kept.
func (v *Vocab) Mask(s *State, budget int) []uint64 { return v.mask(s, budget, true) }

// mask is Mask; byClass false walks the whole trie from every state, as
// the loop classes would not exist (tests compare the two).
func (v *Vocab) mask(s *State, budget int, byClass bool) []uint64 {
	c := s.c
	if e, ok := c.masks[s]; ok && e.v == v && (budget <= 0 && e.budget <= 0 || budget >= e.budget && e.budget > 0) {
		c.work.charge(1)
		return e.bits
	}
	bits := make([]uint64, (v.size+63)/64)
	var cut bool
	if byClass {
		cut = v.maskByClass(s, budget, bits)
	} else {
		cut = v.walk(0, s, budget, func(id int32) { bits[id/64] |= 1 << (id % 64) })
	}
	if c.work.Err() == nil && !cut && len(c.masks) < maxMasks {
		if c.masks == nil {
			c.masks = map[*State]maskEntry{}
		}
		c.masks[s] = maskEntry{v: v, budget: budget, bits: bits}
	}
	return bits
}
