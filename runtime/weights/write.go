package weights

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Write encodes a GGUF file of the given version (2 or 3) with the metadata
// kvs and the tensors, in the order given, to w.
//
// The data alignment is the value of the general.alignment entry of kvs if
// present (an integer power of two up to 2^30), else 32. Each tensor's
// offset is computed by packing the tensors in order, each starting at the
// next multiple of the alignment (Tensor.Offset is ignored and not
// modified); each tensor's bytes are written from its Data, which must be
// exactly Rows()*RowBytes() long, and are followed by zero padding to the
// alignment, as llama.cpp writes them.
//
// Everything is validated before the first byte is written: the version,
// duplicate keys, values whose Type or ElemType does not match their
// contents (the zero Value, nested-array elements that are not arrays,
// arrays nested more than 16 deep), duplicate tensor names, shapes with
// other than 1 to 4 dimensions or a non-positive dimension, dtypes GGUF
// cannot hold, and Data of the wrong length. Errors from w are returned as
// they are.
func Write(w io.Writer, version uint32, kvs []KV, tensors []*Tensor) error {
	if version != 2 && version != 3 {
		return fmt.Errorf("weights: write: unsupported GGUF version %d (only 2 and 3)", version)
	}
	align := uint64(DefaultAlignment)
	var hdr []byte
	hdr = append(hdr, Magic...)
	hdr = binary.LittleEndian.AppendUint32(hdr, version)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(tensors)))
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(kvs)))
	seen := make(map[string]bool, len(kvs))
	for _, kv := range kvs {
		if seen[kv.Key] {
			return fmt.Errorf("weights: write: duplicate key %q", kv.Key)
		}
		seen[kv.Key] = true
		if kv.Key == AlignmentKey {
			a, err := kv.Value.AsUint()
			if err != nil {
				return fmt.Errorf("weights: write: key %q: %w", kv.Key, err)
			}
			if a == 0 || a&(a-1) != 0 || a > maxAlignment {
				return fmt.Errorf("weights: write: key %q: alignment %d is not a power of two between 1 and %d", kv.Key, a, maxAlignment)
			}
			align = a
		}
		hdr = appendString(hdr, kv.Key)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(kv.Value.Type))
		var err error
		if hdr, err = appendValue(hdr, kv.Value, 0); err != nil {
			return fmt.Errorf("weights: write: key %q: %w", kv.Key, err)
		}
	}

	names := make(map[string]bool, len(tensors))
	var off uint64
	for _, t := range tensors {
		if names[t.Name] {
			return fmt.Errorf("weights: write: duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		size, gt, err := checkTensor(t)
		if err != nil {
			return fmt.Errorf("weights: write: tensor %q: %w", t.Name, err)
		}
		hdr = appendString(hdr, t.Name)
		hdr = binary.LittleEndian.AppendUint32(hdr, uint32(len(t.Shape)))
		for _, d := range t.Shape {
			hdr = binary.LittleEndian.AppendUint64(hdr, uint64(d))
		}
		hdr = binary.LittleEndian.AppendUint32(hdr, gt)
		hdr = binary.LittleEndian.AppendUint64(hdr, off)
		off = alignUp(off+uint64(size), align)
	}
	hdr = append(hdr, make([]byte, alignUp(uint64(len(hdr)), align)-uint64(len(hdr)))...)
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	var pad []byte
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
		if n := alignUp(uint64(len(t.Data)), align) - uint64(len(t.Data)); n > 0 {
			if uint64(len(pad)) < n {
				pad = make([]byte, n)
			}
			if _, err := w.Write(pad[:n]); err != nil {
				return err
			}
		}
	}
	return nil
}

func alignUp(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }

