// Package grammar constrains generation to a context-free grammar: GBNF
// (llama.cpp's grammar format) is compiled to rules, a State tracks every
// way the bytes generated so far can continue (a set of pushdown stacks,
// as llama.cpp's grammar sampler), and a Vocab turns a State into the mask
// of tokens that keep the output inside the grammar. JSON Schemas compile
// to GBNF (FromSchema).
package grammar

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Grammar is a compiled grammar: rules of alternatives of symbols, the
// start rule first. It is immutable and safe for concurrent use.
type Grammar struct {
	rules  [][]alt // by rule index; rules[0] is the root
	names  []string
	owner  []int // the rule written in the source that each rule is part of (itself, or the one a group or repetition is in)
	minLen []int // shortest expansion of each rule, in bytes
	// suffix[r][k][i] is altLen(rules[r][k], i): the shortest expansion
	// of alternative k of rule r from symbol i (nil until check has
	// settled minLen).
	suffix [][][]int32

	members []*memberSet // by rule: the member set it is in (nil: none)
}

type alt []sym

// Size is the number of symbols of g's rules: a measure of its memory.
func (g *Grammar) Size() int {
	n := 0
	for _, alts := range g.rules {
		for _, a := range alts {
			n += len(a) + 1
		}
	}
	return n
}

// sym is a rule reference (ref >= 0) or a code point class.
type sym struct {
	ref    int
	ranges []rng // class: code points in any range (or in none when neg)
	neg    bool
}

type rng struct{ lo, hi rune }

func (s sym) isRef() bool { return s.ref >= 0 }

// matches reports whether the class admits c.
func (s sym) matches(c rune) bool {
	in := false
	for _, r := range s.ranges {
		if c >= r.lo && c <= r.hi {
			in = true
			break
		}
	}
	return in != s.neg
}

// admitsRange reports whether the class admits some code point in
// [lo, hi].
func (s sym) admitsRange(lo, hi rune) bool {
	if !s.neg {
		for _, r := range s.ranges {
			if r.lo <= hi && r.hi >= lo {
				return true
			}
		}
		return false
	}
	// Negated: some point of [lo, hi] lies outside every range (sorted
	// by lo: parser.class sorts a negated class's ranges).
	next := lo
	for _, r := range s.ranges {
		if r.lo > next {
			return next <= hi
		}
		if r.hi >= next {
			next = r.hi + 1
		}
		if next > hi {
			return false
		}
	}
	return next <= hi
}

// minBytes is the UTF-8 length of the smallest code point the class admits.
func (s sym) minBytes() int {
	if s.neg {
		if s.matches(0) || s.admitsRange(0, 0x7f) {
			return 1
		}
		return 2
	}
	best := 4
	for _, r := range s.ranges {
		best = min(best, utf8.RuneLen(max(r.lo, 0)))
	}
	return max(best, 1)
}

// MaxSymbols bounds a grammar's size: the symbols of its source (a
// literal's characters, classes, references) with {m,n} repetitions
// expanded. Parse refuses larger grammars.
const MaxSymbols = 1 << 21

// Parse compiles GBNF source; the rule named root is the start. Errors
// name the line and column.
func Parse(src string) (*Grammar, error) { return ParseWork(src, nil) }

