package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A regex is a parsed ECMA-262 pattern (the subset JSON Schema's pattern
// keyword uses in practice): literals, escapes, classes, groups,
// alternation, greedy and lazy quantifiers, ^ / $ at the ends, and
// lookaheads right after a leading ^ of a pattern without top-level
// alternation. Lookbehinds, other lookaheads, backreferences and word
// boundaries are refused.
type regex struct {
	kind  regexKind
	set   []rng    // reClass: code points, sorted and disjoint
	subs  []*regex // reSeq, reAlt: parts; reRepeat, reLook: subs[0]
	lo    int      // reRepeat
	hi    int      // reRepeat; -1: unbounded
	top   bool     // reSeq: a top-level alternative, where anchors count
	start bool     // top: anchored with ^
	end   bool     // top: anchored with $
	neg   bool     // reLook: (?!...) rather than (?=...)
	looks []*regex // top: the lookaheads after ^ (reLook), each a pattern anchored at the start
}

type regexKind uint8

const (
	reClass regexKind = iota
	reSeq
	reAlt
	reRepeat
	reStart // ^ (only at the start of a top-level alternative)
	reEnd   // $ (only at its end)
	reLook  // (?=...) or (?!...) (only after a leading ^)
)

// maxRune is the largest code point.
const maxRune = 0x10FFFF

type regexParser struct {
	src []rune
	pos int
}

// parseRegex parses an ECMA-262 pattern.
func parseRegex(src string) (*regex, error) {
	if !utf8.ValidString(src) {
		return nil, fmt.Errorf("invalid UTF-8")
	}
	p := &regexParser{src: []rune(src)}
	re, err := p.alternation(0)
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, fmt.Errorf("unbalanced ')' at %d", p.pos)
	}
	if err := topAnchors(re, false); err != nil {
		return nil, err
	}
	if len(re.subs) > 1 && re.hasLook() {
		return nil, fmt.Errorf("lookaheads are supported only in a pattern without top-level alternation")
	}
	return re, nil
}

// topAnchors marks re's alternatives as top-level ones: ^ and $ at their
// ends anchor them (inLook: re is a lookahead's pattern, anchored at the
// start), and lookaheads right after a leading ^ are set apart.
func topAnchors(re *regex, inLook bool) error {
	for _, a := range re.subs {
		a.top = true
		if len(a.subs) > 0 && a.subs[0].kind == reStart {
			a.start, a.subs = true, a.subs[1:]
			for !inLook && len(a.subs) > 0 && a.subs[0].kind == reLook {
				look := a.subs[0]
				if err := topAnchors(look.subs[0], true); err != nil {
					return err
				}
				a.looks, a.subs = append(a.looks, look), a.subs[1:]
			}
		}
		if inLook {
			a.start = true
		}
		if n := len(a.subs); n > 0 && a.subs[n-1].kind == reEnd {
			a.end, a.subs = true, a.subs[:n-1]
		}
		if err := noAnchors(a); err != nil {
			return err
		}
	}
	return nil
}

// hasLook reports whether a top-level alternative of re has lookaheads.
func (r *regex) hasLook() bool {
	return slices.ContainsFunc(r.subs, func(a *regex) bool { return len(a.looks) > 0 })
}

func noAnchors(r *regex) error {
	if r.kind == reStart || r.kind == reEnd {
		return fmt.Errorf("anchors are supported only at the ends of the pattern")
	}
	if r.kind == reLook {
		return fmt.Errorf("lookaheads are supported only right after a leading ^")
	}
	for _, s := range r.subs {
		if err := noAnchors(s); err != nil {
			return err
		}
	}
	return nil
}

func (p *regexParser) more() bool { return p.pos < len(p.src) }
func (p *regexParser) peek() rune {
	if p.more() {
		return p.src[p.pos]
	}
	return -1
}

// alternation parses a|b|c; the result is reAlt of reSeq.
func (p *regexParser) alternation(depth int) (*regex, error) {
	if depth > 50 {
		return nil, fmt.Errorf("groups nested too deeply")
	}
	alt := &regex{kind: reAlt}
	for {
		seq, err := p.sequence(depth)
		if err != nil {
			return nil, err
		}
		alt.subs = append(alt.subs, seq)
		if p.peek() != '|' {
			return alt, nil
		}
		p.pos++
	}
}

