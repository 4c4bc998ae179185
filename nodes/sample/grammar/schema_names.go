package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Property names told apart by patterns (patternProperties), and patterns
// with lookaheads, are written by a deterministic automaton: the subset
// construction over several patterns' automata run in step, so that each
// of its states knows which patterns the text read so far matches and
// which it does not (a lookahead's "does not" needs that determinism).

// A patternMachine is a pattern's automata: its own and its lookaheads'
// (a lookahead after ^ matches a prefix of the text, or all of it when
// it ends with $).
type patternMachine struct {
	main  *nfa
	looks []*nfa
	neg   []bool // by look: (?!...)
}

// newPatternMachine is the automata of a parsed pattern.
func newPatternMachine(re *regex) (*patternMachine, error) {
	m := &patternMachine{}
	var err error
	if m.main, err = newNFA(re); err != nil {
		return nil, err
	}
	if len(re.subs) == 1 {
		for _, look := range re.subs[0].looks {
			n, err := newNFA(look.subs[0])
			if err != nil {
				return nil, err
			}
			m.looks = append(m.looks, n)
			m.neg = append(m.neg, look.neg)
		}
	}
	return m, nil
}

// tracks is m's automata in the order matches reads their verdicts.
func (m *patternMachine) tracks() []*nfa { return append([]*nfa{m.main}, m.looks...) }

// matches is whether m matches, given whether each of its tracks accepts.
func (m *patternMachine) matches(accepts []bool) bool {
	if !accepts[0] {
		return false
	}
	for i, neg := range m.neg {
		if accepts[1+i] == neg {
			return false
		}
	}
	return true
}

// match reports whether m matches the whole of s.
func (m *patternMachine) match(s string) bool {
	tracks := m.tracks()
	accepts := make([]bool, len(tracks))
	for i, n := range tracks {
		set := n.closureOf([]int{0})
		for _, r := range s {
			var next []int
			for _, st := range set {
				for _, e := range n.edges[st] {
					if inSet(e.set, r) {
						next = append(next, e.to)
					}
				}
			}
			if set = n.closureOf(next); len(set) == 0 {
				break
			}
		}
		accepts[i] = slices.Contains(set, n.final)
	}
	return m.matches(accepts)
}

// inSet reports whether code point r is in set (sorted, disjoint).
func inSet(set []rng, r rune) bool {
	i, _ := slices.BinarySearchFunc(set, r, func(x rng, r rune) int {
		switch {
		case x.hi < r:
			return -1
		case x.lo > r:
			return 1
		}
		return 0
	})
	return i < len(set) && set[i].lo <= r && r <= set[i].hi
}

