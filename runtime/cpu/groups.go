package cpu

import "github.com/ninfer/ninfer-go/runtime/weights"

// groupable reports whether w, in the file's layout, can be rewritten into
// a 16-row group layout: a matrix (per expert, for a 3-D tensor) of whole
// groups of rows and whole 32-column blocks, its bytes exactly its rows.
func groupable(w *weights.Tensor) bool {
	return w.Layout == weights.LayoutRows && len(w.Shape) >= 2 && w.Shape[0]%32 == 0 &&
		w.Shape[1]%q8GroupRows == 0 && len(w.Data) == w.Rows()*w.RowBytes()
}

// regroup rewrites w (groupable) in place, group by group, into layout:
// put writes row i of a group (the file's bytes) into the group's bytes.
// The groups are spread over the pool's workers, each through its
// scratch[worker], at least one group's bytes (16 rows).
func regroup(pool *pool, w *weights.Tensor, scratch [][]byte, layout weights.Layout, put func(grp []byte, i int, row []byte)) {
	rb := w.RowBytes()
	pool.parallel(w.Rows()/q8GroupRows, 1, func(worker, lo, hi int) {
		scratch := scratch[worker][:q8GroupRows*rb]
		for g := lo; g < hi; g++ {
			grp := w.Data[g*q8GroupRows*rb : (g+1)*q8GroupRows*rb]
			copy(scratch, grp)
			for i := range q8GroupRows {
				put(grp, i, scratch[i*rb:(i+1)*rb])
			}
		}
	})
	w.Layout = layout
}
