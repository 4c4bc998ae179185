package cuda

import "slices"

// DefaultBuckets are the row counts a captured step is padded to, much as
// vLLM picks its capture sizes: 1, 2 and 4 exactly, then steps of 8 up to
// 64, 16 up to 128 and 32 up to 256, so padding adds at most 7, 15 and 31
// rows respectively.
var DefaultBuckets = []int{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256}

// buckets rounds step shapes up to capture sizes.
type buckets []int // ascending, positive

// newBuckets returns the sorted, deduplicated positive sizes of sizes.
func newBuckets(sizes []int) buckets {
	var b buckets
	for _, s := range sizes {
		if s > 0 {
			b = append(b, s)
		}
	}
	slices.Sort(b)
	return slices.Compact(b)
}

// max is the largest bucket, 0 when there is none.
func (b buckets) max() int {
	if len(b) == 0 {
		return 0
	}
	return b[len(b)-1]
}

// round returns the smallest bucket >= n, or n itself when n exceeds every
// bucket (or is not positive).
func (b buckets) round(n int) int {
	if n <= 0 {
		return n
	}
	i, _ := slices.BinarySearch(b, n)
	if i == len(b) {
		return n
	}
	return b[i]
}

// shape returns the recorded shape of a step of rows tokens and logitRows
// sampled rows. A step in which every row samples (decode, and the verify
// of drafts) and that fits the largest bucket is padded to a bucket: these
// are the steps captured as CUDA graphs, a few shapes that recur every
// step. Any other step (one with prefill rows) runs eagerly at its own
// shape: its kernels are few and large, and padding it would only add work.
func (b buckets) shape(rows, logitRows int) (int, int) {
	if rows != logitRows || rows > b.max() || rows <= 0 {
		return rows, logitRows
	}
	r := b.round(rows)
	return r, r
}

// captured reports whether a graph recorded at rows and logitRows is one
// whose shape is a bucket (and so is captured and replayed).
func (b buckets) captured(rows, logitRows int) bool {
	_, found := slices.BinarySearch(b, rows)
	return found && rows == logitRows
}
