package cuda

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBucketShape(t *testing.T) {
	b := newBuckets(DefaultBuckets)
	tests := []struct {
		rows, logitRows int
		want            [2]int
		captured        bool
	}{
		{1, 1, [2]int{1, 1}, true},
		{3, 3, [2]int{4, 4}, true},
		{8, 8, [2]int{8, 8}, true},
		{9, 9, [2]int{16, 16}, true},
		{65, 65, [2]int{80, 80}, true},
		{256, 256, [2]int{256, 256}, true},
		{257, 257, [2]int{257, 257}, false}, // beyond the largest bucket: eager, unpadded
		{5, 1, [2]int{5, 1}, false},         // prefill rows: eager at its own shape
		{17, 2, [2]int{17, 2}, false},
		{512, 1, [2]int{512, 1}, false},
		{0, 0, [2]int{0, 0}, false},
	}
	for _, tt := range tests {
		r, l := b.shape(tt.rows, tt.logitRows)
		if diff := cmp.Diff(tt.want, [2]int{r, l}); diff != "" {
			t.Errorf("shape(%d, %d) (-want +got):\n%s", tt.rows, tt.logitRows, diff)
		}
		if got := b.captured(r, l); got != tt.captured {
			t.Errorf("captured(%d, %d) = %v, want %v", r, l, got, tt.captured)
		}
	}
}

func TestBucketsProperties(t *testing.T) {
	b := newBuckets([]int{16, 4, 0, 4, -1, 1})
	if diff := cmp.Diff(buckets{1, 4, 16}, b); diff != "" {
		t.Fatalf("newBuckets (-want +got):\n%s", diff)
	}
	full := newBuckets(DefaultBuckets)
	for n := 1; n <= full.max(); n++ {
		r := full.round(n)
		limit := 31
		switch {
		case n <= 4:
			limit = 1
		case n <= 64:
			limit = 7
		case n <= 128:
			limit = 15
		}
		if r < n || r-n > limit {
			t.Errorf("round(%d) = %d pads more than %d rows", n, r, limit)
		}
		if pr, pl := full.shape(n, n); pr != r || pl != r || !full.captured(pr, pl) {
			t.Errorf("shape(%d, %d) = (%d, %d), want (%d, %d) captured", n, n, pr, pl, r, r)
		}
	}
}
