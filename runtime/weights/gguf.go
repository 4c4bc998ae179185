// Package weights reads and writes GGUF model files (versions 2 and 3).
//
// A GGUF file is, all little-endian:
//
//	magic "GGUF" | version uint32 | tensor count uint64 | KV count uint64
//	KV entries:   key string | value type uint32 | value
//	tensor infos: name string | n_dims uint32 | dims [n_dims]uint64 |
//	              ggml type uint32 | offset uint64
//	padding to the alignment (general.alignment, default 32)
//	data section: tensor bytes at their offsets (each aligned)
//
// where a string is a uint64 byte length followed by the bytes. Parse and
// Open validate the whole header and every tensor's extent before returning,
// so a corrupt file yields a *FormatError, never a panic or an out-of-range
// access.
package weights

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// Magic is the first four bytes of every GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data alignment used when general.alignment is
// absent.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that overrides DefaultAlignment.
const AlignmentKey = "general.alignment"

// maxAlignment bounds general.alignment; larger values are rejected.
const maxAlignment = 1 << 30

// maxDims is the largest number of dimensions of a ggml tensor.
const maxDims = 4

// maxDepth bounds the nesting of arrays inside arrays.
const maxDepth = 16

// ErrNotFound is wrapped by the errors of File lookups for a key or tensor
// that the file does not contain.
var ErrNotFound = errors.New("not found")

// FormatError describes a malformed GGUF file. Offset is the byte position
// in the file where the problem was found; Key or Tensor (at most one is
// set) names the metadata key or tensor concerned.
type FormatError struct {
	File   string
	Offset int64
	Key    string
	Tensor string
	Msg    string
}

