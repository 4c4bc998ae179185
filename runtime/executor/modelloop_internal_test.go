package executor

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

func newTestModelLoop(t *testing.T, blocks, blockTokens int) *modelLoop {
	t.Helper()
	m, err := kv.New(blocks, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	return &modelLoop{step: "draft", loop: &plan.Loop{Model: "draft"}, dev: &modelDevice{kv: kv.NewShares(m)}}
}

// draftFor runs one step of ml for rows (wanting want drafts each) as
// runLoop does, with a draft model whose next token is the last fed
// token + 1: pass 0 from firstPass, then each draft but the last fed
// back. It returns pass 0's batch and the drafts per row.
func draftFor(ml *modelLoop, rows []*node.SeqState, want []int) (*exec.Batch, [][]int32) {
	hc := &hostStep{HostContext: &node.HostContext{Rows: rows}}
	active := make([]int, len(rows))
	for i := range active {
		active[i] = i
	}
	b, drafting, _ := ml.firstPass(hc, active, want)
	drafts := make([][]int32, len(rows))
	for j, i := range drafting {
		t := b.Tokens[b.LogitRows[j]] + 1
		for {
			drafts[i] = append(drafts[i], t)
			if len(drafts[i]) == want[i] {
				break
			}
			ml.fed(rows[i], t)
			t++
		}
	}
	return b, drafts
}

// A draft model's cache follows the target's accepted prefix: the first
// step feeds the whole history, later steps only what the cache lacks
// after rolling back rejected drafts; each draft is fed back, except the
// last.
func TestModelLoopFeedsOnlyWhatItsCacheLacks(t *testing.T) {
	ml := newTestModelLoop(t, 64, 4)
	row := &node.SeqState{ID: 7, Lookahead: 3}
	for _, st := range []struct {
		name          string
		history, want []int32
		tok, pos      []int32
		kvLen         int
	}{
		{"the first step feeds the history", []int32{10, 11, 12}, []int32{13, 14, 15}, []int32{10, 11, 12}, []int32{0, 1, 2}, 5},
		{"one accepted draft and the target's token", []int32{10, 11, 12, 13, 99}, []int32{100, 101, 102}, []int32{99}, []int32{4}, 7},
		{"every draft accepted: the last draft and the bonus token", []int32{10, 11, 12, 13, 99, 100, 101, 102, 500},
			[]int32{501, 502, 503}, []int32{102, 500}, []int32{7, 8}, 11},
		{"no draft accepted", []int32{10, 11, 12, 13, 99, 100, 101, 102, 500, 7}, []int32{8, 9, 10}, []int32{7}, []int32{9}, 12},
	} {
		row.History = st.history
		b, drafts := draftFor(ml, []*node.SeqState{row}, []int{3})
		if diff := cmp.Diff([][]int32{st.want}, drafts); diff != "" {
			t.Errorf("%s: drafts (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff([][]int32{st.tok, st.pos}, [][]int32{b.Tokens, b.Positions}); diff != "" {
			t.Errorf("%s: pass 0 tokens and positions (-want +got):\n%s", st.name, diff)
		}
		if s := ml.seq(7); s.Seq.Len != st.kvLen || len(s.Tokens) != st.kvLen {
			t.Errorf("%s: cache holds %d slots, %d tokens; want %d", st.name, s.Seq.Len, len(s.Tokens), st.kvLen)
		}
	}
	ml.dev.kv.ReleaseSeq(7) // the sequence stops running
	if used, _ := ml.dev.kv.Usage(); used != 0 || len(ml.seq(7).Tokens) != 0 {
		t.Errorf("after Release: %d blocks used, share of %d tokens", used, len(ml.seq(7).Tokens))
	}
}

// Pass 0 batches the sequences: each one's unseen tokens, its block
// table, and a logit row for its last token.
func TestModelLoopBatchesSequences(t *testing.T) {
	ml := newTestModelLoop(t, 64, 4)
	rows := []*node.SeqState{{ID: 1, History: []int32{1, 2}}, {ID: 2, History: []int32{20}}, {ID: 5, History: []int32{50, 51}}}
	b, drafts := draftFor(ml, rows, []int{4, 1, 2})
	if diff := cmp.Diff([][]int32{{3, 4, 5, 6}, {21}, {52, 53}}, drafts); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
	want := &exec.Batch{Tokens: []int32{1, 2, 20, 50, 51}, Positions: []int32{0, 1, 0, 0, 1}, RowSeq: []int32{0, 0, 1, 2, 2},
		LogitRows: []int32{1, 2, 4}, Tables: [][]int32{ml.seq(1).Seq.Blocks, ml.seq(2).Seq.Blocks, ml.seq(5).Seq.Blocks}}
	if diff := cmp.Diff(want, b); diff != "" {
		t.Errorf("pass 0 (-want +got):\n%s", diff)
	}
}

// A full cache evicts the sequences that are not drafting this step,
// least recently drafting first; a sequence that still does not fit gets
// no draft this step.
func TestModelLoopEvictsIdleSequences(t *testing.T) {
	ml := newTestModelLoop(t, 5, 4) // 20 token slots
	a, b, c := &node.SeqState{ID: 1}, &node.SeqState{ID: 2}, &node.SeqState{ID: 3}
	a.History, b.History = []int32{1, 2, 3, 4, 5}, []int32{1, 2}
	draftFor(ml, []*node.SeqState{a}, []int{3}) // 7 slots: 2 blocks
	draftFor(ml, []*node.SeqState{b}, []int{3}) // 4 slots: 1 block
	if used, _ := ml.dev.kv.Usage(); used != 3 {
		t.Fatalf("%d blocks used, want 3", used)
	}
	// c needs 3 blocks, 2 are free: a (least recently drafting) is
	// evicted, b is kept.
	c.History = []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	_, got := draftFor(ml, []*node.SeqState{c}, []int{3})
	if held := []int{ml.seq(1).Seq.Len, ml.seq(2).Seq.Len}; held[0] != 0 || held[1] != 4 || !slices.Equal(got[0], []int32{10, 11, 12}) {
		t.Errorf("after evicting: sequences 1 and 2 hold %v slots, drafts %v", held, got)
	}
	// b and c draft together; a no longer fits beside them and gets none.
	a.History, b.History, c.History = []int32{1, 2, 3, 4, 5, 6}, []int32{1, 2, 3}, []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	_, got = draftFor(ml, []*node.SeqState{b, c, a}, []int{3, 3, 3})
	if diff := cmp.Diff([][]int32{{4, 5, 6}, {11, 12, 13}, nil}, got); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
	for _, id := range []uint64{1, 2, 3} {
		ml.dev.kv.ReleaseSeq(id)
	}
	if used, _ := ml.dev.kv.Usage(); used != 0 {
		t.Errorf("%d blocks used after releasing every sequence", used)
	}
}

// A draft model is fed an image's rows as the placeholder token (it sees
// no pixels) at their 1-D positions; its cache keeps the rows' keys, so
// the same image stays cached and another image is fed again from its
// first row.
func TestModelLoopFeedsImageRowsAsThePlaceholder(t *testing.T) {
	ml := newTestModelLoop(t, 64, 4)
	ml.image = 77
	row := &node.SeqState{ID: 7, Lookahead: 2}
	for _, st := range []struct {
		name     string
		history  []int32
		tok, pos []int32
	}{
		{"an image's rows feed the placeholder", []int32{10, -5, -6, 11}, []int32{10, 77, 77, 11}, []int32{0, 1, 2, 3}},
		{"the same image stays cached (and the draft 12 fed back)", []int32{10, -5, -6, 11, 12, 40}, []int32{40}, []int32{5}},
		{"another image is fed again", []int32{10, -8, -9, 11}, []int32{77, 77, 11}, []int32{1, 2, 3}},
	} {
		row.History = st.history
		b, _ := draftFor(ml, []*node.SeqState{row}, []int{2})
		if diff := cmp.Diff([][]int32{st.tok, st.pos}, [][]int32{b.Tokens, b.Positions}); diff != "" {
			t.Errorf("%s: pass 0 tokens and positions (-want +got):\n%s", st.name, diff)
		}
	}
}

// Pass 0 of a loop that enters carried hidden states: each sequence
// enters the token indices after its first carried row up to its last
// token, paired with the row before; an MTP head's entries sit at their
// token's position (token 0 with zeros), EAGLE-3's at their hidden
// state's; an image row enters the image placeholder token; only a
// sequence whose last entry is its last token drafts.
func TestCarriedFirstPass(t *testing.T) {
	row := func(v float32) []float32 { return []float32{v, v} }
	rows := func(pos int, vs ...float32) exec.Carried {
		c := exec.Carried{Pos: pos, Width: 2}
		for _, v := range vs {
			c.Data = append(c.Data, row(v)...)
		}
		return c
	}
	hc := &hostStep{HostContext: &node.HostContext{Rows: []*node.SeqState{
		{ID: 1, History: []int32{10, 11, 12}},          // its prompt's rows: positions 0..2 (the last token's too)
		{ID: 2, History: []int32{20, 21, 22, -23, 24}}, // -23: an image row's key, entered as the placeholder 77
		{ID: 3, History: []int32{30, 31, 32, 33}},      // mid-prefill: rows up to position 1 only
		{ID: 4, History: []int32{40, 41}},              // no rows: not entered
	}}}
	carried := []exec.Carried{rows(0, 100, 101, 102), rows(2, 202, 203), rows(0, 300, 301), {}}
	table := func(i, _, _, _, _ int, _ bool) ([]int32, bool) { return []int32{int32(i)}, true }
	for _, tc := range []struct {
		name      string
		atHidden  bool
		tokens    []int32
		positions []int32
		hidden    []float32
		logitRows []int32
		active    []int
		want      []int
	}{
		{"at the token's position", false,
			[]int32{10, 11, 12, 77, 24, 30, 31, 32}, []int32{0, 1, 2, 3, 4, 0, 1, 2},
			[]float32{0, 0, 100, 100, 101, 101, 202, 202, 203, 203, 0, 0, 300, 300, 301, 301},
			[]int32{2, 4, 7}, []int{0, 1, 2}, []int{3, 2, 0}},
		{"at the hidden state's position", true,
			[]int32{11, 12, 77, 24, 31, 32}, []int32{0, 1, 2, 3, 0, 1},
			[]float32{100, 100, 101, 101, 202, 202, 203, 203, 300, 300, 301, 301},
			[]int32{1, 3, 5}, []int{0, 1, 2}, []int{3, 2, 0}},
	} {
		b, active, want, tables, err := carriedFirstPass(hc, carried, []int{0, 1, 2}, []int{3, 2, 4}, 2, tc.atHidden, 77, table)
		if err != nil {
			t.Fatal(err)
		}
		got := []any{b.Tokens, b.Positions, b.Floats[loopHiddenInput], b.LogitRows, active, want, tables}
		exp := []any{tc.tokens, tc.positions, tc.hidden, tc.logitRows, tc.active, tc.want, [][]int32{{0}, {1}, {2}}}
		if diff := cmp.Diff(exp, got); diff != "" {
			t.Errorf("%s: pass 0 (-want +got):\n%s", tc.name, diff)
		}
	}
}
