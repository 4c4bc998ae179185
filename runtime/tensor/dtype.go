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
// BlockBytes. All multi-byte values are little-endian.
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
)

// QK is the number of elements in one block of Q8_0 and Q4_0.
const QK = 32

var dtypeNames = [...]string{
	F32:  "f32",
	F16:  "f16",
	BF16: "bf16",
	Q8_0: "q8_0",
	Q4_0: "q4_0",
	I32:  "i32",
}

// Valid reports whether d is one of the defined dtypes.
func (d DType) Valid() bool {
	return d >= F32 && d <= I32
}

// String returns the lower-case name of d ("f32", "f16", "bf16", "q8_0",
// "q4_0", "i32"), or "dtype(N)" for an invalid value.
func (d DType) String() string {
	if d.Valid() {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType returns the DType whose String is s. Matching is exact
// (lower case); an unknown name is an error.
func ParseDType(s string) (DType, error) {
	for d := F32; d <= I32; d++ {
		if dtypeNames[d] == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q", s)
}

// BlockSize returns the number of elements per storage block: 32 for Q8_0
// and Q4_0, 1 for the other dtypes, and 0 for an invalid dtype.
func (d DType) BlockSize() int {
	switch d {
	case F32, F16, BF16, I32:
		return 1
	case Q8_0, Q4_0:
		return QK
	}
	return 0
}

// BlockBytes returns the number of bytes of one storage block: 4 (F32, I32),
// 2 (F16, BF16), 34 (Q8_0), 18 (Q4_0), and 0 for an invalid dtype.
func (d DType) BlockBytes() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case Q8_0:
		return 2 + QK
	case Q4_0:
		return 2 + QK/2
	}
	return 0
}

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
// d into float32 values in dst. d must be F32, F16, BF16, Q8_0 or Q4_0,
// len(dst) a multiple of d.BlockSize(), and len(src) exactly
// d.RowBytes(len(dst)); otherwise an error is returned and dst is untouched.
func DequantizeRow(d DType, src []byte, dst []float32) error {
	want, err := d.RowBytes(len(dst))
	if err != nil {
		return err
	}
	if len(src) != want {
		return fmt.Errorf("tensor: dequantize %d elements of %v: have %d bytes, want %d", len(dst), d, len(src), want)
	}
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < len(dst)/QK; b++ {
			blk := src[b*34 : b*34+34]
			out := dst[b*QK : b*QK+QK]
			s := F16ToF32(binary.LittleEndian.Uint16(blk))
			q := blk[2:34]
			for j := range out {
				out[j] = s * float32(int8(q[j]))
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/QK; b++ {
			blk := src[b*18 : b*18+18]
			out := dst[b*QK : b*QK+QK]
			s := F16ToF32(binary.LittleEndian.Uint16(blk))
			q := blk[2:18]
			for j := range QK / 2 {
				out[j] = s * float32(int(q[j]&0x0f)-8)
				out[j+QK/2] = s * float32(int(q[j]>>4)-8)
			}
		}
	default:
		return fmt.Errorf("tensor: cannot dequantize %v", d)
	}
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
	switch d {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/QK; b++ {
			x := src[b*QK : b*QK+QK]
			blk := dst[b*34 : b*34+34]
			var amax float32
			for _, v := range x {
				amax = max(amax, abs32(v))
			}
			s := amax / 127
			var inv float32
			if s != 0 {
				inv = 1 / s
			}
			binary.LittleEndian.PutUint16(blk, F32ToF16(s))
			for j, v := range x {
				blk[2+j] = byte(int8(math.Round(float64(v * inv))))
			}
		}
	case Q4_0:
		for b := 0; b < len(src)/QK; b++ {
			x := src[b*QK : b*QK+QK]
			blk := dst[b*18 : b*18+18]
			var amax, m float32
			for _, v := range x {
				if a := abs32(v); amax < a {
					amax, m = a, v
				}
			}
			s := m / -8
			var inv float32
			if s != 0 {
				inv = 1 / s
			}
			binary.LittleEndian.PutUint16(blk, F32ToF16(s))
			for j := range QK / 2 {
				lo := min(15, int8(x[j]*inv+8.5))
				hi := min(15, int8(x[j+QK/2]*inv+8.5))
				blk[2+j] = byte(lo) | byte(hi)<<4
			}
		}
	default:
		return fmt.Errorf("tensor: cannot quantize to %v", d)
	}
	return nil
}

func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}