func (p *regexParser) sequence(depth int) (*regex, error) {
	seq := &regex{kind: reSeq}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		atom, err := p.atom(depth)
		if err != nil {
			return nil, err
		}
		if atom, err = p.quantifier(atom); err != nil {
			return nil, err
		}
		seq.subs = append(seq.subs, atom)
	}
	return seq, nil
}

func (p *regexParser) atom(depth int) (*regex, error) {
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '(':
		look, neg := false, false
		if p.peek() == '?' {
			rest := string(p.src[p.pos:min(p.pos+3, len(p.src))])
			switch {
			case strings.HasPrefix(rest, "?:"):
				p.pos += 2
			case strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!"):
				end := slices.Index(p.src[p.pos:], '>')
				if end < 0 {
					return nil, fmt.Errorf("unterminated group name")
				}
				p.pos += end + 1
			case strings.HasPrefix(rest, "?=") || strings.HasPrefix(rest, "?!"):
				look, neg = true, rest[1] == '!'
				p.pos += 2
			default:
				return nil, fmt.Errorf("lookbehind groups are not supported")
			}
		}
		inner, err := p.alternation(depth + 1)
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("missing ')'")
		}
		p.pos++
		if look {
			return &regex{kind: reLook, neg: neg, subs: []*regex{inner}}, nil
		}
		return inner, nil
	case '[':
		return p.class()
	case '.':
		return &regex{kind: reClass, set: negate([]rng{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}})}, nil
	case '^':
		return &regex{kind: reStart}, nil
	case '$':
		return &regex{kind: reEnd}, nil
	case '\\':
		set, err := p.escape(false)
		if err != nil {
			return nil, err
		}
		return &regex{kind: reClass, set: set}, nil
	case '*', '+', '?':
		return nil, fmt.Errorf("nothing to repeat at %d", p.pos-1)
	}
	return &regex{kind: reClass, set: []rng{{c, c}}}, nil
}

// quantifier applies a postfix *, +, ?, {m}, {m,} or {m,n} (each possibly
// lazy: the same strings).
func (p *regexParser) quantifier(atom *regex) (*regex, error) {
	lo, hi := 0, 0
	switch p.peek() {
	case '*':
		lo, hi = 0, -1
	case '+':
		lo, hi = 1, -1
	case '?':
		lo, hi = 0, 1
	case '{':
		m, n, size, ok := p.braces()
		if !ok {
			return atom, nil // a literal '{' (Annex B)
		}
		p.pos += size - 1
		lo, hi = m, n
	default:
		return atom, nil
	}
	p.pos++
	if p.peek() == '?' {
		p.pos++
	}
	if atom.kind == reStart || atom.kind == reEnd || atom.kind == reLook {
		return nil, fmt.Errorf("nothing to repeat")
	}
	if hi >= 0 && hi < lo {
		return nil, fmt.Errorf("repetition {%d,%d}: the maximum is below the minimum", lo, hi)
	}
	if lo > 1000 || hi > 1000 {
		return nil, fmt.Errorf("repetition counts above 1000 are not supported")
	}
	return &regex{kind: reRepeat, subs: []*regex{atom}, lo: lo, hi: hi}, nil
}

// braces reads {m}, {m,} or {m,n} at the parser's position: size is its
// length in runes.
func (p *regexParser) braces() (lo, hi, size int, ok bool) {
	s := string(p.src[p.pos:])
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, 0, 0, false
	}
	body := s[1:end]
	m, n, comma := strings.Cut(body, ",")
	lo, err := strconv.Atoi(m)
	if err != nil || m == "" || strings.ContainsAny(m, "+-") {
		return 0, 0, 0, false
	}
	hi = lo
	if comma {
		hi = -1
		if n != "" {
			if hi, err = strconv.Atoi(n); err != nil || strings.ContainsAny(n, "+-") {
				return 0, 0, 0, false
			}
		}
	}
	return lo, hi, len([]rune(s[:end+1])), true
}

