package grammar

import "slices"

// A chain is what a string of bounded length is made of: states s0, s1,
// s2, ... where every code point of one class leads from each to the
// next (inside `[^"\\]{0,40}`, each character counts one more). None of
// them loops, so loop classes do not help, and the trie walk makes a
// state per code point and per partial UTF-8 sequence of every piece.
// The class's precomputed tokens know each piece's length in code points
// and each exit's class prefix, so a chain's mask is, for each length L
// whose state sL exists, the class tokens of L code points, and a walk
// of each exit from the state its class prefix reaches: the states of
// the chain are probed once per interval of the class, not per piece.

// chainStep is where every code point of class leads u (nil: nowhere),
// and false when they lead to different states (or u is inside a code
// point, or its classes cut the code points too finely).
func (u *State) chainStep(class []rng) (*State, bool) {
	if u.need > 0 {
		return nil, false
	}
	cuts := u.cuts()
	if cuts == nil {
		return nil, false
	}
	targets := make([]*State, len(cuts))
	var to *State
	probed := false
	for _, r := range class {
		k, _ := slices.BinarySearch(cuts, r.lo+1)
		for k--; k+1 < len(cuts) && cuts[k] <= r.hi; k++ {
			if cuts[k] >= 0xD800 && cuts[k] <= 0xDFFF {
				continue
			}
			t := u.afterCodePoint(max(cuts[k], r.lo), cuts, targets)
			if probed && t != to {
				return nil, false
			}
			to, probed = t, true
		}
	}
	return to, true
}

// chainClass is the class of code points that lead s to one state (the
// one most code points lead to), and that state; nil when s rejects every
// code point.
func (s *State) chainClass(cuts []rune, targets []*State) ([]rng, *State) {
	weight := map[*State]int{}
	var best *State
	for k := 0; k+1 < len(cuts); k++ {
		lo, hi := cuts[k], cuts[k+1]-1
		if lo >= 0xD800 && lo <= 0xDFFF {
			continue
		}
		t := s.afterCodePoint(lo, cuts, targets)
		if t == nil || t.need > 0 {
			continue
		}
		if weight[t] += int(hi - lo + 1); best == nil || weight[t] > weight[best] {
			best = t
		}
	}
	if best == nil {
		return nil, nil
	}
	var class []rng
	for k := 0; k+1 < len(cuts); k++ {
		lo, hi := cuts[k], cuts[k+1]-1
		if lo >= 0xD800 && lo <= 0xDFFF || s.afterCodePoint(lo, cuts, targets) != best {
			continue
		}
		if n := len(class); n > 0 && class[n-1].hi+1 == lo {
			class[n-1].hi = hi
			continue
		}
		class = append(class, rng{lo, hi})
	}
	return class, best
}