// ParseWork is Parse charging w (nil: no Work): parseUnitsPerByte units
// per byte of source, charged before parsing, and the start state's
// expansion (within maxStartWork). It fails when w stops.
func ParseWork(src string, w *Work) (*Grammar, error) {
	if w != nil && !w.reserve(parseUnitsPerByte*len(src)) {
		return nil, fmt.Errorf("grammar: %w", w.Err())
	}
	p := &parser{src: src, work: w, line: 1, col: 1, index: map[string]int{}, gen: map[int]bool{}, owner: map[int]int{}, members: map[int]*memberSet{}}
	root := p.ruleIndex("root")
	defined := map[int]bool{}
	for {
		p.skipSpace(true)
		if p.eof() {
			break
		}
		if p.consume("%") {
			if err := p.memberDirective(); err != nil {
				return nil, err
			}
			continue
		}
		name := p.ident()
		if name == "" {
			return nil, p.errorf("expected a rule name")
		}
		p.skipSpace(false)
		if !p.consume("::=") {
			return nil, p.errorf("expected '::=' after %q", name)
		}
		i := p.ruleIndex(name)
		p.current = i
		if defined[i] {
			return nil, p.errorf("rule %q defined twice", name)
		}
		defined[i] = true
		alts, err := p.alternatives(false, p.members[i] == nil)
		if err != nil {
			return nil, err
		}
		p.rules[i] = alts
	}
	for i, n := range p.names {
		if !defined[i] && !p.gen[i] {
			if i == root {
				return nil, fmt.Errorf("grammar: no rule named root")
			}
			return nil, fmt.Errorf("grammar: rule %q is used but not defined", n)
		}
	}
	g := &Grammar{rules: p.rules, names: p.names, owner: make([]int, len(p.names)), members: make([]*memberSet, len(p.names))}
	for i, ms := range p.members {
		g.members[i] = ms
	}
	for i := range g.owner {
		g.owner[i] = i
		if o, ok := p.owner[i]; ok {
			g.owner[i] = o
		}
	}
	if err := g.check(w); err != nil {
		return nil, err
	}
	c := g.NewCache()
	start := &Work{Limit: maxStartWork}
	if w != nil {
		start = w.child()
		if start.Limit <= 0 || start.Limit > maxStartWork {
			start.Limit = maxStartWork
		}
	}
	c.Bind(start)
	_, err := c.startState()
	if w != nil {
		w.absorb(start)
	}
	if err != nil {
		return nil, fmt.Errorf("grammar: before the first byte: %w", err)
	}
	return g, nil
}

// maxStartWork bounds the Work of computing a grammar's start state in
// Parse.
const maxStartWork = 1 << 22

// parseUnitsPerByte is the Work units ParseWork charges per byte of
// source: parsing, left factoring and checking cost about as much per
// byte as a unit of mask work.
const parseUnitsPerByte = 2

type parser struct {
	src       string
	work      *Work // ticked per alternative parsed and factored (charged before parsing); nil: none
	pos       int
	line, col int
	index     map[string]int
	gen       map[int]bool       // generated rules
	owner     map[int]int        // generated rule -> the rule being defined when it was made
	current   int                // the rule being defined
	members   map[int]*memberSet // by rule: the %members set it is in
	size      int                // symbols so far, repetitions expanded
	names     []string
	rules     [][]alt
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("grammar:%d:%d: %s", p.line, p.col, fmt.Sprintf(format, args...))
}

func (p *parser) eof() bool { return p.pos >= len(p.src) }

func (p *parser) peek() byte {
	if p.eof() {
		return 0
	}
	return p.src[p.pos]
}

func (p *parser) advance(n int) {
	for range n {
		if p.src[p.pos] == '\n' {
			p.line, p.col = p.line+1, 1
		} else {
			p.col++
		}
		p.pos++
	}
}

func (p *parser) consume(s string) bool {
	if strings.HasPrefix(p.src[p.pos:], s) {
		p.advance(len(s))
		return true
	}
	return false
}

// skipSpace skips blanks and comments, and newlines when newlines is set.
func (p *parser) skipSpace(newlines bool) {
	for !p.eof() {
		switch c := p.peek(); {
		case c == '#':
			for !p.eof() && p.peek() != '\n' {
				p.advance(1)
			}
		case c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n'):
			p.advance(1)
		default:
			return
		}
	}
}

