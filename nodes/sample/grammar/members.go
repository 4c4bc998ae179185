package grammar

import (
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// A member set is rules whose alternatives write a JSON object's members
// in any order, each at most once (GBNF cannot say that without a rule per
// subset). The directive
//
//	%members first rest n=3 required=0,2 min=1 max=2 needs=1:0:2
//
// declares one: in each of its rules, alternative k < n writes member k;
// an alternative with k >= n that ends in a reference to a rule of the set
// is free (it may repeat); any other alternative ends the members. The
// members written so far travel along references to the set's rules in
// tail position of its alternatives (a stack frame carries them); an
// alternative writing a member already written is not taken, nor an
// ending one before every required member is written and at least min
// are, and every member that a written one needs (needs=k:j...: member k
// needs members j); no member alternative is taken that would leave more
// members due than max allows. The
// directive comes
// before its rules, which are then not left-factored (an alternative's
// index names its member).
type memberSet struct {
	rules    []int
	n        int
	required uint64
	needs    map[int]uint64 // member -> the members it needs
	min, max int            // max < 0: none
}

// due is the members still to write once set is: the required ones and
// those the written ones need, and so on.
func (ms *memberSet) due(set uint64) uint64 {
	want := ms.required
	for {
		more := want
		for k, need := range ms.needs {
			if (set|want)&(1<<k) != 0 {
				more |= need
			}
		}
		if more == want {
			return want &^ set
		}
		want = more
	}
}

// maxMembers is the most members one member set has.
const maxMembers = 64

// memberDirective parses a %members line (the '%' consumed).
func (p *parser) memberDirective() error {
	if !p.consume("members") {
		return p.errorf("expected %%members")
	}
	ms := &memberSet{max: -1}
	for {
		p.skipSpace(false)
		if p.eof() || p.peek() == '\n' {
			break
		}
		word := p.ident()
		if word == "" {
			return p.errorf("expected a rule name or n=, required=, min=, max=")
		}
		if !p.consume("=") {
			i := p.ruleIndex(word)
			if p.members[i] != nil {
				return p.errorf("rule %q is in two member sets", word)
			}
			if len(p.rules[i]) > 0 {
				return p.errorf("%%members must come before rule %q", word)
			}
			ms.rules = append(ms.rules, i)
			p.members[i] = ms
			continue
		}
		start := p.pos
		for !p.eof() && (p.peek() >= '0' && p.peek() <= '9' || p.peek() == ',' || p.peek() == ':') {
			p.advance(1)
		}
		value := p.src[start:p.pos]
		if word == "needs" {
			for _, f := range strings.Split(value, ",") {
				nums, err := memberNumbers(strings.Split(f, ":"))
				if err != nil || len(nums) < 2 {
					return p.errorf("needs= expects member:member... lists")
				}
				if ms.needs == nil {
					ms.needs = map[int]uint64{}
				}
				for _, j := range nums[1:] {
					ms.needs[nums[0]] |= 1 << j
				}
			}
			continue
		}
		switch word {
		case "n", "min", "max":
			v, err := strconv.Atoi(value)
			if err != nil || v < 0 {
				return p.errorf("%s= expects a number", word)
			}
			switch word {
			case "n":
				ms.n = v
			case "min":
				ms.min = v
			default:
				ms.max = v
			}
			continue
		}
		nums, err := memberNumbers(strings.Split(value, ","))
		if err != nil {
			return p.errorf("%s= expects member numbers", word)
		}
		switch word {
		case "required":
			for _, k := range nums {
				ms.required |= 1 << k
			}
		default:
			return p.errorf("unknown %%members setting %q", word)
		}
	}
	switch {
	case len(ms.rules) == 0:
		return p.errorf("%%members names no rule")
	case ms.n > maxMembers:
		return p.errorf("%%members: more than %d members", maxMembers)
	case ms.n < maxMembers && ms.required>>ms.n != 0:
		return p.errorf("%%members: a required member is past n=%d", ms.n)
	}
	for k, need := range ms.needs {
		if k >= ms.n || ms.n < maxMembers && need>>ms.n != 0 {
			return p.errorf("%%members: a needed member is past n=%d", ms.n)
		}
	}
	return nil
}

// memberNumbers parses member numbers (each below maxMembers).
func memberNumbers(fields []string) ([]int, error) {
	nums := make([]int, len(fields))
	for i, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 || v >= maxMembers {
			return nil, fmt.Errorf("bad member number %q", f)
		}
		nums[i] = v
	}
	return nums, nil
}

// checkMembers checks that every rule of a member set has its n member
// alternatives, each ending in a reference to the set.
func (g *Grammar) checkMembers() error {
	for i, ms := range g.members {
		if ms == nil {
			continue
		}
		if len(g.rules[i]) < ms.n {
			return fmt.Errorf("grammar: rule %q has fewer alternatives than its %d members", g.names[i], ms.n)
		}
		for k := range ms.n {
			if _, ok := g.memberTail(i, k); !ok {
				return fmt.Errorf("grammar: rule %q: member alternative %d does not end in a rule of its member set", g.names[i], k)
			}
		}
	}
	return nil
}

