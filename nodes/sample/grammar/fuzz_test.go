package grammar

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzWorkLimit is the Work limit of each mask in the fuzz targets.
const fuzzWorkLimit = 50_000

// maskWithin runs input through a cache of g, computing the mask of every
// state under a fresh Work of fuzzWorkLimit units, and fails t when a
// mask spends more than its limit (plus one check's granularity), stops
// for any reason but a limit, or a Remaining is negative. It stops at
// the first limit reached.
func maskWithin(t *testing.T, g *Grammar, v *Vocab, input []byte) {
	t.Helper()
	input = input[:min(len(input), 256)] // each byte costs a mask: keep executions fast
	c := g.NewCache()
	st := c.Start()
	for i := 0; st != nil; i++ {
		w := &Work{Limit: fuzzWorkLimit}
		c.Bind(w)
		v.Mask(st, 0)
		if i < len(input) {
			st = st.Advance(input[i])
		}
		if w.Used() > fuzzWorkLimit+workSlack {
			t.Fatalf("after %d bytes: a mask spent %d units, limit %d", i, w.Used(), fuzzWorkLimit)
		}
		if err := w.Err(); err != nil {
			if !errors.Is(err, ErrWorkLimit) && !errors.Is(err, ErrTooAmbiguous) {
				t.Fatalf("after %d bytes: stopped by %v", i, err)
			}
			return
		}
		if st != nil && st.Remaining() < 0 {
			t.Fatalf("after %d bytes: negative Remaining", i)
		}
		if i >= len(input) {
			return
		}
	}
}

// FuzzParse: Parse never panics, and a grammar it accepts follows input
// with every mask within its Work limit.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`root ::= "a" | [b-d]+ x?` + "\nx ::= \"\\u00e9\"{1,3}", "root ::= object\n" + JSONRules, `root ::= (.)*`, `root ::= [^\x00-\x7f]`,
		"%members m r n=3 required=0 min=1 max=2 needs=2:1\nroot ::= \"{\" m \"}\"\nm ::= \"a\" r | \"b\" r | \"c\" r | \"x\" r | \"\"\nr ::= \",a\" r | \",b\" r | \",c\" r | \",x\" r | \"\""} {
		f.Add(s, []byte(`{"a": [1, "é"]}`))
	}
	for _, h := range hostile {
		f.Add(h.src, []byte(h.input))
	}
	v, _ := byteVocab("ab{}[]\",: 1é")
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		g, err := Parse(src)
		if err != nil {
			return
		}
		maskWithin(t, g, v, input)
	})
}

// fuzzSchemaWorkLimit is the Work limit of each compilation in FuzzSchema.
const fuzzSchemaWorkLimit = 1 << 20

// FuzzSchema: FromSchema never panics, its compilation stays within its
// Work limit (failing with ErrSchemaTooComplex when it needs more), what
// it returns parses, and its grammar follows input with every mask within
// its Work limit.
func FuzzSchema(f *testing.F) {
	for _, s := range testSchemas {
		f.Add(s, []byte(`{"a": [1, "b"], "c": {}}`))
	}
	for _, s := range []string{
		`{"anyOf":[{"type":"string"},{"$ref":"#"}]}`,
		`{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991,"multipleOf":3}`,
		`{"type":"number","exclusiveMinimum":0,"maximum":10,"multipleOf":0.5}`,
		`{"type":"string","pattern":"^(?:[a-z]{2,}|\\d+)-x?$","maxLength":9}`,
		`{"type":"string","format":"date-time"}`,
		`{"type":"string","format":"email","pattern":"^[a-z]+(?:\\.[a-z]+)*@x\\.[a-z]{2,}$","maxLength":30}`,
		`{"allOf":[{"$ref":"#/$defs/a"},{"required":["x"]}],"$defs":{"a":{"properties":{"x":{"const":1}}}}}`,
		`{"oneOf":[{"required":["a"]},{"required":["b"]}],"properties":{"a":{},"b":{}},"not":{"type":"array"}}`,
		`{"if":{"properties":{"k":{"const":1}}},"then":{"required":["k"]},"minProperties":1,"maxProperties":2,"properties":{"k":{},"j":{}}}`,
		`{"type":"array","prefixItems":[{"type":"null"}],"items":false,"uniqueItems":true}`,
		`{"type":"object","properties":{"a":{}},"patternProperties":{"^a":{"type":"integer"},"b$":{"maxLength":2}},"additionalProperties":{"type":"null"},"maxProperties":3}`,
		`{"type":"object","patternProperties":{"^(?!(if|in)$)[a-z]+$":{}},"propertyNames":{"maxLength":3},"additionalProperties":false}`,
		`{"type":"string","pattern":"^(?=.*[0-9])(?!.*ab)[a-z0-9]{2,6}$","not":{"enum":["a1","b2"]}}`,
		`{"oneOf":[{"properties":{"t":{"pattern":"^x"}},"required":["t"]},{"properties":{"t":{"pattern":"^y"},"u":{}},"required":["t","u"],"additionalProperties":false}]}`,
	} {
		f.Add(s, []byte(`"abc"`))
	}
	for _, c := range costlySchemas {
		f.Add(c.schema, []byte(`{}`))
	}
	v, _ := byteVocab("ab{}[]\",: 1")
	f.Fuzz(func(t *testing.T, schema string, input []byte) {
		if !json.Valid([]byte(schema)) {
			return
		}
		w := &Work{Limit: fuzzSchemaWorkLimit}
		src, err := FromSchemaWork(json.RawMessage(schema), w)
		if w.Used() > fuzzSchemaWorkLimit+workSlack {
			t.Fatalf("compiling %s spent %d units, limit %d", schema, w.Used(), fuzzSchemaWorkLimit)
		}
		if w.Err() != nil && !errors.Is(err, ErrSchemaTooComplex) {
			t.Fatalf("compiling %s: the Work stopped (%v) but the error is %v", schema, w.Err(), err)
		}
		if err != nil {
			return
		}
		g, err := Parse(src)
		if err != nil {
			if errors.Is(err, ErrTooAmbiguous) || errors.Is(err, ErrWorkLimit) {
				return // refused when compiled: a limit, not a bug
			}
			t.Fatalf("FromSchema(%s) gave GBNF that does not parse: %v\n%s", schema, err, src)
		}
		maskWithin(t, g, v, input)
	})
}

