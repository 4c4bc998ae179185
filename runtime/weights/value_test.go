package weights

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestValueTypes(t *testing.T) {
	got := map[string]string{}
	for _, kv := range sampleKVs() {
		got[kv.Key] = kv.Value.TypeName()
	}
	want := map[string]string{
		"general.architecture": "string", "general.name": "string",
		"u8": "uint8", "i8": "int8", "u16": "uint16", "i16": "int16",
		"u32": "uint32", "i32": "int32", "f32": "float32",
		"bool.t": "bool", "bool.f": "bool", "u64": "uint64", "i64": "int64",
		"f64": "float64", "nan": "float32",
		"arr.u8": "array[uint8]", "arr.i8": "array[int8]", "arr.u16": "array[uint16]",
		"arr.i16": "array[int16]", "arr.u32": "array[uint32]", "arr.i32": "array[int32]",
		"arr.f32": "array[float32]", "arr.bool": "array[bool]", "arr.str": "array[string]",
		"arr.u64": "array[uint64]", "arr.i64": "array[int64]", "arr.f64": "array[float64]",
		"arr.empty": "array[string]", "arr.nested": "array[array]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("type names mismatch (-want +got):\n%s", diff)
	}
	if s := ValueType(13).String(); s != "type(13)" {
		t.Errorf("ValueType(13).String() = %q", s)
	}
	// The on-disk tags are fixed by the GGUF spec.
	tags := []ValueType{Uint8, Int8, Uint16, Int16, Uint32, Int32, Float32, Bool, String, Array, Uint64, Int64, Float64}
	for i, tag := range tags {
		if int(tag) != i {
			t.Errorf("%v = %d, want %d", tag, tag, i)
		}
	}
}

