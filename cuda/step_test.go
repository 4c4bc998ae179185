package cuda

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/exec"
)

func TestStepLayout(t *testing.T) {
	l := newStepLayout(4, 2, 6)
	want := stepLayout{Rows: 4, LogitRows: 2, Blocks: 6, Tokens: 0, Positions: 4, Slots: 8, RowTables: 12, Reach: 16, LogitRowsAt: 20, Tables: 22, StateRead: 29, StateWrite: 33, Words: 37}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Fatalf("layout (-want +got):\n%s", diff)
	}
	if l.Bytes() != 148 {
		t.Errorf("Bytes = %d, want 148", l.Bytes())
	}
}

func TestStepPack(t *testing.T) {
	// Two sequences, block size 4, 6 blocks (pad block 6). Sequence 0 holds
	// blocks [3 5] and decodes position 5; sequence 1 holds [0 2 4] and
	// feeds positions 7 and 8 (a two-token chunk); sequence 2 has no row.
	b := &exec.Batch{
		Tokens:    []int32{11, 12, 13},
		Positions: []int32{5, 7, 8},
		RowSeq:    []int32{0, 1, 1},
		Tables:    [][]int32{{3, 5}, {0, 2, 4}, {1}},
		LogitRows: []int32{0, 2},
	}
	l := newStepLayout(4, 4, 6)
	dst := make([]int32, l.Words)
	for i := range dst {
		dst[i] = -99 // every word must be written
	}
	var p stepPacker
	if err := p.pack(dst, l, b, 4, 100); err != nil {
		t.Fatal(err)
	}
	want := []int32{
		11, 12, 13, 0, // tokens, one pad row
		5, 7, 8, 0, // positions
		5*4 + 1, 2*4 + 3, 4*4 + 0, 6 * 4, // slots; the pad row writes the pad block
		0, 2, 2, 6, // row tables: seq 0 at 0, seq 1 at 2, pad table at 6
		5, 8, 8, 0, // reach: each sequence's last position in the step
		0, 2, 0, 0, // logit rows, padded with row 0
		3, 5, 0, 2, 4, -99, 6, // tables: seq 0 (2 blocks), seq 1 (3 blocks), unused word, pad table
		0, 0, 0, 0, 0, 0, 0, 0, // state read and write: no state slots, all the pad slot (0 of 0)
	}
	if diff := cmp.Diff(want, dst); diff != "" {
		t.Errorf("packed (-want +got):\n%s", diff)
	}

	// A batch that fills its bucket exactly leaves no pad rows.
	full := &exec.Batch{Tokens: []int32{1}, Positions: []int32{0}, RowSeq: []int32{0}, Tables: [][]int32{{2}}, LogitRows: []int32{0}}
	l1 := newStepLayout(1, 1, 3)
	dst1 := make([]int32, l1.Words)
	if err := p.pack(dst1, l1, full, 4, 100); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{1, 0, 8, 0, 0, 0, 2, 0, 0, 3, 0, 0}, dst1); diff != "" {
		t.Errorf("packed (-want +got):\n%s", diff)
	}
}

