package cpu

import "math"

// sinf32 and cosf32 are the C library's float sinf and cosf as glibc
// (2.28 and later, the FMA build x86-64 machines select) computes them:
// the argument in float64, reduced by multiples of pi/2 (a scaled
// conversion for |y| < 120, a 4/pi table of 192 bits beyond), then an odd
// or even polynomial of the reduced argument evaluated with fused
// multiply-adds, rounded once to float32. They are not always correctly
// rounded (about 1 in 120 RoPE angles differs by an ulp from float32 of
// math.Cos), and ggml's RoPE takes its angles' cosines and sines from
// them, so the same bits need the same arithmetic.

// sincosPoly holds one quadrant pair's coefficients.
type sincosPoly struct {
	sign           [4]float64 // sign of the sine in quadrants 0..3
	hpiInv, hpi    float64    // 2/pi * 2^24, pi/2
	c0, c1, c2, c3 float64    // cosine polynomial
	c4             float64
	s1, s2, s3     float64 // sine polynomial
}

var sincosPolys = [2]sincosPoly{
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{[4]float64{1, -1, -1, 1}, 0x1.45F306DC9C883p+23, 0x1.921FB54442D18p0,
		-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// invPio4 is 4/pi to 192 bits, 8 new bits per entry.
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

// abstop12 is the sign-less exponent field (and top mantissa bits) of x.
func abstop12(x float32) uint32 { return (math.Float32bits(x) >> 20) & 0x7ff }

// sinfPoly evaluates the sine (n even) or cosine (n odd) polynomial at the
// reduced argument x, x2 = x*x.
func sinfPoly(x, x2 float64, p *sincosPoly, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := math.FMA(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := math.FMA(x3, p.s1, x)
		return float32(math.FMA(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := math.FMA(x2, p.c4, p.c3)
	c1 := math.FMA(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := math.FMA(x4, p.c2, c1)
	return float32(math.FMA(x6, c2, c))
}

// reduceLarge reduces the float32 with bits xi by multiples of pi/2 with
// the 4/pi table, returning the remainder and the quadrant.
func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi&0xffffff | 0x800000) << shift
	res0 := uint64(xi * arr[0]) // a 32-bit product
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = res2>>32 | res0<<32
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * 0x1.921FB54442D18p-62, int(n)
}

// sinf32 returns sin(y) as glibc's sinf does.
func sinf32(y float32) float32 { return sincosf32(y, 0) }

// cosf32 returns cos(y) as glibc's cosf does.
func cosf32(y float32) float32 { return sincosf32(y, 1) }

// sincosf32 is sinf32 (odd = 0) or cosf32 (odd = 1).
func sincosf32(y float32, odd int) float32 {
	x := float64(y)
	p := &sincosPolys[0]
	switch {
	case abstop12(y) < abstop12(0x1.921FB6p-1): // |y| < pi/4
		if abstop12(y) < abstop12(0x1p-12) {
			if odd == 1 {
				return 1
			}
			return y
		}
		return sinfPoly(x, x*x, p, odd)
	case abstop12(y) < abstop12(120):
		n := (int32(x*p.hpiInv) + 0x800000) >> 24
		x = math.FMA(-float64(n), p.hpi, x)
		s := p.sign[n&3]
		if n&2 != 0 {
			p = &sincosPolys[1]
		}
		return sinfPoly(x*s, x*x, p, int(n)^odd)
	case abstop12(y) < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		sign := int(xi >> 31)
		x, n := reduceLarge(xi)
		s := p.sign[(n+sign)&3]
		if (n+sign)&2 != 0 {
			p = &sincosPolys[1]
		}
		return sinfPoly(x*s, x*x, p, n^odd)
	}
	return float32(math.NaN())
}