// FuzzRegex: a pattern parseRegex accepts compiles to GBNF that parses.
func FuzzRegex(f *testing.F) {
	for _, s := range []string{`^[a-z]+$`, `(a|b)*c{2,3}`, `\d+\.\d*`, `[^"\\]`, `^(?:x|)$`, `a{,}`, `[\w-]{1,5}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		re, err := parseRegex(pattern)
		if err != nil {
			return
		}
		re.lengths()
		if short, ok := re.withLength(1, 8); ok {
			re = short
		}
		g, ok := re.gbnf()
		if !ok {
			return
		}
		src := `root ::= "\"" ` + g + ` "\""` + "\n" + JSONRules
		if _, err := Parse(src); err != nil && !strings.Contains(err.Error(), "too large") {
			t.Fatalf("pattern %q gave GBNF that does not parse: %v\n%s", pattern, err, src)
		}
	})
}

// FuzzPatternMachine: the grammar of a pattern (lookaheads included)
// accepts a string exactly when the pattern's automata match it.
func FuzzPatternMachine(f *testing.F) {
	for _, c := range []struct{ pattern, s string }{
		{`^(?!(if|and)$)[a-z_]\w*$`, "iff"}, {`^(?=.*\d)(?!.*x)[a-z0-9]{2,4}$`, "a1"}, {`a|b+c`, "xbbc"},
		{`^[^/]+(/[^/]+)*$`, "a/b"}, {`^(?!a)`, "ba"}, {`x{2,3}?$`, "axxx"},
	} {
		f.Add(c.pattern, c.s)
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) > 40 || len(s) > 20 || !utf8.ValidString(s) {
			return
		}
		for _, r := range s {
			if !inSet(jsonSafe, r) {
				return // written escaped or not at all: the grammar's text differs
			}
		}
		re, err := parseRegex(pattern)
		if err != nil {
			return
		}
		m, err := newPatternMachine(re)
		if err != nil {
			return
		}
		src, err := FromSchemaWork(json.RawMessage(`{"type":"string","pattern":`+mustJSON(pattern)+`}`), &Work{Limit: fuzzSchemaWorkLimit})
		if err != nil {
			return
		}
		g, err := Parse(src)
		if err != nil {
			return
		}
		text, _ := canonical(s) // as written: no HTML escapes
		st := g.NewCache().Start().AdvanceBytes(text)
		if got, want := st != nil && st.Accepting(), m.match(s); got != want {
			t.Fatalf("pattern %q, string %q: the grammar accepts=%v, the automata match=%v", pattern, s, got, want)
		}
	})
}

// FuzzNumberKey checks numberKey against big.Rat: two JSON numbers (of
// modest exponent) have the same key exactly when their values are equal.
func FuzzNumberKey(f *testing.F) {
	f.Add("1", "1.0")
	f.Add("-0", "0e7")
	f.Add("100", "1E+2")
	f.Add("0.00120", "12e-4")
	f.Add("-5", "5")
	f.Fuzz(func(t *testing.T, a, b string) {
		var ra, rb big.Rat
		for _, s := range []string{a, b} {
			if !json.Valid([]byte(s)) || len(s) > 64 || strings.ContainsAny(s, "\"[{tfn \t\r\n") {
				return
			}
			if _, exp, ok := strings.Cut(strings.ToLower(s), "e"); ok && len(exp) > 3 {
				return
			}
		}
		if _, ok := ra.SetString(a); !ok {
			return
		}
		if _, ok := rb.SetString(b); !ok {
			return
		}
		ka, errA := numberKey(a)
		kb, errB := numberKey(b)
		if errA != nil || errB != nil {
			t.Fatalf("numberKey(%q), numberKey(%q): %v, %v", a, b, errA, errB)
		}
		if (ka == kb) != (ra.Cmp(&rb) == 0) {
			t.Fatalf("numberKey(%q) = %q, numberKey(%q) = %q; values equal: %v", a, ka, b, kb, ra.Cmp(&rb) == 0)
		}
	})
}
