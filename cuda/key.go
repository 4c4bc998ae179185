package cuda

import (
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"math"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// captureKey identifies a captured graph: a SHA-256 of everything a
// recorded graph's kernels depend on (every op's kind, shape, dtype,
// arguments, names and attributes, and the named outputs) and of the
// graph's Origin, which names the plan by its hash. Two graphs with the
// same key launch the same kernels on the same buffers, so one capture
// serves both.
type captureKey [32]byte

func graphKey(g *tensor.Graph) captureKey {
	h := sha256.New()
	var buf []byte
	u := func(v uint64) { buf = binary.LittleEndian.AppendUint64(buf, v) }
	s := func(v string) { u(uint64(len(v))); buf = append(buf, v...) }
	tt := func(t tensor.Tensor) {
		u(uint64(int64(t.ID)))
		u(uint64(t.Shape[0]))
		u(uint64(t.Shape[1]))
		u(uint64(t.DType))
	}
	s(g.Origin)
	u(uint64(len(g.Ops)))
	for _, op := range g.Ops {
		u(uint64(op.Kind))
		tt(op.Out)
		u(uint64(len(op.Args)))
		for _, a := range op.Args {
			tt(a)
		}
		s(op.Name)
		u(uint64(math.Float32bits(op.Eps)))
		u(uint64(op.Group))
		r := op.RoPE
		u(uint64(r.HeadDim))
		u(uint64(r.Dims))
		u(uint64(math.Float32bits(r.Base)))
		u(uint64(r.Mode))
		a := op.Attn
		u(uint64(a.Layer))
		u(uint64(a.Heads))
		u(uint64(a.KVHeads))
		u(uint64(a.HeadDim))
		u(uint64(math.Float32bits(a.Scale)))
		if op.HasArg {
			u(1)
		} else {
			u(0)
		}
		h.Write(buf)
		buf = buf[:0]
	}
	for _, name := range slices.Sorted(maps.Keys(g.Outputs)) {
		s(name)
		tt(g.Outputs[name])
	}
	h.Write(buf)
	var k captureKey
	h.Sum(k[:0])
	return k
}
