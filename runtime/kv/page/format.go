package page

import (
	"fmt"
	"strings"
)

// Format describes how one KV cache page stores a K or V row: each value
// takes ValueBytes bytes, and formats with Group > 0 add one ScaleBytes
// scale per group of Group contiguous values of the row. Groups never span
// two rows (two tokens, or K and V, or two layers); a row of n values has
// ceil(n/Group) groups, the last one shorter when Group does not divide n,
// and a row shorter than Group is one group.
//
// Codec (codec.go) writes and reads these bytes; Format
// is only the size accounting, so that the engine, the backends and reports
// agree on what a token costs.
type Format struct {
	// Name is the format as written in a graph's kv.cache node ("int8-g64").
	Name string
	// ValueBytes is the size of one stored value.
	ValueBytes int
	// Group is the number of values that share one scale; 0 means no scales.
	Group int
	// ScaleBytes is the size of one scale (a float32), 0 when Group is 0.
	ScaleBytes int
	// Doc is a one-line description.
	Doc string
}

// The formats, in Formats order.
var (
	// F32 stores IEEE binary32 values: the reference format.
	F32 = Format{Name: "f32", ValueBytes: 4, Doc: "IEEE binary32, the reference"}
	// F16 stores IEEE binary16 values, rounded to nearest even; values
	// beyond ±65504 become ±Inf.
	F16 = Format{Name: "f16", ValueBytes: 2, Doc: "IEEE binary16, round to nearest even"}
	// BF16 stores bfloat16 values (the top half of a binary32), rounded to
	// nearest even.
	BF16 = Format{Name: "bf16", ValueBytes: 2, Doc: "bfloat16, round to nearest even"}
	// Int8G64 stores symmetric int8 values with one float32 scale
	// max|x|/127 per group of 64 values.
	Int8G64 = Format{Name: "int8-g64", ValueBytes: 1, Group: 64, ScaleBytes: 4,
		Doc: "symmetric int8, one float32 scale max|x|/127 per 64 values"}
	// FP8E4M3Row256 stores OCP E4M3FN values (saturating) with one float32
	// scale max|x|/448 per group of 256 values.
	FP8E4M3Row256 = Format{Name: "fp8-e4m3-row256", ValueBytes: 1, Group: 256, ScaleBytes: 4,
		Doc: "OCP FP8 E4M3FN, saturating, one float32 scale max|x|/448 per 256 values"}
)

var formats = []Format{F32, F16, BF16, Int8G64, FP8E4M3Row256}

// Formats returns every KV page format, f32 first.
func Formats() []Format { return append([]Format(nil), formats...) }

// FormatNames returns the names of Formats, in order.
func FormatNames() []string {
	names := make([]string, len(formats))
	for i, f := range formats {
		names[i] = f.Name
	}
	return names
}

// LookupFormat returns the format called name; "" is f32.
func LookupFormat(name string) (Format, error) {
	if name == "" {
		return F32, nil
	}
	for _, f := range formats {
		if f.Name == name {
			return f, nil
		}
	}
	return Format{}, fmt.Errorf("kv: unknown format %q (have %s)", name, strings.Join(FormatNames(), ", "))
}

// Groups is the number of scale groups of a row of n values: ceil(n/Group),
// and 0 for formats without scales or n <= 0.
func (f Format) Groups(n int) int {
	if f.Group == 0 || n <= 0 {
		return 0
	}
	return (n + f.Group - 1) / f.Group
}

// RowBytes is the size of one stored row of n values: the values, then the
// row's scales.
func (f Format) RowBytes(n int) int { return n*f.ValueBytes + f.Groups(n)*f.ScaleBytes }

// BytesPerToken is the KV memory one token occupies: a K and a V row of
// kvDim values in each of layers layers, scales included.
func BytesPerToken(f Format, layers, kvDim int) int64 {
	return 2 * int64(layers) * int64(f.RowBytes(kvDim))
}

// CapacityTokens is the number of tokens whose K and V rows fit in budget
// bytes, rounded down to whole blocks of blockTokens tokens (blockTokens
// <= 1 counts single tokens). It is 0 when not even one block fits or the
// shape is empty.
func CapacityTokens(budget int64, f Format, layers, kvDim, blockTokens int) int64 {
	per := BytesPerToken(f, layers, kvDim)
	if per <= 0 || budget <= 0 {
		return 0
	}
	n := budget / per
	if blockTokens > 1 {
		n -= n % int64(blockTokens)
	}
	return n
}
