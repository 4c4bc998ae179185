// Codecs of the KV page formats: a backend quantizes K and V rows with them
// as it writes pages and dequantizes them in attention.

package page

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

type kind uint8

const (
	kindF32 kind = iota
	kindF16
	kindBF16
	kindInt8
	kindFP8
)

// Codec converts rows of N float32 values to and from one stored format.
// A stored row is N values of Format.ValueBytes bytes each (little-endian),
// followed by the row's Format.Groups(N) float32 scales (little-endian).
// A Codec holds no state beyond its shape: it is safe for concurrent use.
type Codec struct {
	Format Format
	N      int // values per row
	kind   kind
	vals   int // bytes of the values, N*ValueBytes
}

// NewCodec returns the codec of the named format ("" is f32) for rows of n
// values, n >= 1.
func NewCodec(format string, n int) (*Codec, error) {
	f, err := LookupFormat(format)
	if err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("kv: row length %d < 1", n)
	}
	c := &Codec{Format: f, N: n, vals: n * f.ValueBytes}
	switch f.Name {
	case F32.Name:
		c.kind = kindF32
	case F16.Name:
		c.kind = kindF16
	case BF16.Name:
		c.kind = kindBF16
	case Int8G64.Name:
		c.kind = kindInt8
	case FP8E4M3Row256.Name:
		c.kind = kindFP8
	default:
		return nil, fmt.Errorf("kv: no codec for format %q", f.Name)
	}
	return c, nil
}

// RowBytes is the size of one stored row.
func (c *Codec) RowBytes() int { return c.Format.RowBytes(c.N) }

// Encode quantizes src ([N]) into dst ([RowBytes]).
//
// f32 stores the bits; f16 and bf16 round to nearest even (f16 overflows to
// ±Inf; NaN stays NaN). int8-g64 stores per group the scale d = max|x|/127
// (as float32) and q = round(x/d), ties away from zero; fp8-e4m3-row256
// stores d = max|x|/448 and E4M3FromF32(x/d); when rounding makes 127*d
// (448*d) overflow float32, d is lowered by one ulp. A group of zeros (or of values
// so small that d underflows to 0) stores d = 0 and zeros. A group holding
// a NaN or ±Inf stores d = NaN, so that all its values decode to NaN, as
// they would poison f32 attention.
func (c *Codec) Encode(dst []byte, src []float32) {
	if len(src) != c.N || len(dst) != c.RowBytes() {
		panic(fmt.Sprintf("kv: Encode %d values into %d bytes, codec is %d values in %d bytes", len(src), len(dst), c.N, c.RowBytes()))
	}
	c.EncodeSlice(dst, src, 0)
}

// SliceAligned reports whether values [lo, lo+n) of a row can be encoded
// on their own by EncodeSlice: always for formats without scales, else
// when the slice is whole groups (it may end at N).
func (c *Codec) SliceAligned(lo, n int) bool {
	if lo < 0 || n < 0 || lo+n > c.N {
		return false
	}
	g := c.Format.Group
	return g == 0 || lo%g == 0 && (n%g == 0 || lo+n == c.N)
}

// EncodeSlice stores src as values lo..lo+len(src) of the row dst
// ([RowBytes]), exactly as Encode of the whole row would store them and
// their groups' scales, leaving the rest of the row as it is; the slice
// must be SliceAligned. Slices of one row that do not overlap may be
// encoded concurrently (a backend writes each KV head's slice of a row on
// its own worker).
func (c *Codec) EncodeSlice(dst []byte, src []float32, lo int) {
	if !c.SliceAligned(lo, len(src)) || len(dst) != c.RowBytes() {
		panic(fmt.Sprintf("kv: EncodeSlice values [%d,%d) into %d bytes, codec is %d values in %d bytes, groups of %d", lo, lo+len(src), len(dst), c.N, c.RowBytes(), c.Format.Group))
	}
	switch c.kind {
	case kindF32:
		for i, x := range src {
			binary.LittleEndian.PutUint32(dst[4*(lo+i):], math.Float32bits(x))
		}
	case kindF16:
		for i, x := range src {
			binary.LittleEndian.PutUint16(dst[2*(lo+i):], tensor.F32ToF16(x))
		}
	case kindBF16:
		for i, x := range src {
			binary.LittleEndian.PutUint16(dst[2*(lo+i):], tensor.F32ToBF16(x))
		}
	case kindInt8, kindFP8:
		g := c.Format.Group
		for off := 0; off < len(src); off += g {
			end := min(off+g, len(src))
			d := c.encodeGroup(dst[lo+off:lo+end], src[off:end])
			binary.LittleEndian.PutUint32(dst[c.vals+4*((lo+off)/g):], math.Float32bits(d))
		}
	}
}

