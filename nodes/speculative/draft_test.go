package speculative

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// fakeDevice is a draft model whose next token is always the last fed
// token + 1 (mod vocab); it records the batches it runs.
type fakeDevice struct {
	m       *kv.Manager
	batches []exec.Batch
}

const fakeVocab = 1000

func (f *fakeDevice) Forward(_ context.Context, _ string, _ exec.Recorder, b *exec.Batch) (exec.Logits, error) {
	cp := exec.Batch{Tokens: slices.Clone(b.Tokens), Positions: slices.Clone(b.Positions), RowSeq: slices.Clone(b.RowSeq),
		LogitRows: slices.Clone(b.LogitRows)}
	for _, t := range b.Tables {
		cp.Tables = append(cp.Tables, slices.Clone(t))
	}
	f.batches = append(f.batches, cp)
	l := exec.Logits{Data: make([]float32, len(b.LogitRows)*fakeVocab), Rows: len(b.LogitRows), Vocab: fakeVocab}
	for i, r := range b.LogitRows {
		l.Row(i)[(b.Tokens[r]+1)%fakeVocab] = 1
	}
	return l, nil
}

func (f *fakeDevice) Pass(context.Context, string, exec.PassRecorder, *exec.Batch, ...string) (map[string]exec.Logits, error) {
	return nil, errors.New("fakeDevice: no multi-output passes")
}

func (f *fakeDevice) KV() exec.KVBlocks           { return f }
func (f *fakeDevice) BlockTokens() int            { return f.m.BlockTokens() }
func (f *fakeDevice) Grow(s *kv.Seq, n int) error { return f.m.Grow(s, n) }
func (f *fakeDevice) Truncate(s *kv.Seq, n int)   { f.m.Truncate(s, n) }
func (f *fakeDevice) Release(s *kv.Seq)           { f.m.Release(s) }
func (f *fakeDevice) Usage() (used, total int)    { return f.m.Used(), f.m.Total() }
func (f *fakeDevice) reset() (b []exec.Batch)     { b, f.batches = f.batches, nil; return b }
func (f *fakeDevice) feeds() (tok, pos [][]int32) { return feeds(f.reset()) }
func feeds(bs []exec.Batch) (tok, pos [][]int32) {
	for _, b := range bs {
		tok, pos = append(tok, b.Tokens), append(pos, b.Positions)
	}
	return tok, pos
}

func newFakeDraft(t *testing.T, k, blocks, blockTokens int) (*Draft, *fakeDevice) {
	t.Helper()
	m, err := kv.New(blocks, blockTokens)
	if err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{m: m}
	d := &Draft{K: k, Alias: "draft", cfg: &model.Config{Layers: 1}, seqs: map[uint64]*draftSeq{}, name: "test"}
	d.Attach(dev)
	return d, dev
}

func draftStep(t *testing.T, d *Draft, rows []*exec.SeqState, history [][]int32, prior exec.Drafts) exec.Drafts {
	t.Helper()
	in := map[string]any{"history": history}
	if prior != nil {
		in["prior"] = prior
	}
	res, err := d.RunHost(&exec.HostContext{Ctx: context.Background(), Rows: rows}, in)
	if err != nil {
		t.Fatal(err)
	}
	return res["draft"].(exec.Drafts)
}

