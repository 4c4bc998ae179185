package grammar

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// mixedVocab is a vocabulary with what makes loop classes subtle: every
// byte alone (invalid lead bytes and continuation bytes included), JSON
// punctuation, escapes and controls, multi-byte code points whole and cut
// (a piece ending inside a code point, one starting with its
// continuation), and random pieces of them.
func mixedVocab(seed uint64, n int) (*Vocab, []string) {
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string([]byte{byte(b)}))
	}
	atoms := []string{"a", "b", "z", "0", "7", " ", "\"", "\\", "\n", "\t", "\x7f", "{", "}", "[", "]", ":", ",", "-", ".", "e", "é", "ß", "中", "😀", "\u2028",
		"\xe4", "\xe4\xb8", "\xb8\xad", "\xf0\x9f", "\x80", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\\u00e9", "\\n", "true", "null"}
	r := rand.New(rand.NewPCG(seed, 1))
	seen := map[string]bool{}
	for _, p := range pieces {
		seen[p] = true
	}
	for len(pieces) < n {
		var b strings.Builder
		for range 1 + r.IntN(5) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		if p := b.String(); !seen[p] {
			seen[p] = true
			pieces = append(pieces, p)
		}
	}
	return NewVocab(len(pieces), func(id int32) []byte { return []byte(pieces[id]) }), pieces
}

// walkMask is the mask of a walk of the whole trie (Allow), the reference
// for masks by loop class.
func walkMask(v *Vocab, s *State, budget int) []uint64 {
	bits := make([]uint64, (v.Size()+63)/64)
	v.Allow(s, budget, func(id int32) { bits[id/64] |= 1 << (id % 64) })
	return bits
}

// maskDiff names the tokens whose bits differ in two masks.
func maskDiff(pieces []string, got, want []uint64) string {
	var d []string
	for id := range pieces {
		g, w := got[id/64]>>(id%64)&1, want[id/64]>>(id%64)&1
		if g != w {
			d = append(d, fmt.Sprintf("%q by class %d, by walk %d", pieces[id], g, w))
		}
	}
	return strings.Join(d, "\n")
}

