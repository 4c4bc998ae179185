package exec

import "github.com/ninfer/ninfer-go/runtime/node"

// ArgmaxOutputter is implemented by executables that reduce a graph output
// of [rows, vocab] logits to each row's argmax on the device, so that a
// step whose sampled rows all pick greedily (Sampling.Greedy, not
// Penalized) and want no logprobs copies back rows token ids instead of
// rows x vocab floats. Such an executable copies that output to the host
// only when Output asks for it, so a caller that takes the ids and never
// calls Output for the logits saves the copy; Output stays valid for the
// logprobs path.
type ArgmaxOutputter interface {
	// OutputArgmax returns, for each row of the named output of the last
	// Run (the rows Output reports), the index of its largest value, ties
	// to the lower index, exactly as the greedy sampler (nodes/sample
	// Argmax) picks it; valid until the next Run or Close. It is an error
	// for an output the executable does not reduce (HasArgmax).
	OutputArgmax(name string) ([]int32, error)
	// HasArgmax reports whether OutputArgmax serves the named output.
	HasArgmax(name string) bool
}

// ArgmaxReader is implemented by host nodes that, for some steps, read of
// their logits input only each row's argmax (sample.argmax always; a draft
// sampler when no row of the pass samples). When every reader of a device
// output says so, the engine has the device reduce it (ArgmaxOutputter)
// and hands the readers Logits with Argmax set and Data nil.
type ArgmaxReader interface {
	ReadsArgmaxOnly(hc *node.HostContext) bool
}