func (p *regexParser) class() (*regex, error) {
	neg := false
	if p.peek() == '^' {
		neg = true
		p.pos++
	}
	var set []rng
	for {
		if !p.more() {
			return nil, fmt.Errorf("unterminated character class")
		}
		c := p.src[p.pos]
		p.pos++
		if c == ']' {
			break
		}
		var lo []rng
		if c == '\\' {
			s, err := p.escape(true)
			if err != nil {
				return nil, err
			}
			lo = s
		} else {
			lo = []rng{{c, c}}
		}
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' && len(lo) == 1 && lo[0].lo == lo[0].hi {
			p.pos++
			h := p.src[p.pos]
			p.pos++
			hiSet := []rng{{h, h}}
			if h == '\\' {
				s, err := p.escape(true)
				if err != nil {
					return nil, err
				}
				hiSet = s
			}
			if len(hiSet) != 1 || hiSet[0].lo != hiSet[0].hi {
				set = append(set, lo[0], rng{'-', '-'})
				set = append(set, hiSet...)
				continue
			}
			if hiSet[0].lo < lo[0].lo {
				return nil, fmt.Errorf("class range out of order")
			}
			set = append(set, rng{lo[0].lo, hiSet[0].lo})
			continue
		}
		set = append(set, lo...)
	}
	set = normalize(set)
	if neg {
		set = negate(set)
	}
	return &regex{kind: reClass, set: set}, nil
}