// Masks by loop class are bit for bit the masks of the trie walk: on
// grammars whose states loop on ASCII, on multi-byte code points, on
// classes cut at odd code points and on nothing, after each byte of an
// input, with and without a token budget.
func TestMaskByClassIsTheWalk(t *testing.T) {
	v, pieces := mixedVocab(1, 3000)
	cases := []struct {
		name, src, input string
	}{
		{"JSON", "root ::= object\n" + JSONRules, `{"a": [1, "é中😀\n\u00e9"], "b": {"c": true, "dd": -1.5e3}}`},
		{"string with a length", `root ::= "\"" [^"\\\x00-\x1f]{0,6} "\""`, `"ab中😀c"`},
		{"a long string with a length", `root ::= "{\"a\":\"" [^"\\\x00-\x1f]{2,60} "\"}"`, `{"a":"ab中😀c"}`},
		{"a hexadecimal string", `root ::= "\"" [0-9a-f]{24} "\""`, `"0123456789abcdef01234567"`},
		{"multi-byte loop", `root ::= [α-ωé中]* "!" | [0-9]+ "中"`, "éé中ω!"},
		{"negated non-ASCII", `root ::= [^\u00e0-\u00ff\u4e00]* "\n"`, "abc中ßx\n"},
		{"odd cuts", `root ::= ([\u00e8-\u4e2d] | [\x7e-\u00e9] | "\U0001F600")* "."`, "é~中😀."},
		{"any byte", `root ::= (.)* "\x00"`, "a\"中\x00"},
		{"two loops", `root ::= [a-z]* | [a-c0-9]* "x"`, "abc12x"},
		{"a property name or any other", "root ::= \"{\\\"\" name \":1}\"\n" +
			`name ::= "\"" | "k" n2 | [^"\\k] [^"\\]* "\""` + "\n" +
			`n2 ::= "\"" | "e" n3 | [^"\\e] [^"\\]* "\""` + "\n" +
			`n3 ::= [^"\\]+ "\""`, `{"kéy中":1}`},
		{"a non-ASCII name or any other", "root ::= \"{\\\"\" name \":1}\"\n" +
			`name ::= "\"" | "中" n2 | [^"\\中] [^"\\]* "\""` + "\n" +
			`n2 ::= "\"" | "ß" [^"\\]* "\"" | [^"\\ß] [0-9]* "\""`, `{"中ß😀":1}`},
	}
	for _, tc := range cases {
		g, err := Parse(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, budget := range []int{0, 1, 3, 40} {
			c := g.NewCache()
			st := c.Start()
			for i := 0; st != nil && i <= len(tc.input); i++ {
				if diff := maskDiff(pieces, v.Mask(st, budget), walkMask(v, st, budget)); diff != "" {
					t.Errorf("%s, budget %d, after %q:\n%s", tc.name, budget, tc.input[:i], diff)
				}
				if i < len(tc.input) {
					st = st.Advance(tc.input[i])
				}
			}
			if st == nil || !st.Accepting() {
				t.Errorf("%s: the input leaves the grammar", tc.name)
			}
		}
	}
}

// The same on the states random generation reaches in MaskBench's
// schemas: from each state a random allowed token is taken (the mixed
// vocabulary, and Qwen3's when `just tokenizers` has made it); with Qwen3,
// also on the states a valid instance passes through.
func TestMaskByClassIsTheWalkRandomized(t *testing.T) {
	type vocab struct {
		name   string
		v      *Vocab
		pieces []string
		steps  int
	}
	v, pieces := mixedVocab(2, 4000)
	vocabs := []vocab{{"mixed", v, pieces, 40}}
	schemas := readBench(t, filepath.Join(benchDir(t), "maskbench-tests.jsonl"))
	if tk, qv := qwen3VocabIfMade(t); qv != nil {
		checked := 0
		for i, s := range schemas {
			src, err := FromSchema(s.Schema)
			if i%150 != 3 || err != nil {
				continue
			}
			g, err := Parse(src)
			if err != nil {
				t.Fatal(err)
			}
			st := g.NewCache().Start()
			for _, tc := range s.Tests {
				val, _ := decodeOrdered(tc.Data)
				text, _ := canonical(val)
				ids := tk.Encode(string(text), false, false)
				for _, id := range ids[:min(20, len(ids))] {
					got, want := qv.Mask(st, 0), walkMask(qv, st, 0)
					checked++
					if !cmp.Equal(got, want) {
						t.Fatalf("qwen3, %s, before token %d of %s: masks differ", s.ID, id, text)
					}
					if st = st.AdvanceBytes(tk.Piece(id)); st == nil {
						break
					}
				}
				break
			}
		}
		t.Logf("qwen3, valid instances: %d states", checked)
		vocabs = append(vocabs, vocab{"qwen3", qv, qwen3Pieces(tk), 6})
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, vc := range vocabs {
		checked := 0
		for s, g := range sampleGrammars(t, schemas, 50, 7) {
			budget := 0
			if r.IntN(2) == 0 {
				budget = 5 + r.IntN(60)
			}
			st := g.NewCache().Start()
			for step := 0; st != nil && step < vc.steps; step++ {
				got, want := vc.v.Mask(st, budget), walkMask(vc.v, st, budget)
				checked++
				if !cmp.Equal(got, want) {
					t.Fatalf("%s, %s, budget %d, step %d:\n%s", vc.name, s.ID, budget, step, maskDiff(vc.pieces, got, want))
				}
				var allowed []int
				for id := range vc.pieces {
					if got[id/64]>>(id%64)&1 != 0 {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					break
				}
				st = st.AdvanceBytes([]byte(vc.pieces[allowed[r.IntN(len(allowed))]]))
				if budget > 0 {
					budget--
				}
			}
		}
		if checked < 50 {
			t.Errorf("%s: only %d states checked", vc.name, checked)
		}
		t.Logf("%s: %d states", vc.name, checked)
	}
}

// The loop class of a state inside a JSON string is every code point a
// string holds unescaped.
func TestLoopClassOfAJSONString(t *testing.T) {
	g, err := Parse("root ::= object\n" + JSONRules)
	if err != nil {
		t.Fatal(err)
	}
	st := g.Start().AdvanceBytes([]byte(`{"ab`))
	want := []rng{{0x20, 0x21}, {0x23, 0x5b}, {0x5d, 0x7e}, {0x80, 0xd7ff}, {0xe000, utf8.MaxRune}}
	if diff := cmp.Diff(want, st.loopClass(), cmp.AllowUnexported(rng{})); diff != "" {
		t.Errorf("loop class (-want +got):\n%s", diff)
	}
	if c := st.AdvanceBytes([]byte(`": 1`)).loopClass(); len(c) != 0 {
		t.Errorf("inside a JSON integer (at most 16 digits): loop class %v, want none", c)
	}
	g, err = Parse(`root ::= [0-9]* "." [0-9]`)
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Start().AdvanceBytes([]byte("12")).loopClass(); !slices.Equal(c, []rng{{'0', '9'}}) {
		t.Errorf("inside [0-9]*: loop class %v, want [0-9]", c)
	}
}

// With the Qwen3 vocabulary (`just tokenizers`), on the states the valid
// instances of a quarter of MaskBench's benchmark sample (every 64th
// schema; every 16th, as BenchmarkMaskBench, with NINFER_SCHEMABENCH=full:
// two minutes) pass through token by token, chain masks are the masks of
// the trie walk, and so are the masks of every 16th other state (loop
// classes and bulk masks; states whose mask is the walk, with classes cut
// too finely, are left out), each at a token budget of 0, 1, 3 or 12 in
// turn.
func TestMaskBenchMasksAreTheWalk(t *testing.T) {
	tk, qv := qwen3VocabIfMade(t)
	if qv == nil {
		t.Skip("no Qwen3 vocabulary (just tokenizers)")
	}
	schemas := readBench(t, filepath.Join(benchDir(t), "maskbench-tests.jsonl"))
	pieces := qwen3Pieces(tk)
	budgets := []int{0, 1, 3, 12} // in turn over the states: no budget, then tight ones that cut tokens
	chains, others, states, budgetCuts := 0, 0, 0, 0
	for i, s := range schemas {
		src, err := FromSchema(s.Schema)
		if i%16 != 0 || !fullBench() && i%64 != 0 || err != nil {
			continue
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		start := g.NewCache().Start()
		for _, text := range validTexts(s) {
			st := start
			for _, id := range tk.Encode(string(text), false, false) {
				states++
				budget := budgets[states%len(budgets)]
				var got []uint64
				if cuts := st.cuts(); len(st.loopClass()) == 0 && cuts != nil {
					bits := make([]uint64, (qv.Size()+63)/64)
					if ok, cut := qv.maskByChain(st, cuts, budget, bits); ok {
						got = bits
						chains++
						if cut {
							budgetCuts++
						}
					}
				}
				if got == nil && states%16 == 0 && (len(st.loopClass()) > 0 || st.cuts() != nil) {
					got = qv.Mask(st, budget)
					others++
				}
				if got != nil {
					if want := walkMask(qv, st, budget); !cmp.Equal(got, want) {
						t.Fatalf("%s, state %d of %s, budget %d:\n%s", s.ID, states, text, budget, maskDiff(pieces, got, want))
					}
				}
				if st = st.AdvanceBytes(tk.Piece(id)); st == nil {
					break
				}
			}
		}
	}
	t.Logf("%d chain masks (%d cut by the budget) and %d others of %d states", chains, budgetCuts, others, states)
	if chains > 0 && budgetCuts == 0 {
		t.Error("no chain mask was cut by a budget: the budgets test nothing")
	}
	if chains < 100 {
		t.Errorf("%d chain masks, want 100 or more", chains)
	}
}