// Error returns "gguf FILE: key "K": MSG", "gguf FILE: tensor "T": MSG", or
// "gguf FILE: offset N: MSG" when neither a key nor a tensor is concerned.
func (e *FormatError) Error() string {
	switch {
	case e.Key != "":
		return fmt.Sprintf("gguf %s: key %q: %s", e.File, e.Key, e.Msg)
	case e.Tensor != "":
		return fmt.Sprintf("gguf %s: tensor %q: %s", e.File, e.Tensor, e.Msg)
	}
	return fmt.Sprintf("gguf %s: offset %d: %s", e.File, e.Offset, e.Msg)
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Tensor describes one tensor of a GGUF file and holds its bytes.
type Tensor struct {
	Name string
	// Shape lists the dimensions in ggml order: Shape[0] is the contiguous
	// (innermost) dimension, so a PyTorch [out, in] weight matrix has
	// Shape {in, out}. 1 to 4 entries, each positive.
	Shape []int
	DType tensor.DType
	// Offset is the position of the tensor's bytes relative to the start of
	// the data section. Write ignores it and computes its own.
	Offset uint64
	// Data is exactly the tensor's bytes, Rows() rows of RowBytes() bytes.
	// For a File from Open it points into a read-only mapping: writing to it
	// crashes. For a File from Open or Load it becomes invalid after Close.
	Data []byte
	// Layout is the order of Data's bytes: LayoutRows as the file stores
	// them, unless a backend rewrote the tensor in place (File.Private).
	Layout Layout
}

// Layout is an order of a tensor's bytes in memory.
type Layout uint8

const (
	// LayoutRows is the file's order: Rows() rows of RowBytes() bytes.
	LayoutRows Layout = iota
	// LayoutQ8x16 is Q8_0 rows interleaved in groups of 16 (Shape[1] a
	// multiple of 16), the CPU backend's GEMM layout: per group and block
	// of 32 columns, 544 bytes: the 16 rows' fp16 scales, then for each
	// k = 0..7 the 16 rows' quants 4k..4k+3, each plus 128 (flipped to an
	// unsigned byte). Data keeps its size; a group of 16 rows occupies the
	// bytes its rows occupied.
	LayoutQ8x16
	// LayoutQ4x16 is Q4_0 or IQ4_NL rows interleaved in groups of 16
	// (Shape[1] a multiple of 16): per group and block of 32 columns, 288 bytes: the
	// 16 rows' fp16 scales, then for each j = 0..3 the 16 rows' quant
	// bytes 4j..4j+3 of the file's block (64 bytes; a byte's low nibble is
	// quant 4j+m, its high nibble quant 16+4j+m). Data keeps its size.
	// Q5_0 rows too, 352 bytes per group and block: those 288 bytes of
	// their low 4 bits, then the 16 rows' high bits, 4 bytes each (byte m
	// holds at bit k the high bit of quant 4k+m). Q4_1 and Q5_1 rows as
	// Q4_0 and Q5_0, the scales d in the scales' place, then after a
	// group's blocks the 16 rows' fp16 mins of each block (32 bytes a
	// block).
	LayoutQ4x16
	// LayoutQ4Kx16 is Q4_K rows interleaved in groups of 16 (Shape[1] a
	// multiple of 16), the CPU backend's GEMM layout: per group and
	// super-block of 256 columns, 2304 bytes: the 16 rows' fp16 d, their
	// fp16 dmin, for each of the 12 packed scale bytes the 16 rows' byte,
	// then for each chunk pair g = 0..3 and k = 0..7 the 16 rows' quant
	// bytes 32g+4k..32g+4k+3 (64 bytes). Data keeps its size.
	LayoutQ4Kx16
	// LayoutQ2Kx16 is Q2_K rows interleaved in groups of 16, as
	// LayoutQ4Kx16: per group and super-block, 1344 bytes: the 16 rows'
	// fp16 d, their fp16 dmin, for each of the 16 scale bytes the 16 rows'
	// byte, then for half h = 0..1 and k = 0..7 the 16 rows' quant bytes
	// 32h+4k..32h+4k+3 (64 bytes).
	LayoutQ2Kx16
	// LayoutQ5Kx16 is Q5_K rows interleaved in groups of 16, as
	// LayoutQ4Kx16: per group and super-block, 2816 bytes: the 16 rows'
	// fp16 d, their fp16 dmin, for each of the 12 packed scale bytes the 16
	// rows' byte, then for k = 0..7 the 16 rows' bytes 4k..4k+3 of qs[32g:]
	// for g = 0..3 and of qh (5 x 64 bytes).
	LayoutQ5Kx16
	// LayoutQ6Kx16 is Q6_K rows interleaved in groups of 16, as
	// LayoutQ4Kx16: per group and super-block, 3360 bytes: the 16 rows'
	// fp16 d, for each of the 16 int8 scales the 16 rows' byte, then for
	// k = 0..7 and half h = 0..1 the 16 rows' bytes 4k..4k+3 of ql[64h:],
	// of ql[64h+32:] and of qh[32h:] (3 x 64 bytes).
	LayoutQ6Kx16
	// LayoutIQ4XSx16 is IQ4_XS rows interleaved in groups of 16, as
	// LayoutQ4Kx16: per group and super-block, 2176 bytes: the 16 rows'
	// fp16 d, for each of the 6 scale bytes (scales_h, then scales_l) the
	// 16 rows' byte, then for k = 0..3 and chunk c = 0..7 the 16 rows'
	// quant bytes 16c+4k..16c+4k+3 (64 bytes).
	LayoutIQ4XSx16
	// LayoutQ3Kx16 is Q3_K rows interleaved in groups of 16, as
	// LayoutQ4Kx16: per group and super-block, 1760 bytes: the 16 rows'
	// fp16 d, for each of the 12 packed scale bytes the 16 rows' byte,
	// then for k = 0..7 the 16 rows' bytes 4k..4k+3 of qs[0:], of qs[32:]
	// and of hmask (3 x 64 bytes).
	LayoutQ3Kx16
)

// Elements returns the number of elements: the product of Shape.
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Rows returns the product of Shape[1:], 1 for a vector.
func (t *Tensor) Rows() int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// RowLen returns the number of elements of one row, Shape[0].
func (t *Tensor) RowLen() int { return t.Shape[0] }

// RowBytes returns the number of bytes of one row. It panics if the shape
// and dtype are inconsistent, which cannot happen for a parsed tensor.
func (t *Tensor) RowBytes() int {
	n, err := t.DType.RowBytes(t.Shape[0])
	if err != nil {
		panic(fmt.Sprintf("weights: tensor %q: %v", t.Name, err))
	}
	return n
}

// Row returns the bytes of row i (0 <= i < Rows()), a sub-slice of Data.
// It panics if i is out of range or the tensor is not in LayoutRows.
func (t *Tensor) Row(i int) []byte {
	if t.Layout != LayoutRows {
		panic(fmt.Sprintf("weights: tensor %q: Row of a tensor in layout %d", t.Name, t.Layout))
	}
	if i < 0 || i >= t.Rows() {
		panic(fmt.Sprintf("weights: tensor %q: row %d out of range [0, %d)", t.Name, i, t.Rows()))
	}
	rb := t.RowBytes()
	return t.Data[i*rb : (i+1)*rb : (i+1)*rb]
}

// Float32s returns a new slice of all Elements() values converted to
// float32, in storage order (row 0 first). It is an error if the dtype
// cannot be dequantized (I32) or Data has the wrong length.
func (t *Tensor) Float32s() ([]float32, error) {
	if t.Layout != LayoutRows {
		return nil, fmt.Errorf("weights: tensor %q: repacked in memory (layout %d)", t.Name, t.Layout)
	}
	out := make([]float32, t.Elements())
	if err := tensor.DequantizeRow(t.DType, t.Data, out); err != nil {
		return nil, fmt.Errorf("weights: tensor %q: %w", t.Name, err)
	}
	return out, nil
}

// ggmlTypeNames names the ggml tensor type ids, for messages.
var ggmlTypeNames = map[uint32]string{
	0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 4: "q4_2", 5: "q4_3",
	6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1", 10: "q2_K", 11: "q3_K",
	12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 16: "iq2_xxs",
	17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl", 21: "iq3_s",
	22: "iq2_s", 23: "iq4_xs", 24: "i8", 25: "i16", 26: "i32", 27: "i64",
	28: "f64", 29: "iq1_m", 30: "bf16", 31: "q4_0_4_4", 32: "q4_0_4_8",
	33: "q4_0_8_8", 34: "tq1_0", 35: "tq2_0", 36: "iq4_nl_4_4",
	37: "iq4_nl_4_8", 38: "iq4_nl_8_8", 39: "mxfp4",
}

// ggmlType returns the ggml type id of d, or false if d has none.
func ggmlType(d tensor.DType) (uint32, bool) { return d.GGMLType() }

func ggmlTypeName(id uint32) string {
	if s, ok := ggmlTypeNames[id]; ok {
		return s
	}
	return "unknown"
}

// File is a parsed GGUF file.
type File struct {
	Path      string // the path given to Open or the name given to Parse
	Version   uint32 // 2 or 3
	Alignment int    // data alignment in bytes, a power of two
	// DataOffset is the file offset of the data section: the end of the
	// tensor infos rounded up to Alignment.
	DataOffset int64
	KV         []KV      // metadata in file order
	Tensors    []*Tensor // tensors in file order

	keys    map[string]int // key -> index in KV
	tensors map[string]int // tensor name -> index in Tensors
	unmap   func() error   // releases the mapping; nil if none or closed
	private bool           // Data is this File's own writable memory (Load)
}

// Private reports whether the tensors' Data is memory of this File alone,
// read from the file (Load) rather than mapped from it (Open) or given
// (Parse): a backend may then rewrite a tensor in place, recording how in
// its Layout, for as long as every user of the File reads that Layout.
func (f *File) Private() bool { return f.private }

// Close releases the file mapping (for a File from Open) and clears every
// tensor's Data. It is idempotent, and a no-op for a File from Parse apart
// from clearing Data.
func (f *File) Close() error {
	for _, t := range f.Tensors {
		t.Data = nil
	}
	if f.unmap == nil {
		return nil
	}
	u := f.unmap
	f.unmap = nil
	return u()
}

// Arch returns the value of general.architecture, or "" if it is absent or
// not a string.
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}