func isIdent(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func (p *parser) ident() string {
	start := p.pos
	for !p.eof() && isIdent(p.peek()) {
		p.advance(1)
	}
	return p.src[start:p.pos]
}

func (p *parser) ruleIndex(name string) int {
	if i, ok := p.index[name]; ok {
		return i
	}
	i := len(p.names)
	p.index[name] = i
	p.names = append(p.names, name)
	p.rules = append(p.rules, nil)
	return i
}

// genRule adds an unnamed rule (a group or repetition); its name cannot
// clash with a GBNF identifier.
func (p *parser) genRule() int {
	i := p.ruleIndex(fmt.Sprintf("(%d)", len(p.names)))
	p.gen[i] = true
	p.owner[i] = p.current
	return i
}

// newRule adds a rule for a group or repetition.
func (p *parser) newRule(alts []alt) int {
	i := p.genRule()
	p.rules[i] = alts
	return i
}

// alternatives parses a | b | c up to the end of the rule (nested: up to
// the closing parenthesis).
func (p *parser) alternatives(nested, factor bool) ([]alt, error) {
	var alts []alt
	for {
		if !p.work.tick(1) {
			return nil, fmt.Errorf("grammar: %w", p.work.Err())
		}
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.skipSpace(nested)
		if !p.consume("|") {
			if !factor {
				return alts, nil
			}
			alts = p.factor(alts)
			if p.work != nil && p.work.Err() != nil {
				return nil, fmt.Errorf("grammar: %w", p.work.Err())
			}
			return alts, nil
		}
		p.skipSpace(true)
	}
}

// factor merges alternatives that begin alike: x ::= "ab" c | "ad"
// becomes x ::= "a" x' with x' ::= "b" c | "d" (x' a generated rule, in
// tail position, so it pushes nothing). The language is the same, and a
// State follows a shared prefix with one stack instead of one per
// alternative: the start of an enum of 100,000 strings holds one stack per
// distinct first character, not 100,000.
func (p *parser) factor(alts []alt) []alt {
	if len(alts) < 2 {
		return alts
	}
	var groups [][]alt
	byFirst := map[string]int{}
	for _, a := range alts {
		p.work.tick(1) // an interruption is read once factor returns
		if len(a) == 0 {
			groups = append(groups, []alt{a})
			continue
		}
		k := a[0].key()
		if g, ok := byFirst[k]; ok {
			groups[g] = append(groups[g], a)
			continue
		}
		byFirst[k] = len(groups)
		groups = append(groups, []alt{a})
	}
	if len(groups) == len(alts) {
		return alts
	}
	out := make([]alt, 0, len(groups))
	for _, g := range groups {
		p.work.tick(len(g))
		if len(g) == 1 {
			out = append(out, g[0])
			continue
		}
		n := 1 // the length of the prefix every alternative of g shares
		for ; n < len(g[0]); n++ {
			if !allShare(g, n) {
				break
			}
		}
		tails := make([]alt, len(g))
		for i, a := range g {
			tails[i] = a[n:]
		}
		r := p.genRule()
		p.rules[r] = p.factor(tails)
		out = append(out, append(append(alt{}, g[0][:n]...), sym{ref: r}))
	}
	return out
}

// allShare reports whether every alternative of g has g[0]'s symbol at
// index n.
func allShare(g []alt, n int) bool {
	for _, a := range g[1:] {
		if n >= len(a) || !a[n].equal(g[0][n]) {
			return false
		}
	}
	return true
}

func (s sym) equal(o sym) bool {
	return s.ref == o.ref && s.neg == o.neg && slices.Equal(s.ranges, o.ranges)
}

// key is a string equal for equal symbols only.
func (s sym) key() string {
	b := make([]byte, 0, 9+8*len(s.ranges))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.ref))
	if s.neg {
		b = append(b, 1)
	}
	return string(append(b, classKey(s.ranges)...))
}

func (p *parser) sequence(nested bool) (alt, error) {
	var seq alt
	for {
		p.skipSpace(nested)
		if p.peek() == '\n' { // a rule ends at the end of its line (llama.cpp)
			return seq, nil
		}
		if p.eof() {
			return seq, nil
		}
		var item []sym
		switch c := p.peek(); {
		case c == '"':
			s, err := p.literal()
			if err != nil {
				return nil, err
			}
			n := utf8.RuneCountInString(s)
			rs := make([]rng, 0, n) // one allocation for the literal's classes
			item = make([]sym, 0, n)
			for _, r := range s {
				rs = append(rs, rng{r, r})
				item = append(item, sym{ref: -1, ranges: rs[len(rs)-1 : len(rs) : len(rs)]})
			}
		case c == '[':
			s, err := p.class()
			if err != nil {
				return nil, err
			}
			item = []sym{s}
		case c == '.':
			p.advance(1)
			item = []sym{{ref: -1, neg: true}}
		case c == '(':
			p.advance(1)
			alts, err := p.alternatives(true, true)
			if err != nil {
				return nil, err
			}
			p.skipSpace(true)
			if !p.consume(")") {
				return nil, p.errorf("expected ')'")
			}
			item = []sym{{ref: p.newRule(alts)}}
		case isIdent(c):
			item = []sym{{ref: p.ruleIndex(p.ident())}}
		default:
			return seq, nil
		}
		if p.size += len(item); p.size > MaxSymbols {
			return nil, p.errorf("the grammar is too large (more than %d symbols once repetitions are expanded)", MaxSymbols)
		}
		item, err := p.repetition(item)
		if err != nil {
			return nil, err
		}
		seq = append(seq, item...)
	}
}

