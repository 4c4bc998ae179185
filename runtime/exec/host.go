package exec

import (
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Logits is a host view of [Rows, Vocab] logits, one row per logit row of a step.
type Logits struct {
	Data  []float32
	Rows  int
	Vocab int
	// Argmax, when Data is nil, is each row's argmax (ties to the lower
	// id) as the device reduced it (ArgmaxOutputter): the engine reduces
	// only for steps whose every row picks greedily, unpenalized, without
	// logprobs, so the rows themselves were never copied to the host.
	Argmax []int32
}

// Row returns row i, [Vocab].
func (l Logits) Row(i int) []float32 { return l.Data[i*l.Vocab : (i+1)*l.Vocab] }

// Binder is implemented by nodes that need the target model's file
// (weights and metadata) before they can record ops. Nodes that run a
// model of their own implement ModelBinder.
type Binder interface {
	Bind(f *weights.File) error
}

// KVShaper is implemented by nodes that own KV cache layers.
type KVShaper interface {
	KVShape() (layers, kvDim int)
}