// Has reports whether the metadata contains key.
func (f *File) Has(key string) bool {
	_, ok := f.keys[key]
	return ok
}

// Lookup returns the value of key and whether it is present.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// get returns the value of key or an error wrapping ErrNotFound.
func (f *File) get(key string) (Value, error) {
	v, ok := f.Lookup(key)
	if !ok {
		return Value{}, fmt.Errorf("gguf %s: key %q: %w", f.Path, key, ErrNotFound)
	}
	return v, nil
}

func convert[T any](f *File, key string, conv func(Value) (T, error)) (T, error) {
	v, err := f.get(key)
	if err != nil {
		var zero T
		return zero, err
	}
	r, err := conv(v)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("gguf %s: key %q: %w", f.Path, key, err)
	}
	return r, nil
}

// String returns the value of a String key. A missing key is an error
// wrapping ErrNotFound; another type is an error wrapping ErrType that
// names the key and both types.
func (f *File) String(key string) (string, error) { return convert(f, key, Value.AsString) }

// Uint returns the value of a key of any integer type. Errors as for
// String, and a negative value is an error.
func (f *File) Uint(key string) (uint64, error) { return convert(f, key, Value.AsUint) }

// Int returns the value of a key of any integer type. Errors as for String,
// and a uint64 value above math.MaxInt64 is an error.
func (f *File) Int(key string) (int64, error) { return convert(f, key, Value.AsInt) }