// repetition applies a postfix *, +, ? or {m,n} to item.
func (p *parser) repetition(item []sym) ([]sym, error) {
	lo, hi := -1, -1
	switch {
	case p.consume("*"):
		lo, hi = 0, -2
	case p.consume("+"):
		lo, hi = 1, -2
	case p.consume("?"):
		lo, hi = 0, 1
	case p.peek() == '{':
		p.advance(1)
		m := p.number()
		if m < 0 {
			return nil, p.errorf("expected a count after '{'")
		}
		lo, hi = m, m
		if p.consume(",") {
			hi = p.number()
			if hi < 0 {
				hi = -2
			}
		}
		if !p.consume("}") {
			return nil, p.errorf("expected '}'")
		}
		if hi != -2 && hi < lo {
			return nil, p.errorf("repetition {%d,%d}: the maximum is below the minimum", lo, hi)
		}
		if lo > 1000 || hi > 1000 {
			return nil, p.errorf("repetition counts above 1000 are not supported")
		}
	default:
		return item, nil
	}
	p.size += len(item) * (max(lo, hi, 1) - 1)
	if p.size > MaxSymbols {
		return nil, p.errorf("the grammar is too large (more than %d symbols once repetitions are expanded)", MaxSymbols)
	}
	var out []sym
	for range lo {
		out = append(out, item...)
	}
	if hi == -2 { // x*: R ::= x R | ""
		r := p.genRule()
		p.rules[r] = []alt{append(append(alt{}, item...), sym{ref: r}), {}}
		return append(out, sym{ref: r}), nil
	}
	// Up to hi-lo optional items, nested: R1 ::= x R2 | "" ...
	next := -1
	for range hi - lo {
		a := append(alt{}, item...)
		if next >= 0 {
			a = append(a, sym{ref: next})
		}
		next = p.newRule([]alt{a, {}})
	}
	if next >= 0 {
		out = append(out, sym{ref: next})
	}
	return out, nil
}

func (p *parser) number() int {
	start := p.pos
	for !p.eof() && p.peek() >= '0' && p.peek() <= '9' {
		p.advance(1)
	}
	if start == p.pos {
		return -1
	}
	n, _ := strconv.Atoi(p.src[start:p.pos])
	return n
}

func (p *parser) literal() (string, error) {
	p.advance(1)
	var b strings.Builder
	for {
		if p.eof() || p.peek() == '\n' {
			return "", p.errorf("unterminated string")
		}
		if p.consume(`"`) {
			return b.String(), nil
		}
		r, err := p.char()
		if err != nil {
			return "", err
		}
		b.WriteRune(r)
	}
}

