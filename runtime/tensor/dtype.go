// Package tensor defines element types (dtypes) of weight and activation
// tensors, their storage layout, and conversions between them and float32.
package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is the element type of a tensor's storage. The zero value is invalid.
//
// Quantized types store elements in fixed-size blocks; see BlockSize and
// BlockBytes. All multi-byte values are little-endian. Every property of a
// dtype lives in one table entry (see Traits), so supporting a new dtype is
// one entry here plus its kernels in the backends.
type DType uint8

const (
	// F32 is IEEE 754 binary32, 4 bytes per element.
	F32 DType = iota + 1
	// F16 is IEEE 754 binary16, 2 bytes per element.
	F16
	// BF16 is bfloat16 (the upper 16 bits of a binary32), 2 bytes per element.
	BF16
	// Q8_0 stores blocks of 32 elements in 34 bytes: an F16 scale d followed
	// by 32 int8 values q; element j is d*q[j].
	Q8_0
	// Q4_0 stores blocks of 32 elements in 18 bytes: an F16 scale d followed
	// by 16 bytes; the low nibble of byte j holds element j and the high
	// nibble holds element j+16 (j in 0..15); an element with nibble q is
	// d*(q-8).
	Q4_0
	// I32 is a signed 32-bit integer, 4 bytes per element.
	I32
	// Q4_1 stores blocks of 32 elements in 20 bytes: F16 scale d, F16 offset
	// m, then nibbles as in Q4_0; an element with nibble q is d*q + m.
	Q4_1
	// Q5_0 stores blocks of 32 elements in 22 bytes: F16 scale d, 4 bytes of
	// high bits (bit j of the little-endian uint32 is bit 4 of element j),
	// then the low nibbles as in Q4_0; an element with 5-bit value q is
	// d*(q-16).
	Q5_0
	// Q5_1 stores blocks of 32 elements in 24 bytes: F16 scale d, F16 offset
	// m, then high bits and nibbles as in Q5_0; an element is d*q + m.
	Q5_1
	// Q2_K stores super-blocks of 256 elements in 84 bytes: 16 bytes of
	// 4-bit scale (low nibble) and min (high nibble) for the 16 sub-blocks of
	// 16, 64 bytes of 2-bit quants, F16 d and F16 dmin; an element is
	// d*scale*q - dmin*min.
	Q2_K
	// Q3_K stores super-blocks of 256 elements in 110 bytes: 32 bytes of
	// high bits, 64 bytes of low 2-bit quants, 12 bytes of 6-bit scales
	// (offset 32) for 16 sub-blocks of 16, and F16 d; an element is
	// d*(scale-32)*(q-4) where q's high bit is set when its hmask bit is.
	Q3_K
	// Q4_K stores super-blocks of 256 elements in 144 bytes: F16 d, F16 dmin,
	// 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, and 128 bytes
	// of nibbles; an element is d*scale*q - dmin*min.
	Q4_K
	// Q5_K is Q4_K with a fifth bit per element: F16 d, F16 dmin, 12 bytes
	// of scales and mins, 32 bytes of high bits, 128 bytes of nibbles; 176
	// bytes per 256 elements.
	Q5_K
	// Q6_K stores super-blocks of 256 elements in 210 bytes: 128 bytes of
	// low nibbles, 64 bytes of high 2-bit pairs, 16 int8 scales for
	// sub-blocks of 16, and F16 d; an element is d*scale*(q-32).
	Q6_K
	// IQ4_NL stores blocks of 32 elements in 18 bytes like Q4_0, but a
	// nibble selects one of 16 non-uniform int8 levels (iq4nlLevels): an
	// element is d*level[q].
	IQ4_NL
	// IQ4_XS stores super-blocks of 256 elements in 136 bytes: F16 d, a
	// uint16 of high scale bits, 4 bytes of low scale nibbles (6-bit scales,
	// offset 32, for 8 sub-blocks of 32), and IQ4_NL nibbles.
	IQ4_XS
	// Q8_1 is Q8_0 plus the block's F16 s = d*sum(q): 36 bytes per 32
	// elements. It is the activation format of Q4_1 and Q5_1 dot products.
	Q8_1
	// Q8_K stores super-blocks of 256 elements in 292 bytes: a float32 scale
	// d, 256 int8 quants and 16 int16 sums of 16 quants each. It is the
	// activation format of the K-quant and IQ4_XS dot products.
	Q8_K
)

// QK is the number of elements in one block of Q8_0 and Q4_0 (and of the
// other 32-element block formats).
const QK = 32

// QKK is the number of elements in one super-block of the K-quants, IQ4_XS
// and Q8_K.
const QKK = 256

