package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// hostile are ambiguous and exponential grammars, each with an input that
// drives it into its worst case: the number of ways the input can be
// parsed (stacks) grows exponentially, or the expansion without input
// does.
var hostile = []struct {
	name, src, input string
}{
	{"the probe's ambiguous grammar", "root ::= x \"z\"\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"", strings.Repeat("a", 64)},
	{"the probe's grammar, unfactorable", "root ::= x \"z\"\nx ::= a1 x \"b\" | a2 x \"c\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"", strings.Repeat("a", 64)},
	{"three-way ambiguity", "root ::= x\nx ::= a1 x \"1\" | a2 x \"2\" | a3 x \"3\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"\na3 ::= [a]", strings.Repeat("a", 64)},
	{"nested repetition of an ambiguous item", "root ::= (x)* \"!\"\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"", strings.Repeat("a", 256)},
	{"stars of stars", `root ::= (("a")* ("a")*)* "b"`, strings.Repeat("a", 256)},
	{"many nullable rules in a row", "root ::= " + strings.Repeat("n ", 60) + "\"x\"\nn ::= \"\" | \"\" | \"a\"", strings.Repeat("a", 60)},
	{"doubling choices before any byte", chain(40), strings.Repeat("a", 40)},
	{"a JSON-like value with an ambiguous string", "root ::= v\nv ::= \"[\" (v (\",\" v)*)? \"]\" | s\ns ::= \"\\\"\" (c | c c)* \"\\\"\"\nc ::= [a-z]", "[\"" + strings.Repeat("a", 200)},
	{"ambiguity nested in arrays", "root ::= \"[\" v \"]\"\nv ::= a1 v \"b\" | a2 v \"c\" | \"[\" v \"]\" | \"0\"\na1 ::= \"a\"\na2 ::= \"a\" \"\"?", "[[" + strings.Repeat("a", 64)},
}

// chain is a grammar whose start state doubles its stacks with each rule:
// r0 ::= p0 "x" | q0 "y", p0 ::= r1, q0 ::= r1, r1 ::= ... (p and q,
// the same rule by two names, keep left factoring from merging the two).
func chain(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= p%d \"x\" | q%d \"y\"\np%d ::= r%d\nq%d ::= r%d\n", i, i, i, i, i+1, i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"a\"*\n", n)
	return b.String()
}

// byteVocab is a vocabulary of every byte and every pair of the bytes in
// alphabet, so masks walk a two-level trie.
func byteVocab(alphabet string) (*Vocab, []string) {
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	for _, a := range alphabet {
		for _, b := range alphabet {
			pieces = append(pieces, string(a)+string(b))
		}
	}
	return NewVocab(len(pieces), func(id int32) []byte { return []byte(pieces[id]) }), pieces
}

// The core guarantee: a mask never spends more than its Work's limit (up
// to one check's granularity), whatever the grammar; a grammar too
// ambiguous to follow fails with ErrTooAmbiguous or ErrWorkLimit instead
// of growing, and the failure leaves the cache usable.
func TestMaskWorkIsBounded(t *testing.T) {
	v, _ := byteVocab("ab,[]\"xyz!")
	const limit = 200_000
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.src)
			if err != nil {
				if !errors.Is(err, ErrTooAmbiguous) {
					t.Fatalf("Parse: %v", err)
				}
				return // refused when compiled: its start state alone is too ambiguous
			}
			c := g.NewCache()
			var failed error
			st := c.Start()
			for i := 0; i <= len(tc.input) && st != nil; i++ {
				w := &Work{Limit: limit}
				c.Bind(w)
				v.Mask(st, 0)
				if w.Used() > limit+workSlack {
					t.Fatalf("after %d bytes a mask spent %d units, limit %d", i, w.Used(), limit)
				}
				if failed = w.Err(); failed != nil {
					break
				}
				if i < len(tc.input) {
					st = st.Advance(tc.input[i])
					if failed = w.Err(); failed != nil {
						break
					}
				}
			}
			if failed != nil && !errors.Is(failed, ErrTooAmbiguous) && !errors.Is(failed, ErrWorkLimit) {
				t.Fatalf("failed with %v, want ErrTooAmbiguous or ErrWorkLimit", failed)
			}
			// The cache still answers within a fresh budget.
			w := &Work{Limit: limit}
			c.Bind(w)
			v.Mask(c.Start(), 0)
			if w.Used() > limit+workSlack {
				t.Errorf("after the failure, the start mask spent %d units", w.Used())
			}
		})
	}
}

