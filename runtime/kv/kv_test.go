package kv

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGrowTruncateRelease(t *testing.T) {
	m, err := New(4, 16)
	if err != nil {
		t.Fatal(err)
	}
	var a, b Seq
	if err := m.Grow(&a, 17); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Seq{Blocks: []int32{0, 1}, Len: 17}, a); diff != "" {
		t.Errorf("a after Grow(17) (-want +got):\n%s", diff)
	}
	if err := m.Grow(&b, 48); !errors.Is(err, ErrNoSpace) {
		t.Errorf("Grow past capacity: err = %v, want ErrNoSpace", err)
	}
	if len(b.Blocks) != 0 || m.Free() != 2 {
		t.Errorf("failed Grow changed state: b=%+v free=%d", b, m.Free())
	}
	m.Truncate(&a, 16)
	if diff := cmp.Diff(Seq{Blocks: []int32{0}, Len: 16}, a); diff != "" {
		t.Errorf("a after Truncate(16) (-want +got):\n%s", diff)
	}
	if err := m.Grow(&b, 48); err != nil {
		t.Fatal(err)
	}
	if m.Free() != 0 || m.Used() != 4 {
		t.Errorf("free=%d used=%d, want 0/4", m.Free(), m.Used())
	}
	m.Release(&a)
	m.Release(&b)
	if m.Free() != 4 || len(a.Blocks) != 0 || a.Len != 0 {
		t.Errorf("after Release: free=%d a=%+v", m.Free(), a)
	}
}

func TestNewRejectsBadSizes(t *testing.T) {
	for _, c := range [][2]int{{0, 16}, {4, 0}, {-1, 1}} {
		if _, err := New(c[0], c[1]); err == nil {
			t.Errorf("New(%d, %d) succeeded", c[0], c[1])
		}
	}
}

// Block hashes chain the blocks before them and the salt: the same tokens
// under another KV format (salt), or after a different first block, miss.
func TestChainDependsOnSaltAndParent(t *testing.T) {
	toks := []int32{1, 2, 3, 4}
	a := Chain([]byte("model|f32"), BlockHash{}, toks)
	if a == Chain([]byte("model|q8_0"), BlockHash{}, toks) {
		t.Error("another salt gives the same hash")
	}
	if a == Chain([]byte("model|f32"), BlockHash{1}, toks) {
		t.Error("another parent gives the same hash")
	}
	if a != Chain([]byte("model|f32"), BlockHash{}, []int32{1, 2, 3, 4}) {
		t.Error("the hash is not a function of its inputs")
	}
	m, _ := New(4, 4)
	m.EnablePrefixCache([]byte("model|f32"))
	var s Seq
	m.Grow(&s, 8)
	m.Publish(&s, []int32{1, 2, 3, 4, 5, 6, 7, 8}, 8)
	m.Release(&s)
	if got := m.Match([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 2); len(got) != 2 {
		t.Errorf("matched %v, want 2 blocks", got)
	}
	if got := m.Match([]int32{1, 2, 3, 4, 5, 6, 7, 0, 9}, 2); len(got) != 1 {
		t.Errorf("diverging in the second block: matched %v, want 1 block", got)
	}
	if m.Cached() != 2 || m.Free() != 4 || m.Used() != 0 {
		t.Errorf("cached %d free %d used %d, want 2 4 0", m.Cached(), m.Free(), m.Used())
	}
}

// Demote puts a released sequence's cached blocks first in the eviction
// order, its last block first; blocks a sequence still holds and blocks
// that were never registered are left as they are.
func TestDemoteEvictsFirst(t *testing.T) {
	m, err := New(6, 2)
	if err != nil {
		t.Fatal(err)
	}
	m.EnablePrefixCache([]byte("salt"))
	var old, tail, held Seq
	for _, c := range []struct {
		s      *Seq
		tokens []int32
	}{{&old, []int32{1, 2, 3, 4}}, {&tail, []int32{5, 6, 7, 8}}, {&held, []int32{9, 10}}} {
		if err := m.Grow(c.s, len(c.tokens)); err != nil {
			t.Fatal(err)
		}
		m.Publish(c.s, c.tokens, len(c.tokens))
	}
	m.Release(&old)       // cached, oldest
	blocks := tail.Blocks // [2 3]
	m.Release(&tail)      // cached after old's
	m.Demote(append(blocks, held.Blocks...))
	var got []int32
	for range 3 {
		var s Seq
		if err := m.Grow(&s, 2); err != nil {
			t.Fatal(err)
		}
		got = append(got, s.Blocks...)
	}
	// One plain free block (5), then the demoted ones, last first, before
	// the older cached ones (1, 0); the held block (4) stays held.
	if diff := cmp.Diff([]int32{5, 3, 2}, got); diff != "" {
		t.Errorf("blocks taken after Demote (-want +got):\n%s", diff)
	}
	if m.Cached() != 2 || len(held.Blocks) != 1 {
		t.Errorf("cached %d, held %v", m.Cached(), held.Blocks)
	}
}