// Traits are the properties of one dtype.
type Traits struct {
	// Name is ggml's name of the type ("f32", "q8_0", "q4_K", "iq4_xs").
	Name string
	// BlockSize is the number of elements per storage block.
	BlockSize int
	// BlockBytes is the number of bytes of one storage block.
	BlockBytes int
	// GGML is the ggml / GGUF type id, and HasGGML whether there is one.
	GGML    uint32
	HasGGML bool
	// DotType is the format that activations are converted to before a dot
	// product with weights of this type, as ggml's CPU backend does (its
	// vec_dot_type): F32, F16 and BF16 for the float types, Q8_0, Q8_1 or
	// Q8_K for the quantized ones. It is 0 for types that are not weight
	// types of a matmul (I32, and the activation formats Q8_1 and Q8_K).
	DotType DType

	// dequantize converts whole blocks src into dst (len(dst) =
	// len(src)/BlockBytes*BlockSize); nil if the type holds no floats.
	dequantize func(dst []float32, src []byte)
	// quantize converts dst's worth of src into whole blocks; nil if the
	// package has no quantizer for the type.
	quantize func(dst []byte, src []float32)
}

// traits is the dtype table, indexed by DType.
var traits = [...]Traits{
	F32:    {Name: "f32", BlockSize: 1, BlockBytes: 4, GGML: 0, HasGGML: true, DotType: F32, dequantize: dequantF32, quantize: quantF32},
	F16:    {Name: "f16", BlockSize: 1, BlockBytes: 2, GGML: 1, HasGGML: true, DotType: F16, dequantize: dequantF16, quantize: quantF16},
	BF16:   {Name: "bf16", BlockSize: 1, BlockBytes: 2, GGML: 30, HasGGML: true, DotType: BF16, dequantize: dequantBF16, quantize: quantBF16},
	Q8_0:   {Name: "q8_0", BlockSize: QK, BlockBytes: 34, GGML: 8, HasGGML: true, DotType: Q8_0, dequantize: dequantQ8_0, quantize: quantQ8_0},
	Q4_0:   {Name: "q4_0", BlockSize: QK, BlockBytes: 18, GGML: 2, HasGGML: true, DotType: Q8_0, dequantize: dequantQ4_0, quantize: quantQ4_0},
	I32:    {Name: "i32", BlockSize: 1, BlockBytes: 4, GGML: 26, HasGGML: true},
	Q4_1:   {Name: "q4_1", BlockSize: QK, BlockBytes: 20, GGML: 3, HasGGML: true, DotType: Q8_1, dequantize: dequantQ4_1},
	Q5_0:   {Name: "q5_0", BlockSize: QK, BlockBytes: 22, GGML: 6, HasGGML: true, DotType: Q8_0, dequantize: dequantQ5_0},
	Q5_1:   {Name: "q5_1", BlockSize: QK, BlockBytes: 24, GGML: 7, HasGGML: true, DotType: Q8_1, dequantize: dequantQ5_1},
	Q2_K:   {Name: "q2_K", BlockSize: QKK, BlockBytes: 84, GGML: 10, HasGGML: true, DotType: Q8_K, dequantize: dequantQ2_K},
	Q3_K:   {Name: "q3_K", BlockSize: QKK, BlockBytes: 110, GGML: 11, HasGGML: true, DotType: Q8_K, dequantize: dequantQ3_K},
	Q4_K:   {Name: "q4_K", BlockSize: QKK, BlockBytes: 144, GGML: 12, HasGGML: true, DotType: Q8_K, dequantize: dequantQ4_K},
	Q5_K:   {Name: "q5_K", BlockSize: QKK, BlockBytes: 176, GGML: 13, HasGGML: true, DotType: Q8_K, dequantize: dequantQ5_K},
	Q6_K:   {Name: "q6_K", BlockSize: QKK, BlockBytes: 210, GGML: 14, HasGGML: true, DotType: Q8_K, dequantize: dequantQ6_K},
	IQ4_NL: {Name: "iq4_nl", BlockSize: QK, BlockBytes: 18, GGML: 20, HasGGML: true, DotType: Q8_0, dequantize: dequantIQ4_NL},
	IQ4_XS: {Name: "iq4_xs", BlockSize: QKK, BlockBytes: 136, GGML: 23, HasGGML: true, DotType: Q8_K, dequantize: dequantIQ4_XS},
	Q8_1:   {Name: "q8_1", BlockSize: QK, BlockBytes: 36, GGML: 9, HasGGML: true, dequantize: dequantQ8_1},
	Q8_K:   {Name: "q8_K", BlockSize: QKK, BlockBytes: 292, GGML: 15, HasGGML: true, dequantize: dequantQ8_K},
}

// NumDTypes is one more than the largest DType: arrays indexed by DType have
// this length.
const NumDTypes = len(traits)

// Valid reports whether d is one of the defined dtypes.
func (d DType) Valid() bool {
	return int(d) < len(traits) && traits[d].Name != ""
}

// Traits returns d's table entry; the zero Traits for an invalid dtype.
func (d DType) Traits() Traits {
	if !d.Valid() {
		return Traits{}
	}
	return traits[d]
}

// DTypes returns every valid dtype in increasing order.
func DTypes() []DType {
	var ds []DType
	for d := range DType(len(traits)) {
		if d.Valid() {
			ds = append(ds, d)
		}
	}
	return ds
}