// maskByChain sets in bits the tokens Allow allows from s, a state
// without a loop class, when s starts a chain (its code points of one
// class lead to one state, whose code points of that class lead to one
// state, ... as far as the longest class prefix of a piece), and reports
// whether it did and whether the budget cut some tokens. A chain whose
// second state loops on the class is left to bulk (firstCodePoints),
// which takes the loop's tokens in ranges; so is one that ends after a
// step. cuts are s.cuts().
func (v *Vocab) maskByChain(s *State, cuts []rune, budget int, bits []uint64) (ok, cut bool) {
	w := s.c.work
	class, s1 := s.chainClass(cuts, make([]*State, len(cuts)))
	if s1 == nil {
		return false, false
	}
	// A chain of one step (after the first letter of a listed name) or of
	// one code point is no string: its class's tokens would be
	// precomputed for nothing.
	if class[0].lo == class[len(class)-1].hi {
		return false, false
	}
	s2, uniform := s1.chainStep(class)
	if !uniform || s2 == s1 || s2 == nil {
		return false, false
	}
	ct := v.classTokensFor(class, w)
	if ct == nil || ct.maxLen < 2 || ct.maxLen >= 1<<16-1 { // orderedLen holds lengths below 1<<16-1
		return false, false
	}
	chain := make([]*State, ct.maxLen+1) // [maxLen+1]: chain[L] after L class code points
	chain[0], chain[1] = s, s1
	if len(chain) > 2 {
		chain[2] = s2
	}
	for L := 2; L+1 < len(chain) && chain[L] != nil; L++ {
		if !w.charge(1) {
			return true, cut
		}
		next, uniform := chain[L].chainStep(class)
		if !uniform {
			return false, false
		}
		if next == chain[L] { // it loops: so does every state after
			for k := L + 1; k < len(chain); k++ {
				chain[k] = next
			}
			break
		}
		chain[L+1] = next
	}
	// The class tokens, by length.
	longest, cutAt := 0, false // the longest length allowed; whether the budget cut one
	for L := 1; L < len(chain) && chain[L] != nil; L++ {
		if budget > 0 && chain[L].Remaining() > budget-1 {
			cutAt = true
			continue
		}
		longest = L
	}
	switch {
	case !cutAt && longest+1 >= len(ct.lenStart)-1: // all of them
		if !w.charge(len(bits) / 16) {
			return true, cut
		}
		for i, x := range ct.inside {
			bits[i] |= x
		}
	case !cutAt && int(ct.lenStart[longest+1]) > len(ct.byLen)/2: // most: all, less the longer ones
		if !w.charge(len(bits)/16 + (len(ct.byLen)-int(ct.lenStart[longest+1]))/16) {
			return true, cut
		}
		for i, x := range ct.inside {
			bits[i] |= x
		}
		for _, id := range ct.byLen[ct.lenStart[longest+1]:] {
			bits[id/64] &^= 1 << (id % 64)
		}
	default:
		for L := 1; L < len(chain) && L+1 < len(ct.lenStart) && chain[L] != nil; L++ {
			ids := ct.byLen[ct.lenStart[L]:ct.lenStart[L+1]]
			if len(ids) == 0 {
				continue
			}
			if budget > 0 && chain[L].Remaining() > budget-1 {
				cut = true
				continue
			}
			if !w.charge(len(ids)/16 + 1) {
				return true, cut
			}
			for _, id := range ids {
				bits[id/64] |= 1 << (id % 64)
			}
		}
	}
	// The exits, from the state their class prefix reaches.
	f := firstCodePoints{v: v, s: s, budget: budget, bits: bits}
	defer func() { cut = cut || f.cut }()
	for _, x := range ct.exitAt {
		from := chain[x.depth]
		if from == nil {
			continue
		}
		if !w.charge(1) {
			return true, cut
		}
		if seq := ct.exits[x.group].seq; from.cutShort(seq) {
			if v.allowPartialAt(x.node, from, seq, budget, f.allow) {
				cut = true
			}
			continue
		}
		next := from.afterSeq(ct.exits[x.group].seq)
		if next == nil {
			continue
		}
		if v.allowAt(x.node, next, budget, f.allow) {
			cut = true
		}
		if !x.tokensOnly {
			f.walk(x.node, next)
		}
	}
	return true, cut
}

// sortByLen sets ct.byLen and ct.lenStart from ct.orderedLen, which it
// drops.
func (ct *classTokens) sortByLen() {
	ct.lenStart = make([]int32, ct.maxLen+2)
	for _, n := range ct.orderedLen {
		ct.lenStart[n+1]++
	}
	for L := 1; L < len(ct.lenStart); L++ {
		ct.lenStart[L] += ct.lenStart[L-1]
	}
	ct.byLen = make([]int32, len(ct.ordered))
	next := slices.Clone(ct.lenStart)
	for i, id := range ct.ordered {
		n := ct.orderedLen[i]
		ct.byLen[next[n]] = id
		next[n]++
	}
	ct.orderedLen = nil
}