// closureOf is the states the states of from reach by ε-moves, sorted.
func (n *nfa) closureOf(from []int) []int {
	var out []int
	for _, s := range from {
		out = append(out, n.closure(s)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Limits on a deterministic automaton: its states, and the code point
// intervals its states' moves try.
const (
	maxDFAStates = 8192
	maxDFAMoves  = 1 << 20
	// dfaMovesPerUnit is how many NFA edges tried make a unit of Work.
	dfaMovesPerUnit = 16
)

// A dfaState is a state of the subset construction over several
// automata (tracks): the states each is in, and the moves out of it.
type dfaState struct {
	sets  [][]int // by track: ε-closed, sorted
	edges []dfaEdge
}

type dfaEdge struct {
	set []rng // code points, sorted and disjoint
	to  int
}

// accepts is whether each track accepts in state s.
func (s *dfaState) accepts(tracks []*nfa) []bool {
	out := make([]bool, len(tracks))
	for i, n := range tracks {
		_, out[i] = slices.BinarySearch(s.sets[i], n.final)
	}
	return out
}

// buildDFA runs tracks in step over the code points a JSON string can
// hold, charging the compilation; state 0 is the start.
func (c *schemaCompiler) buildDFA(tracks []*nfa, at string) ([]dfaState, error) {
	var states []dfaState
	index := map[string]int{}
	key := func(sets [][]int) string {
		var b strings.Builder
		for _, set := range sets {
			for _, s := range set {
				b.WriteString(strconv.Itoa(s))
				b.WriteByte(',')
			}
			b.WriteByte(';')
		}
		return b.String()
	}
	visit := func(sets [][]int) (int, error) {
		k := key(sets)
		if i, ok := index[k]; ok {
			return i, nil
		}
		if len(states) >= maxDFAStates {
			return 0, fmt.Errorf("the patterns' automaton has more than %d states", maxDFAStates)
		}
		index[k] = len(states)
		states = append(states, dfaState{sets: sets})
		return len(states) - 1, nil
	}
	start := make([][]int, len(tracks))
	for i, n := range tracks {
		start[i] = n.closureOf([]int{0})
	}
	if _, err := visit(start); err != nil {
		return nil, err
	}
	moves, charged := 0, 0
	for i := 0; i < len(states); i++ {
		// The code points where some edge's set starts or ends cut the
		// alphabet into intervals every edge takes whole or not at all.
		var cuts []rune
		for _, r := range jsonWritable {
			cuts = append(cuts, r.lo, r.hi+1)
		}
		for t, n := range tracks {
			for _, s := range states[i].sets[t] {
				for _, e := range n.edges[s] {
					for _, r := range e.set {
						cuts = append(cuts, r.lo, r.hi+1)
					}
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		if err := c.spend(len(cuts), at); err != nil {
			return nil, err
		}
		targets := map[int][]rng{}
		var order []int
		for k := 0; k+1 < len(cuts); k++ {
			lo, hi := cuts[k], cuts[k+1]-1
			if !inSet(jsonWritable, lo) {
				continue
			}
			next := make([][]int, len(tracks))
			for t, n := range tracks {
				var to []int
				for _, s := range states[i].sets[t] {
					moves += len(n.edges[s])
					for _, e := range n.edges[s] {
						if inSet(e.set, lo) {
							to = append(to, e.to)
						}
					}
				}
				next[t] = n.closureOf(to)
			}
			if moves > maxDFAMoves {
				return nil, fmt.Errorf("the patterns' automaton has more than %d moves", maxDFAMoves)
			}
			if err := c.spend(1+(moves-charged)/dfaMovesPerUnit, at); err != nil {
				return nil, err
			}
			charged = moves
			j, err := visit(next)
			if err != nil {
				return nil, err
			}
			if _, ok := targets[j]; !ok {
				order = append(order, j)
			}
			targets[j] = append(targets[j], rng{lo, hi})
		}
		for _, j := range order {
			states[i].edges = append(states[i].edges, dfaEdge{normalize(targets[j]), j})
		}
	}
	return states, nil
}

// emitDFA writes states as rules named from hint: each state's moves, and
// where final gives a text (non-empty), that text ending the string
// there. States from which no final text is reached are left out; ok is
// false when that is the start.
func (c *schemaCompiler) emitDFA(hint string, states []dfaState, final func(i int) string) (name string, ok bool) {
	ends := make([]string, len(states))
	live := make([]bool, len(states))
	for i := range states {
		ends[i] = final(i)
		live[i] = ends[i] != ""
	}
	for changed := true; changed; {
		changed = false
		for i, s := range states {
			if !live[i] && slices.ContainsFunc(s.edges, func(e dfaEdge) bool { return live[e.to] }) {
				live[i], changed = true, true
			}
		}
	}
	if !live[0] {
		return "", false
	}
	names := make([]string, len(states))
	for i := range states {
		if live[i] {
			names[i] = c.ruleName(hint)
		}
	}
	for i, s := range states {
		if !live[i] {
			continue
		}
		var alts []string
		for _, e := range s.edges {
			if g, ok := gbnfClass(e.set); ok && live[e.to] {
				alts = append(alts, g+" "+names[e.to])
			}
		}
		if ends[i] != "" {
			alts = append(alts, ends[i])
		}
		c.emit(names[i] + " ::= " + strings.Join(alts, " | "))
	}
	return names[0], true
}

// lookaheadGBNF is GBNF for the JSON string contents (without quotes)
// that every one of res (parsed patterns, lookaheads allowed) matches,
// within lo to hi code points when hasHi or lo > 0; ok is false when there
// are none.
func (c *schemaCompiler) lookaheadGBNF(res []*regex, lo, hi int, hasHi bool, at string) (string, bool, error) {
	return c.patternsGBNF(res, nil, lo, hi, hasHi, at)
}

// stringExcluding is GBNF for the strings a schema admits when "not"
// excludes some (excluded): those matching pattern (when hasPattern; its
// keyword: "pattern" or "format") and alsoFormat's pattern (when not ""),
// within minLength lo and maxLength hi (when hasHi), that are none of
// excluded.
func (c *schemaCompiler) stringExcluding(pattern string, hasPattern bool, alsoFormat, keyword string, excluded []string, lo, hi int, hasHi bool, at string) (string, error) {
	var res []*regex
	if hasPattern {
		re, err := parseRegex(pattern)
		if err != nil {
			return "", fmt.Errorf("schema%s: keyword %q: %v", at, keyword, err)
		}
		res = append(res, re)
	}
	if alsoFormat != "" {
		re, err := parseRegex(formatPatterns[alsoFormat])
		if err != nil {
			return "", fmt.Errorf("schema%s: keyword \"format\": %v", at, err)
		}
		res = append(res, re)
	}
	name, ok, err := c.patternsGBNF(res, excluded, lo, hi, hasHi, at)
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"not\" beside %q: %v", at, keyword, err)
	}
	if !ok {
		return "", nothingf("schema%s: \"not\" excludes every string the schema admits", at)
	}
	return `"\"" ` + name + ` "\""`, nil
}

// patternsGBNF is lookaheadGBNF leaving out the strings of excluded.
func (c *schemaCompiler) patternsGBNF(res []*regex, excluded []string, lo, hi int, hasHi bool, at string) (string, bool, error) {
	var machines []*patternMachine
	var tracks []*nfa
	for _, re := range withLength(res, lo, hi, hasHi) {
		m, err := newPatternMachine(re)
		if err != nil {
			return "", false, err
		}
		machines = append(machines, m)
		tracks = append(tracks, m.tracks()...)
	}
	if len(excluded) > 0 {
		n, err := literalsNFA(excluded)
		if err != nil {
			return "", false, err
		}
		tracks = append(tracks, n)
	}
	states, err := c.buildDFA(tracks, at)
	if err != nil {
		return "", false, err
	}
	name, ok := c.emitDFA("pattern-look", states, func(i int) string {
		acc := states[i].accepts(tracks)
		if len(excluded) > 0 && acc[len(acc)-1] {
			return ""
		}
		for _, m := range machines {
			if !m.matches(acc[:len(m.tracks())]) {
				return ""
			}
			acc = acc[len(m.tracks()):]
		}
		return `""`
	})
	return name, ok, nil
}

// patternMachine is pattern (a patternProperties name) compiled once per
// compiler, charging the compilation.
func (c *schemaCompiler) patternMachine(pattern string) (*patternMachine, error) {
	if m, ok := c.machines[pattern]; ok {
		return m.m, m.err
	}
	var m *patternMachine
	re, err := parseRegex(pattern)
	if err == nil {
		if err = c.spend(len(pattern), ""); err == nil {
			m, err = newPatternMachine(re)
		}
	}
	if c.machines == nil {
		c.machines = map[string]machineOrError{}
	}
	c.machines[pattern] = machineOrError{m, err}
	return m, err
}

type machineOrError struct {
	m   *patternMachine
	err error
}

// patternMatches reports whether name matches pattern (ECMA-262 semantics,
// as the compiler reads patterns), charging the compilation.
func (c *schemaCompiler) patternMatches(pattern, name string) (bool, error) {
	m, err := c.patternMachine(pattern)
	if err != nil {
		return false, err
	}
	if err := c.spend(1+len(name), ""); err != nil {
		return false, err
	}
	return m.match(name), nil
}

// literalsNFA is an automaton matching exactly the strings of names.
func literalsNFA(names []string) (*nfa, error) {
	alt := &regex{kind: reAlt}
	for _, s := range names {
		seq := &regex{kind: reSeq, top: true, start: true, end: true}
		for _, r := range s {
			seq.subs = append(seq.subs, &regex{kind: reClass, set: []rng{{r, r}}})
		}
		alt.subs = append(alt.subs, seq)
	}
	if len(alt.subs) == 0 { // no name: an automaton that never accepts
		n := &nfa{}
		n.state()
		final, _ := n.state()
		n.final = final
		return n, nil
	}
	return newNFA(alt)
}

// patternMembers is GBNF for one member whose name is none of excluded,
// with the value its name asks for: the schemas of the patterns (keys of
// patterns) it matches, all of them, or ap (additionalProperties; absent
// when !hasAP) when it matches none. "" when no such member is valid.
func (c *schemaCompiler) patternMembers(hint string, patterns *object, excluded []string, names []nameRule, ap any, hasAP bool, at string) (string, error) {
	if patterns == nil {
		patterns = &object{vals: map[string]any{}}
	}
	var machines []*patternMachine
	var tracks []*nfa
	first := []int{} // by pattern: its first track
	for _, p := range patterns.keys {
		m, err := c.patternMachine(p)
		if err != nil {
			return "", fmt.Errorf("schema%s: keyword \"patternProperties\": %q: %v", at, p, err)
		}
		machines = append(machines, m)
		first = append(first, len(tracks))
		tracks = append(tracks, m.tracks()...)
	}
	nameFirst := len(tracks)
	for _, r := range names {
		tracks = append(tracks, r.m.tracks()...)
	}
	listed, err := literalsNFA(excluded)
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"properties\": %v", at, err)
	}
	tracks = append(tracks, listed)
	states, err := c.buildDFA(tracks, at)
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"patternProperties\": %v", at, err)
	}
	values := map[string]string{} // by the patterns matched (their indexes): the value's rule; "" none
	var firstErr error
	value := func(matched []int) string {
		k := fmt.Sprint(matched)
		if v, ok := values[k]; ok {
			return v
		}
		var s any
		switch {
		case len(matched) == 0:
			s = cmpOrAny(ap, hasAP)
		case len(matched) == 1:
			s = patterns.vals[patterns.keys[matched[0]]]
		default:
			var all []any
			for _, i := range matched {
				all = append(all, patterns.vals[patterns.keys[i]])
			}
			s = &object{keys: []string{"allOf"}, vals: map[string]any{"allOf": all}}
		}
		v := ""
		if s != false {
			m := c.mark()
			name, err := c.rule(hint+"-value", s, at+".patternProperties")
			switch {
			case err == nil:
				v = name
			case errors.Is(err, errNothing):
				c.rollback(m)
			default:
				c.rollback(m)
				firstErr = cmpOr(firstErr, err)
			}
		}
		values[k] = v
		return v
	}
	name, ok := c.emitDFA(hint+"-name", states, func(i int) string {
		acc := states[i].accepts(tracks)
		if acc[len(acc)-1] {
			return "" // a listed or excluded name
		}
		next := nameFirst
		for _, r := range names {
			n := len(r.m.tracks())
			if r.m.matches(acc[next:next+n]) != r.match {
				return "" // a name propertyNames refuses
			}
			next += n
		}
		var matched []int
		for p, m := range machines {
			if m.matches(acc[first[p] : first[p]+len(m.tracks())]) {
				matched = append(matched, p)
			}
		}
		v := value(matched)
		if v == "" {
			return ""
		}
		return `"\"" ws ":" ws ` + v + ` ws`
	})
	if firstErr != nil {
		return "", firstErr // leaving those names out would reject valid objects that have them
	}
	if !ok {
		return "", nil
	}
	return `"\"" ` + name, nil
}