// char reads one possibly escaped code point.
func (p *parser) char() (rune, error) {
	if p.peek() == '\\' {
		p.advance(1)
		if p.eof() {
			return 0, p.errorf("unterminated escape")
		}
		c := p.peek()
		p.advance(1)
		switch c {
		case 'n':
			return '\n', nil
		case 'r':
			return '\r', nil
		case 't':
			return '\t', nil
		case '\\', '"', '[', ']', '-', '^':
			return rune(c), nil
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if p.pos+n > len(p.src) {
				return 0, p.errorf("short \\%c escape", c)
			}
			digits := p.src[p.pos : p.pos+n]
			v, err := strconv.ParseUint(digits, 16, 32)
			if err != nil {
				return 0, p.errorf("bad \\%c escape", c)
			}
			switch {
			case v > unicode.MaxRune:
				return 0, p.errorf("\\%c escape %s is beyond U+10FFFF", c, digits)
			case v >= 0xD800 && v <= 0xDFFF:
				return 0, p.errorf("\\%c escape %s is not a code point (a UTF-16 surrogate)", c, digits)
			}
			p.advance(n)
			return rune(v), nil
		}
		return 0, p.errorf("unknown escape \\%c", c)
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	if r == utf8.RuneError && n <= 1 {
		return 0, p.errorf("invalid UTF-8")
	}
	p.advance(n)
	return r, nil
}

func (p *parser) class() (sym, error) {
	p.advance(1)
	s := sym{ref: -1}
	if p.consume("^") {
		s.neg = true
	}
	for {
		if p.eof() || p.peek() == '\n' {
			return s, p.errorf("unterminated character class")
		}
		if p.consume("]") {
			if s.neg {
				slices.SortFunc(s.ranges, func(a, b rng) int { return cmp.Compare(a.lo, b.lo) })
			}
			return s, nil
		}
		lo, err := p.char()
		if err != nil {
			return s, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.advance(1)
			if hi, err = p.char(); err != nil {
				return s, err
			}
			if hi < lo {
				return s, p.errorf("range %q-%q is backwards", lo, hi)
			}
		}
		s.ranges = append(s.ranges, rng{lo, hi})
	}
}

// check checks member sets, computes the rules' shortest expansions
// (ticking w; nil: none) and rejects left recursion and rules that match
// nothing finite.
func (g *Grammar) check(w *Work) error {
	if err := g.checkMembers(); err != nil {
		return err
	}
	g.minLenFixed(nil, w)
	if w != nil && w.Err() != nil {
		return fmt.Errorf("grammar: %w", w.Err())
	}
	for i, l := range g.minLen {
		if l >= infLen {
			return fmt.Errorf("grammar: %s never ends", g.describe(i))
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return err
	}
	g.settleMembers()
	g.tabulateSuffixes()
	return nil
}

// tabulateSuffixes sets g.suffix from the rules' settled shortest
// expansions.
func (g *Grammar) tabulateSuffixes() {
	total := 0
	for _, alts := range g.rules {
		for _, a := range alts {
			total += len(a) + 1
		}
	}
	buf := make([]int32, total)
	g.suffix = make([][][]int32, len(g.rules))
	for r, alts := range g.rules {
		g.suffix[r] = make([][]int32, len(alts))
		for k, a := range alts {
			suf := buf[: len(a)+1 : len(a)+1]
			buf = buf[len(a)+1:]
			for i := len(a) - 1; i >= 0; i-- {
				l := g.altLen(a[i:i+1], 0)
				if l >= infLen || int(suf[i+1]) >= infLen {
					suf[i] = infLen
					continue
				}
				suf[i] = int32(addLen(int(suf[i+1]), l))
			}
			g.suffix[r][k] = suf
		}
	}
}

// partLen is the shortest expansion of symbols [from, to) of alternative
// k of rule r: altLen, read from g.suffix once tabulated.
func (g *Grammar) partLen(r, k, from, to int) int {
	if g.suffix != nil {
		suf := g.suffix[r][k]
		if a := int(suf[from]); a < infLen-1 {
			return a - int(suf[to])
		}
	}
	return g.altLen(g.rules[r][k][:to], from)
}

// infLen is the shortest expansion of a rule that never ends; lengths
// that would reach it are capped just below (a sentence that long never
// fits max_tokens anyway).
const infLen = 1 << 30

// addLen is a + b capped below infLen.
func addLen(a, b int) int { return min(a+b, infLen-1) }

// minLenFixed sets g.minLen, the lengths of the rules in fixed given, by
// Knuth's generalization of Dijkstra's algorithm, in time linear in the
// grammar's size (times a log): rules are settled shortest first; an
// alternative becomes a candidate once every rule it references is
// settled.
func (g *Grammar) minLenFixed(fixed map[int]int, w *Work) {
	n := len(g.rules)
	minLen := make([]int, n)
	for i := range minLen {
		minLen[i] = infLen
	}
	type altID struct{ rule, alt int }
	var alts []altID
	var partial, unsettled []int // per alternative: the settled part's length, the references still unsettled
	users := make([][]int, n)    // rule -> the alternatives referencing it, once per reference
	h := &lenHeap{}
	for r, l := range fixed {
		heap.Push(h, ruleLen{l, r})
	}
	for i, as := range g.rules {
		if _, ok := fixed[i]; ok {
			continue
		}
		for k, a := range as {
			w.tick(1) // an interruption is read by the caller
			id := len(alts)
			alts = append(alts, altID{i, k})
			sum, refs := 0, 0
			for _, s := range a {
				if s.isRef() {
					refs++
					users[s.ref] = append(users[s.ref], id)
				} else {
					sum = addLen(sum, s.minBytes())
				}
			}
			partial, unsettled = append(partial, sum), append(unsettled, refs)
			if refs == 0 {
				heap.Push(h, ruleLen{sum, i})
			}
		}
	}
	settled := make([]bool, n)
	for h.Len() > 0 {
		top := heap.Pop(h).(ruleLen)
		w.tick(1)
		if settled[top.rule] {
			continue
		}
		settled[top.rule], minLen[top.rule] = true, top.len
		for _, id := range users[top.rule] {
			partial[id] = addLen(partial[id], top.len)
			if unsettled[id]--; unsettled[id] == 0 {
				heap.Push(h, ruleLen{partial[id], alts[id].rule})
			}
		}
	}
	g.minLen = minLen
}

type ruleLen struct{ len, rule int }

// lenHeap is a min-heap of rule lengths.
type lenHeap []ruleLen

func (h lenHeap) Len() int           { return len(h) }
func (h lenHeap) Less(i, j int) bool { return h[i].len < h[j].len }
func (h lenHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lenHeap) Push(x any)        { *h = append(*h, x.(ruleLen)) }
func (h *lenHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// describe names rule i for errors: a rule of the source by its name, a
// group or repetition by the rule it is written in.
func (g *Grammar) describe(i int) string {
	if o := g.owner[i]; o != i {
		return fmt.Sprintf("a group or repetition in rule %q", g.names[o])
	}
	return fmt.Sprintf("rule %q", g.names[i])
}

// checkLeftRecursion rejects rules that reach themselves through nullable
// prefixes with something left to match after the return (x ::= x "a"):
// every trip round such a cycle pushes a continuation, so expanding it
// never ends. A cycle of references in tail position ((("a")*)*) pushes
// nothing, and the expansion, which visits each (frame, rest) once, ends.
func (g *Grammar) checkLeftRecursion() error {
	n := len(g.rules)
	type edge struct {
		to   int
		push bool
	}
	edges := make([][]edge, n)
	for i, alts := range g.rules {
		for _, a := range alts {
			for k, s := range a {
				if !s.isRef() {
					break
				}
				edges[i] = append(edges[i], edge{s.ref, k+1 < len(a)})
				if g.minLen[s.ref] != 0 {
					break
				}
			}
		}
	}
	// Tarjan's strongly connected components, iteratively.
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int
	onStack := make([]bool, n)
	next, ncomp := 0, 0
	type callFrame struct{ v, e int }
	for root := range n {
		if index[root] >= 0 {
			continue
		}
		calls := []callFrame{{root, 0}}
		index[root], low[root] = next, next
		next++
		stack, onStack[root] = append(stack, root), true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.e < len(edges[f.v]) {
				w := edges[f.v][f.e].to
				f.e++
				if index[w] < 0 {
					index[w], low[w] = next, next
					next++
					stack, onStack[w] = append(stack, w), true
					calls = append(calls, callFrame{w, 0})
				} else if onStack[w] {
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				for {
					w := stack[len(stack)-1]
					stack, onStack[w] = stack[:len(stack)-1], false
					comp[w] = ncomp
					if w == v {
						break
					}
				}
				ncomp++
			}
		}
	}
	for i := range n {
		for _, e := range edges[i] {
			if e.push && comp[e.to] == comp[i] {
				culprit := i
				for j := range n { // name a rule of the source when the cycle has one
					if comp[j] == comp[i] && g.owner[j] == j {
						culprit = j
						break
					}
				}
				return fmt.Errorf("grammar: %s is left-recursive", g.describe(culprit))
			}
		}
	}
	return nil
}

// altLen is the shortest expansion of a[from:].
func (g *Grammar) altLen(a alt, from int) int {
	total := 0
	for _, s := range a[from:] {
		if s.isRef() {
			if g.minLen == nil || g.minLen[s.ref] >= infLen {
				return infLen
			}
			total = addLen(total, g.minLen[s.ref])
		} else {
			total = addLen(total, s.minBytes())
		}
	}
	return total
}