func TestStepPackRejects(t *testing.T) {
	ok := func() *exec.Batch {
		return &exec.Batch{Tokens: []int32{1, 2}, Positions: []int32{0, 1}, RowSeq: []int32{0, 0}, Tables: [][]int32{{1}}, LogitRows: []int32{1}}
	}
	tests := []struct {
		name string
		edit func(b *exec.Batch)
		want string
	}{
		{"too many rows", func(b *exec.Batch) {
			b.Tokens, b.Positions, b.RowSeq = []int32{1, 2, 3}, []int32{0, 1, 2}, []int32{0, 0, 0}
		}, "does not fit"},
		{"lengths differ", func(b *exec.Batch) { b.Positions = b.Positions[:1] }, "1 positions"},
		{"sequence out of range", func(b *exec.Batch) { b.RowSeq[1] = 1 }, "sequence 1 out of range"},
		{"negative position", func(b *exec.Batch) { b.Positions[0] = -1 }, "position -1"},
		{"position past table", func(b *exec.Batch) { b.Positions[1] = 4 }, "has no kv block"},
		{"block out of range", func(b *exec.Batch) { b.Tables[0][0] = 3 }, "kv block 3 out of range"},
		{"negative block", func(b *exec.Batch) { b.Tables[0][0] = -1 }, "kv block -1 out of range"},
		{"token out of vocabulary", func(b *exec.Batch) { b.Tokens[0] = 100 }, "token 100 out of range"},
		{"logit row out of range", func(b *exec.Batch) { b.LogitRows[0] = 2 }, "logit row 2 out of range"},
	}
	l := newStepLayout(2, 2, 3)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := ok()
			tt.edit(b)
			var p stepPacker
			err := p.pack(make([]int32, l.Words), l, b, 4, 100)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("pack: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	var p stepPacker
	if err := p.pack(make([]int32, l.Words), l, ok(), 4, 100); err != nil {
		t.Errorf("valid batch: %v", err)
	}
	// Tables that together exceed the cache cannot come from one block
	// manager; they are rejected rather than overflowing the buffer.
	dup := &exec.Batch{Tokens: []int32{1, 2}, Positions: []int32{4, 4}, RowSeq: []int32{0, 1}, Tables: [][]int32{{0, 1}, {2, 0}}, LogitRows: []int32{0}}
	if err := p.pack(make([]int32, l.Words), l, dup, 4, 100); err == nil || !strings.Contains(err.Error(), "more than the cache") {
		t.Errorf("overfull tables: %v", err)
	}
}

func TestStepPackState(t *testing.T) {
	// Sequence 0 decodes one row in slot 2; sequence 1 verifies three rows
	// from slot 1 through snapshot slots [1 4 5]; one pad row. 6 slots (the
	// pad slot is 6).
	b := func() *exec.Batch {
		return &exec.Batch{
			Tokens: []int32{1, 2, 3, 4}, Positions: []int32{9, 3, 4, 5}, RowSeq: []int32{0, 1, 1, 1},
			Tables: [][]int32{{0, 1, 2}, {3, 4}}, LogitRows: []int32{0},
			StateSlots: []int32{2, 1}, StateSnapshots: [][]int32{nil, {1, 4, 5}},
		}
	}
	l := newStepLayout(5, 1, 8)
	l.StateSlots, l.Stateful = 6, true
	dst := make([]int32, l.Words)
	var p stepPacker
	if err := p.pack(dst, l, b(), 4, 100); err != nil {
		t.Fatal(err)
	}
	got := [][]int32{dst[l.StateRead : l.StateRead+5], dst[l.StateWrite : l.StateWrite+5]}
	want := [][]int32{
		{2, 1, 1, 4, 6}, // read: row j of the verify reads the snapshot row j-1 wrote
		{2, 1, 4, 5, 6}, // write
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state rows (-want +got):\n%s", diff)
	}
	// Resuming from checkpoints (StateFrom): each sequence's first row
	// reads the checkpoint's slot, the others as before.
	resumed := b()
	resumed.StateFrom = []int32{0, 3}
	if err := p.pack(dst, l, resumed, 4, 100); err != nil {
		t.Fatal(err)
	}
	got = [][]int32{dst[l.StateRead : l.StateRead+5], dst[l.StateWrite : l.StateWrite+5]}
	want = [][]int32{{0, 3, 1, 4, 6}, {2, 1, 4, 5, 6}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state rows resuming from checkpoints (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		name string
		edit func(*exec.Batch)
		want string
	}{
		{"slot past the reserved", func(b *exec.Batch) { b.StateSlots[0] = 6 }, "state slot 6 out of range"},
		{"negative slot", func(b *exec.Batch) { b.StateSlots[1] = -1 }, "state slot -1 out of range"},
		{"checkpoint past the reserved", func(b *exec.Batch) { b.StateFrom = []int32{-1, 9} }, "state slot 9 out of range"},
		{"snapshot past the reserved", func(b *exec.Batch) { b.StateSnapshots[1][2] = 7 }, "state slot 7 out of range"},
		{"too few snapshots", func(b *exec.Batch) { b.StateSnapshots[1] = b.StateSnapshots[1][:2] }, "2 state snapshots for more rows"},
		{"slots for too few sequences", func(b *exec.Batch) { b.StateSlots = b.StateSlots[:1] }, "1 state slots for 2 sequences"},
		{"no slots for a stateful graph", func(b *exec.Batch) { b.StateSlots, b.StateSnapshots = nil, nil }, "needs the batch's state slots"},
	} {
		bb := b()
		c.edit(bb)
		if err := p.pack(make([]int32, l.Words), l, bb, 4, 100); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// A staged (bf16) state binds the rows to staging entries, numbered in row
// order over the slots read and written, and lists each entry's slot and
// whether a row writes it; entries past the count are zero.
func TestStepPackStage(t *testing.T) {
	// Sequence 0 decodes in slot 2; sequence 1 verifies three rows from
	// slot 1 (read, not written) into snapshots [3 4 5]; a pad row (slot 6).
	b := &exec.Batch{
		Tokens: []int32{1, 2, 3, 4}, Positions: []int32{9, 3, 4, 5}, RowSeq: []int32{0, 1, 1, 1},
		Tables: [][]int32{{0, 1, 2}, {3, 4}}, LogitRows: []int32{0},
		StateSlots: []int32{2, 1}, StateSnapshots: [][]int32{nil, {3, 4, 5}},
	}
	l := newStepLayout(5, 1, 8)
	l.StateSlots, l.Stateful = 6, true
	l.addStage(stageSlots(5, 6))
	dst := make([]int32, l.Words)
	for i := range dst {
		dst[i] = -7 // stale words of an earlier step
	}
	var p stepPacker
	if err := p.pack(dst, l, b, 4, 100); err != nil {
		t.Fatal(err)
	}
	type stage struct{ Read, Write, Slot, Written, Count []int32 }
	got := stage{dst[l.StateRead : l.StateRead+5], dst[l.StateWrite : l.StateWrite+5], dst[l.StageSlot : l.StageSlot+l.Stage],
		dst[l.StageWritten : l.StageWritten+l.Stage], dst[l.StageCount : l.StageCount+1]}
	want := stage{
		Read:    []int32{0, 1, 2, 3, 5}, // slots 2 1 3 4 6 as entries
		Write:   []int32{0, 2, 3, 4, 5}, // slots 2 3 4 5 6
		Slot:    []int32{2, 1, 3, 4, 5, 6, 0},
		Written: []int32{1, 0, 1, 1, 1, 1, 0},
		Count:   []int32{6},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("staged state rows (-want +got):\n%s", diff)
	}
	if l.Stage != 7 || stageSlots(100, 6) != 7 {
		t.Errorf("stage of 5 rows on 6 slots %d, of 100 rows %d; want 7 (every slot and the pad slot)", l.Stage, stageSlots(100, 6))
	}
}

func TestStepPackFloats(t *testing.T) {
	// A float input of 4 rows x 2 recorded at a bucket of 4; the batch has
	// 3 rows, so the last row is zeros.
	l := newStepLayout(4, 1, 2)
	at := l.addFloat("hidden", 4, 2)
	if at != 32 || l.Words != 40 {
		t.Fatalf("float input at word %d of %d, want 32 of 40", at, l.Words)
	}
	b := &exec.Batch{Tokens: []int32{1, 2, 3}, Positions: []int32{0, 1, 2}, RowSeq: []int32{0, 0, 0}, Tables: [][]int32{{0}},
		LogitRows: []int32{2}, Floats: map[string][]float32{"hidden": {1, -2, 0.5, 3, 4, -1e30}}}
	dst := make([]int32, l.Words)
	for i := range dst {
		dst[i] = -99
	}
	var p stepPacker
	if err := p.pack(dst, l, b, 4, 100); err != nil {
		t.Fatal(err)
	}
	var got []float32
	for _, w := range dst[at:] {
		got = append(got, math.Float32frombits(uint32(w)))
	}
	if diff := cmp.Diff([]float32{1, -2, 0.5, 3, 4, -1e30, 0, 0}, got); diff != "" {
		t.Errorf("floats (-want +got):\n%s", diff)
	}
	for name, floats := range map[string]map[string][]float32{
		"missing":  nil,
		"ragged":   {"hidden": {1, 2, 3}},
		"too many": {"hidden": make([]float32, 10)},
	} {
		b.Floats = floats
		if err := p.pack(dst, l, b, 4, 100); err == nil {
			t.Errorf("%s float input: packed", name)
		}
	}
	// The capture's empty batch binds zeros.
	if err := p.pack(dst, l, &exec.Batch{}, 4, 100); err != nil || dst[at] != 0 {
		t.Errorf("empty batch: %v, first float word %d", err, dst[at])
	}
}
