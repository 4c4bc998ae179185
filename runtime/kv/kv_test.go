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