// requiresRefused reports whether every object a admits has a property
// that schema b, as written, refuses: one a requires, or one each branch
// of a's anyOf or oneOf requires.
func (c *schemaCompiler) requiresRefused(a *object, b any, depth int) bool {
	if depth > MaxSchemaInline || !c.work.charge(1) {
		return false
	}
	if slices.ContainsFunc(stringList(a.vals["required"]), func(p string) bool { return c.refusesName(b, p, 0) }) {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		list, ok := a.vals[k].([]any)
		if !ok || len(list) == 0 {
			continue
		}
		every := true
		for _, e := range list {
			eo, err := c.inline(e, "", depth+1)
			if err != nil || !c.requiresRefused(eo, b, depth+1) {
				every = false
				break
			}
		}
		if every {
			return true
		}
	}
	return false
}

// lacksRequired reports whether every object a admits lacks, or has a
// value b refuses for, a property b requires: a refuses the name, or a's
// schema for it and b's admit no value in common.
func (c *schemaCompiler) lacksRequired(a, b *object) bool {
	propsA, _ := a.vals["properties"].(*object)
	propsB, _ := b.vals["properties"].(*object)
	for _, p := range stringList(b.vals["required"]) {
		if c.refusesName(a, p, 0) {
			return true
		}
		if propsA == nil || propsB == nil || !hasKey(propsA, p) || !hasKey(propsB, p) {
			continue
		}
		if c.disjointSchemas(propsA.vals[p], propsB.vals[p]) {
			return true
		}
	}
	return false
}

