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