// Float returns the value of a Float32 or Float64 key, or of an integer key
// converted to float64. Errors as for String.
func (f *File) Float(key string) (float64, error) { return convert(f, key, Value.AsFloat) }

// Bool returns the value of a Bool key. Errors as for String.
func (f *File) Bool(key string) (bool, error) { return convert(f, key, Value.AsBool) }

// Strings returns a copy of an array-of-String key. Errors as for String.
func (f *File) Strings(key string) ([]string, error) { return convert(f, key, Value.AsStrings) }

// Float32s returns a new slice holding an array key of Float32, Float64 or
// integer elements converted to float32. Errors as for String.
func (f *File) Float32s(key string) ([]float32, error) { return convert(f, key, Value.AsFloat32s) }

// Int32s returns a new slice holding an array key of any integer element
// type converted to int32 (for example tokenizer.ggml.token_type). Errors
// as for String, and an element outside the int32 range is an error.
func (f *File) Int32s(key string) ([]int32, error) { return convert(f, key, Value.AsInt32s) }

// Tensor returns the tensor called name, or an error wrapping ErrNotFound.
func (f *File) Tensor(name string) (*Tensor, error) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, fmt.Errorf("gguf %s: tensor %q: %w", f.Path, name, ErrNotFound)
	}
	return f.Tensors[i], nil
}

// With returns a view of f that also holds extra, tensors of another open
// file (a drafter that borrows its target's token embeddings and output
// head): the same metadata and tensors, and the extra tensors under their
// own names, which must not be f's. Both files stay owned by whoever
// opened them: do not Close the view (Close clears every tensor's Data).
// The view is not Private: its tensors keep the Layout they have.
func (f *File) With(extra ...*Tensor) (*File, error) {
	v := &File{Path: f.Path, Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset, KV: f.KV,
		Tensors: slices.Clip(f.Tensors), keys: f.keys, tensors: maps.Clone(f.tensors)}
	for _, t := range extra {
		if _, dup := v.tensors[t.Name]; dup {
			return nil, fmt.Errorf("gguf %s: tensor %q is already in the file", f.Path, t.Name)
		}
		v.tensors[t.Name] = len(v.Tensors)
		v.Tensors = append(v.Tensors, t)
	}
	return v, nil
}

// parser decodes a GGUF header from data, tracking the read position and
// the key or tensor being decoded so that errors can name it.
type parser struct {
	data   []byte
	pos    int
	name   string
	key    string
	tensor string
	// prefix starts every message; it identifies a tensor with an empty
	// name, which FormatError cannot name.
	prefix string
}

func (p *parser) errAt(at int, format string, args ...any) *FormatError {
	return &FormatError{File: p.name, Offset: int64(at), Key: p.key, Tensor: p.tensor, Msg: p.prefix + fmt.Sprintf(format, args...)}
}

func (p *parser) remaining() int { return len(p.data) - p.pos }

// take consumes n bytes; what describes them for the error message.
func (p *parser) take(n uint64, what string) ([]byte, error) {
	if n > uint64(p.remaining()) {
		return nil, p.errAt(p.pos, "truncated %s: need %d bytes, %d left in file", what, n, p.remaining())
	}
	b := p.data[p.pos : p.pos+int(n) : p.pos+int(n)]
	p.pos += int(n)
	return b, nil
}

func (p *parser) u32(what string) (uint32, error) {
	b, err := p.take(4, what)
	if err != nil {
		return 0, err
	}
	return le32(b), nil
}

func (p *parser) u64(what string) (uint64, error) {
	b, err := p.take(8, what)
	if err != nil {
		return 0, err
	}
	return le64(b), nil
}

