package weights

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// tensorView is the comparable part of a Tensor.
type tensorView struct {
	Name  string
	Shape []int
	DType tensor.DType
	Data  []byte
}

func views(ts []*Tensor) []tensorView {
	var out []tensorView
	for _, t := range ts {
		out = append(out, tensorView{t.Name, t.Shape, t.DType, t.Data})
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		version   uint32
		alignKV   *Value
		wantAlign int
	}{
		{"v3 default alignment", 3, nil, 32},
		{"v2 default alignment", 2, nil, 32},
		{"alignment 1", 3, &[]Value{U32(1)}[0], 1},
		{"alignment 8 as uint64", 3, &[]Value{U64(8)}[0], 8},
		{"alignment 64 as int32", 2, &[]Value{I32(64)}[0], 64},
		{"alignment 4096", 3, &[]Value{U32(4096)}[0], 4096},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kvs := sampleKVs()
			if tc.alignKV != nil {
				kvs = append(kvs, KV{AlignmentKey, *tc.alignKV})
			}
			tensors := sampleTensors()
			data := writeFile(t, tc.version, kvs, tensors)
			f, err := Parse(data, "rt.gguf")
			if err != nil {
				t.Fatal(err)
			}
			if f.Version != tc.version || f.Alignment != tc.wantAlign || f.Path != "rt.gguf" {
				t.Errorf("version %d alignment %d path %q; want %d %d rt.gguf", f.Version, f.Alignment, f.Path, tc.version, tc.wantAlign)
			}
			if diff := cmp.Diff(kvs, f.KV); diff != "" {
				t.Errorf("KV mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(views(tensors), views(f.Tensors)); diff != "" {
				t.Errorf("tensors mismatch (-want +got):\n%s", diff)
			}
			a := int64(tc.wantAlign)
			if f.DataOffset%a != 0 {
				t.Errorf("data offset %d not aligned to %d", f.DataOffset, a)
			}
			end := f.DataOffset
			for _, tt := range f.Tensors {
				if int64(tt.Offset)%a != 0 {
					t.Errorf("tensor %s offset %d not aligned", tt.Name, tt.Offset)
				}
				if int64(tt.Offset) < end-f.DataOffset {
					t.Errorf("tensor %s at %d overlaps the previous one", tt.Name, tt.Offset)
				}
				end = f.DataOffset + int64(tt.Offset) + int64(len(tt.Data))
				end = (end + a - 1) / a * a
			}
			if int64(len(data)) != end {
				t.Errorf("file is %d bytes, want %d", len(data), end)
			}
			// Writing the parsed file again gives identical bytes.
			if again := writeFile(t, f.Version, f.KV, f.Tensors); !bytes.Equal(again, data) {
				t.Error("re-encoding the parsed file changed its bytes")
			}
		})
	}
}

// TestWriteBytes checks Write's output byte for byte against a hand-encoded
// file, so that reader and writer cannot share a misreading of the format.
func TestWriteBytes(t *testing.T) {
	kvs := []KV{
		{"a", U32(7)},
		{"s", Arr([]string{"hi"})},
		{AlignmentKey, U32(8)},
	}
	tensors := []*Tensor{
		{Name: "w", Shape: []int{2, 1}, DType: tensor.F16, Offset: 999, Data: []byte{1, 2, 3, 4}},
		{Name: "b", Shape: []int{1}, DType: tensor.F32, Data: []byte{5, 6, 7, 8}},
	}
	got := writeFile(t, 3, kvs, tensors)
	var w []byte
	u32 := func(v uint32) { w = binary.LittleEndian.AppendUint32(w, v) }
	u64 := func(v uint64) { w = binary.LittleEndian.AppendUint64(w, v) }
	str := func(s string) { u64(uint64(len(s))); w = append(w, s...) }
	w = append(w, 'G', 'G', 'U', 'F')
	u32(3)
	u64(2) // tensors
	u64(3) // kvs
	str("a")
	u32(4)
	u32(7)
	str("s")
	u32(9)
	u32(8)
	u64(1)
	str("hi")
	str(AlignmentKey)
	u32(4)
	u32(8)
	str("w")
	u32(2)
	u64(2)
	u64(1)
	u32(1) // f16
	u64(0)
	str("b")
	u32(1)
	u64(1)
	u32(0) // f32
	u64(8)
	for len(w)%8 != 0 {
		w = append(w, 0)
	}
	w = append(w, 1, 2, 3, 4, 0, 0, 0, 0, 5, 6, 7, 8, 0, 0, 0, 0)
	if diff := cmp.Diff(w, got); diff != "" {
		t.Errorf("Write output mismatch (-want +got):\n%s", diff)
	}
	if tensors[0].Offset != 999 {
		t.Error("Write modified Tensor.Offset")
	}
}