func TestValueString(t *testing.T) {
	tests := []struct {
		v    Value
		want string
	}{
		{Str("a\"b"), `"a\"b"`},
		{U32(7), "7"},
		{I8(-3), "-3"},
		{F32(1e-5), "1e-05"},
		{F64(0.1), "0.1"},
		{Boolean(true), "true"},
		{Arr([]int32{1, 2}), "array[int32](2)[1, 2]"},
		{Arr([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}), `array[string](9)["a", "b", "c", "d", "e", "f", "g", "h", ...]`},
		{Arrs(Arr([]uint8{1}), Arrs()), "array[array](2)[array[uint8](1)[1], array[array](0)[]]"},
		{Value{}, "<nil>"},
	}
	for _, tc := range tests {
		if got := tc.v.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

func TestValueEqual(t *testing.T) {
	nan := math.Float32frombits(0x7fc00001)
	tests := []struct {
		a, b Value
		want bool
	}{
		{U32(1), U32(1), true},
		{U32(1), U64(1), false},
		{U32(1), U32(2), false},
		{F32(nan), F32(nan), true},
		{F32(0), F32(float32(math.Copysign(0, -1))), false},
		{Arr([]float32{nan}), Arr([]float32{nan}), true},
		{Arr([]string{"a"}), Arr([]string{"a"}), true},
		{Arr([]string{"a"}), Arr([]string{"b"}), false},
		{Arr([]string{}), Arr([]int32{}), false},
		{Arr([]int32{1}), Arr([]int32{1, 2}), false},
		{Arrs(Arr([]int8{1})), Arrs(Arr([]int8{1})), true},
		{Arrs(Arr([]int8{1})), Arrs(Arr([]int8{2})), false},
		{Value{}, Value{}, true},
	}
	for i, tc := range tests {
		if got := tc.a.Equal(tc.b); got != tc.want {
			t.Errorf("%d: %v.Equal(%v) = %v, want %v", i, tc.a, tc.b, got, tc.want)
		}
	}
	// Arr copies its input.
	xs := []int32{1}
	v := Arr(xs)
	xs[0] = 2
	if !v.Equal(Arr([]int32{1})) {
		t.Error("Arr does not copy its input")
	}
}

func TestValueConversions(t *testing.T) {
	type result struct {
		Val any
		Err string // substring of the error, "" for success
	}
	call := func(v Value, method string) result {
		var x any
		var err error
		switch method {
		case "string":
			x, err = v.AsString()
		case "bool":
			x, err = v.AsBool()
		case "uint":
			x, err = v.AsUint()
		case "int":
			x, err = v.AsInt()
		case "float":
			x, err = v.AsFloat()
		case "strings":
			x, err = v.AsStrings()
		case "float32s":
			x, err = v.AsFloat32s()
		case "int32s":
			x, err = v.AsInt32s()
		}
		if err != nil {
			if errors.Is(err, ErrType) && !strings.Contains(err.Error(), v.TypeName()) {
				t.Errorf("type error %q does not name the type %s", err, v.TypeName())
			}
			return result{Err: err.Error()}
		}
		return result{Val: x}
	}
	tests := []struct {
		v      Value
		method string
		want   result
	}{
		{Str("x"), "string", result{Val: "x"}},
		{U32(1), "string", result{Err: "wrong type: have uint32, want string"}},
		{Boolean(true), "bool", result{Val: true}},
		{U8(1), "bool", result{Err: "have uint8, want bool"}},
		{U8(200), "uint", result{Val: uint64(200)}},
		{U64(math.MaxUint64), "uint", result{Val: uint64(math.MaxUint64)}},
		{I32(5), "uint", result{Val: uint64(5)}},
		{I64(-1), "uint", result{Err: "negative int64 -1"}},
		{I8(-1), "uint", result{Err: "negative int8"}},
		{F32(1), "uint", result{Err: "have float32, want unsigned integer"}},
		{Arr([]uint32{1}), "uint", result{Err: "have array[uint32], want unsigned integer"}},
		{U32(math.MaxUint32), "int", result{Val: int64(math.MaxUint32)}},
		{I16(-5), "int", result{Val: int64(-5)}},
		{U64(math.MaxInt64), "int", result{Val: int64(math.MaxInt64)}},
		{U64(math.MaxInt64 + 1), "int", result{Err: "overflows int64"}},
		{Str("1"), "int", result{Err: "have string, want integer"}},
		{F32(0.5), "float", result{Val: 0.5}},
		{F64(-2.25), "float", result{Val: -2.25}},
		{I32(-3), "float", result{Val: -3.0}},
		{U16(3), "float", result{Val: 3.0}},
		{Boolean(false), "float", result{Err: "have bool, want float"}},
		{Arr([]string{"a", "b"}), "strings", result{Val: []string{"a", "b"}}},
		{Arr([]int32{1}), "strings", result{Err: "have array[int32], want array[string]"}},
		{Str("a"), "strings", result{Err: "have string, want array[string]"}},
		{Arr([]float32{1, 2}), "float32s", result{Val: []float32{1, 2}}},
		{Arr([]float64{0.5}), "float32s", result{Val: []float32{0.5}}},
		{Arr([]int32{-1}), "float32s", result{Val: []float32{-1}}},
		{Arr([]uint8{9}), "float32s", result{Val: []float32{9}}},
		{Arr([]string{}), "float32s", result{Err: "have array[string], want array[float32]"}},
		{Arr([]int32{1, -2}), "int32s", result{Val: []int32{1, -2}}},
		{Arr([]uint8{255}), "int32s", result{Val: []int32{255}}},
		{Arr([]int8{-1}), "int32s", result{Val: []int32{-1}}},
		{Arr([]uint16{65535}), "int32s", result{Val: []int32{65535}}},
		{Arr([]int16{-1}), "int32s", result{Val: []int32{-1}}},
		{Arr([]uint32{math.MaxInt32}), "int32s", result{Val: []int32{math.MaxInt32}}},
		{Arr([]uint32{1, math.MaxInt32 + 1}), "int32s", result{Err: "element 1 (2147483648) overflows int32"}},
		{Arr([]int64{math.MinInt32}), "int32s", result{Val: []int32{math.MinInt32}}},
		{Arr([]int64{math.MinInt32 - 1}), "int32s", result{Err: "overflows int32"}},
		{Arr([]uint64{7}), "int32s", result{Val: []int32{7}}},
		{Arr([]float32{1}), "int32s", result{Err: "have array[float32], want array[int32]"}},
		{Value{}, "string", result{Err: "have uint8, want string"}},
		{Value{}, "uint", result{Err: "have uint8, want unsigned integer"}},
	}
	for _, tc := range tests {
		got := call(tc.v, tc.method)
		if tc.want.Err != "" {
			if got.Err == "" || !strings.Contains(got.Err, tc.want.Err) {
				t.Errorf("%v as %s: got %+v, want error containing %q", tc.v, tc.method, got, tc.want.Err)
			}
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%v as %s mismatch (-want +got):\n%s", tc.v, tc.method, diff)
		}
	}

	// Slice results are copies.
	v := Arr([]string{"a"})
	s, _ := v.AsStrings()
	s[0] = "z"
	if got, _ := v.AsStrings(); got[0] != "a" {
		t.Error("AsStrings returned shared storage")
	}
}