// checkTensor validates t for writing and returns its byte size and ggml
// type id.
func checkTensor(t *Tensor) (int, uint32, error) {
	if len(t.Shape) < 1 || len(t.Shape) > maxDims {
		return 0, 0, fmt.Errorf("%d dimensions, want 1 to %d", len(t.Shape), maxDims)
	}
	rows := 1
	for i, d := range t.Shape {
		if d <= 0 {
			return 0, 0, fmt.Errorf("dimension %d is %d, want > 0", i, d)
		}
		if i > 0 {
			if rows > math.MaxInt/d {
				return 0, 0, fmt.Errorf("shape %v overflows", t.Shape)
			}
			rows *= d
		}
	}
	gt, ok := ggmlType(t.DType)
	if !ok {
		return 0, 0, fmt.Errorf("dtype %v cannot be stored in GGUF", t.DType)
	}
	rb, err := t.DType.RowBytes(t.Shape[0])
	if err != nil {
		return 0, 0, err
	}
	if rows > math.MaxInt/max(rb, 1) {
		return 0, 0, fmt.Errorf("shape %v %v overflows", t.Shape, t.DType)
	}
	if size := rows * rb; len(t.Data) != size {
		return 0, 0, fmt.Errorf("shape %v %v needs %d bytes of data, have %d", t.Shape, t.DType, size, len(t.Data))
	}
	return len(t.Data), gt, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendValue appends the encoding of v without its type tag; depth counts
// enclosing arrays.
func appendValue(b []byte, v Value, depth int) ([]byte, error) {
	mismatch := func() ([]byte, error) {
		return nil, fmt.Errorf("value of type %s holds %T", v.TypeName(), v.x)
	}
	le := binary.LittleEndian
	switch x := v.x.(type) {
	case uint8:
		if v.Type == Uint8 {
			return append(b, x), nil
		}
	case int8:
		if v.Type == Int8 {
			return append(b, byte(x)), nil
		}
	case bool:
		if v.Type == Bool {
			return append(b, boolByte(x)), nil
		}
	case uint16:
		if v.Type == Uint16 {
			return le.AppendUint16(b, x), nil
		}
	case int16:
		if v.Type == Int16 {
			return le.AppendUint16(b, uint16(x)), nil
		}
	case uint32:
		if v.Type == Uint32 {
			return le.AppendUint32(b, x), nil
		}
	case int32:
		if v.Type == Int32 {
			return le.AppendUint32(b, uint32(x)), nil
		}
	case float32:
		if v.Type == Float32 {
			return le.AppendUint32(b, math.Float32bits(x)), nil
		}
	case uint64:
		if v.Type == Uint64 {
			return le.AppendUint64(b, x), nil
		}
	case int64:
		if v.Type == Int64 {
			return le.AppendUint64(b, uint64(x)), nil
		}
	case float64:
		if v.Type == Float64 {
			return le.AppendUint64(b, math.Float64bits(x)), nil
		}
	case string:
		if v.Type == String {
			return appendString(b, x), nil
		}
	}
	if v.Type != Array {
		return mismatch()
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("arrays nested more than %d deep", maxDepth)
	}
	b = le.AppendUint32(b, uint32(v.ElemType))
	b = le.AppendUint64(b, uint64(v.Len()))
	switch x := v.x.(type) {
	case []uint8:
		if v.ElemType == Uint8 {
			return append(b, x...), nil
		}
	case []int8:
		if v.ElemType == Int8 {
			return appendEach(b, x, func(b []byte, e int8) []byte { return append(b, byte(e)) }), nil
		}
	case []bool:
		if v.ElemType == Bool {
			return appendEach(b, x, func(b []byte, e bool) []byte { return append(b, boolByte(e)) }), nil
		}
	case []uint16:
		if v.ElemType == Uint16 {
			return appendEach(b, x, le.AppendUint16), nil
		}
	case []int16:
		if v.ElemType == Int16 {
			return appendEach(b, x, func(b []byte, e int16) []byte { return le.AppendUint16(b, uint16(e)) }), nil
		}
	case []uint32:
		if v.ElemType == Uint32 {
			return appendEach(b, x, le.AppendUint32), nil
		}
	case []int32:
		if v.ElemType == Int32 {
			return appendEach(b, x, func(b []byte, e int32) []byte { return le.AppendUint32(b, uint32(e)) }), nil
		}
	case []float32:
		if v.ElemType == Float32 {
			return appendEach(b, x, func(b []byte, e float32) []byte { return le.AppendUint32(b, math.Float32bits(e)) }), nil
		}
	case []uint64:
		if v.ElemType == Uint64 {
			return appendEach(b, x, le.AppendUint64), nil
		}
	case []int64:
		if v.ElemType == Int64 {
			return appendEach(b, x, func(b []byte, e int64) []byte { return le.AppendUint64(b, uint64(e)) }), nil
		}
	case []float64:
		if v.ElemType == Float64 {
			return appendEach(b, x, func(b []byte, e float64) []byte { return le.AppendUint64(b, math.Float64bits(e)) }), nil
		}
	case []string:
		if v.ElemType == String {
			return appendEach(b, x, appendString), nil
		}
	case []Value:
		if v.ElemType == Array {
			for i, e := range x {
				if e.Type != Array {
					return nil, fmt.Errorf("element %d of a nested array is a %s, not an array", i, e.TypeName())
				}
				var err error
				if b, err = appendValue(b, e, depth+1); err != nil {
					return nil, err
				}
			}
			return b, nil
		}
	}
	return mismatch()
}

func appendEach[T any](b []byte, xs []T, f func([]byte, T) []byte) []byte {
	for _, x := range xs {
		b = f(b, x)
	}
	return b
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}