// String returns ggml's name of d ("f32", "f16", "bf16", "q8_0", "q4_K",
// "iq4_xs", ...), or "dtype(N)" for an invalid value.
func (d DType) String() string {
	if d.Valid() {
		return traits[d].Name
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType returns the DType whose String is s. Matching is exact (ggml's
// spelling: "q4_K", not "Q4_K" or "q4_k"); an unknown name is an error.
func ParseDType(s string) (DType, error) {
	for _, d := range DTypes() {
		if traits[d].Name == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q", s)
}

// DTypeOfGGML returns the dtype of ggml type id id, and false if the
// package does not define that type.
func DTypeOfGGML(id uint32) (DType, bool) {
	for _, d := range DTypes() {
		if t := traits[d]; t.HasGGML && t.GGML == id {
			return d, true
		}
	}
	return 0, false
}

// GGMLType returns the ggml type id of d, and false if d has none.
func (d DType) GGMLType() (uint32, bool) {
	t := d.Traits()
	return t.GGML, t.HasGGML
}

// BlockSize returns the number of elements per storage block: 32 for Q8_0,
// Q4_0 and the other 32-element formats, 256 for the K-quants, IQ4_XS and
// Q8_K, 1 for the unquantized dtypes, and 0 for an invalid dtype.
func (d DType) BlockSize() int { return d.Traits().BlockSize }

// BlockBytes returns the number of bytes of one storage block (4 for F32,
// 34 for Q8_0, 144 for Q4_K, ...), and 0 for an invalid dtype.
func (d DType) BlockBytes() int { return d.Traits().BlockBytes }

// DotType returns the format activations take in a dot product with
// weights of type d (see Traits.DotType), 0 if d is not a weight type.
func (d DType) DotType() DType { return d.Traits().DotType }

// RowBytes returns the number of bytes that n consecutive elements of type d
// occupy. It is an error if d is invalid, n is negative, n is not a multiple
// of d.BlockSize(), or the result does not fit in an int.
func (d DType) RowBytes(n int) (int, error) {
	bs := d.BlockSize()
	if bs == 0 {
		return 0, fmt.Errorf("tensor: invalid dtype %v", d)
	}
	if n < 0 {
		return 0, fmt.Errorf("tensor: negative element count %d", n)
	}
	if n%bs != 0 {
		return 0, fmt.Errorf("tensor: %d elements of %v is not a multiple of the block size %d", n, d, bs)
	}
	blocks := n / bs
	bb := d.BlockBytes()
	if blocks > math.MaxInt/bb {
		return 0, fmt.Errorf("tensor: %d elements of %v overflow the byte size", n, d)
	}
	return blocks * bb, nil
}

// DequantizeRow converts the storage bytes src of len(dst) elements of type
// d into float32 values in dst. d must hold floats (every dtype but I32),
// len(dst) must be a multiple of d.BlockSize(), and len(src) exactly
// d.RowBytes(len(dst)); otherwise an error is returned and dst is untouched.
//
// The quantized formats are converted exactly as ggml's dequantize_row_*
// functions do, product by product, so the values equal what llama.cpp's
// get_rows gives.
func DequantizeRow(d DType, src []byte, dst []float32) error {
	want, err := d.RowBytes(len(dst))
	if err != nil {
		return err
	}
	if len(src) != want {
		return fmt.Errorf("tensor: dequantize %d elements of %v: have %d bytes, want %d", len(dst), d, len(src), want)
	}
	f := traits[d].dequantize
	if f == nil {
		return fmt.Errorf("tensor: cannot dequantize %v", d)
	}
	f(dst, src)
	return nil
}

// QuantizeRow converts the float32 values src into the storage bytes dst of
// type d, which must be F32, F16, BF16, Q8_0 or Q4_0. len(src) must be a
// multiple of d.BlockSize() and len(dst) exactly d.RowBytes(len(src));
// otherwise an error is returned and dst is untouched.
//
// Q8_0 and Q4_0 follow ggml's reference quantizers (quantize_row_q8_0_ref,
// quantize_row_q4_0_ref), so the bytes match what llama.cpp writes: for
// Q8_0, d = max|x|/127 and q = round-half-away(x/d); for Q4_0, d = m/-8
// where m is the element of largest magnitude, and q = min(15,
// trunc(x/d + 8.5)).
func QuantizeRow(d DType, src []float32, dst []byte) error {
	want, err := d.RowBytes(len(src))
	if err != nil {
		return err
	}
	if len(dst) != want {
		return fmt.Errorf("tensor: quantize %d elements to %v: have %d bytes, want %d", len(src), d, len(dst), want)
	}
	f := traits[d].quantize
	if f == nil {
		return fmt.Errorf("tensor: cannot quantize to %v", d)
	}
	f(dst, src)
	return nil
}

func dequantF32(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(dst []float32, src []byte) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func quantF32(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func quantBF16(dst []byte, src []float32) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}
