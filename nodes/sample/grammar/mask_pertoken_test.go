package grammar

import (
	"path/filepath"
	"slices"
	"testing"
)

// perTokenMask is the mask by definition: token id is allowed when its
// piece takes s to a state from which a sentence can be completed within
// budget-1 more one-byte tokens (budget <= 0: any). It is independent of
// the trie, loop classes, chains and partial code points.
func perTokenMask(s *State, pieces []string, budget int) []uint64 {
	bits := make([]uint64, (len(pieces)+63)/64)
	for id, p := range pieces {
		if p == "" {
			continue
		}
		n := s.AdvanceBytes([]byte(p))
		if n == nil || budget > 0 && n.Remaining() > budget-1 {
			continue
		}
		bits[id/64] |= 1 << (id % 64)
	}
	return bits
}

// Masks (Vocab.Mask) are, bit for bit, the per-token check of every
// piece, on the states that MaskBench's valid instances pass through
// token by token (every 11th state of every 60th schema, at budgets 0, 2
// and 9 in turn): with the mixed vocabulary, and with Qwen3's when `just
// tokenizers` has made it.
func TestMaskIsThePerTokenCheck(t *testing.T) {
	type vocab struct {
		name   string
		v      *Vocab
		pieces []string
		encode func(string) []int32
	}
	mv, mp := mixedVocab(5, 3000)
	vocabs := []vocab{{"mixed", mv, mp, func(text string) []int32 {
		ids := make([]int32, len(text))
		for i := range text {
			ids[i] = int32(text[i]) // the mixed vocabulary's first 256 pieces are the bytes
		}
		return ids
	}}}
	if tk, qv := qwen3VocabIfMade(t); qv != nil {
		vocabs = append(vocabs, vocab{"qwen3", qv, qwen3Pieces(tk), func(text string) []int32 { return tk.Encode(text, false, false) }})
	}
	schemas := readBench(t, filepath.Join(benchDir(t), "maskbench-tests.jsonl"))
	budgets := []int{0, 2, 9}
	for _, vc := range vocabs {
		checked, cut := 0, 0
		for s, g := range sampleGrammars(t, schemas, 60, 5) {
			texts := validTexts(s)
			if len(texts) == 0 {
				continue
			}
			st := g.NewCache().Start()
			for k, id := range vc.encode(string(texts[0])) {
				if k%11 == 0 {
					budget := budgets[checked%len(budgets)]
					got, want := vc.v.Mask(st, budget), perTokenMask(st, vc.pieces, budget)
					if diff := maskDiff(vc.pieces, got, want); diff != "" {
						t.Fatalf("%s, %s, budget %d, before token %d of %s:\n%s", vc.name, s.ID, budget, k, texts[0], diff)
					}
					if budget > 0 && !slices.Equal(want, perTokenMask(st, vc.pieces, 0)) {
						cut++
					}
					checked++
				}
				if st = st.AdvanceBytes([]byte(vc.pieces[id])); st == nil {
					break
				}
			}
		}
		t.Logf("%s: %d states (%d cut by a budget)", vc.name, checked, cut)
		if checked < 50 || cut == 0 {
			t.Errorf("%s: %d states checked, %d cut by a budget: the sample tests too little", vc.name, checked, cut)
		}
	}
}
