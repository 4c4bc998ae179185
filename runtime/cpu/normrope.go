package cpu

import "github.com/ninfer/ninfer-go/runtime/tensor"

// fuseNormRoPE returns, per op index, the rope op that rms_norm op i feeds
// when the two run as one (-1 otherwise): a norm of heads (Qwen3's Q and K
// norms) whose only reader is a rope of the same heads, whose other inputs
// exist before the norm runs. The pair then normalises and rotates each
// row in one pass on one worker, into the rope's buffer (the norm's output
// is never written), with the same operations as the two ops apart.
func fuseNormRoPE(g *tensor.Graph) []int {
	readers := make([]int, len(g.Ops))
	for _, op := range g.Ops {
		for _, a := range op.Args {
			readers[a.ID]++
		}
	}
	for _, t := range g.Outputs {
		readers[t.ID]++ // read after Run
	}
	into := make([]int, len(g.Ops))
	for i := range into {
		into[i] = -1
	}
	for j, op := range g.Ops {
		if op.Kind != tensor.OpRoPE {
			continue
		}
		i := op.Args[0].ID
		norm := g.Ops[i]
		if norm.Kind != tensor.OpRMSNorm || readers[i] != 1 || norm.Group != op.RoPE.HeadDim || norm.Out.Shape != op.Out.Shape {
			continue
		}
		before := true
		for _, a := range op.Args[1:] {
			before = before && a.ID < i
		}
		if before {
			into[i] = j
		}
	}
	return into
}
