package weights

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// A safetensors file is, little-endian:
//
//	header length uint64 | header: N bytes of JSON | data
//
// where the header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets relative to the start of data, shape in PyTorch
// order: outermost first) and may hold "__metadata__", an object of strings.

// safetensorsMaxHeader bounds the JSON header, as the reference
// implementation does (100 MB).
const safetensorsMaxHeader = 100 << 20

// safetensorsMetadataKey is the header entry that is not a tensor.
const safetensorsMetadataKey = "__metadata__"

// HFError is a malformed Hugging Face checkpoint file: File is its path, Key
// the JSON key, tensor name or file that is wrong.
type HFError struct {
	File string
	Key  string
	Msg  string
}

// Error returns "FILE: KEY: MSG" with KEY quoted, or "FILE: MSG" when no
// key is concerned (a file that is not JSON).
func (e *HFError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: %q: %s", e.File, e.Key, e.Msg)
}

func hfErr(file, key, format string, args ...any) *HFError {
	return &HFError{File: file, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// safetensorsDTypeSizes are the element sizes of the safetensors dtypes
// Parse accepts; only F32, F16 and BF16 become Tensors.
var safetensorsDTypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
	"U16": 2, "I16": 2, "F16": 2, "BF16": 2,
	"U32": 4, "I32": 4, "F32": 4,
	"U64": 8, "I64": 8, "F64": 8,
}

// SafeTensor is one tensor of a safetensors file.
type SafeTensor struct {
	Name  string
	DType string // the safetensors dtype: "F32", "BF16", ...
	// Shape is in PyTorch order (outermost first), possibly empty (a
	// scalar) or with zero dimensions.
	Shape []int
	// Data is the tensor's bytes, a sub-slice of the parsed data.
	Data []byte
}

// Safetensors is a parsed safetensors file.
type Safetensors struct {
	Path     string
	Metadata map[string]string
	// DataOffset is the file offset of the data section.
	DataOffset int64
	Tensors    []*SafeTensor // ordered by data offset, then name
	byName     map[string]int
}

// Tensor returns the tensor called name, or nil.
func (s *Safetensors) Tensor(name string) *SafeTensor {
	i, ok := s.byName[name]
	if !ok {
		return nil
	}
	return s.Tensors[i]
}

type safetensorsEntry struct {
	DType   string   `json:"dtype"`
	Shape   []uint64 `json:"shape"`
	Offsets []uint64 `json:"data_offsets"`
}

// parseSafetensorsHeader decodes a safetensors header, the JSON object
// of entries by tensor name (and __metadata__), leaving each unparsed.
func parseSafetensorsHeader(hdr []byte, name string) (map[string]json.RawMessage, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if err := dec.Decode(&raw); err != nil {
		return nil, hfErr(name, "header", "not a JSON object: %v", err)
	}
	if raw == nil {
		return nil, hfErr(name, "header", "not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, hfErr(name, "header", "text after the JSON object")
	}
	return raw, nil
}

// ParseSafetensors decodes and validates the safetensors file held in data;
// name is used in errors and as Path. The tensors' Data point into data.
//
// Every problem is an *HFError naming the file and the key: a header length
// that does not fit in the file or exceeds 100 MB, a header that is not a
// JSON object, an entry that is not {dtype, shape, data_offsets}, an unknown
// dtype, a shape whose byte size overflows or differs from its offsets,
// offsets that are reversed or extend past the end of the data, and a
// tensor whose bytes overlap another's (named: the one that starts later,
// or the later name of two that start together). Empty tensors may sit at
// any offset.
func ParseSafetensors(data []byte, name string) (*Safetensors, error) {
	if len(data) < 8 {
		return nil, hfErr(name, "header", "truncated: the file has %d bytes, the header length alone needs 8", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > uint64(len(data)-8) {
		return nil, hfErr(name, "header", "truncated: header of %d bytes but only %d bytes follow the length", n, len(data)-8)
	}
	if n > safetensorsMaxHeader {
		return nil, hfErr(name, "header", "header of %d bytes exceeds the %d byte limit", n, safetensorsMaxHeader)
	}
	raw, err := parseSafetensorsHeader(data[8:8+n], name)
	if err != nil {
		return nil, err
	}
	body := data[8+n:]
	s := &Safetensors{Path: name, DataOffset: int64(8 + n), byName: make(map[string]int, len(raw))}
	type placed struct {
		t     *SafeTensor
		begin uint64
	}
	var ts []placed
	for key, msg := range raw {
		if key == safetensorsMetadataKey {
			if err := json.Unmarshal(msg, &s.Metadata); err != nil {
				return nil, hfErr(name, key, "not an object of strings: %v", err)
			}
			continue
		}
		var e safetensorsEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, hfErr(name, key, "not a tensor entry {dtype, shape, data_offsets}: %v", err)
		}
		size, ok := safetensorsDTypeSizes[e.DType]
		if !ok {
			return nil, hfErr(name, key, "unknown dtype %q", e.DType)
		}
		if len(e.Offsets) != 2 {
			return nil, hfErr(name, key, "data_offsets has %d values, want 2", len(e.Offsets))
		}
		elems := uint64(1)
		shape := make([]int, len(e.Shape))
		for i, d := range e.Shape {
			hi, lo := bits.Mul64(elems, d)
			if hi != 0 || lo > math.MaxInt || d > math.MaxInt {
				return nil, hfErr(name, key, "shape %v overflows", e.Shape)
			}
			elems, shape[i] = lo, int(d)
		}
		hi, nbytes := bits.Mul64(elems, uint64(size))
		if hi != 0 || nbytes > math.MaxInt {
			return nil, hfErr(name, key, "%s shape %v overflows", e.DType, e.Shape)
		}
		begin, end := e.Offsets[0], e.Offsets[1]
		switch {
		case begin > end:
			return nil, hfErr(name, key, "data_offsets [%d, %d] are reversed", begin, end)
		case end > uint64(len(body)):
			return nil, hfErr(name, key, "data_offsets [%d, %d] extend past the %d bytes of data", begin, end, len(body))
		case end-begin != nbytes:
			return nil, hfErr(name, key, "%s shape %v needs %d bytes, data_offsets [%d, %d] hold %d", e.DType, e.Shape, nbytes, begin, end, end-begin)
		}
		ts = append(ts, placed{&SafeTensor{Name: key, DType: e.DType, Shape: shape, Data: body[begin:end:end]}, begin})
	}
	slices.SortFunc(ts, func(a, b placed) int {
		if a.begin != b.begin {
			if a.begin < b.begin {
				return -1
			}
			return 1
		}
		return strings.Compare(a.t.Name, b.t.Name)
	})
	var prev *SafeTensor // the non-empty tensor that ends last so far
	var prevEnd uint64
	for _, p := range ts {
		if n := uint64(len(p.t.Data)); n > 0 {
			if prev != nil && p.begin < prevEnd {
				return nil, hfErr(name, p.t.Name, "data_offsets [%d, %d] overlap tensor %q's [%d, %d]",
					p.begin, p.begin+n, prev.Name, prevEnd-uint64(len(prev.Data)), prevEnd)
			}
			prev, prevEnd = p.t, p.begin+n
		}
		s.byName[p.t.Name] = len(s.Tensors)
		s.Tensors = append(s.Tensors, p.t)
	}
	return s, nil
}

// WriteSafetensors encodes tensors, in the order given and packed without
// gaps, with metadata (may be nil) as a safetensors file to w. The header is
// padded with spaces so that the data starts at a multiple of 32 bytes, and
// each tensor's Data must hold exactly its shape's bytes.
func WriteSafetensors(w io.Writer, tensors []*SafeTensor, metadata map[string]string) error {
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr[safetensorsMetadataKey] = metadata
	}
	var off uint64
	for _, t := range tensors {
		size, ok := safetensorsDTypeSizes[t.DType]
		if !ok {
			return fmt.Errorf("weights: safetensors: tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		if t.Name == safetensorsMetadataKey {
			return fmt.Errorf("weights: safetensors: a tensor may not be called %q", t.Name)
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("weights: safetensors: duplicate tensor %q", t.Name)
		}
		elems := 1
		shape := make([]uint64, len(t.Shape))
		for i, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("weights: safetensors: tensor %q: negative dimension in %v", t.Name, t.Shape)
			}
			elems *= d
			shape[i] = uint64(d)
		}
		if len(t.Data) != elems*size {
			return fmt.Errorf("weights: safetensors: tensor %q: %s shape %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, elems*size, len(t.Data))
		}
		hdr[t.Name] = safetensorsEntry{DType: t.DType, Shape: shape, Offsets: []uint64{off, off + uint64(len(t.Data))}}
		off += uint64(len(t.Data))
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("weights: safetensors: %w", err)
	}
	if pad := (32 - (8+len(js))%32) % 32; pad > 0 {
		js = append(js, bytes.Repeat([]byte(" "), pad)...)
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