func TestWriteErrors(t *testing.T) {
	good := func() *Tensor {
		return &Tensor{Name: "t", Shape: []int{2}, DType: tensor.F32, Data: make([]byte, 8)}
	}
	withTensor := func(mod func(*Tensor)) []*Tensor {
		tt := good()
		mod(tt)
		return []*Tensor{tt}
	}
	tests := []struct {
		name    string
		version uint32
		kvs     []KV
		tensors []*Tensor
		want    string
	}{
		{"version 1", 1, nil, nil, "unsupported GGUF version 1"},
		{"duplicate key", 3, []KV{{"k", U8(1)}, {"k", U8(2)}}, nil, `duplicate key "k"`},
		{"zero value", 3, []KV{{"k", Value{}}}, nil, `key "k": value of type uint8 holds <nil>`},
		{"type mismatch", 3, []KV{{"k", Value{Type: String, x: uint32(1)}}}, nil, "value of type string holds uint32"},
		{"elem mismatch", 3, []KV{{"k", Value{Type: Array, ElemType: Int32, x: []uint32{1}}}}, nil, "value of type array[int32] holds []uint32"},
		{"unknown type", 3, []KV{{"k", Value{Type: 13, x: uint8(1)}}}, nil, "value of type type(13)"},
		{"nested non-array", 3, []KV{{"k", Arrs(Arr([]int8{1}), U8(1))}}, nil, "element 1 of a nested array is a uint8"},
		{"bad alignment", 3, []KV{{AlignmentKey, U32(24)}}, nil, "alignment 24 is not a power of two"},
		{"alignment type", 3, []KV{{AlignmentKey, Str("32")}}, nil, "have string, want unsigned integer"},
		{"duplicate tensor", 3, nil, []*Tensor{good(), good()}, `duplicate tensor name "t"`},
		{"no dims", 3, nil, withTensor(func(t *Tensor) { t.Shape = nil }), "0 dimensions"},
		{"5 dims", 3, nil, withTensor(func(t *Tensor) { t.Shape = []int{2, 1, 1, 1, 1} }), "5 dimensions"},
		{"zero dim", 3, nil, withTensor(func(t *Tensor) { t.Shape = []int{2, 0} }), "dimension 1 is 0"},
		{"short data", 3, nil, withTensor(func(t *Tensor) { t.Data = t.Data[:7] }), "needs 8 bytes of data, have 7"},
		{"bad dtype", 3, nil, withTensor(func(t *Tensor) { t.DType = 0 }), "dtype dtype(0) cannot be stored"},
		{"block multiple", 3, nil, withTensor(func(t *Tensor) { t.DType = tensor.Q8_0 }), "not a multiple of the block size"},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		err := Write(&buf, tc.version, tc.kvs, tc.tensors)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Write error %v, want one containing %q", tc.name, err, tc.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: Write wrote %d bytes before failing", tc.name, buf.Len())
		}
	}
}