// disjointSchemas reports whether no value meets both schemas x and y
// (false: perhaps some does): their kinds differ, their enum or const
// values differ, or they are strings whose patterns no string matches
// both of.
func (c *schemaCompiler) disjointSchemas(x, y any) bool {
	if !c.work.charge(1) {
		return false
	}
	if len(intersectStrings(c.kinds(x, false, 0), c.kinds(y, false, 0))) == 0 {
		return true
	}
	xo, errX := c.inline(x, "", 0)
	yo, errY := c.inline(y, "", 0)
	if errX != nil || errY != nil {
		return false
	}
	if vx, ok := valueList(xo); ok { // the values admitted are among these
		if vy, ok := valueList(yo); ok {
			return c.disjointValues(vx, vy)
		}
	}
	px, okX := c.stringPattern(x)
	py, okY := c.stringPattern(y)
	if !okX || !okY {
		return false
	}
	mx, err := c.patternMachine(px)
	if err != nil {
		return false
	}
	my, err := c.patternMachine(py)
	if err != nil {
		return false
	}
	tracks := append(mx.tracks(), my.tracks()...)
	states, err := c.buildDFA(tracks, "")
	if err != nil {
		return false
	}
	for i := range states {
		acc := states[i].accepts(tracks)
		if mx.matches(acc[:len(mx.tracks())]) && my.matches(acc[len(mx.tracks()):]) {
			return false
		}
	}
	return true
}

