package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Strings that several patterns must all match (a format's pattern and a
// schema's own pattern, as zod writes them side by side) are the product
// of the patterns' automata: a code point moves every automaton at once,
// and a string is whole when every automaton accepts.

// Limits on the automata, so that a schema cannot make compilation
// arbitrarily slow: states of one pattern's automaton and of the product,
// and the code point edges the product's states try.
const (
	maxPatternStates = 4096
	maxProductStates = 8192
	maxProductMoves  = 1 << 18
)

// jsonWritable are the code points a JSON string can hold (gbnfClass
// writes each, escaped where JSON asks).
var jsonWritable = normalize(append(slices.Clone(jsonSafe), rng{'"', '"'}, rng{'\\', '\\'}, rng{'\n', '\n'}, rng{'\r', '\r'}, rng{'\t', '\t'}))

// An nfa is a pattern's automaton: code point edges and ε-moves between
// states; start is 0 and final is the one accepting state.
type nfa struct {
	edges [][]nfaEdge // by state
	eps   [][]int     // by state
	final int
	moved map[int]nfaMoves // moves' results by state
}

type nfaMoves struct {
	edges []nfaEdge
	final bool
}

type nfaEdge struct {
	set []rng // code points, sorted and disjoint
	to  int
}

func (n *nfa) state() (int, error) {
	if len(n.edges) >= maxPatternStates {
		return 0, fmt.Errorf("the pattern's automaton has more than %d states", maxPatternStates)
	}
	n.edges = append(n.edges, nil)
	n.eps = append(n.eps, nil)
	return len(n.edges) - 1, nil
}

// newNFA is the automaton of r (a parsed pattern); an unanchored end
// matches any code points there.
func newNFA(r *regex) (*nfa, error) {
	n := &nfa{}
	start, _ := n.state()
	final, _ := n.state()
	n.final = final
	return n, n.add(r, start, final)
}

// add builds r between states from and to.
func (n *nfa) add(r *regex, from, to int) error {
	switch r.kind {
	case reClass:
		n.edges[from] = append(n.edges[from], nfaEdge{r.set, to})
		return nil
	case reAlt:
		for _, s := range r.subs {
			if err := n.add(s, from, to); err != nil {
				return err
			}
		}
		return nil
	case reSeq:
		subs := r.subs
		anyRun := &regex{kind: reRepeat, subs: []*regex{{kind: reClass, set: []rng{{0, maxRune}}}}, hi: -1}
		if r.top && !r.start {
			subs = append([]*regex{anyRun}, subs...)
		}
		if r.top && !r.end {
			subs = append(slices.Clone(subs), anyRun)
		}
		return n.chain(subs, from, to)
	case reRepeat:
		parts := slices.Repeat([]*regex{r.subs[0]}, r.lo)
		at := from
		if len(parts) > 0 {
			var err error
			if at, err = n.state(); err != nil {
				return err
			}
			if err := n.chain(parts, from, at); err != nil {
				return err
			}
		}
		if r.hi < 0 {
			loop, err := n.state()
			if err != nil {
				return err
			}
			n.eps[at] = append(n.eps[at], loop)
			n.eps[loop] = append(n.eps[loop], to)
			return n.add(r.subs[0], loop, loop)
		}
		for range r.hi - r.lo {
			next, err := n.state()
			if err != nil {
				return err
			}
			n.eps[at] = append(n.eps[at], to)
			if err := n.add(r.subs[0], at, next); err != nil {
				return err
			}
			at = next
		}
		n.eps[at] = append(n.eps[at], to)
		return nil
	}
	return fmt.Errorf("anchors are supported only at the ends of the pattern")
}

// chain builds parts one after another between from and to.
func (n *nfa) chain(parts []*regex, from, to int) error {
	if len(parts) == 0 {
		n.eps[from] = append(n.eps[from], to)
		return nil
	}
	at := from
	for i, p := range parts {
		next := to
		if i < len(parts)-1 {
			var err error
			if next, err = n.state(); err != nil {
				return err
			}
		}
		if err := n.add(p, at, next); err != nil {
			return err
		}
		at = next
	}
	return nil
}

// closure is the states s reaches by ε-moves, s included.
func (n *nfa) closure(s int) []int {
	seen := map[int]bool{s: true}
	out := []int{s}
	for i := 0; i < len(out); i++ {
		for _, t := range n.eps[out[i]] {
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// moves are the code point edges out of s's closure, and whether the
// closure accepts.
func (n *nfa) moves(s int) (edges []nfaEdge, final bool) {
	if m, ok := n.moved[s]; ok {
		return m.edges, m.final
	}
	for _, c := range n.closure(s) {
		edges = append(edges, n.edges[c]...)
		final = final || c == n.final
	}
	if n.moved == nil {
		n.moved = map[int]nfaMoves{}
	}
	n.moved[s] = nfaMoves{edges, final}
	return edges, final
}

// productGBNF is GBNF for the JSON string contents (without quotes) whose
// decoded text every one of res (parsed patterns) matches, as rules named
// by c from hint; ok is false when no string matches them all.
func (c *schemaCompiler) productGBNF(hint string, res []*regex) (name string, ok bool, err error) {
	if slices.ContainsFunc(res, (*regex).hasLook) {
		return c.lookaheadGBNF(res, 0, 0, false, "")
	}
	autos := make([]*nfa, len(res))
	for i, r := range res {
		if autos[i], err = newNFA(r); err != nil {
			return "", false, err
		}
	}
	// The product's states, each a tuple of the automata's states, in
	// the order first reached from the start tuple.
	type node struct {
		edges map[int][]rng // by target node
		final bool
	}
	var tuples [][]int
	index := map[string]int{}
	key := func(t []int) string {
		var b strings.Builder
		for _, s := range t {
			b.WriteString(strconv.Itoa(s))
			b.WriteByte(',')
		}
		return b.String()
	}
	visit := func(t []int) (int, error) {
		k := key(t)
		if i, ok := index[k]; ok {
			return i, nil
		}
		if len(tuples) >= maxProductStates {
			return 0, fmt.Errorf("the patterns' joint automaton has more than %d states", maxProductStates)
		}
		index[k] = len(tuples)
		tuples = append(tuples, t)
		return len(tuples) - 1, nil
	}
	if _, err := visit(make([]int, len(autos))); err != nil {
		return "", false, err
	}
	var nodes []node
	moves := 0
	for i := 0; i < len(tuples); i++ {
		nd := node{edges: map[int][]rng{}, final: true}
		// paths: the code points read so far and the states reached,
		// one automaton at a time.
		type path struct {
			set []rng
			to  []int
		}
		paths := []path{{set: jsonWritable}}
		for a, auto := range autos {
			edges, final := auto.moves(tuples[i][a])
			nd.final = nd.final && final
			var next []path
			for _, p := range paths {
				if moves += len(edges); moves > maxProductMoves {
					return "", false, fmt.Errorf("the patterns' joint automaton has more than %d moves", maxProductMoves)
				}
				for _, e := range edges {
					if set := intersect(p.set, e.set); len(set) > 0 {
						next = append(next, path{set, append(slices.Clone(p.to), e.to)})
					}
				}
			}
			paths = next
		}
		for _, p := range paths {
			to, err := visit(p.to)
			if err != nil {
				return "", false, err
			}
			nd.edges[to] = append(nd.edges[to], p.set...)
		}
		for to, set := range nd.edges {
			nd.edges[to] = normalize(set)
		}
		nodes = append(nodes, nd)
	}
	states := make([]dfaState, len(nodes))
	for i, nd := range nodes {
		targets := make([]int, 0, len(nd.edges))
		for to := range nd.edges {
			targets = append(targets, to)
		}
		slices.Sort(targets)
		for _, to := range targets {
			states[i].edges = append(states[i].edges, dfaEdge{nd.edges[to], to})
		}
	}
	name, ok = c.emitDFA(hint, states, func(i int) string {
		if nodes[i].final {
			return `""`
		}
		return ""
	})
	return name, ok, nil
}

// patternAndFormat is GBNF for the strings a schema admits when it has both a
// pattern and a format the compiler enforces (f): those both match, within
// minLength lo and maxLength hi (when hasHi).
func (c *schemaCompiler) patternAndFormat(pattern, f string, lo, hi int, hasHi bool, at string) (string, error) {
	re, err := parseRegex(pattern)
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"pattern\": %v", at, err)
	}
	formatRe, err := parseRegex(formatPatterns[f])
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"format\": %v", at, err)
	}
	name, ok, err := c.productGBNF("pattern-"+f, withLength([]*regex{re, formatRe}, lo, hi, hasHi))
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword \"pattern\" with \"format\" %q: %v", at, f, err)
	}
	if !ok {
		return "", fmt.Errorf("schema%s: keyword \"pattern\": no string a JSON text can hold matches %q and format %q", at, pattern, f)
	}
	return `"\"" ` + name + ` "\""`, nil
}