func TestAccessors(t *testing.T) {
	kvs := append(sampleKVs(), KV{"neg", I32(-4)}, KV{"big", U64(1 << 63)})
	f, err := Parse(writeFile(t, 3, kvs, sampleTensors()), "acc.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Arch(); got != "llama" {
		t.Errorf("Arch() = %q", got)
	}
	if !f.Has("u8") || f.Has("nope") {
		t.Error("Has is wrong")
	}
	if v, ok := f.Lookup("u16"); !ok || !v.Equal(U16(60000)) {
		t.Errorf("Lookup(u16) = %v, %v", v, ok)
	}
	if _, ok := f.Lookup("nope"); ok {
		t.Error("Lookup(nope) found something")
	}

	type res struct {
		Val any
		Err string
	}
	mk := func(v any, err error) res {
		if err != nil {
			return res{Err: err.Error()}
		}
		return res{Val: v}
	}
	got := map[string]res{}
	got["String(general.architecture)"] = mk(f.String("general.architecture"))
	got["Uint(u32)"] = mk(f.Uint("u32"))
	got["Uint(i8)"] = mk(f.Uint("i8"))
	got["Int(i64)"] = mk(f.Int("i64"))
	got["Int(big)"] = mk(f.Int("big"))
	got["Uint(neg)"] = mk(f.Uint("neg"))
	got["Float(f32)"] = mk(f.Float("f32"))
	got["Float(u16)"] = mk(f.Float("u16"))
	got["Bool(bool.t)"] = mk(f.Bool("bool.t"))
	got["Strings(arr.str)"] = mk(f.Strings("arr.str"))
	got["Float32s(arr.f32)"] = mk(f.Float32s("arr.f32"))
	got["Int32s(arr.i32)"] = mk(f.Int32s("arr.i32"))
	got["String(u32)"] = mk(f.String("u32"))
	got["Int32s(arr.str)"] = mk(f.Int32s("arr.str"))
	got["Bool(missing)"] = mk(f.Bool("missing"))
	want := map[string]res{
		"String(general.architecture)": {Val: "llama"},
		"Uint(u32)":                    {Val: uint64(4000000000)},
		"Uint(i8)":                     {Err: `gguf acc.gguf: key "i8": negative int8 -100 where an unsigned integer is wanted`},
		"Int(i64)":                     {Val: int64(math.MinInt64)},
		"Int(big)":                     {Err: `gguf acc.gguf: key "big": uint64 9223372036854775808 overflows int64`},
		"Uint(neg)":                    {Err: `gguf acc.gguf: key "neg": negative int32 -4 where an unsigned integer is wanted`},
		"Float(f32)":                   {Val: 1.5},
		"Float(u16)":                   {Val: 60000.0},
		"Bool(bool.t)":                 {Val: true},
		"Strings(arr.str)":             {Val: []string{"<unk>", "▁the", "", "a\x00b"}},
		"Float32s(arr.f32)":            {Val: []float32{0.5, -1, 3e38}},
		"Int32s(arr.i32)":              {Val: []int32{1, 2, 3, 6}},
		"String(u32)":                  {Err: `gguf acc.gguf: key "u32": wrong type: have uint32, want string`},
		"Int32s(arr.str)":              {Err: `gguf acc.gguf: key "arr.str": wrong type: have array[string], want array[int32]`},
		"Bool(missing)":                {Err: `gguf acc.gguf: key "missing": not found`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("accessor results mismatch (-want +got):\n%s", diff)
	}

	if _, err := f.Uint("missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key error %v does not wrap ErrNotFound", err)
	}
	if _, err := f.Float("arr.f32"); !errors.Is(err, ErrType) {
		t.Errorf("wrong type error %v does not wrap ErrType", err)
	}

	tt, err := f.Tensor("q8")
	if err != nil || tt.Name != "q8" {
		t.Errorf("Tensor(q8) = %v, %v", tt, err)
	}
	if _, err := f.Tensor("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `tensor "nope"`) {
		t.Errorf("Tensor(nope) error = %v", err)
	}
}

