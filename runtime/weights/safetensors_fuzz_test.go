package weights

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// FuzzParseSafetensors checks that ParseSafetensors never panics or
// over-reads, that every failure is an *HFError naming the file, and that
// every file it accepts has tensors whose bytes lie in the data section and
// fit their dtype and shape, and survives a WriteSafetensors/Parse round
// trip.
//
// Seeds: WriteSafetensors output, hand-made headers, and the first 4 KiB of
// a folder converted from tiny-qwen3.
func FuzzParseSafetensors(f *testing.F) {
	f.Add(encodeSafetensors(f, sampleSafeTensors(), map[string]string{"format": "pt"}))
	f.Add(rawSafetensors(`{"w":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},"v":{"dtype":"BF16","shape":[2],"data_offsets":[4,8]}}`, 8))
	f.Add(rawSafetensors(`{"__metadata__":{"a":"b"}}`, 3))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	if dir := modelsDir(); dir != "" {
		if g, err := Open(filepath.Join(dir, "tiny-qwen3-f32.gguf")); err == nil {
			out := f.TempDir()
			if err := WriteHF(g, out, HFWriteOptions{DType: 0}); err == nil {
				if data, err := os.ReadFile(filepath.Join(out, HFSafetensorsFile)); err == nil {
					f.Add(data[:min(len(data), 4096)])
				}
			}
			g.Close()
		}
	}
	f.Add(rawSafetensors(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}`, 12))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSafetensors(data, "in")
		if err != nil {
			var he *HFError
			if !errors.As(err, &he) || he.File != "in" {
				t.Fatalf("error %v (%T) is not an *HFError naming the file", err, err)
			}
			return
		}
		lo := uintptr(0)
		if len(data) > 0 {
			lo = uintptr(unsafe.Pointer(unsafe.SliceData(data)))
		}
		var end uintptr // where the previous non-empty tensor ends
		for _, st := range s.Tensors {
			n := safetensorsDTypeSizes[st.DType]
			for _, d := range st.Shape {
				n *= d
			}
			if len(st.Data) != n {
				t.Fatalf("tensor %q: %d bytes for %s %v", st.Name, len(st.Data), st.DType, st.Shape)
			}
			if len(st.Data) > 0 {
				p := uintptr(unsafe.Pointer(unsafe.SliceData(st.Data)))
				if p < lo+uintptr(s.DataOffset) || p+uintptr(len(st.Data)) > lo+uintptr(len(data)) {
					t.Fatalf("tensor %q lies outside the data section", st.Name)
				}
				if p < end {
					t.Fatalf("tensor %q overlaps the tensor before it", st.Name)
				}
				end = p + uintptr(len(st.Data))
			}
		}
		var buf bytes.Buffer
		if err := WriteSafetensors(&buf, s.Tensors, s.Metadata); err != nil {
			t.Fatalf("an accepted file does not re-encode: %v", err)
		}
		back, err := ParseSafetensors(buf.Bytes(), "back")
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		if len(back.Tensors) != len(s.Tensors) {
			t.Fatalf("%d tensors after the round trip, want %d", len(back.Tensors), len(s.Tensors))
		}
		for _, st := range s.Tensors {
			b := back.Tensor(st.Name)
			if b == nil || b.DType != st.DType || !bytes.Equal(b.Data, st.Data) || len(b.Shape) != len(st.Shape) {
				t.Fatalf("tensor %q changed in the round trip", st.Name)
			}
		}
	})
}