// withLength is res and, when lo > 0 or hasHi, a pattern of lo to hi code
// points (minLength and maxLength), for productGBNF.
func withLength(res []*regex, lo, hi int, hasHi bool) []*regex {
	if lo == 0 && !hasHi {
		return res
	}
	count := &regex{kind: reRepeat, subs: []*regex{{kind: reClass, set: []rng{{0, maxRune}}}}, lo: lo, hi: -1}
	if hasHi {
		count.hi = hi
	}
	return append(res, &regex{kind: reAlt, subs: []*regex{{kind: reSeq, subs: []*regex{count}, top: true, start: true, end: true}}})
}

// patternAndLength is GBNF for the strings that match re (pattern, or a
// format's pattern: keyword) within minLength lo and maxLength hi (when
// hasHi): the product of the pattern's automaton and a counter.
func (c *schemaCompiler) patternAndLength(re *regex, keyword string, lo, hi int, hasHi bool, at string) (string, error) {
	name, ok, err := c.productGBNF("pattern-length", withLength([]*regex{re}, lo, hi, hasHi))
	if err != nil {
		return "", fmt.Errorf("schema%s: keyword %q with minLength or maxLength: %v", at, keyword, err)
	}
	if !ok {
		return "", fmt.Errorf("schema%s: keyword %q: no string a JSON text can hold matches it within minLength and maxLength", at, keyword)
	}
	return `"\"" ` + name + ` "\""`, nil
}
