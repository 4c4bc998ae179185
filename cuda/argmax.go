package cuda

import (
	"maps"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// argmaxOut is a graph output the backend reduces to one token id per row
// on the device (argmax_rows) every step: the ids go to Off in the arena,
// past the activations, and are what a greedy step copies back
// (exec.ArgmaxOutputter) instead of the logits.
type argmaxOut struct {
	Name string
	T    tensor.Tensor
	Off  int64 // byte offset of the [T.Rows()] int32 ids in the arena
}

// planArgmax picks the outputs of g that are logits, those whose rows
// follow the step's logit_rows (select_rows by logit_rows, as every model
// records its logits), in name order, and places their ids after the
// activations of a plan of size bytes. It returns them and the arena size
// with the ids.
func planArgmax(g *tensor.Graph, p bufferPlan) ([]argmaxOut, int64) {
	var outs []argmaxOut
	size := p.Size
	for _, name := range slices.Sorted(maps.Keys(g.Outputs)) {
		t := g.Outputs[name]
		if t.ID < 0 || t.ID >= len(p.Rows) || p.Rows[t.ID] != rowsLogits || t.Rows() < 1 || t.Cols() < 1 {
			continue
		}
		off := alignUp(size, arenaAlign)
		outs = append(outs, argmaxOut{Name: name, T: t, Off: off})
		size = off + 4*int64(t.Rows())
	}
	return outs, size
}