func TestTensorMethods(t *testing.T) {
	// A Q8_0 matrix with 2 rows of 64 elements: 2 blocks per row. Block b of
	// row r has scale r+1 and q[j] = j - 16 + b.
	var data []byte
	var want []float32
	for r := range 2 {
		for b := range 2 {
			data = binary.LittleEndian.AppendUint16(data, tensor.F32ToF16(float32(r+1)))
			for j := range 32 {
				q := int8(j - 16 + b)
				data = append(data, byte(q))
				want = append(want, float32(r+1)*float32(q))
			}
		}
	}
	kv := []KV{{"general.architecture", Str("test")}}
	f, err := Parse(writeFile(t, 3, kv, []*Tensor{{Name: "m", Shape: []int{64, 2}, DType: tensor.Q8_0, Data: data}}), "m.gguf")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := f.Tensor("m")
	type dims struct{ Elements, Rows, RowLen, RowBytes int }
	if diff := cmp.Diff(dims{128, 2, 64, 68}, dims{m.Elements(), m.Rows(), m.RowLen(), m.RowBytes()}); diff != "" {
		t.Errorf("dims mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(data[68:], m.Row(1)); diff != "" {
		t.Errorf("Row(1) mismatch (-want +got):\n%s", diff)
	}
	got, err := m.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Float32s mismatch (-want +got):\n%s", diff)
	}
	row1 := make([]float32, 64)
	if err := tensor.DequantizeRow(m.DType, m.Row(1), row1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[64:], row1); diff != "" {
		t.Errorf("row 1 dequantized mismatch (-want +got):\n%s", diff)
	}
	for _, i := range []int{-1, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Row(%d) did not panic", i)
				}
			}()
			m.Row(i)
		}()
	}
	vec := &Tensor{Name: "v", Shape: []int{3}, DType: tensor.F32, Data: f32Bytes(1, 2, 3)}
	if vec.Rows() != 1 || vec.RowLen() != 3 || vec.Elements() != 3 {
		t.Errorf("vector dims %d %d %d", vec.Rows(), vec.RowLen(), vec.Elements())
	}
	ids := &Tensor{Name: "ids", Shape: []int{1}, DType: tensor.I32, Data: make([]byte, 4)}
	if _, err := ids.Float32s(); err == nil || !strings.Contains(err.Error(), `tensor "ids"`) {
		t.Errorf("Float32s of I32 tensor: %v", err)
	}
	f.Close()
	if m.Data != nil {
		t.Error("Close did not clear Data")
	}
}

// raw builds GGUF bytes by hand, for files Write refuses to produce.
type raw []byte

func (r raw) u32(v uint32) raw  { return binary.LittleEndian.AppendUint32(r, v) }
func (r raw) u64(v uint64) raw  { return binary.LittleEndian.AppendUint64(r, v) }
func (r raw) str(s string) raw  { return append(r.u64(uint64(len(s))), s...) }
func (r raw) add(b ...byte) raw { return append(r, b...) }

// header starts a file with the given counts.
func header(version uint32, nTensors, nKV uint64) raw {
	return raw("GGUF").u32(version).u64(nTensors).u64(nKV)
}

// kv appends an entry whose value is a uint32.
func (r raw) kvU32(key string, v uint32) raw { return r.str(key).u32(uint32(Uint32)).u32(v) }

// info appends a tensor info.
func (r raw) info(name string, dims []uint64, ggmlType uint32, off uint64) raw {
	r = r.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		r = r.u64(d)
	}
	return r.u32(ggmlType).u64(off)
}

// data pads r to 32 bytes and appends n bytes of tensor data.
func (r raw) data(n int) raw {
	for len(r)%32 != 0 {
		r = append(r, 0)
	}
	return append(r, make([]byte, n)...)
}