// escape reads what follows a backslash: a class escape or one code
// point.
func (p *regexParser) escape(inClass bool) ([]rng, error) {
	if !p.more() {
		return nil, fmt.Errorf("trailing backslash")
	}
	c := p.src[p.pos]
	p.pos++
	digit := []rng{{'0', '9'}}
	word := []rng{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// ECMA-262's \s also holds Unicode spaces and \v, which other
	// engines' \s (RE2's) lack: \s is the blanks both agree on, \S
	// the complement of ECMA's.
	space := []rng{{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}
	ecmaSpace := []rng{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	one := func(r rune) ([]rng, error) { return []rng{{r, r}}, nil }
	switch c {
	case 'd':
		return digit, nil
	case 'D':
		return negate(digit), nil
	case 'w':
		return word, nil
	case 'W':
		return negate(word), nil
	case 's':
		return space, nil
	case 'S':
		return negate(ecmaSpace), nil
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 't':
		return one('\t')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case '0':
		return one(0)
	case 'b':
		if inClass {
			return one('\b')
		}
		return nil, fmt.Errorf(`word boundaries (\b) are not supported`)
	case 'B':
		return nil, fmt.Errorf(`word boundaries (\B) are not supported`)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if c == 'u' && p.peek() == '{' {
			end := slices.Index(p.src[p.pos:], '}')
			if end < 0 {
				return nil, fmt.Errorf(`unterminated \u{...}`)
			}
			v, err := strconv.ParseUint(string(p.src[p.pos+1:p.pos+end]), 16, 32)
			if err != nil || v > maxRune {
				return nil, fmt.Errorf(`bad \u{...} escape`)
			}
			p.pos += end + 1
			return one(rune(v))
		}
		if p.pos+n > len(p.src) {
			return one(c) // Annex B: an identity escape
		}
		v, err := strconv.ParseUint(string(p.src[p.pos:p.pos+n]), 16, 32)
		if err != nil {
			return one(c)
		}
		p.pos += n
		return one(rune(v))
	case 'c':
		if p.more() && (p.peek()|0x20) >= 'a' && (p.peek()|0x20) <= 'z' {
			r := p.peek() % 32
			p.pos++
			return one(r)
		}
		return one('\\')
	case 'p', 'P':
		return nil, fmt.Errorf(`Unicode property escapes (\p) are not supported`)
	case 'k':
		return nil, fmt.Errorf(`named backreferences (\k) are not supported`)
	}
	if c >= '1' && c <= '9' {
		return nil, fmt.Errorf("backreferences are not supported")
	}
	return one(c)
}

// normalize sorts ranges and merges overlapping or adjacent ones.
func normalize(set []rng) []rng {
	set = slices.Clone(set)
	slices.SortFunc(set, func(a, b rng) int { return int(a.lo - b.lo) })
	var out []rng
	for _, r := range set {
		if n := len(out); n > 0 && r.lo <= out[n-1].hi+1 {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

// negate is the complement of a set within [0, maxRune].
func negate(set []rng) []rng {
	set = normalize(set)
	var out []rng
	next := rune(0)
	for _, r := range set {
		if r.lo > next {
			out = append(out, rng{next, r.lo - 1})
		}
		next = r.hi + 1
	}
	if next <= maxRune {
		out = append(out, rng{next, maxRune})
	}
	return out
}

// intersect is the code points in both sets.
func intersect(a, b []rng) []rng {
	var out []rng
	for _, x := range a {
		for _, y := range b {
			if lo, hi := max(x.lo, y.lo), min(x.hi, y.hi); lo <= hi {
				out = append(out, rng{lo, hi})
			}
		}
	}
	return normalize(out)
}

// lengths is the fewest and most code points r matches (hi -1:
// unbounded).
func (r *regex) lengths() (lo, hi int) {
	switch r.kind {
	case reClass:
		if len(r.set) == 0 {
			return 0, 0
		}
		return 1, 1
	case reSeq:
		for _, s := range r.subs {
			l, h := s.lengths()
			lo += l
			if hi >= 0 {
				if h < 0 {
					hi = -1
				} else {
					hi += h
				}
			}
		}
		if r.top && (!r.start || !r.end) {
			hi = -1
		}
		return lo, hi
	case reAlt:
		for i, s := range r.subs {
			l, h := s.lengths()
			if i == 0 || l < lo {
				lo = l
			}
			if i == 0 || hi >= 0 && (h < 0 || h > hi) {
				hi = h
			}
		}
		return lo, hi
	case reRepeat:
		l, h := r.subs[0].lengths()
		if r.hi < 0 || h < 0 {
			return l * r.lo, -1
		}
		return l * r.lo, h * r.hi
	}
	return 0, 0
}

// jsonSafe are the code points a JSON string holds unescaped (the char
// rule of JSONRules); '"', '\\', '\n', '\r' and '\t' are written escaped
// and other control characters are left out.
var jsonSafe = []rng{{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x7E}, {0x80, 0xD7FF}, {0xE000, maxRune}}

// gbnfClass is GBNF for one code point of set inside a JSON string; ok is
// false when none can be written.
func gbnfClass(set []rng) (string, bool) {
	var alts []string
	if safe := intersect(set, jsonSafe); len(safe) > 0 {
		var b strings.Builder
		b.WriteByte('[')
		for _, r := range safe {
			b.WriteString(classChar(r.lo))
			if r.hi != r.lo {
				b.WriteByte('-')
				b.WriteString(classChar(r.hi))
			}
		}
		b.WriteByte(']')
		alts = append(alts, b.String())
	}
	for _, e := range []struct {
		r   rune
		esc string
	}{{'"', `"\\\""`}, {'\\', `"\\\\"`}, {'\n', `"\\n"`}, {'\r', `"\\r"`}, {'\t', `"\\t"`}} {
		if len(intersect(set, []rng{{e.r, e.r}})) > 0 {
			alts = append(alts, e.esc)
		}
	}
	switch len(alts) {
	case 0:
		return "", false
	case 1:
		return alts[0], true
	}
	return "( " + strings.Join(alts, " | ") + " )", true
}

func classChar(r rune) string {
	if r >= 0x20 && r < 0x7F && r != '\\' && r != ']' && r != '-' && r != '^' && r != '"' {
		return string(r)
	}
	if r <= 0xFFFF {
		return fmt.Sprintf(`\u%04X`, r)
	}
	return fmt.Sprintf(`\U%08X`, r)
}

// gbnf is GBNF for the JSON string contents (without quotes) whose
// decoded text r matches; ok is false when there are none.
func (r *regex) gbnf() (string, bool) {
	switch r.kind {
	case reClass:
		return gbnfClass(r.set)
	case reSeq:
		if len(r.looks) > 0 {
			return "", false // the automaton of lookaheadGBNF writes these
		}
		var parts []string
		for _, s := range r.subs {
			g, ok := s.gbnf()
			if !ok {
				return "", false
			}
			parts = append(parts, g)
		}
		if r.top && !r.start {
			parts = append([]string{"char*"}, parts...)
		}
		if r.top && !r.end {
			parts = append(parts, "char*")
		}
		if len(parts) == 0 {
			return `""`, true
		}
		return "( " + strings.Join(parts, " ") + " )", true
	case reAlt:
		var alts []string
		for _, s := range r.subs {
			if g, ok := s.gbnf(); ok {
				alts = append(alts, g)
			}
		}
		if len(alts) == 0 {
			return "", false
		}
		return "( " + strings.Join(alts, " | ") + " )", true
	case reRepeat:
		g, ok := r.subs[0].gbnf()
		if !ok {
			if r.lo == 0 {
				return `""`, true
			}
			return "", false
		}
		hi := r.hi
		if l, _ := r.subs[0].lengths(); l == 0 && hi < 0 {
			// A repeated part that can be empty would recurse on the
			// left: a bounded count of it (a subset) instead.
			hi = r.lo + 8
		}
		switch {
		case hi < 0 && r.lo == 0:
			return g + "*", true
		case hi < 0 && r.lo == 1:
			return g + "+", true
		case hi < 0:
			return fmt.Sprintf("%s{%d,}", g, r.lo), true
		case r.lo == hi:
			if r.lo == 0 {
				return `""`, true
			}
			return fmt.Sprintf("%s{%d}", g, r.lo), true
		}
		return fmt.Sprintf("%s{%d,%d}", g, r.lo, hi), true
	}
	return "", false
}

// withLength restricts r (a parsed pattern) to strings of lo..hi code
// points (hi -1: unbounded) when that is expressible: its length already
// lies within them, or it is one sequence whose only variable-length part
// is one repetition of a single code point (an unanchored end counts as
// such a part).
func (r *regex) withLength(lo, hi int) (*regex, bool) {
	pl, ph := r.lengths()
	if pl >= lo && (hi < 0 || ph >= 0 && ph <= hi) {
		return r, true
	}
	if len(r.subs) != 1 {
		return nil, false
	}
	seq := *r.subs[0]
	seq.subs = slices.Clone(seq.subs)
	anyChar := &regex{kind: reClass, set: []rng{{0, maxRune}}}
	if !seq.start {
		seq.subs = append([]*regex{{kind: reRepeat, subs: []*regex{anyChar}, hi: -1}}, seq.subs...)
		seq.start = true
	}
	if !seq.end {
		seq.subs = append(seq.subs, &regex{kind: reRepeat, subs: []*regex{anyChar}, hi: -1})
		seq.end = true
	}
	fixed, variable, fixedBefore := 0, -1, 0 // fixedBefore: the fixed length before the variable part
	for i, s := range seq.subs {
		l, h := s.lengths()
		if l == h {
			fixed += l
			continue
		}
		if variable >= 0 || s.kind != reRepeat || s.subs[0].kind != reClass {
			if variable >= 0 && s.kind == reRepeat && s.subs[0].kind == reClass && s.lo == 0 && s.hi < 0 && seq.subs[variable].hi < 0 &&
				fixed == fixedBefore && slices.Equal(intersect(seq.subs[variable].subs[0].set, s.subs[0].set), normalize(s.subs[0].set)) {
				// Two unbounded repetitions with nothing between them (an
				// unanchored pattern's tail), the second's code points
				// among the first's: the first matches what both do.
				seq.subs[i] = &regex{kind: reSeq}
				continue
			}
			return nil, false
		}
		variable, fixedBefore = i, fixed
	}
	if variable < 0 {
		return nil, false
	}
	v := *seq.subs[variable]
	v.lo = max(v.lo, lo-fixed)
	if hi >= 0 {
		if v.hi < 0 || v.hi > hi-fixed {
			v.hi = hi - fixed
		}
	}
	if v.hi >= 0 && (v.hi < v.lo || v.hi > 1000) || v.lo > 1000 {
		return nil, false
	}
	seq.subs[variable] = &v
	return &regex{kind: reAlt, subs: []*regex{&seq}}, true
}
