package cuda

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/exec"
)

func TestStepLayout(t *testing.T) {
	l := newStepLayout(4, 2, 6)
	want := stepLayout{Rows: 4, LogitRows: 2, Blocks: 6, Tokens: 0, Positions: 4, Slots: 8, RowTables: 12, Reach: 16, LogitRowsAt: 20, Tables: 22, Words: 29}
	if diff := cmp.Diff(want, l); diff != "" {
		t.Fatalf("layout (-want +got):\n%s", diff)
	}
	if l.Bytes() != 116 {
		t.Errorf("Bytes = %d, want 116", l.Bytes())
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
	if diff := cmp.Diff([]int32{1, 0, 8, 0, 0, 0, 2, 0, 0, 3}, dst1); diff != "" {
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
