package weights

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// FuzzParse checks that Parse never panics or over-reads on arbitrary input,
// that every failure is a *FormatError, and that every file it accepts
// satisfies the File invariants and survives a Write/Parse round trip (see
// checkParse).
//
// Seeds: synthetic files from Write (one with K-quant and IQ4 tensors), hand-built headers, the first 4 KiB of
// each shared model, and stories260K's real metadata with two small real
// tensors.
func FuzzParse(f *testing.F) {
	f.Add(writeFile(f, 3, sampleKVs(), sampleTensors()))
	f.Add(writeFile(f, 2, []KV{{AlignmentKey, U32(8)}, {"k", Arrs(Arr([]int8{1}))}},
		[]*Tensor{{Name: "q", Shape: []int{32, 1}, DType: tensor.Q4_0, Data: seqBytes(18, 0)}}))
	f.Add(writeFile(f, 3, nil, []*Tensor{
		{Name: "k", Shape: []int{256, 2}, DType: tensor.Q4_K, Data: seqBytes(288, 0)},
		{Name: "x", Shape: []int{256}, DType: tensor.IQ4_XS, Data: seqBytes(136, 7)},
	}))
	f.Add([]byte(header(3, 0, 0)))
	f.Add([]byte(header(3, 1, 1).kvU32(AlignmentKey, 16).info("w", []uint64{32, 2}, 8, 0).data(68)))
	if dir := modelsDir(); dir != "" {
		for _, name := range modelFiles {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				continue
			}
			f.Add(data[:min(len(data), 4096)])
		}
		if g, err := Open(filepath.Join(dir, "stories260K.gguf")); err == nil {
			var small []*Tensor
			for _, t := range g.Tensors {
				if len(t.Data) <= 256 && len(small) < 2 {
					small = append(small, t)
				}
			}
			f.Add(writeFile(f, 3, g.KV, small))
			g.Close()
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
	})
}
