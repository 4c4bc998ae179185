package tensor

import "math"

// f16Table maps every binary16 bit pattern to the bits of the equal float32.
// 65536 entries, 256 KiB, filled at package init.
var f16Table [1 << 16]uint32

func init() {
	for h := range f16Table {
		f16Table[h] = f16ToF32Bits(uint16(h))
	}
}

// f16ToF32Bits converts binary16 bits to binary32 bits exactly: subnormal
// halves become normal floats, infinities stay infinite, and a NaN keeps its
// sign and payload (shifted into the top of the float32 mantissa) and is made
// quiet, as x86 F16C vcvtph2ps does.
func f16ToF32Bits(h uint16) uint32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f && mant == 0: // inf
		return sign | 0x7f800000
	case exp == 0x1f: // NaN, made quiet
		return sign | 0x7fc00000 | mant<<13
	case exp != 0: // normal: rebias 15 -> 127
		return sign | (exp+127-15)<<23 | mant<<13
	case mant == 0: // signed zero
		return sign
	}
	// Subnormal: value = mant * 2^-24. Normalize so the leading one sits at
	// bit 10, decrementing the exponent once per shift.
	e := uint32(127 - 15 + 1)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return sign | e<<23 | (mant&0x3ff)<<13
}

// F16ToF32 returns the float32 equal to the IEEE 754 binary16 value with bits
// h. The conversion is exact for every input, including signed zeros,
// subnormals and infinities; a NaN keeps its sign and payload and is made
// quiet (bit 22 set), matching C's float conversion and x86 F16C vcvtph2ps.
func F16ToF32(h uint16) float32 {
	return math.Float32frombits(f16Table[h])
}

// F32ToF16 returns the bits of the binary16 value nearest to f, with ties
// rounded to even, as C's (_Float16) cast and x86 F16C vcvtps2ph (rounding
// mode 0) do. Values too large for binary16 become ±Inf, values too small
// become ±0 (keeping the sign), and a NaN becomes a quiet NaN with the same
// sign and the top 9 bits of its payload.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 // unbiased exponent of a normal float32
	switch {
	case e > 15:
		return sign | 0x7c00
	case e >= -14:
		// Normal half. Round the 23-bit mantissa to 10 bits; a carry out of
		// the mantissa correctly bumps the exponent (up to Inf).
		h := uint32(e+15)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 != 0) {
			h++
		}
		return sign | uint16(h)
	case e < -25 || exp == 0:
		// Below half of the smallest subnormal (2^-25), including float32
		// zeros and subnormals: rounds to zero.
		return sign
	}
	// Subnormal half: the result is round(m * 2^(e+1)) units of 2^-24,
	// where m is the 24-bit significand with its implicit one.
	m := mant | 0x800000
	shift := uint(-e - 1) // 14..24
	h := m >> shift
	rem := m & (1<<shift - 1)
	half := uint32(1) << (shift - 1)
	if rem > half || (rem == half && h&1 != 0) {
		h++
	}
	return sign | uint16(h)
}

// BF16ToF32 returns the float32 whose upper 16 bits are h and whose lower
// 16 bits are zero; the conversion is exact.
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16 returns the bfloat16 bits nearest to f, with ties rounded to
// even, as ggml's ggml_compute_fp32_to_bf16 does: subnormals are rounded
// like any other value, overflow becomes ±Inf, and a NaN keeps its sign and
// top payload bits and is made quiet.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
