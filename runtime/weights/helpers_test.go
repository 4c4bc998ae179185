package weights

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// modelsDir returns <module root>/../shared/models, where the module root is
// the nearest directory above the working directory holding go.mod, or ""
// if there is no such directory.
func modelsDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			m := filepath.Join(dir, "..", "shared", "models")
			if st, err := os.Stat(m); err == nil && st.IsDir() {
				return m
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// modelPath returns the path of a file in shared/models, skipping the test
// if it is absent.
func modelPath(t testing.TB, name string) string {
	t.Helper()
	d := modelsDir()
	if d == "" {
		t.Skip("shared/models not found next to the module root")
	}
	p := filepath.Join(d, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model %s not available: %v", name, err)
	}
	return p
}

// openModel opens a file of shared/models and closes it when t ends.
func openModel(t *testing.T, name string) *File {
	t.Helper()
	f, err := Open(modelPath(t, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// f32Bytes encodes xs as little-endian float32s.
func f32Bytes(xs ...float32) []byte {
	var b []byte
	for _, x := range xs {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// seqBytes returns n bytes with values start, start+1, ... (mod 256).
func seqBytes(n int, start byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = start + byte(i)
	}
	return b
}

// sampleKVs returns metadata exercising every value type, empty and nested
// arrays.
func sampleKVs() []KV {
	return []KV{
		{"general.architecture", Str("llama")},
		{"general.name", Str("")},
		{"u8", U8(200)},
		{"i8", I8(-100)},
		{"u16", U16(60000)},
		{"i16", I16(-30000)},
		{"u32", U32(4000000000)},
		{"i32", I32(-2000000000)},
		{"f32", F32(1.5)},
		{"bool.t", Boolean(true)},
		{"bool.f", Boolean(false)},
		{"u64", U64(math.MaxUint64)},
		{"i64", I64(math.MinInt64)},
		{"f64", F64(-0.125)},
		{"nan", F32(float32(math.NaN()))},
		{"arr.u8", Arr([]uint8{1, 2, 255})},
		{"arr.i8", Arr([]int8{-1, 0, 1})},
		{"arr.u16", Arr([]uint16{7})},
		{"arr.i16", Arr([]int16{-7, 7})},
		{"arr.u32", Arr([]uint32{0, math.MaxUint32})},
		{"arr.i32", Arr([]int32{1, 2, 3, 6})},
		{"arr.f32", Arr([]float32{0.5, -1, 3e38})},
		{"arr.bool", Arr([]bool{true, false, true})},
		{"arr.str", Arr([]string{"<unk>", "▁the", "", "a\x00b"})},
		{"arr.u64", Arr([]uint64{1 << 40})},
		{"arr.i64", Arr([]int64{-1 << 40})},
		{"arr.f64", Arr([]float64{math.Pi})},
		{"arr.empty", Arr([]string{})},
		{"arr.nested", Arrs(Arr([]int32{1, 2}), Arr([]string{"x"}), Arrs(Arr([]uint8{}), Arrs()))},
	}
}

// sampleTensors returns one tensor of every dtype, with 1 to 4 dimensions.
func sampleTensors() []*Tensor {
	return []*Tensor{
		{Name: "vec.f32", Shape: []int{3}, DType: tensor.F32, Data: f32Bytes(1, -2, 0.25)},
		{Name: "mat.f16", Shape: []int{4, 2}, DType: tensor.F16, Data: seqBytes(16, 0x10)},
		{Name: "cube.bf16", Shape: []int{2, 2, 2}, DType: tensor.BF16, Data: seqBytes(16, 0x20)},
		{Name: "q8", Shape: []int{64, 3}, DType: tensor.Q8_0, Data: seqBytes(2*34*3, 0x30)},
		{Name: "q4", Shape: []int{32, 2, 1, 2}, DType: tensor.Q4_0, Data: seqBytes(18*4, 0x40)},
		{Name: "ids", Shape: []int{5}, DType: tensor.I32, Data: seqBytes(20, 0x50)},
	}
}

// writeFile encodes a GGUF file with Write, failing the test on error.
func writeFile(t testing.TB, version uint32, kvs []KV, tensors []*Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, version, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