// memberTail is the rule of r's member set that alternative k of r ends
// in a reference to (ok false: none, or r is in no set).
func (g *Grammar) memberTail(r, k int) (int, bool) {
	ms := g.members[r]
	if ms == nil {
		return 0, false
	}
	a := g.rules[r][k]
	if len(a) == 0 || !a[len(a)-1].isRef() || g.members[a[len(a)-1].ref] != ms {
		return 0, false
	}
	return a[len(a)-1].ref, true
}

// memberBit is the member alternative k of rule r writes (0 for a free
// or ending one, or outside member sets).
func (g *Grammar) memberBit(r, k int) uint64 {
	if ms := g.members[r]; ms != nil && k < ms.n {
		return 1 << k
	}
	return 0
}

// childSet is the members written that frames of rule ref's alternatives
// carry when f (in tail position) references it.
func (g *Grammar) childSet(f frame, ref int, tail bool) uint64 {
	ms := g.members[ref]
	if ms == nil || !tail || g.members[f.rule] != ms {
		return 0
	}
	return f.set | g.memberBit(int(f.rule), int(f.alt))
}

// takes reports whether alternative k of rule r may be taken when set is
// written.
func (g *Grammar) takes(r, k int, set uint64) bool {
	ms := g.members[r]
	if ms == nil {
		return true
	}
	count := bits.OnesCount64(set)
	if k < ms.n {
		after := set | 1<<k
		return set&(1<<k) == 0 && (ms.max < 0 || count+1+bits.OnesCount64(ms.due(after)) <= ms.max)
	}
	if _, free := g.memberTail(r, k); free {
		return true
	}
	return ms.due(set) == 0 && count >= ms.min
}

// bodyLen is the shortest expansion of alternative k of rule r without
// its tail reference.
func (g *Grammar) bodyLen(r, k int) int {
	return g.partLen(r, k, 0, len(g.rules[r][k])-1)
}

// membersLen is the fewest bytes that end rule r's member set once set is
// written: the required members still due, and the shortest others up to
// min, each written as r's alternatives write them.
func (g *Grammar) membersLen(r int, set uint64) int {
	ms := g.members[r]
	total := 0
	count := bits.OnesCount64(set)
	due := ms.due(set)
	var optional []int
	for k := range ms.n {
		bit := uint64(1) << k
		switch {
		case set&bit != 0:
		case due&bit != 0:
			total = addLen(total, g.bodyLen(r, k))
			count++
		default:
			optional = append(optional, g.bodyLen(r, k))
		}
	}
	if count < ms.min {
		slices.Sort(optional)
		for _, l := range optional[:min(ms.min-count, len(optional))] {
			total = addLen(total, l)
		}
	}
	return total
}

// ruleMembersLen is rule r's shortest expansion when nothing is written
// yet: its cheapest alternative that can be taken, followed by what its
// set still needs.
func (g *Grammar) ruleMembersLen(r int) int {
	best := infLen
	for k := range g.rules[r] {
		if !g.takes(r, k, 0) {
			continue
		}
		tail, ok := g.memberTail(r, k)
		if !ok {
			best = min(best, g.altLen(g.rules[r][k], 0))
			continue
		}
		best = min(best, addLen(g.bodyLen(r, k), g.membersLen(tail, g.memberBit(r, k))))
	}
	return best
}

// frameLen is suffixLen for a frame of a member set's rule: the rest of
// its alternative, with what the set still needs in place of the tail
// reference's length when nothing is written.
func (g *Grammar) frameLen(f frame) int {
	a := g.rules[f.rule][f.alt]
	tail, ok := g.memberTail(int(f.rule), int(f.alt))
	if !ok {
		return g.partLen(int(f.rule), int(f.alt), int(f.idx), len(a))
	}
	return addLen(g.partLen(int(f.rule), int(f.alt), int(f.idx), len(a)-1), g.membersLen(tail, f.set|g.memberBit(int(f.rule), int(f.alt))))
}

// maxMemberPasses bounds the passes settleMembers makes: one per level of
// objects nested in members that must be written.
const maxMemberPasses = 16

// settleMembers corrects the shortest expansions of member sets' rules
// (minLen takes each alternative alone, as if an ending one could
// always be taken) and of the rules using them, until nothing changes.
func (g *Grammar) settleMembers() {
	var sets []int
	for i, ms := range g.members {
		if ms != nil {
			sets = append(sets, i)
		}
	}
	if len(sets) == 0 {
		return
	}
	for range maxMemberPasses {
		fixed := map[int]int{}
		changed := false
		for _, r := range sets {
			l := g.ruleMembersLen(r)
			fixed[r] = l
			if l != g.minLen[r] {
				changed = true
			}
		}
		if !changed {
			return
		}
		g.minLenFixed(fixed, nil)
	}
}
