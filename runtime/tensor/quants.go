package tensor

import (
	"encoding/binary"
	"math"
)

// The block formats' converters. Dequantization follows ggml's
// dequantize_row_* in ggml-quants.c operation for operation (each product
// and sum rounded to float32 on its own, never fused), so the values are
// bit for bit llama.cpp's. Block layouts are ggml's (ggml-common.h).

// iq4nlLevels are the 16 int8 levels an IQ4_NL / IQ4_XS nibble selects
// (ggml's kvalues_iq4nl).
var iq4nlLevels = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// IQ4NLLevel returns the int8 level of IQ4_NL / IQ4_XS nibble q (0..15).
func IQ4NLLevel(q uint8) int8 { return iq4nlLevels[q&15] }

func f16At(b []byte, off int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[off:])) }

func dequantQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*34 : b*34+34]
		out := dst[b*QK : b*QK+QK]
		s := f16At(blk, 0)
		q := blk[2:34]
		for j := range out {
			out[j] = s * float32(int8(q[j]))
		}
	}
}

func dequantQ4_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*18 : b*18+18]
		out := dst[b*QK : b*QK+QK]
		s := f16At(blk, 0)
		q := blk[2:18]
		for j := range QK / 2 {
			out[j] = s * float32(int(q[j]&0x0f)-8)
			out[j+QK/2] = s * float32(int(q[j]>>4)-8)
		}
	}
}

// dequantQ4_1: d, m, 16 bytes of nibbles; x = q*d + m.
func dequantQ4_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*20 : b*20+20]
		out := dst[b*QK : b*QK+QK]
		d, m := f16At(blk, 0), f16At(blk, 2)
		q := blk[4:20]
		for j := range QK / 2 {
			out[j] = float32(float32(q[j]&0x0f)*d) + m
			out[j+QK/2] = float32(float32(q[j]>>4)*d) + m
		}
	}
}

// q5Values writes the 5-bit values of a Q5_0/Q5_1 block (high bits qh,
// nibbles qs) into v.
func q5Values(v *[QK]int32, qh uint32, qs []byte) {
	for j := range QK / 2 {
		v[j] = int32(qs[j]&0x0f) | int32((qh>>j)&1)<<4
		v[j+QK/2] = int32(qs[j]>>4) | int32((qh>>(j+16))&1)<<4
	}
}

// dequantQ5_0: d, qh, 16 bytes of nibbles; x = (q-16)*d.
func dequantQ5_0(dst []float32, src []byte) {
	var v [QK]int32
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*22 : b*22+22]
		out := dst[b*QK : b*QK+QK]
		d := f16At(blk, 0)
		q5Values(&v, binary.LittleEndian.Uint32(blk[2:]), blk[6:22])
		for j := range out {
			out[j] = float32(v[j]-16) * d
		}
	}
}

// dequantQ5_1: d, m, qh, 16 bytes of nibbles; x = q*d + m.
func dequantQ5_1(dst []float32, src []byte) {
	var v [QK]int32
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*24 : b*24+24]
		out := dst[b*QK : b*QK+QK]
		d, m := f16At(blk, 0), f16At(blk, 2)
		q5Values(&v, binary.LittleEndian.Uint32(blk[4:]), blk[8:24])
		for j := range out {
			out[j] = float32(float32(v[j])*d) + m
		}
	}
}

func dequantIQ4_NL(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*18 : b*18+18]
		out := dst[b*QK : b*QK+QK]
		d := f16At(blk, 0)
		q := blk[2:18]
		for j := range QK / 2 {
			out[j] = d * float32(iq4nlLevels[q[j]&0x0f])
			out[j+QK/2] = d * float32(iq4nlLevels[q[j]>>4])
		}
	}
}

func dequantQ8_1(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QK; b++ {
		blk := src[b*36 : b*36+36]
		out := dst[b*QK : b*QK+QK]
		d := f16At(blk, 0)
		for j := range out {
			out[j] = d * float32(int8(blk[4+j]))
		}
	}
}

func dequantQ8_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*292 : b*292+292]
		out := dst[b*QKK : b*QKK+QKK]
		d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
		for j := range out {
			out[j] = d * float32(int8(blk[4+j]))
		}
	}
}

// ScaleMinK4 returns the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes q of a Q4_K or Q5_K super-block (ggml's get_scale_min_k4).
func ScaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q3KScales unpacks the 16 6-bit scales of a Q3_K super-block from its 12
// packed bytes, minus the offset 32.
func Q3KScales(p []byte) [16]int8 {
	var s [16]int8
	for j := range 16 {
		var lo, hi byte
		if j < 8 {
			lo = p[j] & 0xf
		} else {
			lo = p[j-8] >> 4
		}
		hi = (p[8+j%4] >> (2 * (j / 4))) & 3
		s[j] = int8(lo|hi<<4) - 32
	}
	return s
}