// Work is interruptible: an Interrupt error stops a mask within one
// check's granularity, and is what Err reports.
func TestWorkInterrupt(t *testing.T) {
	v, _ := byteVocab("ab")
	g, err := Parse("root ::= x\nx ::= \"a\" x \"1\" | \"a\" x \"2\" | \"\"")
	if err != nil {
		t.Fatal(err)
	}
	stop := errors.New("aborted")
	calls := 0
	w := &Work{Interrupt: func() error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	}}
	c := g.NewCache()
	c.Bind(w)
	st := c.Start()
	for range 30 {
		if st == nil || w.Err() != nil {
			break
		}
		v.Mask(st, 0)
		st = st.Advance('a')
	}
	if !errors.Is(w.Err(), stop) || w.Used() > 2*interruptEvery+workSlack {
		t.Errorf("Err %v after %d units, want %v within %d", w.Err(), w.Used(), stop, 2*interruptEvery+workSlack)
	}
}

// A mask stopped by its Work is not kept: the next mask of the same state
// under a fresh Work is complete.
func TestStoppedMaskIsNotCached(t *testing.T) {
	v, pieces := byteVocab("ab")
	g, err := Parse(`root ::= [a-b]{1,3}`)
	if err != nil {
		t.Fatal(err)
	}
	c := g.NewCache()
	c.Bind(&Work{Limit: 3})
	st := c.Start()
	v.Mask(st, 0)
	w := &Work{}
	c.Bind(w)
	bits := v.Mask(c.Start(), 0)
	var got []string
	for id, p := range pieces {
		if bits[id/64]&(1<<(id%64)) != 0 {
			got = append(got, p)
		}
	}
	if w.Err() != nil || strings.Join(got, " ") != "a b aa ab ba bb" {
		t.Errorf("mask %q (err %v), want a b aa ab ba bb", got, w.Err())
	}
}

// The unfactorable hostile grammars do reach a limit: the test above
// checks the bound on real blow-ups, not on grammars factoring tamed.
func TestHostileGrammarsReachTheirLimit(t *testing.T) {
	v, _ := byteVocab("ab,[]\"xyz!")
	for _, tc := range hostile {
		if !strings.Contains(tc.name, "unfactorable") && !strings.Contains(tc.name, "three-way") && !strings.Contains(tc.name, "before any byte") && !strings.Contains(tc.name, "nested in arrays") {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			g, err := Parse(tc.src)
			if err != nil {
				if !errors.Is(err, ErrTooAmbiguous) && !errors.Is(err, ErrWorkLimit) {
					t.Fatal(err)
				}
				return
			}
			c := g.NewCache()
			w := &Work{Limit: 1 << 24}
			c.Bind(w)
			st := c.Start()
			for i := 0; i < len(tc.input) && st != nil && w.Err() == nil; i++ {
				v.Mask(st, 0)
				st = st.Advance(tc.input[i])
			}
			if !errors.Is(w.Err(), ErrTooAmbiguous) && !errors.Is(w.Err(), ErrWorkLimit) {
				t.Errorf("no limit reached (err %v, %d units)", w.Err(), w.Used())
			}
		})
	}
}

// BenchmarkParseLongChain: 20,000 rules each referencing the next
// (r0 ::= r1 "a", ...; 400 KB of GBNF). The shortest expansions are
// settled shortest first, in time linear in the grammar, where a fixpoint
// over every rule took one pass per rule (12 s).
func BenchmarkParseLongChain(b *testing.B) {
	var src strings.Builder
	src.WriteString("root ::= r0\n")
	const n = 20000
	for i := range n {
		fmt.Fprintf(&src, "r%d ::= r%d \"a\"\n", i, i+1)
	}
	fmt.Fprintf(&src, "r%d ::= \"b\"\n", n)
	for b.Loop() {
		g, err := Parse(src.String())
		if err != nil {
			b.Fatal(err)
		}
		if got := g.Start().Remaining(); got != n+1 {
			b.Fatalf("Remaining %d, want %d", got, n+1)
		}
	}
}