// The draft model's cache follows the target's accepted prefix: the first
// step feeds the whole history, later steps only what the cache lacks
// after rolling back rejected drafts, and each draft token is fed back
// once, at the next position, except the last.
func TestDraftFeedsOnlyWhatItsCacheLacks(t *testing.T) {
	d, dev := newFakeDraft(t, 3, 64, 4)
	row := &exec.SeqState{ID: 7, Lookahead: 3}
	steps := []struct {
		name     string
		history  []int32
		want     []int32
		tok, pos [][]int32
		kvLen    int
	}{
		{"the first step feeds the history", []int32{10, 11, 12}, []int32{13, 14, 15},
			[][]int32{{10, 11, 12}, {13}, {14}}, [][]int32{{0, 1, 2}, {3}, {4}}, 5},
		{"one accepted draft and the target's token", []int32{10, 11, 12, 13, 99}, []int32{100, 101, 102},
			[][]int32{{99}, {100}, {101}}, [][]int32{{4}, {5}, {6}}, 7},
		{"every draft accepted: the last draft and the bonus token", []int32{10, 11, 12, 13, 99, 100, 101, 102, 500}, []int32{501, 502, 503},
			[][]int32{{102, 500}, {501}, {502}}, [][]int32{{7, 8}, {9}, {10}}, 11},
		{"no draft accepted", []int32{10, 11, 12, 13, 99, 100, 101, 102, 500, 7}, []int32{8, 9, 10},
			[][]int32{{7}, {8}, {9}}, [][]int32{{9}, {10}, {11}}, 12},
	}
	for _, st := range steps {
		got := draftStep(t, d, []*exec.SeqState{row}, [][]int32{st.history}, nil)
		if diff := cmp.Diff(exec.Drafts{st.want}, got); diff != "" {
			t.Errorf("%s: drafts (-want +got):\n%s", st.name, diff)
		}
		tok, pos := dev.feeds()
		if diff := cmp.Diff(st.tok, tok); diff != "" {
			t.Errorf("%s: fed tokens (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.pos, pos); diff != "" {
			t.Errorf("%s: fed positions (-want +got):\n%s", st.name, diff)
		}
		if s := d.seqs[7]; s.kv.Len != st.kvLen || len(s.cached) != st.kvLen {
			t.Errorf("%s: cache holds %d slots, %d tokens; want %d", st.name, s.kv.Len, len(s.cached), st.kvLen)
		}
	}
	d.ReleaseSeq(7)
	if used, _ := dev.Usage(); used != 0 || len(d.seqs) != 0 {
		t.Errorf("after ReleaseSeq: %d blocks used, %d sequences", used, len(d.seqs))
	}
}

// Sequences draft in one batch per pass, each up to its lookahead; one
// with a prior draft or no lookahead is not drafted for.
func TestDraftBatchesSequences(t *testing.T) {
	d, dev := newFakeDraft(t, 4, 64, 4)
	rows := []*exec.SeqState{{ID: 1, Lookahead: 4}, {ID: 2, Lookahead: 1}, {ID: 3, Lookahead: 4}, {ID: 4, Lookahead: 0}, {ID: 5, Lookahead: 2}}
	history := [][]int32{{1, 2}, {20}, {30, 31, 32}, {40, 41}, {50, 51}}
	got := draftStep(t, d, rows, history, exec.Drafts{nil, nil, {9, 9, 9, 9, 9}, nil, nil})
	want := exec.Drafts{{3, 4, 5, 6}, {21}, {9, 9, 9, 9}, nil, {52, 53}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
	tok, _ := dev.feeds()
	if diff := cmp.Diff([][]int32{{1, 2, 20, 50, 51}, {3, 52}, {4}, {5}}, tok); diff != "" {
		t.Errorf("fed tokens (-want +got):\n%s", diff)
	}
	if _, ok := d.seqs[3]; ok {
		t.Error("a sequence with a prior draft got draft state")
	}
}

// A full cache evicts the sequences that are not drafting this step,
// least recently drafting first; a sequence that still does not fit gets
// no draft this step.
func TestDraftEvictsIdleSequences(t *testing.T) {
	d, dev := newFakeDraft(t, 3, 5, 4) // 20 token slots
	a, b, c := &exec.SeqState{ID: 1, Lookahead: 3}, &exec.SeqState{ID: 2, Lookahead: 3}, &exec.SeqState{ID: 3, Lookahead: 3}
	draftStep(t, d, []*exec.SeqState{a}, [][]int32{{1, 2, 3, 4, 5}}, nil) // 7 slots: 2 blocks
	draftStep(t, d, []*exec.SeqState{b}, [][]int32{{1, 2}}, nil)          // 4 slots: 1 block
	if used, _ := dev.Usage(); used != 3 {
		t.Fatalf("%d blocks used, want 3", used)
	}
	// c needs 3 blocks, 2 are free: a (least recently drafting) is
	// evicted, b is kept.
	got := draftStep(t, d, []*exec.SeqState{c}, [][]int32{{1, 2, 3, 4, 5, 6, 7, 8, 9}}, nil)
	if _, ok := d.seqs[1]; ok || d.seqs[2] == nil || !slices.Equal(got[0], []int32{10, 11, 12}) {
		t.Errorf("after evicting: sequences %v, drafts %v", slices.Sorted(maps.Keys(d.seqs)), got)
	}
	dev.reset()
	// b and c draft together; a no longer fits beside them and falls back.
	got = draftStep(t, d, []*exec.SeqState{b, c, a}, [][]int32{{1, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 2, 3, 4, 5, 6}}, nil)
	want := exec.Drafts{{4, 5, 6}, {11, 12, 13}, nil}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("drafts (-want +got):\n%s", diff)
	}
	for _, id := range []uint64{1, 2, 3} {
		d.ReleaseSeq(id)
	}
	if used, _ := dev.Usage(); used != 0 {
		t.Errorf("%d blocks used after releasing every sequence", used)
	}
}

func sharedModel(t *testing.T, name string) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	return p
}

func openModel(t *testing.T, path string) *weights.File {
	t.Helper()
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// SameVocabulary accepts a quantized copy of the target and rejects a
// model with another vocabulary size or one token text changed, naming
// the difference.
func TestSameVocabulary(t *testing.T) {
	f32 := openModel(t, sharedModel(t, "tiny-qwen3-f32.gguf"))
	q8 := openModel(t, sharedModel(t, "tiny-qwen3-q8_0.gguf"))
	stories := openModel(t, sharedModel(t, "stories260K.gguf"))
	if err := SameVocabulary(f32, q8); err != nil {
		t.Errorf("tiny-qwen3 f32 and q8_0: %v", err)
	}
	if err := SameVocabulary(f32, stories); err == nil || !strings.Contains(err.Error(), "512 token embeddings in the draft, 2048 in the target") {
		t.Errorf("tiny-qwen3 and stories260K: %v", err)
	}
	// A copy of q8_0 with token 300's text changed.
	kvs := slices.Clone(q8.KV)
	for i, e := range kvs {
		if e.Key == "tokenizer.ggml.tokens" {
			toks := slices.Clone(e.Value.Any().([]string))
			toks[300] = "changed"
			kvs[i] = weights.KV{Key: e.Key, Value: weights.Arr(toks)}
		}
	}
	var buf bytes.Buffer
	if err := weights.Write(&buf, q8.Version, kvs, q8.Tensors); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "changed.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	changed := openModel(t, path)
	if err := SameVocabulary(f32, changed); err == nil || !strings.Contains(err.Error(), `token 300 is "changed" in the draft`) {
		t.Errorf("one token text changed: %v", err)
	}
}
