package weights

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type tag of a GGUF metadata value, as stored in the file.
type ValueType uint32

// GGUF metadata value types. The numbers are the on-disk tags.
const (
	Uint8   ValueType = 0
	Int8    ValueType = 1
	Uint16  ValueType = 2
	Int16   ValueType = 3
	Uint32  ValueType = 4
	Int32   ValueType = 5
	Float32 ValueType = 6
	Bool    ValueType = 7 // one byte, 0 = false, anything else = true
	String  ValueType = 8 // uint64 length, then that many bytes (no terminator)
	Array   ValueType = 9 // uint32 element type, uint64 count, then the elements
	Uint64  ValueType = 10
	Int64   ValueType = 11
	Float64 ValueType = 12
)

var valueTypeNames = [...]string{
	Uint8: "uint8", Int8: "int8", Uint16: "uint16", Int16: "int16",
	Uint32: "uint32", Int32: "int32", Float32: "float32", Bool: "bool",
	String: "string", Array: "array", Uint64: "uint64", Int64: "int64",
	Float64: "float64",
}

// Valid reports whether t is one of the thirteen defined value types.
func (t ValueType) Valid() bool { return t <= Float64 }

// String returns the lower-case name of t ("uint8", ..., "array",
// "float64"), or "type(N)" for an undefined tag.
func (t ValueType) String() string {
	if t.Valid() {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size returns the encoded size in bytes of a fixed-size scalar type, or 0
// for String, Array and undefined types.
func (t ValueType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// ErrType is wrapped by every error caused by a metadata value having a
// different type than the one asked for.
var ErrType = errors.New("wrong type")

// Value is one decoded GGUF metadata value.
//
// For a scalar, Type is its type and ElemType is unused (zero). For an
// array, Type is Array and ElemType the type of its elements; a nested
// array has ElemType Array and holds one Value (itself an array) per
// element. Build Values with the constructors (U32, Str, Arr, ...) or get
// them from a parsed File; the zero Value holds nothing and cannot be
// written.
type Value struct {
	Type     ValueType
	ElemType ValueType
	// x holds the Go value: uint8, int8, uint16, int16, uint32, int32,
	// float32, bool, string, uint64, int64 or float64 for a scalar, and the
	// slice of that type for an array ([]Value for nested arrays).
	x any
}

// U8 returns a Uint8 value.
func U8(v uint8) Value { return Value{Type: Uint8, x: v} }

// I8 returns an Int8 value.
func I8(v int8) Value { return Value{Type: Int8, x: v} }

// U16 returns a Uint16 value.
func U16(v uint16) Value { return Value{Type: Uint16, x: v} }

// I16 returns an Int16 value.
func I16(v int16) Value { return Value{Type: Int16, x: v} }

// U32 returns a Uint32 value.
func U32(v uint32) Value { return Value{Type: Uint32, x: v} }

// I32 returns an Int32 value.
func I32(v int32) Value { return Value{Type: Int32, x: v} }

// F32 returns a Float32 value.
func F32(v float32) Value { return Value{Type: Float32, x: v} }

// Boolean returns a Bool value.
func Boolean(v bool) Value { return Value{Type: Bool, x: v} }

// Str returns a String value.
func Str(v string) Value { return Value{Type: String, x: v} }

// U64 returns a Uint64 value.
func U64(v uint64) Value { return Value{Type: Uint64, x: v} }

// I64 returns an Int64 value.
func I64(v int64) Value { return Value{Type: Int64, x: v} }

// F64 returns a Float64 value.
func F64(v float64) Value { return Value{Type: Float64, x: v} }

// Elem is the set of Go element types a GGUF array can hold directly.
type Elem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64
}

// Arr returns an array Value holding a copy of xs; its ElemType follows
// from T (for example []string gives an array of String).
func Arr[T Elem](xs []T) Value {
	c := append([]T{}, xs...)
	var et ValueType
	switch any(c).(type) {
	case []uint8:
		et = Uint8
	case []int8:
		et = Int8
	case []uint16:
		et = Uint16
	case []int16:
		et = Int16
	case []uint32:
		et = Uint32
	case []int32:
		et = Int32
	case []float32:
		et = Float32
	case []bool:
		et = Bool
	case []string:
		et = String
	case []uint64:
		et = Uint64
	case []int64:
		et = Int64
	case []float64:
		et = Float64
	}
	return Value{Type: Array, ElemType: et, x: c}
}

// Arrs returns a nested array Value (ElemType Array) whose elements are
// copies of vs. Every element must itself be an array; Write reports an
// error otherwise.
func Arrs(vs ...Value) Value {
	return Value{Type: Array, ElemType: Array, x: append([]Value{}, vs...)}
}

// Any returns the Go value held by v: for a scalar its Go counterpart
// (uint8 ... float64, bool, string), for an array the slice ([]uint8 ...
// []string, or []Value for nested arrays). The slice is shared with v and
// must not be modified. The zero Value gives nil.
func (v Value) Any() any { return v.x }

// Len returns the number of elements of an array value, and 0 for a scalar.
func (v Value) Len() int {
	switch x := v.x.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// TypeName returns the type of v for messages: the scalar type name, or
// "array[T]" for an array of T (for example "array[string]").
func (v Value) TypeName() string {
	if v.Type == Array {
		return "array[" + v.ElemType.String() + "]"
	}
	return v.Type.String()
}

func (v Value) typeErr(want string) error {
	return fmt.Errorf("%w: have %s, want %s", ErrType, v.TypeName(), want)
}

// scalarInt returns the integer held by a scalar of an integer type as
// either a signed or an unsigned 64-bit value (signed tells which).
func scalarInt(x any) (u uint64, i int64, signed, ok bool) {
	switch x := x.(type) {
	case uint8:
		return uint64(x), 0, false, true
	case uint16:
		return uint64(x), 0, false, true
	case uint32:
		return uint64(x), 0, false, true
	case uint64:
		return x, 0, false, true
	case int8:
		return 0, int64(x), true, true
	case int16:
		return 0, int64(x), true, true
	case int32:
		return 0, int64(x), true, true
	case int64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// AsString returns the string held by a String value; any other type is an
// error wrapping ErrType.
func (v Value) AsString() (string, error) {
	if s, ok := v.x.(string); ok && v.Type == String {
		return s, nil
	}
	return "", v.typeErr("string")
}

// AsBool returns the bool held by a Bool value; any other type is an error
// wrapping ErrType.
func (v Value) AsBool() (bool, error) {
	if b, ok := v.x.(bool); ok && v.Type == Bool {
		return b, nil
	}
	return false, v.typeErr("bool")
}

// AsUint returns the value of any integer scalar as a uint64. A non-integer
// type is an error wrapping ErrType; a negative value is an error too.
func (v Value) AsUint() (uint64, error) {
	u, i, signed, ok := scalarInt(v.x)
	if !ok || v.Type == Array {
		return 0, v.typeErr("unsigned integer")
	}
	if signed {
		if i < 0 {
			return 0, fmt.Errorf("negative %s %d where an unsigned integer is wanted", v.Type, i)
		}
		return uint64(i), nil
	}
	return u, nil
}

// AsInt returns the value of any integer scalar as an int64. A non-integer
// type is an error wrapping ErrType; a uint64 above math.MaxInt64 is an
// error too.
func (v Value) AsInt() (int64, error) {
	u, i, signed, ok := scalarInt(v.x)
	if !ok || v.Type == Array {
		return 0, v.typeErr("integer")
	}
	if signed {
		return i, nil
	}
	if u > math.MaxInt64 {
		return 0, fmt.Errorf("%s %d overflows int64", v.Type, u)
	}
	return int64(u), nil
}

// AsFloat returns the value of a Float32 or Float64 scalar, or of any
// integer scalar converted to float64 (rounding to nearest for integers
// beyond 2^53). Other types are an error wrapping ErrType.
func (v Value) AsFloat() (float64, error) {
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	u, i, signed, ok := scalarInt(v.x)
	if !ok || v.Type == Array {
		return 0, v.typeErr("float")
	}
	if signed {
		return float64(i), nil
	}
	return float64(u), nil
}

// AsStrings returns a copy of the elements of an array of String; any
// other type is an error wrapping ErrType.
func (v Value) AsStrings() ([]string, error) {
	if s, ok := v.x.([]string); ok {
		return append([]string{}, s...), nil
	}
	return nil, v.typeErr("array[string]")
}

// AsFloat32s returns the elements of an array of Float32 (copied), Float64
// (converted, rounding to nearest) or any integer type (converted) as a new
// slice. Other types are an error wrapping ErrType.
func (v Value) AsFloat32s() ([]float32, error) {
	switch x := v.x.(type) {
	case []float32:
		return append([]float32{}, x...), nil
	case []float64:
		return convertSlice(x, func(e float64) float32 { return float32(e) }), nil
	case []uint8:
		return convertSlice(x, func(e uint8) float32 { return float32(e) }), nil
	case []int8:
		return convertSlice(x, func(e int8) float32 { return float32(e) }), nil
	case []uint16:
		return convertSlice(x, func(e uint16) float32 { return float32(e) }), nil
	case []int16:
		return convertSlice(x, func(e int16) float32 { return float32(e) }), nil
	case []uint32:
		return convertSlice(x, func(e uint32) float32 { return float32(e) }), nil
	case []int32:
		return convertSlice(x, func(e int32) float32 { return float32(e) }), nil
	case []uint64:
		return convertSlice(x, func(e uint64) float32 { return float32(e) }), nil
	case []int64:
		return convertSlice(x, func(e int64) float32 { return float32(e) }), nil
	}
	return nil, v.typeErr("array[float32]")
}

// AsInt32s returns the elements of an array of any integer type as a new
// []int32. Other types are an error wrapping ErrType, and an element
// outside the int32 range is an error naming its index.
func (v Value) AsInt32s() ([]int32, error) {
	switch x := v.x.(type) {
	case []int32:
		return append([]int32{}, x...), nil
	case []uint8:
		return convertSlice(x, func(e uint8) int32 { return int32(e) }), nil
	case []int8:
		return convertSlice(x, func(e int8) int32 { return int32(e) }), nil
	case []uint16:
		return convertSlice(x, func(e uint16) int32 { return int32(e) }), nil
	case []int16:
		return convertSlice(x, func(e int16) int32 { return int32(e) }), nil
	case []uint32:
		return checkedInt32s(x, func(e uint32) bool { return e <= math.MaxInt32 })
	case []uint64:
		return checkedInt32s(x, func(e uint64) bool { return e <= math.MaxInt32 })
	case []int64:
		return checkedInt32s(x, func(e int64) bool { return e >= math.MinInt32 && e <= math.MaxInt32 })
	}
	return nil, v.typeErr("array[int32]")
}

func convertSlice[S, D any](xs []S, f func(S) D) []D {
	out := make([]D, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func checkedInt32s[S uint32 | uint64 | int64](xs []S, inRange func(S) bool) ([]int32, error) {
	out := make([]int32, len(xs))
	for i, x := range xs {
		if !inRange(x) {
			return nil, fmt.Errorf("element %d (%d) overflows int32", i, x)
		}
		out[i] = int32(x)
	}
	return out, nil
}

// Equal reports whether v and o have the same type and contents. Floats are
// compared by bit pattern, so NaNs equal identical NaNs and -0 differs from
// +0. (go-cmp uses this method.)
func (v Value) Equal(o Value) bool {
	if v.Type != o.Type || (v.Type == Array && v.ElemType != o.ElemType) {
		return false
	}
	switch x := v.x.(type) {
	case float32:
		y, ok := o.x.(float32)
		return ok && math.Float32bits(x) == math.Float32bits(y)
	case float64:
		y, ok := o.x.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []float32:
		y, ok := o.x.([]float32)
		return ok && sliceEqual(x, y, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })
	case []float64:
		y, ok := o.x.([]float64)
		return ok && sliceEqual(x, y, func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) })
	case []Value:
		y, ok := o.x.([]Value)
		return ok && sliceEqual(x, y, Value.Equal)
	case []uint8:
		return sliceEq(x, o.x)
	case []int8:
		return sliceEq(x, o.x)
	case []uint16:
		return sliceEq(x, o.x)
	case []int16:
		return sliceEq(x, o.x)
	case []uint32:
		return sliceEq(x, o.x)
	case []int32:
		return sliceEq(x, o.x)
	case []bool:
		return sliceEq(x, o.x)
	case []string:
		return sliceEq(x, o.x)
	case []uint64:
		return sliceEq(x, o.x)
	case []int64:
		return sliceEq(x, o.x)
	}
	return v.x == o.x
}

func sliceEqual[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eq(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sliceEq[T comparable](a []T, o any) bool {
	b, ok := o.([]T)
	return ok && sliceEqual(a, b, func(x, y T) bool { return x == y })
}

// maxShown is how many array elements String prints before "...".
const maxShown = 8

// String formats v for people: numbers in Go syntax, strings quoted, and
// arrays as "array[T](n)[e0, e1, ...]" showing at most the first 8
// elements.
func (v Value) String() string {
	var b strings.Builder
	v.format(&b)
	return b.String()
}

func (v Value) format(b *strings.Builder) {
	if v.Type != Array {
		b.WriteString(formatScalar(v.x))
		return
	}
	n := v.Len()
	fmt.Fprintf(b, "%s(%d)[", v.TypeName(), n)
	for i := range min(n, maxShown) {
		if i > 0 {
			b.WriteString(", ")
		}
		switch x := v.x.(type) {
		case []Value:
			x[i].format(b)
		default:
			b.WriteString(formatScalar(indexAny(x, i)))
		}
	}
	if n > maxShown {
		b.WriteString(", ...")
	}
	b.WriteString("]")
}

func formatScalar(x any) string {
	switch x := x.(type) {
	case nil:
		return "<nil>"
	case string:
		return strconv.Quote(x)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(x)
}

// indexAny returns element i of a typed slice held by a non-nested array.
func indexAny(x any, i int) any {
	switch x := x.(type) {
	case []uint8:
		return x[i]
	case []int8:
		return x[i]
	case []uint16:
		return x[i]
	case []int16:
		return x[i]
	case []uint32:
		return x[i]
	case []int32:
		return x[i]
	case []float32:
		return x[i]
	case []bool:
		return x[i]
	case []string:
		return x[i]
	case []uint64:
		return x[i]
	case []int64:
		return x[i]
	case []float64:
		return x[i]
	}
	return nil
}