func TestCorruptFiles(t *testing.T) {
	// Each file has valid framing apart from the corruption named.
	oneTensor := func(dims []uint64, typ uint32, off uint64, n int) raw {
		return header(3, 1, 0).info("w", dims, typ, off).data(n)
	}
	nested := header(3, 0, 1).str("deep").u32(uint32(Array))
	for range 17 {
		nested = nested.u32(uint32(Array)).u64(1)
	}
	nested = nested.u32(uint32(Uint8)).u64(0)

	type want struct {
		Key, Tensor string
		Msg         string // substring of the message
	}
	tests := []struct {
		name string
		data []byte
		want want
	}{
		{"empty", nil, want{Msg: "truncated magic"}},
		{"bad magic", raw("GGML").u32(3).u64(0).u64(0), want{Msg: `bad magic "GGML"`}},
		{"version 1", header(1, 0, 0), want{Msg: "unsupported GGUF version 1"}},
		{"version 0", header(0, 0, 0), want{Msg: "unsupported GGUF version 0"}},
		{"version 4", header(4, 0, 0), want{Msg: "unsupported GGUF version 4"}},
		{"big endian version", header(3<<24, 0, 0), want{Msg: "unsupported GGUF version 50331648"}},
		{"truncated counts", header(3, 0, 0)[:20], want{Msg: "truncated metadata count"}},
		{"huge tensor count", header(3, 1<<62, 0), want{Msg: "tensor count 4611686018427387904 cannot fit"}},
		{"huge kv count", header(3, 0, math.MaxUint64), want{Msg: "metadata count 18446744073709551615 cannot fit"}},
		{"kv count beyond data", header(3, 0, 2).kvU32("a", 1), want{Msg: "metadata count 2 cannot fit"}},
		{"huge key length", header(3, 0, 1).u64(1 << 60).add(make([]byte, 8)...), want{Msg: "key of metadata entry 0 length 1152921504606846976 exceeds"}},
		{"missing value", header(3, 0, 1).str("k").u32(uint32(Uint32)).add(0, 0), want{Key: "k", Msg: "truncated uint32 value"}},
		{"huge string value", header(3, 0, 1).str("name").u32(uint32(String)).u64(math.MaxUint64), want{Key: "name", Msg: "string value length 18446744073709551615 exceeds"}},
		{"unknown value type", header(3, 0, 1).str("k").u32(13).u32(0), want{Key: "k", Msg: "unknown value type 13"}},
		{"unknown elem type", header(3, 0, 1).str("k").u32(uint32(Array)).u32(99).u64(0), want{Key: "k", Msg: "unknown array element type 99"}},
		{"huge array", header(3, 0, 1).str("k").u32(uint32(Array)).u32(uint32(Uint32)).u64(1 << 62).u32(0), want{Key: "k", Msg: "array of 4611686018427387904 uint32 elements exceeds"}},
		{"array past end", header(3, 0, 1).str("k").u32(uint32(Array)).u32(uint32(Uint64)).u64(2).u64(0), want{Key: "k", Msg: "array of 2 uint64 elements exceeds the 8 bytes"}},
		{"huge string array", header(3, 0, 1).str("tokens").u32(uint32(Array)).u32(uint32(String)).u64(1 << 40).u64(1), want{Key: "tokens", Msg: "array of 1099511627776 string elements"}},
		{"string array element past end", header(3, 0, 1).str("tokens").u32(uint32(Array)).u32(uint32(String)).u64(2).str("a").u64(100), want{Key: "tokens", Msg: "string 1 of array length 100 exceeds"}},
		{"huge nested array", header(3, 0, 1).str("k").u32(uint32(Array)).u32(uint32(Array)).u64(1 << 50), want{Key: "k", Msg: "array of 1125899906842624 array elements"}},
		{"nested too deep", nested, want{Key: "deep", Msg: "nested more than 16 deep"}},
		{"duplicate key", header(3, 0, 2).kvU32("k", 1).kvU32("k", 2), want{Key: "k", Msg: "duplicate key"}},
		{"alignment 3", header(3, 0, 1).kvU32(AlignmentKey, 3), want{Key: AlignmentKey, Msg: "alignment 3 is not a power of two"}},
		{"alignment 0", header(3, 0, 1).kvU32(AlignmentKey, 0), want{Key: AlignmentKey, Msg: "alignment 0 is not a power of two"}},
		{"alignment 2^31", header(3, 0, 1).kvU32(AlignmentKey, 1<<31), want{Key: AlignmentKey, Msg: "alignment 2147483648 is not a power of two between 1 and 1073741824"}},
		{"alignment string", header(3, 0, 1).str(AlignmentKey).u32(uint32(String)).str("32"), want{Key: AlignmentKey, Msg: "wrong type: have string, want unsigned integer"}},
		{"alignment negative", header(3, 0, 1).str(AlignmentKey).u32(uint32(Int32)).u32(math.MaxUint32), want{Key: AlignmentKey, Msg: "negative int32 -1"}},
		{"tensor count beyond data", header(3, 3, 0).info("w", []uint64{8}, 0, 0).add(make([]byte, 60)...), want{Msg: "tensor count 3 cannot fit in the 93 bytes"}},
		{"empty tensor name", header(3, 2, 0).info("w", []uint64{8}, 0, 0).data(32), want{Msg: `tensor 1 (name ""): 0 dimensions, want 1 to 4`}},
		{"huge tensor name", header(3, 1, 0).u64(1 << 40).add(make([]byte, 40)...), want{Msg: "name of tensor 0 length 1099511627776 exceeds"}},
		{"0 dims", oneTensor(nil, 0, 0, 64).add(make([]byte, 16)...), want{Tensor: "w", Msg: "0 dimensions, want 1 to 4"}},
		{"5 dims", oneTensor([]uint64{1, 1, 1, 1, 1}, 0, 0, 64), want{Tensor: "w", Msg: "5 dimensions, want 1 to 4"}},
		{"zero dim", oneTensor([]uint64{4, 0}, 0, 0, 64), want{Tensor: "w", Msg: "dimension 1 is 0"}},
		{"dim above int64", oneTensor([]uint64{1 << 63}, 0, 0, 64), want{Tensor: "w", Msg: "dimension 0 is 9223372036854775808"}},
		{"element overflow", oneTensor([]uint64{1 << 32, 1 << 32}, 0, 0, 64), want{Tensor: "w", Msg: "element count of shape overflows at dimension 1"}},
		{"byte overflow", oneTensor([]uint64{1 << 61, 2}, 0, 0, 64), want{Tensor: "w", Msg: "overflow"}},
		{"unsupported iq2_xxs", oneTensor([]uint64{256}, 16, 0, 66), want{Tensor: "w", Msg: "unsupported dtype iq2_xxs (16)"}},
		{"unsupported q4_2", oneTensor([]uint64{32}, 4, 0, 20), want{Tensor: "w", Msg: "unsupported dtype q4_2 (4)"}},
		{"q4_K row not block multiple", oneTensor([]uint64{128, 2}, 12, 0, 144), want{Tensor: "w", Msg: "not a multiple of the block size 256"}},
		{"q6_K data short", oneTensor([]uint64{256, 2}, 14, 0, 419), want{Tensor: "w", Msg: "extends past end of file"}},
		{"iq4_nl row not block multiple", oneTensor([]uint64{48}, 20, 0, 36), want{Tensor: "w", Msg: "not a multiple of the block size 32"}},
		{"unknown ggml type", oneTensor([]uint64{4}, 200, 0, 64), want{Tensor: "w", Msg: "unsupported dtype unknown (200)"}},
		{"q8_0 row not block multiple", oneTensor([]uint64{33}, 8, 0, 64), want{Tensor: "w", Msg: "not a multiple of the block size 32"}},
		{"misaligned offset", oneTensor([]uint64{4}, 0, 4, 64), want{Tensor: "w", Msg: "data offset 4 is not a multiple of the alignment 32"}},
		{"offset past end", oneTensor([]uint64{4}, 0, 1<<20, 64), want{Tensor: "w", Msg: "data [1048640, 1048656) extends past end of file (128 bytes)"}},
		{"offset overflow", oneTensor([]uint64{4}, 0, math.MaxUint64&^31, 64), want{Tensor: "w", Msg: "overflows"}},
		{"data short by one", oneTensor([]uint64{4}, 0, 0, 15), want{Tensor: "w", Msg: "data [64, 80) extends past end of file (79 bytes)"}},
		{"huge tensor", oneTensor([]uint64{1 << 20, 1 << 20}, 0, 0, 64), want{Tensor: "w", Msg: "data [96, 4398046511200) extends past end of file (160 bytes)"}},
		{"truncated tensor info", header(3, 1, 0).info("w", []uint64{4}, 0, 0)[:56], want{Tensor: "w", Msg: "truncated data offset: need 8 bytes, 7 left in file"}},
		{"duplicate tensor", header(3, 2, 0).info("w", []uint64{8}, 0, 0).info("w", []uint64{8}, 0, 32).data(64), want{Tensor: "w", Msg: "duplicate tensor name"}},
		{"second tensor bad", header(3, 2, 0).info("a", []uint64{8}, 0, 0).info("b", []uint64{8}, 0, 32).data(40), want{Tensor: "b", Msg: "extends past end of file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(tc.data, "bad.gguf")
			if err == nil {
				t.Fatalf("Parse succeeded: %d KVs, %d tensors", len(f.KV), len(f.Tensors))
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FormatError", err, err)
			}
			got := want{Key: fe.Key, Tensor: fe.Tensor, Msg: fe.Msg}
			opt := cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Msg" },
				cmp.Comparer(func(a, b string) bool { return strings.Contains(a, b) || strings.Contains(b, a) }))
			if diff := cmp.Diff(tc.want, got, opt); diff != "" {
				t.Errorf("error mismatch (-want +got):\n%s\nfull error: %v", diff, err)
			}
			if fe.File != "bad.gguf" || fe.Offset < 0 || fe.Offset > int64(len(tc.data)) {
				t.Errorf("File %q Offset %d (file is %d bytes)", fe.File, fe.Offset, len(tc.data))
			}
		})
	}
}

