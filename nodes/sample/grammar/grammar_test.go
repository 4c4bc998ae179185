package grammar

import (
	"strings"
	"testing"
)

// accepts runs s through a fresh state and through a cached one (which
// must agree), twice for the cache so that its memoized transitions are
// used too.
func accepts(g *Grammar, s string) (ok, prefix bool) {
	run := func(st *State) (bool, bool) {
		st = st.AdvanceBytes([]byte(s))
		if st == nil {
			return false, false
		}
		return st.Accepting(), true
	}
	ok, prefix = run(g.Start())
	c := g.NewCache()
	for range 2 {
		if cok, cprefix := run(c.Start()); cok != ok || cprefix != prefix {
			return !ok, !prefix // disagreement fails every expectation
		}
	}
	return ok, prefix
}

func TestParseAndMatch(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		yes, no   []string
		prefixes  []string // valid prefixes that are not sentences
	}{
		{"literals and alternatives", `root ::= "yes" | "no"`, []string{"yes", "no"}, []string{"", "y", "yess", "maybe"}, []string{"y", "n"}},
		{"classes, negation and repetition", `root ::= [a-c]+ [^a-c]? "!"`, []string{"a!", "abcx!", "ccc!"}, []string{"!", "ad", "x!"}, []string{"ab", "abx"}},
		{"bounded repetition", `root ::= "x"{2,3}`, []string{"xx", "xxx"}, []string{"x", "xxxx"}, []string{"x"}},
		{"rules, groups and multi-line rules", "root ::= item (\",\" item)*\nitem ::= \"a\" |\n  \"bb\"  # comment\n", []string{"a", "a,bb,a"}, []string{"a,", "b"}, []string{"a,", "a,b"}},
		{"escapes and unicode", `root ::= "\x41\u00e9" [α-ω]`, []string{"Aéβ"}, []string{"Ae", "AéA"}, []string{"A", "A\xc3"}},
		{"any character", `root ::= . .`, []string{"ab", "é€"}, []string{"a", "abc"}, []string{"\xe2\x82"}},
		{"a repetition of a nullable repetition", `root ::= (("a")*)* "b"`, []string{"b", "ab", "aaab"}, []string{"", "ba", "c"}, []string{"a", "aa"}},
		{"tail references round a nullable cycle", "root ::= x \"!\"\nx ::= y | \"b\"\ny ::= \"a\" x | x | \"\"", []string{"!", "b!", "aab!"}, []string{"", "ba!"}, []string{"a", "ab"}},
		{"members in any order, each once, required ones always",
			"%members m r n=3 required=0 needs=2:1\nroot ::= \"{\" m \"}\"\nm ::= \"a\" r | \"b\" r | \"c\" r | \"\"\nr ::= \",a\" r | \",b\" r | \",c\" r | \"\"",
			[]string{"{a}", "{b,a}", "{a,b}", "{c,a,b}", "{b,c,a}"}, []string{"{}", "{b}", "{a,a}", "{a,c}", "{c,a}", "{a,b,b}"}, []string{"{b", "{c,a", "{a,"}},
		{"members counted by min and max",
			"%members m r n=3 required=2 min=2 max=2 needs=0:1\nroot ::= m\nm ::= \"a\" r | \"b\" r | \"c\" r | \"\"\nr ::= \",a\" r | \",b\" r | \",c\" r | \"\"",
			[]string{"b,c", "c,b"}, []string{"c", "a,b,c", "a,c", "b,c,a", "a"}, []string{"b", "c", "b,"}},
		{"alternatives that share prefixes", `root ::= "item1" | "item12" | "item2" | "it" | "other" | "item1"`, []string{"item1", "item12", "item2", "it", "other"}, []string{"item", "item3", "i"}, []string{"ite", "o"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.yes {
				if ok, _ := accepts(g, s); !ok {
					t.Errorf("%q rejected", s)
				}
			}
			for _, s := range tc.no {
				if ok, _ := accepts(g, s); ok {
					t.Errorf("%q accepted", s)
				}
			}
			for _, s := range tc.prefixes {
				if ok, prefix := accepts(g, s); ok || !prefix {
					t.Errorf("%q: sentence %v prefix %v, want a prefix only", s, ok, prefix)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{`item ::= "a"`, "no rule named root"},
		{`root ::= missing`, `"missing" is used but not defined`},
		{`root ::= root "a" | "b"`, `rule "root" is left-recursive`},
		{"root ::= x\nx ::= (x \"a\")? \"b\"", `rule "x" is left-recursive`},
		{`root ::= "\uD800"`, `\u escape D800 is not a code point (a UTF-16 surrogate)`},
		{`root ::= [\uDFFF-\uE000]`, `\u escape DFFF is not a code point (a UTF-16 surrogate)`},
		{`root ::= "\U7FFFFFFF"`, `\U escape 7FFFFFFF is beyond U+10FFFF`},
		{`root ::= "\U00110000"`, `\U escape 00110000 is beyond U+10FFFF`},
		{`root ::= "a`, "grammar:1:"},
		{`root ::= [b-a]`, "backwards"},
		{`root ::= "a" root`, "never ends"},
		{"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
		{"root ::= m\nm ::= \"a\" m | \"\"\n%members m n=1", "must come before rule \"m\""},
		{"%members m n=2\nroot ::= m\nm ::= \"a\" m | \"b\" | \"\"", "member alternative 1 does not end in a rule of its member set"},
		{"%members m n=1 required=1\nroot ::= m\nm ::= \"a\" m | \"\"", "a required member is past n=1"},
		{"%members m n=1 depth=1\nroot ::= m\nm ::= \"a\" m | \"\"", `unknown %members setting "depth"`},
		{"root ::= " + strings.Repeat(`"abcdefghij"{1000} `, 210), "too large"},
	} {
		_, err := Parse(tc.src)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.src, err, tc.want)
		}
	}
}

func TestRemaining(t *testing.T) {
	g, err := Parse(`root ::= "{" [a-z]* "}" | "[]"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want int
	}{{"", 2}, {"{", 1}, {"{abc", 1}, {"{}", 0}, {"[", 1}} {
		if got := g.Start().AdvanceBytes([]byte(tc.in)).Remaining(); got != tc.want {
			t.Errorf("Remaining after %q = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestRemainingCountsMembersDue(t *testing.T) {
	g, err := Parse("%members m r n=3 required=0,2 needs=1:2\nroot ::= \"{\" m \"}\"\n" +
		"m ::= \"aa\" r | \"b\" r | \"cccc\" r | \"\"\nr ::= \",aa\" r | \",b\" r | \",cccc\" r | \"\"")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want int
	}{{"", len("{aa,cccc}")}, {"{", len("aa,cccc}")}, {"{b", len(",aa,cccc}")}, {"{cccc", len(",aa}")}, {"{aa,cccc", 1}, {"{cccc,aa", 1}} {
		if got := g.Start().AdvanceBytes([]byte(tc.in)).Remaining(); got != tc.want {
			t.Errorf("Remaining after %q = %d, want %d", tc.in, got, tc.want)
		}
	}
}