func (p *parser) str(what string) (string, error) {
	at := p.pos
	n, err := p.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(p.remaining()) {
		return "", p.errAt(at, "%s length %d exceeds the %d bytes left in file", what, n, p.remaining())
	}
	b, _ := p.take(n, what)
	return string(b), nil
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }
func le32(b []byte) uint32 { return uint32(le16(b)) | uint32(le16(b[2:]))<<16 }
func le64(b []byte) uint64 { return uint64(le32(b)) | uint64(le32(b[4:]))<<32 }

// minEncodedSize is the fewest bytes one value of type t can occupy.
func minEncodedSize(t ValueType) int {
	switch t {
	case String:
		return 8
	case Array:
		return 12
	}
	return t.size()
}

// value decodes one value of type t; depth counts enclosing arrays.
func (p *parser) value(t ValueType, depth int) (Value, error) {
	at := p.pos
	switch t {
	case String:
		s, err := p.str("string value")
		return Str(s), err
	case Array:
		return p.array(depth)
	}
	n := t.size()
	if n == 0 {
		return Value{}, p.errAt(at-4, "unknown value type %d", uint32(t))
	}
	b, err := p.take(uint64(n), t.String()+" value")
	if err != nil {
		return Value{}, err
	}
	return decodeScalar(t, b), nil
}

func decodeScalar(t ValueType, b []byte) Value {
	switch t {
	case Uint8:
		return U8(b[0])
	case Int8:
		return I8(int8(b[0]))
	case Bool:
		return Boolean(b[0] != 0)
	case Uint16:
		return U16(le16(b))
	case Int16:
		return I16(int16(le16(b)))
	case Uint32:
		return U32(le32(b))
	case Int32:
		return I32(int32(le32(b)))
	case Float32:
		return F32(math.Float32frombits(le32(b)))
	case Uint64:
		return U64(le64(b))
	case Int64:
		return I64(int64(le64(b)))
	case Float64:
		return F64(math.Float64frombits(le64(b)))
	}
	return Value{}
}

func decodeSlice[T any](b []byte, size int, f func([]byte) T) []T {
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = f(b[i*size:])
	}
	return out
}

func (p *parser) array(depth int) (Value, error) {
	at := p.pos
	if depth >= maxDepth {
		return Value{}, p.errAt(at, "arrays nested more than %d deep", maxDepth)
	}
	et32, err := p.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	et := ValueType(et32)
	if !et.Valid() {
		return Value{}, p.errAt(at, "unknown array element type %d", et32)
	}
	n, err := p.u64("array length")
	if err != nil {
		return Value{}, err
	}
	if min := uint64(minEncodedSize(et)); n > uint64(p.remaining())/min {
		return Value{}, p.errAt(at, "array of %d %s elements exceeds the %d bytes left in file", n, et, p.remaining())
	}
	v := Value{Type: Array, ElemType: et}
	if sz := et.size(); sz != 0 {
		b, _ := p.take(n*uint64(sz), "array")
		switch et {
		case Uint8:
			v.x = append([]uint8{}, b...)
		case Int8:
			v.x = decodeSlice(b, 1, func(b []byte) int8 { return int8(b[0]) })
		case Bool:
			v.x = decodeSlice(b, 1, func(b []byte) bool { return b[0] != 0 })
		case Uint16:
			v.x = decodeSlice(b, 2, le16)
		case Int16:
			v.x = decodeSlice(b, 2, func(b []byte) int16 { return int16(le16(b)) })
		case Uint32:
			v.x = decodeSlice(b, 4, le32)
		case Int32:
			v.x = decodeSlice(b, 4, func(b []byte) int32 { return int32(le32(b)) })
		case Float32:
			v.x = decodeSlice(b, 4, func(b []byte) float32 { return math.Float32frombits(le32(b)) })
		case Uint64:
			v.x = decodeSlice(b, 8, le64)
		case Int64:
			v.x = decodeSlice(b, 8, func(b []byte) int64 { return int64(le64(b)) })
		case Float64:
			v.x = decodeSlice(b, 8, func(b []byte) float64 { return math.Float64frombits(le64(b)) })
		}
		return v, nil
	}
	if et == String {
		ss := make([]string, n)
		for i := range ss {
			if ss[i], err = p.str(fmt.Sprintf("string %d of array", i)); err != nil {
				return Value{}, err
			}
		}
		v.x = ss
		return v, nil
	}
	vs := make([]Value, n)
	for i := range vs {
		if vs[i], err = p.array(depth + 1); err != nil {
			return Value{}, err
		}
	}
	v.x = vs
	return v, nil
}

