// Package prefill implements prefill.chunk, the policy node that sets how many
// prompt tokens of one sequence an engine step may process.
package prefill

import "github.com/ninfer/ninfer-go/runtime/node"

func init() {
	one, most := 1.0, 65536.0
	node.Register(node.Spec{
		Op:        "prefill.chunk",
		Placement: node.Policy,
		Params: []node.Param{{Name: "size", Kind: node.Int, Default: int64(512), Min: &one, Max: &most,
			Doc: "prompt tokens of one sequence per engine step"}},
		Summary: "Split long prompts into chunks of at most `size` tokens per engine step.",
		Doc: "Smaller chunks let decode steps of other requests interleave with a long prefill; " +
			"the tokens produced do not depend on the chunk size.",
		NewPolicy: func(p node.Params) (node.PolicyNode, error) { return Chunk{Size: p.Int("size")}, nil },
	})
}

// Chunk is the prefill.chunk node.
type Chunk struct{ Size int }

// Fold implements node.PolicyNode.
func (c Chunk) Fold(p *node.PlanPolicy) error {
	p.PrefillChunk = c.Size
	return nil
}