// stringPattern is the pattern of schema s when it admits only strings
// and has one (ok false otherwise).
func (c *schemaCompiler) stringPattern(s any) (string, bool) {
	o, err := c.inline(s, "", 0)
	if err != nil || !slices.Equal(c.kinds(o, false, 0), []string{"string"}) {
		return "", false
	}
	p, ok := o.vals["pattern"].(string)
	return p, ok
}

// A nameRule is a pattern every written name must match (match) or must
// not match.
type nameRule struct {
	m     *patternMachine
	match bool
}

// nameRules is what propertyNames' schema pn asks of names, as automata:
// a pattern, a format the compiler writes as a pattern, minLength and
// maxLength, enum or const strings, and not of enum or const. Another
// keyword is an error naming propertyNames.
func (c *schemaCompiler) nameRules(pn any, at string) ([]nameRule, error) {
	o, err := c.inline(pn, at, 0)
	if err != nil {
		return nil, err
	}
	refuse := func(k string) error {
		return fmt.Errorf("schema%s: keyword \"propertyNames\" with %q is supported only on listed properties", at, k)
	}
	var rules []nameRule
	addPattern := func(p, k string) error {
		re, err := parseRegex(p)
		if err != nil {
			return fmt.Errorf("schema%s.propertyNames: keyword %q: %v", at, k, err)
		}
		m, err := newPatternMachine(re)
		if err != nil {
			return fmt.Errorf("schema%s.propertyNames: keyword %q: %v", at, k, err)
		}
		rules = append(rules, nameRule{m, true})
		return nil
	}
	addLiterals := func(values []any, match bool) {
		var strs []string
		for _, v := range values {
			if s, ok := v.(string); ok {
				strs = append(strs, s)
			}
		}
		n, _ := literalsNFA(strs)
		rules = append(rules, nameRule{&patternMachine{main: n}, match})
	}
	for _, k := range o.keys {
		if !schemaKeywords[k] {
			continue
		}
		switch k {
		case "type":
			types, err := typeList(o, at+".propertyNames")
			if err != nil {
				return nil, err
			}
			if !slices.Contains(types, "string") {
				return nil, nothingf("schema%s: propertyNames admits no string", at)
			}
		case "pattern":
			p, _ := o.vals[k].(string)
			if err := addPattern(p, k); err != nil {
				return nil, err
			}
		case "format":
			f, _ := o.vals[k].(string)
			if p, ok := formatPatterns[f]; ok {
				if err := addPattern(p, k); err != nil {
					return nil, err
				}
			} else if assertedFormats[f] {
				return nil, refuse(k)
			}
		case "minLength", "maxLength":
		case "enum", "const":
			values, _ := valueList(o)
			addLiterals(values, true)
		case notValuesKey:
			addLiterals(excludedValues(o), false)
		default:
			return nil, refuse(k)
		}
	}
	lo, _, err := count(o, "minLength", at+".propertyNames")
	if err != nil {
		return nil, err
	}
	hi, hasHi, err := count(o, "maxLength", at+".propertyNames")
	if err != nil {
		return nil, err
	}
	if counted := withLength(nil, lo, hi, hasHi); len(counted) > 0 {
		m, err := newPatternMachine(counted[0])
		if err != nil {
			return nil, err
		}
		rules = append(rules, nameRule{m, true})
	}
	return rules, nil
}