func TestFormatErrorMessage(t *testing.T) {
	// Alignment 8 and a header of 108 bytes put the data section at 112, so
	// offset 888 places 1000 f32s (4000 bytes) at [1000, 5000).
	data := header(3, 1, 1).kvU32(AlignmentKey, 8).info("blk.0.attn_q.weight", []uint64{1000}, 0, 888)
	data = append(data, make([]byte, 4096-len(data))...)
	_, err := Parse(data, "stories.gguf")
	const want = `gguf stories.gguf: tensor "blk.0.attn_q.weight": data [1000, 5000) extends past end of file (4096 bytes)`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v\nwant    %s", err, want)
	}
	if _, err := Parse(append(data, make([]byte, 904)...), "stories.gguf"); err != nil {
		t.Errorf("the same file extended to 5000 bytes: %v", err)
	}
	keyErr := &FormatError{File: "x.gguf", Offset: 40, Key: "k", Msg: "m"}
	posErr := &FormatError{File: "x.gguf", Offset: 40, Msg: "m"}
	if keyErr.Error() != `gguf x.gguf: key "k": m` || posErr.Error() != "gguf x.gguf: offset 40: m" {
		t.Errorf("messages %q, %q", keyErr, posErr)
	}
}

// TestTruncations parses every proper prefix of a valid file: each must be
// an error (a *FormatError), never a panic or a success.
func TestTruncations(t *testing.T) {
	kvs := append(sampleKVs(), KV{AlignmentKey, U32(16)})
	data := writeFile(t, 3, kvs, sampleTensors())
	if _, err := Parse(data, "full"); err != nil {
		t.Fatal(err)
	}
	// The last tensor is followed by padding, which is not needed.
	last := sampleTensors()[len(sampleTensors())-1]
	f, _ := Parse(data, "full")
	end := int(f.DataOffset) + int(f.Tensors[len(f.Tensors)-1].Offset) + len(last.Data)
	if _, err := Parse(data[:end], "exact"); err != nil {
		t.Fatalf("file without final padding: %v", err)
	}
	for n := range end {
		_, err := Parse(data[:n], "prefix")
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("prefix of %d bytes: error %v, want a *FormatError", n, err)
		}
	}
}