// Parse decodes and validates a GGUF file held in data; name is used in
// error messages and as File.Path. The returned tensors' Data and the
// File's lifetime are tied to data, which must not be modified; metadata
// strings are copied.
//
// Every problem is reported as a *FormatError: bad magic, a version other
// than 2 or 3, counts, lengths or array sizes that do not fit in the rest
// of the file, unknown value types, arrays nested more than 16 deep,
// duplicate keys or tensor names, a general.alignment that is not an
// integer power of two (at most 2^30), tensors with other than 1 to 4
// dimensions, a zero dimension, an element or byte count that overflows,
// an unsupported ggml type, a first dimension that is not a multiple of the
// block size, an offset that is not a multiple of the alignment, and tensor
// data extending past the end of data. Tensors may overlap.
func Parse(data []byte, name string) (*File, error) {
	p := &parser{data: data, name: name}
	magic, err := p.take(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != Magic {
		return nil, p.errAt(0, "bad magic %q, want %q", magic, Magic)
	}
	version, err := p.u32("version")
	if err != nil {
		return nil, err
	}
	switch version {
	case 2, 3:
	case 1:
		return nil, p.errAt(4, "unsupported GGUF version 1 (only 2 and 3 are supported)")
	default:
		return nil, p.errAt(4, "unsupported GGUF version %d (only 2 and 3 are supported)", version)
	}
	nTensors, err := p.u64("tensor count")
	if err != nil {
		return nil, err
	}
	nKV, err := p.u64("metadata count")
	if err != nil {
		return nil, err
	}
	// Each entry needs at least: key length 8 + type 4 + 1 value byte; each
	// tensor info at least: name length 8 + n_dims 4 + one dim 8 + type 4 +
	// offset 8.
	const minKV, minTensor = 13, 32
	if nKV > uint64(p.remaining())/minKV {
		return nil, p.errAt(16, "metadata count %d cannot fit in the %d bytes left in file", nKV, p.remaining())
	}
	if nTensors > uint64(p.remaining())/minTensor {
		return nil, p.errAt(8, "tensor count %d cannot fit in the %d bytes left in file", nTensors, p.remaining())
	}

	f := &File{
		Path:      name,
		Version:   version,
		Alignment: DefaultAlignment,
		KV:        make([]KV, 0, nKV),
		keys:      make(map[string]int, nKV),
	}
	for i := range nKV {
		at := p.pos
		key, err := p.str(fmt.Sprintf("key of metadata entry %d", i))
		if err != nil {
			return nil, err
		}
		if _, dup := f.keys[key]; dup {
			p.key = key
			return nil, p.errAt(at, "duplicate key")
		}
		p.key = key
		t, err := p.u32("value type")
		if err != nil {
			return nil, err
		}
		if !ValueType(t).Valid() {
			return nil, p.errAt(p.pos-4, "unknown value type %d", t)
		}
		v, err := p.value(ValueType(t), 0)
		if err != nil {
			return nil, err
		}
		f.keys[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
		p.key = ""
	}

	if v, ok := f.Lookup(AlignmentKey); ok {
		p.key = AlignmentKey
		a, err := v.AsUint()
		if err != nil {
			return nil, p.errAt(p.pos, "%v", err)
		}
		if a == 0 || a&(a-1) != 0 || a > maxAlignment {
			return nil, p.errAt(p.pos, "alignment %d is not a power of two between 1 and %d", a, maxAlignment)
		}
		f.Alignment = int(a)
		p.key = ""
	}
	align := uint64(f.Alignment)

	if nTensors > uint64(p.remaining())/minTensor {
		return nil, p.errAt(8, "tensor count %d cannot fit in the %d bytes left in file", nTensors, p.remaining())
	}
	f.Tensors = make([]*Tensor, 0, nTensors)
	f.tensors = make(map[string]int, nTensors)
	infoAt := make([]int, 0, nTensors)   // file offset of each tensor info
	sizes := make([]uint64, 0, nTensors) // byte size of each tensor
	for i := range nTensors {
		at := p.pos
		tname, err := p.str(fmt.Sprintf("name of tensor %d", i))
		if err != nil {
			return nil, err
		}
		p.tensor = tname
		if tname == "" {
			p.prefix = fmt.Sprintf("tensor %d (name \"\"): ", i)
		}
		if _, dup := f.tensors[tname]; dup {
			return nil, p.errAt(at, "duplicate tensor name")
		}
		t, nbytes, err := p.tensorInfo(align)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, nbytes)
		t.Name = tname
		f.tensors[tname] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
		infoAt = append(infoAt, at)
		p.tensor, p.prefix = "", ""
	}

	// The data section starts at the end of the infos rounded up to the
	// alignment; pos < 2^63 and align <= 2^30, so this cannot overflow.
	start := (uint64(p.pos) + align - 1) &^ (align - 1)
	f.DataOffset = int64(start)
	size := uint64(len(data))
	for i, t := range f.Tensors {
		p.tensor, p.prefix = t.Name, ""
		if t.Name == "" {
			p.prefix = fmt.Sprintf("tensor %d (name \"\"): ", i)
		}
		n := sizes[i]
		lo, c1 := bits.Add64(start, t.Offset, 0)
		hi, c2 := bits.Add64(lo, n, 0)
		if c1 != 0 || c2 != 0 || hi > size {
			if c1 != 0 || c2 != 0 {
				return nil, p.errAt(infoAt[i], "data offset %d + size %d overflows", t.Offset, n)
			}
			return nil, p.errAt(infoAt[i], "data [%d, %d) extends past end of file (%d bytes)", lo, hi, size)
		}
		t.Data = data[lo:hi:hi]
	}
	return f, nil
}

// tensorInfo decodes the part of a tensor info after the name, returning
// the tensor (without Name and Data) and its size in bytes.
func (p *parser) tensorInfo(align uint64) (*Tensor, uint64, error) {
	at := p.pos
	nd, err := p.u32("dimension count")
	if err != nil {
		return nil, 0, err
	}
	if nd < 1 || nd > maxDims {
		return nil, 0, p.errAt(at, "%d dimensions, want 1 to %d", nd, maxDims)
	}
	t := &Tensor{Shape: make([]int, nd)}
	elems := uint64(1)
	for d := range t.Shape {
		at := p.pos
		n, err := p.u64("dimension")
		if err != nil {
			return nil, 0, err
		}
		if n == 0 || n > math.MaxInt64 {
			return nil, 0, p.errAt(at, "dimension %d is %d, want 1 to %d", d, n, int64(math.MaxInt64))
		}
		hi, lo := bits.Mul64(elems, n)
		if hi != 0 || lo > math.MaxInt {
			return nil, 0, p.errAt(at, "element count of shape overflows at dimension %d", d)
		}
		elems = lo
		t.Shape[d] = int(n)
	}
	at = p.pos
	gt, err := p.u32("ggml type")
	if err != nil {
		return nil, 0, err
	}
	dt, ok := tensor.DTypeOfGGML(gt)
	if !ok {
		return nil, 0, p.errAt(at, "unsupported dtype %s (%d)", ggmlTypeName(gt), gt)
	}
	t.DType = dt
	rowBytes, err := dt.RowBytes(t.Shape[0])
	if err != nil {
		return nil, 0, p.errAt(at, "shape %v: %v", t.Shape, err)
	}
	hi, nbytes := bits.Mul64(uint64(rowBytes), elems/uint64(t.Shape[0]))
	if hi != 0 || nbytes > math.MaxInt {
		return nil, 0, p.errAt(at, "byte size of shape %v %v overflows", t.Shape, dt)
	}
	at = p.pos
	if t.Offset, err = p.u64("data offset"); err != nil {
		return nil, 0, err
	}
	if t.Offset%align != 0 {
		return nil, 0, p.errAt(at, "data offset %d is not a multiple of the alignment %d", t.Offset, align)
	}
	return t, nbytes, nil
}

// WeightInfo resolves f's tensor names to their dtype and [rows, cols]
// (Rows, RowLen) for a tensor.Builder.
func (f *File) WeightInfo() tensor.WeightInfo {
	return func(name string) (tensor.DType, int, int, bool) {
		t, err := f.Tensor(name)
		if err != nil {
			return 0, 0, 0, false
		}
		return t.DType, t.Rows(), t.RowLen(), true
	}
}