// Q2_K: scales[16] at 0, qs[64] at 16, d at 80, dmin at 82.
func dequantQ2_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*84 : b*84+84]
		out := dst[b*QKK : b*QKK+QKK]
		d, dmin := f16At(blk, 80), f16At(blk, 82)
		for e := range out {
			sc := blk[e/16]
			q := (blk[16+32*(e/128)+e%32] >> (2 * ((e / 32) % 4))) & 3
			dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
			out[e] = float32(dl*float32(q)) - ml
		}
	}
}

// Q3_K: hmask[32] at 0, qs[64] at 32, scales[12] at 96, d at 108.
func dequantQ3_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*110 : b*110+110]
		out := dst[b*QKK : b*QKK+QKK]
		d := f16At(blk, 108)
		sc := Q3KScales(blk[96:108])
		for e := range out {
			dl := d * float32(sc[e/16])
			out[e] = dl * float32(q3Value(blk, e))
		}
	}
}

// q3Value returns element e's signed 3-bit value (-4..3) in Q3_K block blk.
func q3Value(blk []byte, e int) int8 {
	l := e % 32
	shift := 2 * ((e / 32) % 4)
	q := int8((blk[32+32*(e/128)+l] >> shift) & 3)
	if blk[l]&(1<<(e/32)) == 0 {
		q -= 4
	}
	return q
}

// Q4_K: d at 0, dmin at 2, scales[12] at 4, qs[128] at 16.
func dequantQ4_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*144 : b*144+144]
		out := dst[b*QKK : b*QKK+QKK]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		for e := range out {
			s, m := ScaleMinK4(e/32, blk[4:16])
			q := blk[16+32*(e/64)+e%32]
			if (e/32)%2 == 0 {
				q &= 0xf
			} else {
				q >>= 4
			}
			d1, m1 := d*float32(s), dmin*float32(m)
			out[e] = float32(d1*float32(q)) - m1
		}
	}
}

// Q5_K: d at 0, dmin at 2, scales[12] at 4, qh[32] at 16, qs[128] at 48.
func dequantQ5_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*176 : b*176+176]
		out := dst[b*QKK : b*QKK+QKK]
		d, dmin := f16At(blk, 0), f16At(blk, 2)
		for e := range out {
			s, m := ScaleMinK4(e/32, blk[4:16])
			q := blk[48+32*(e/64)+e%32]
			if (e/32)%2 == 0 {
				q &= 0xf
			} else {
				q >>= 4
			}
			q |= (blk[16+e%32] >> (e / 32) & 1) << 4
			d1, m1 := d*float32(s), dmin*float32(m)
			out[e] = float32(d1*float32(q)) - m1
		}
	}
}

// q6Value returns element e's unsigned 6-bit value (0..63) in Q6_K block
// blk: ql[128] at 0, qh[64] at 128.
func q6Value(blk []byte, e int) uint8 {
	h, l := e/128, e%32
	part := (e % 128) / 32 // 0: ql[l] low, 1: ql[l+32] low, 2: ql[l] high, 3: ql[l+32] high
	ql := blk[64*h+l+32*(part%2)]
	if part >= 2 {
		ql >>= 4
	}
	qh := (blk[128+32*h+l] >> (2 * part)) & 3
	return ql&0xf | qh<<4
}

// Q6_K: ql[128] at 0, qh[64] at 128, scales[16] (int8) at 192, d at 208.
func dequantQ6_K(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*210 : b*210+210]
		out := dst[b*QKK : b*QKK+QKK]
		d := f16At(blk, 208)
		for e := range out {
			sc := int8(blk[192+e/16])
			q := int8(q6Value(blk, e)) - 32
			out[e] = float32(d*float32(sc)) * float32(q)
		}
	}
}

// IQ4XSScale returns the 6-bit scale of sub-block ib (0..7) of an IQ4_XS
// super-block, minus the offset 32.
func IQ4XSScale(blk []byte, ib int) int32 {
	sh := binary.LittleEndian.Uint16(blk[2:])
	ls := int32(blk[4+ib/2]>>(4*(ib%2)))&0xf | int32((sh>>(2*ib))&3)<<4
	return ls - 32
}

// IQ4_XS: d at 0, scales_h at 2, scales_l[4] at 4, qs[128] at 8.
func dequantIQ4_XS(dst []float32, src []byte) {
	for b := 0; b < len(dst)/QKK; b++ {
		blk := src[b*136 : b*136+136]
		out := dst[b*QKK : b*QKK+QKK]
		d := f16At(blk, 0)
		for ib := range 8 {
			dl := d * float32(IQ4XSScale(blk, ib))
			qs := blk[8+16*ib : 8+16*ib+16]
			for j := range 16 {
				out[32*ib+j] = dl * float32(iq4nlLevels[qs[j]&0xf])
				out[32*ib+j+16] = dl * float32(iq4nlLevels[qs[j]>>4])
			}
		}
	}
}

func quantQ8_0(dst []byte, src []float32) {
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
}

func quantQ4_0(dst []byte, src []float32) {
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
}