// TestCorruptBytes flips each header byte of a valid file in turn: the
// result must parse or fail cleanly, and a success must be re-encodable.
func TestCorruptBytes(t *testing.T) {
	data := writeFile(t, 3, sampleKVs(), sampleTensors())
	f, _ := Parse(data, "full")
	buf := append([]byte(nil), data...)
	for i := range int(f.DataOffset) {
		for _, x := range []byte{0xff, 0x80, 0x01} {
			buf[i] ^= x
			checkParse(t, buf)
			buf[i] ^= x
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	data := writeFile(t, 3, sampleKVs(), sampleTensors())
	path := filepath.Join(dir, "ok.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, data[:100], 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		open func(string) (*File, error)
	}{{"Open", Open}, {"Load", Load}} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tc.open(path)
			if err != nil {
				t.Fatal(err)
			}
			if f.Path != path {
				t.Errorf("Path = %q", f.Path)
			}
			if diff := cmp.Diff(views(sampleTensors()), views(f.Tensors)); diff != "" {
				t.Errorf("tensors mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(sampleKVs(), f.KV); diff != "" {
				t.Errorf("KV mismatch (-want +got):\n%s", diff)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			// Metadata stays usable after Close: strings are copies.
			if s, err := f.Strings("arr.str"); err != nil || s[1] != "▁the" {
				t.Errorf("Strings after Close = %q, %v", s, err)
			}

			var fe *FormatError
			if _, err := tc.open(bad); !errors.As(err, &fe) || fe.File != bad {
				t.Errorf("%s(truncated) = %v", tc.name, err)
			}
			if _, err := tc.open(empty); !errors.As(err, &fe) {
				t.Errorf("%s(empty) = %v", tc.name, err)
			}
			if _, err := tc.open(filepath.Join(dir, "missing.gguf")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s(missing) = %v", tc.name, err)
			}
			if _, err := tc.open(dir); err == nil {
				t.Errorf("%s(directory) succeeded", tc.name)
			}
		})
	}
}

// checkParse parses data and, if that succeeds, checks the invariants every
// parsed file must satisfy and that Write reproduces it. It is shared by the
// corruption tests and FuzzParse.
func checkParse(t testing.TB, data []byte) {
	t.Helper()
	f, err := Parse(data, "in")
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error %v (%T) is not a *FormatError", err, err)
		}
		if fe.Offset < 0 || fe.Offset > int64(len(data)) {
			t.Fatalf("error offset %d outside the %d-byte file", fe.Offset, len(data))
		}
		return
	}
	if f.Alignment <= 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset%int64(f.Alignment) != 0 {
		t.Fatalf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	// Tensors may overlap, so a small file can describe many tensors that
	// each span it; dequantizing and re-encoding those costs quadratic time
	// and memory, so only files with modest total tensor bytes get them.
	total := 0
	for _, tt := range f.Tensors {
		total += len(tt.Data)
	}
	heavy := total > 1<<22 || f.Alignment > 1<<16
	for _, tt := range f.Tensors {
		if tt.Offset%uint64(f.Alignment) != 0 {
			t.Fatalf("tensor %q offset %d not aligned", tt.Name, tt.Offset)
		}
		if len(tt.Data) != tt.Rows()*tt.RowBytes() {
			t.Fatalf("tensor %q has %d bytes, want %d", tt.Name, len(tt.Data), tt.Rows()*tt.RowBytes())
		}
		_ = tt.Row(tt.Rows() - 1)
		if tt.DType != tensor.I32 && !heavy {
			if _, err := tt.Float32s(); err != nil {
				t.Fatalf("tensor %q: %v", tt.Name, err)
			}
		}
	}
	if heavy {
		// Write would copy every tensor and pad each to the alignment (up
		// to 1 GiB): too slow to round-trip.
		return
	}
	var buf bytes.Buffer
	if err := Write(&buf, f.Version, f.KV, f.Tensors); err != nil {
		t.Fatalf("re-encoding a parsed file: %v", err)
	}
	g, err := Parse(buf.Bytes(), "again")
	if err != nil {
		t.Fatalf("parsing a re-encoded file: %v", err)
	}
	// Compare cheaply first; go-cmp explains a difference.
	same := len(f.KV) == len(g.KV) && len(f.Tensors) == len(g.Tensors)
	for i := 0; same && i < len(f.KV); i++ {
		same = f.KV[i].Key == g.KV[i].Key && f.KV[i].Value.Equal(g.KV[i].Value)
	}
	for i := 0; same && i < len(f.Tensors); i++ {
		a, b := f.Tensors[i], g.Tensors[i]
		same = a.Name == b.Name && a.DType == b.DType && slices.Equal(a.Shape, b.Shape) && bytes.Equal(a.Data, b.Data)
	}
	if !same {
		t.Fatalf("re-encoding changed the file (-first +second):\n%s%s", cmp.Diff(f.KV, g.KV),
			cmp.Diff(views(f.Tensors), views(g.Tensors), cmpopts.EquateEmpty()))
	}
}
