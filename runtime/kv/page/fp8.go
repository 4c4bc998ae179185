package page

import "math"

// E4M3Max is the largest finite OCP E4M3FN value (bits 0x7E).
const E4M3Max = 448

// e4m3NaN is the positive E4M3FN NaN; 0xFF is the negative one. E4M3FN has
// no infinities.
const e4m3NaN = 0x7F

// e4m3Table maps every E4M3FN byte to its float32 value.
var e4m3Table = func() (t [256]float32) {
	for b := range 256 {
		sign, exp, mant := b>>7, (b>>3)&0xF, b&7
		var v float64
		switch {
		case exp == 0xF && mant == 7:
			v = math.NaN()
		case exp == 0:
			v = float64(mant) / 8 * math.Ldexp(1, -6) // subnormal: m/8 * 2^-6
		default:
			v = (1 + float64(mant)/8) * math.Ldexp(1, exp-7)
		}
		if sign == 1 {
			v = -v
		}
		t[b] = float32(v)
	}
	return t
}()

// E4M3ToF32 returns the value of the OCP E4M3FN byte b: sign, 4 exponent
// bits (bias 7), 3 mantissa bits; exponent 0 is subnormal (m/8 * 2^-6);
// 0x7F and 0xFF are NaN; there are no infinities. The conversion is exact.
func E4M3ToF32(b uint8) float32 { return e4m3Table[b] }

// E4M3FromF32 returns the OCP E4M3FN byte nearest to x, ties to even, in
// saturating mode: finite values beyond ±448 and ±Inf become ±448 (0x7E,
// 0xFE), NaN becomes 0x7F (0xFF when its sign bit is set), and values below
// half the smallest subnormal (2^-10) become ±0, keeping the sign.
func E4M3FromF32(x float32) uint8 {
	bits := math.Float32bits(x)
	sign := uint8(bits>>24) & 0x80
	a := bits & 0x7FFFFFFF
	switch {
	case a > 0x7F800000:
		return sign | e4m3NaN
	case a >= 0x43E00000: // 448 and above, including +Inf
		return sign | 0x7E
	case a < 0x3C800000: // below 2^-6: a subnormal E4M3 value
		// x * 2^9 is exact in float32 here; round it to an integer number
		// of 2^-9 units (0..8, where 8 is the smallest normal, code 0x08).
		m := math.RoundToEven(float64(math.Float32frombits(a)) * 512)
		return sign | uint8(m)
	}
	exp := int(a>>23) - 127 // -6..8
	mant := a & 0x7FFFFF
	code := uint32(exp+7)<<3 | mant>>20
	rem := mant & 0xFFFFF
	if rem > 0x80000 || (rem == 0x80000 && code&1 != 0) {
		code++ // a carry out of the mantissa bumps the exponent; at most 0x7E, as |x| < 448
	}
	return sign | uint8(code)
}