// encodeGroup quantizes one group of an int8 or fp8 row and returns its scale.
func (c *Codec) encodeGroup(dst []byte, src []float32) float32 {
	var amax float32
	for _, x := range src {
		a := float32(math.Abs(float64(x)))
		if !(a <= math.MaxFloat32) { // NaN or Inf
			clear(dst)
			return float32(math.NaN())
		}
		amax = max(amax, a)
	}
	top := float32(127)
	if c.kind == kindFP8 {
		top = E4M3Max
	}
	d := amax / top
	if d == 0 {
		clear(dst)
		return 0
	}
	if d*top > math.MaxFloat32 { // d rounded up: top*d would decode to Inf
		d = math.Nextafter32(d, 0)
	}
	for i, x := range src {
		v := x / d
		if c.kind == kindFP8 {
			dst[i] = E4M3FromF32(v)
			continue
		}
		q := math.Round(float64(v))
		dst[i] = byte(int8(max(-127, min(127, q))))
	}
	return d
}

// Decode writes values lo..lo+len(dst) of the stored row into dst; lo >= 0
// and lo+len(dst) <= N. Each value is its stored number times its group's
// scale (float32 arithmetic), which is exact for f32, f16 and bf16.
func (c *Codec) Decode(dst []float32, row []byte, lo int) {
	if lo < 0 || lo+len(dst) > c.N || len(row) != c.RowBytes() {
		panic(fmt.Sprintf("kv: Decode values [%d,%d) of a %d-byte row, codec is %d values in %d bytes", lo, lo+len(dst), len(row), c.N, c.RowBytes()))
	}
	switch c.kind {
	case kindF32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*(lo+i):]))
		}
	case kindF16:
		for i := range dst {
			dst[i] = tensor.F16ToF32(binary.LittleEndian.Uint16(row[2*(lo+i):]))
		}
	case kindBF16:
		for i := range dst {
			dst[i] = tensor.BF16ToF32(binary.LittleEndian.Uint16(row[2*(lo+i):]))
		}
	case kindInt8, kindFP8:
		g := c.Format.Group
		for i := 0; i < len(dst); {
			gi := (lo + i) / g
			end := min(len(dst), (gi+1)*g-lo)
			d := math.Float32frombits(binary.LittleEndian.Uint32(row[c.vals+4*gi:]))
			q := row[lo+i : lo+end]
			out := dst[i:end]
			if c.kind == kindFP8 {
				for j, b := range q {
					out[j] = e4m3Table[b] * d
				}
			} else {
				for j, b := range q {
					out[j] = float32(int8(b)) * d
				}
			}
			i = end
		}
	}
}

// DecodeRows decodes values lo..lo+w of each of len(dst)/w consecutive
// stored rows (rows holds exactly that many rows) into dst, w values per
// row: the same values as one Decode per row, in one call. It is how
// attention reads one head's slice of a run of tokens in a page.
func (c *Codec) DecodeRows(dst []float32, rows []byte, lo, w int) {
	rb := c.RowBytes()
	if w < 1 || len(dst)%w != 0 || len(rows) != len(dst)/w*rb || lo < 0 || lo+w > c.N {
		panic(fmt.Sprintf("kv: DecodeRows %d values, %d per row from %d, of %d bytes; codec is %d values in %d bytes", len(dst), w, lo, len(rows), c.N, rb))
	}
	g := c.Format.Group
	for r := 0; r < len(dst)/w; r++ {
		row, out := rows[r*rb:(r+1)*rb], dst[r*w:(r+1)*w]
		switch c.kind {
		case kindF32:
			for i := range out {
				out[i] = math.Float32frombits(binary.LittleEndian.Uint32(row[4*(lo+i):]))
			}
		case kindF16:
			vals := row[2*lo : 2*(lo+w)]
			for i := range out {
				out[i] = tensor.F16ToF32(uint16(vals[2*i]) | uint16(vals[2*i+1])<<8)
			}
		case kindBF16:
			vals := row[2*lo : 2*(lo+w)]
			for i := range out {
				out[i] = math.Float32frombits(uint32(vals[2*i])<<16 | uint32(vals[2*i+1])<<24)
			}
		case kindInt8, kindFP8:
			if lo/g != (lo+w-1)/g { // the slice spans groups
				c.Decode(out, row, lo)
				continue
			}
			d := math.Float32frombits(binary.LittleEndian.Uint32(row[c.vals+4*(lo/g):]))
			vals := row[lo : lo+w]
			if c.kind == kindFP8 {
				for i, b := range vals {
					out[i] = e4m3Table[b] * d
				}
			} else {
				for i, b := range vals {
					out[i] = float32(int8(b)) * d
				}
			}
		}
	}
}
