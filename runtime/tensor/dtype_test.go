package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bitsEqual compares float32 values by their bit patterns, so that -0 != +0
// and NaNs compare equal to identical NaNs.
var bitsEqual = cmp.Comparer(func(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b)
})

func TestDTypeNames(t *testing.T) {
	type row struct {
		Name                  string
		BlockSize, BlockBytes int
	}
	var got []row
	for _, d := range DTypes() {
		got = append(got, row{d.String(), d.BlockSize(), d.BlockBytes()})
		p, err := ParseDType(d.String())
		if err != nil || p != d {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", d.String(), p, err, d)
		}
	}
	want := []row{
		{"f32", 1, 4}, {"f16", 1, 2}, {"bf16", 1, 2},
		{"q8_0", 32, 34}, {"q4_0", 32, 18}, {"i32", 1, 4},
		{"q4_1", 32, 20}, {"q5_0", 32, 22}, {"q5_1", 32, 24},
		{"q2_K", 256, 84}, {"q3_K", 256, 110}, {"q4_K", 256, 144}, {"q5_K", 256, 176}, {"q6_K", 256, 210},
		{"iq4_nl", 32, 18}, {"iq4_xs", 256, 136}, {"q8_1", 32, 36}, {"q8_K", 256, 292},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dtype table mismatch (-want +got):\n%s", diff)
	}
	for _, s := range []string{"", "F32", "q4_k", "Q4_K", "float32"} {
		if d, err := ParseDType(s); err == nil {
			t.Errorf("ParseDType(%q) = %v, want error", s, d)
		}
	}
	if s := DType(0).String(); s != "dtype(0)" {
		t.Errorf("DType(0).String() = %q", s)
	}
	if DType(0).Valid() || DType(NumDTypes).Valid() || !Q4_0.Valid() || !IQ4_XS.Valid() {
		t.Error("Valid is wrong")
	}
}

func TestRowBytes(t *testing.T) {
	tests := []struct {
		d       DType
		n       int
		want    int
		wantErr string
	}{
		{F32, 0, 0, ""},
		{F32, 7, 28, ""},
		{F16, 7, 14, ""},
		{BF16, 3, 6, ""},
		{I32, 5, 20, ""},
		{Q8_0, 64, 68, ""},
		{Q4_0, 96, 54, ""},
		{Q8_0, 33, 0, "not a multiple"},
		{Q4_0, 16, 0, "not a multiple"},
		{F32, -1, 0, "negative"},
		{DType(0), 4, 0, "invalid dtype"},
		{DType(99), 4, 0, "invalid dtype"},
		{F32, math.MaxInt, 0, "overflow"},
		{Q8_0, math.MaxInt - math.MaxInt%32, 0, "overflow"},
	}
	for _, tc := range tests {
		got, err := tc.d.RowBytes(tc.n)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v.RowBytes(%d) = %d, %v; want error containing %q", tc.d, tc.n, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v.RowBytes(%d) = %d, %v; want %d", tc.d, tc.n, got, err, tc.want)
		}
	}
}

func TestF16ToF32Table(t *testing.T) {
	tests := []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0},
		{0x8000, float32(math.Copysign(0, -1))},
		{0x3c00, 1},
		{0xbc00, -1},
		{0x4000, 2},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0xfbff, -65504},
		{0x0400, 0x1p-14},   // smallest normal
		{0x0001, 0x1p-24},   // smallest subnormal
		{0x8001, -0x1p-24},  // negative subnormal
		{0x03ff, 0x3ffp-24}, // largest subnormal
		{0x0200, 0x1p-15},   // subnormal power of two
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
		{0x7e00, math.Float32frombits(0x7fc00000)}, // quiet NaN
		{0xfe01, math.Float32frombits(0xffc02000)}, // negative NaN, payload kept
		{0x7c01, math.Float32frombits(0x7fc02000)}, // signalling NaN made quiet
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, F16ToF32(tc.h), bitsEqual); diff != "" {
			t.Errorf("F16ToF32(%#04x) mismatch (-want +got):\n%s", tc.h, diff)
		}
	}
}

func TestF32ToF16Table(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		want uint16
	}{
		{"+0", 0, 0x0000},
		{"-0", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3c00},
		{"minus two", -2, 0xc000},
		{"max", 65504, 0x7bff},
		{"below overflow tie", 65519.99, 0x7bff},
		{"overflow tie to even is inf", 65520, 0x7c00},
		{"overflow", 1e6, 0x7c00},
		{"negative overflow", -1e30, 0xfc00},
		{"max float32", math.MaxFloat32, 0x7c00},
		{"+inf", float32(math.Inf(1)), 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xfc00},
		{"nan", float32(math.NaN()), 0x7e00},
		{"negative nan keeps sign", math.Float32frombits(0xffc00000), 0xfe00},
		{"nan payload truncated", math.Float32frombits(0x7f802001), 0x7e01},
		{"tie at 1 rounds down to even", 1 + 0x1p-11, 0x3c00},
		{"tie above odd rounds up to even", 1 + 3*0x1p-11, 0x3c02},
		{"just above tie rounds up", 1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{"mantissa carry into exponent", 2 - 0x1p-12, 0x4000},
		{"smallest normal", 0x1p-14, 0x0400},
		{"largest subnormal", 0x3ffp-24, 0x03ff},
		{"subnormal rounding to normal", 0x3ffp-24 + 0x1p-25, 0x0400},
		{"smallest subnormal", 0x1p-24, 0x0001},
		{"half of smallest subnormal ties to zero", 0x1p-25, 0x0000},
		{"negative half smallest ties to -0", -0x1p-25, 0x8000},
		{"just above half smallest", 0x1p-25 + 0x1p-40, 0x0001},
		{"1.5 smallest subnormal ties to 2", 0x3p-25, 0x0002},
		{"2.5 smallest subnormal ties to 2", 0x5p-25, 0x0002},
		{"tiny", 1e-10, 0x0000},
		{"float32 subnormal", math.SmallestNonzeroFloat32, 0x0000},
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.f); got != tc.want {
			t.Errorf("%s: F32ToF16(%g) = %#04x, want %#04x", tc.name, tc.f, got, tc.want)
		}
	}
}

// TestF16RoundTrip checks, for every binary16 value, that converting to
// float32 and back gives the same bits (NaNs: a quiet NaN of the same sign).
func TestF16RoundTrip(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		got := F32ToF16(F16ToF32(h))
		want := h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			want = h | 0x200
		}
		if got != want {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

// TestF32ToF16Midpoints checks ties-to-even at the exact midpoint between
// every pair of adjacent finite positive halves (each midpoint is exactly
// representable as a float32), and that values just off the midpoint round
// to the nearer neighbour.
func TestF32ToF16Midpoints(t *testing.T) {
	for h := uint16(0); h < 0x7bff; h++ {
		lo, hi := float64(F16ToF32(h)), float64(F16ToF32(h+1))
		mid := float32((lo + hi) / 2)
		if float64(mid) != (lo+hi)/2 {
			t.Fatalf("midpoint of %#04x not exact", h)
		}
		even := h
		if h&1 != 0 {
			even = h + 1
		}
		if got := F32ToF16(mid); got != even {
			t.Fatalf("F32ToF16(midpoint %#04x..%#04x = %g) = %#04x, want %#04x", h, h+1, mid, got, even)
		}
		if got := F32ToF16(-mid); got != even|0x8000 {
			t.Fatalf("F32ToF16(-midpoint %g) = %#04x, want %#04x", mid, got, even|0x8000)
		}
		below := math.Nextafter32(mid, 0)
		above := math.Nextafter32(mid, float32(math.Inf(1)))
		if got := F32ToF16(below); got != h {
			t.Fatalf("F32ToF16(%g just below midpoint) = %#04x, want %#04x", below, got, h)
		}
		if got := F32ToF16(above); got != h+1 {
			t.Fatalf("F32ToF16(%g just above midpoint) = %#04x, want %#04x", above, got, h+1)
		}
	}
}

// TestF32ToF16Nearest checks on random float32 bit patterns that the result
// is a nearest binary16 value: no neighbour of it is strictly closer.
func TestF32ToF16Nearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		f := math.Float32frombits(r.Uint32())
		h := F32ToF16(f)
		switch {
		case f != f:
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("F32ToF16(NaN %#08x) = %#04x, not a NaN", math.Float32bits(f), h)
			}
			continue
		case math.Abs(float64(f)) >= 65520:
			if h&0x7fff != 0x7c00 {
				t.Fatalf("F32ToF16(%g) = %#04x, want inf", f, h)
			}
			continue
		}
		x := float64(f)
		got := float64(F16ToF32(h))
		if math.Signbit(got) != math.Signbit(x) {
			t.Fatalf("F32ToF16(%g) = %#04x has the wrong sign", f, h)
		}
		d := math.Abs(x - got)
		mag := h & 0x7fff
		for _, n := range []uint16{mag - 1, mag + 1} {
			if n >= 0x7c00 { // below zero (wrapped) or infinite
				continue
			}
			nv := math.Copysign(float64(F16ToF32(n)), x)
			if math.Abs(x-nv) < d {
				t.Fatalf("F32ToF16(%g) = %#04x (%g), but %#04x (%g) is closer", f, h, got, n, nv)
			}
		}
	}
}

func TestBF16Table(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		want uint16
	}{
		{"+0", 0, 0x0000},
		{"-0", float32(math.Copysign(0, -1)), 0x8000},
		{"one", 1, 0x3f80},
		{"minus one", -1, 0xbf80},
		{"exact", 3.140625, 0x4049},
		{"tie rounds down to even", math.Float32frombits(0x3f808000), 0x3f80},
		{"tie rounds up to even", math.Float32frombits(0x3f818000), 0x3f82},
		{"above tie rounds up", math.Float32frombits(0x3f808001), 0x3f81},
		{"max float32 overflows to inf", math.MaxFloat32, 0x7f80},
		{"+inf", float32(math.Inf(1)), 0x7f80},
		{"-inf", float32(math.Inf(-1)), 0xff80},
		{"quiet nan", math.Float32frombits(0x7fc00000), 0x7fc0},
		{"signalling nan made quiet", math.Float32frombits(0x7f800001), 0x7fc0},
		{"negative nan", math.Float32frombits(0xff810000), 0xffc1},
		{"subnormal rounds", math.Float32frombits(0x00008000), 0x0000},
		{"subnormal rounds up", math.Float32frombits(0x00018000), 0x0002},
	}
	for _, tc := range tests {
		if got := F32ToBF16(tc.f); got != tc.want {
			t.Errorf("%s: F32ToBF16(%#08x) = %#04x, want %#04x", tc.name, math.Float32bits(tc.f), got, tc.want)
		}
	}
	if diff := cmp.Diff(float32(-2.5), BF16ToF32(0xc020), bitsEqual); diff != "" {
		t.Errorf("BF16ToF32(0xc020) mismatch:\n%s", diff)
	}
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		want := h
		if f != f {
			want = h | 0x40
		}
		if got := F32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x, want %#04x", h, got, want)
		}
	}
}

func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }

func TestDequantizeRow(t *testing.T) {
	// One Q8_0 block: scale 0.5, q = -16, -15, ..., 15.
	q8 := le16(F32ToF16(0.5))
	var wantQ8 []float32
	for j := range 32 {
		q := int8(j - 16)
		q8 = append(q8, byte(q))
		wantQ8 = append(wantQ8, 0.5*float32(q))
	}
	// Two Q8_0 blocks: the first as above, the second with scale -2 and
	// q = 127, -128, then zeros.
	q8x2 := append([]byte(nil), q8...)
	q8x2 = append(q8x2, le16(F32ToF16(-2))...)
	q8x2 = append(q8x2, 0x7f, 0x80)
	q8x2 = append(q8x2, make([]byte, 30)...)
	wantQ8x2 := append(append([]float32(nil), wantQ8...), -254, 256)
	wantQ8x2 = append(wantQ8x2, make([]float32, 30)...)
	for i := 32 + 2; i < 64; i++ {
		wantQ8x2[i] = float32(math.Copysign(0, -1)) // -2 * 0
	}

	// One Q4_0 block: scale 0.25; byte j has low nibble j and high nibble
	// 15-j, so element j is 0.25*(j-8) and element 16+j is 0.25*(7-j).
	q4 := le16(F32ToF16(0.25))
	wantQ4 := make([]float32, 32)
	for j := range 16 {
		q4 = append(q4, byte(j)|byte(15-j)<<4)
		wantQ4[j] = 0.25 * float32(j-8)
		wantQ4[16+j] = 0.25 * float32(7-j)
	}

	f32 := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(-3))
	f16 := append(le16(0x3c00), le16(0xfbff)...)
	bf16 := append(le16(0x3f80), le16(0xc020)...)

	tests := []struct {
		d    DType
		src  []byte
		want []float32
	}{
		{F32, f32, []float32{1.5, -3}},
		{F16, f16, []float32{1, -65504}},
		{BF16, bf16, []float32{1, -2.5}},
		{Q8_0, q8, wantQ8},
		{Q8_0, q8x2, wantQ8x2},
		{Q4_0, q4, wantQ4},
		{F32, nil, []float32{}},
	}
	for _, tc := range tests {
		got := make([]float32, len(tc.want))
		if err := DequantizeRow(tc.d, tc.src, got); err != nil {
			t.Errorf("DequantizeRow(%v): %v", tc.d, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, bitsEqual); diff != "" {
			t.Errorf("DequantizeRow(%v) mismatch (-want +got):\n%s", tc.d, diff)
		}
	}
}

func TestDequantizeRowErrors(t *testing.T) {
	tests := []struct {
		name string
		d    DType
		src  []byte
		n    int
	}{
		{"short f32", F32, make([]byte, 7), 2},
		{"long f32", F32, make([]byte, 9), 2},
		{"q8_0 not whole block", Q8_0, make([]byte, 34), 31},
		{"q8_0 short", Q8_0, make([]byte, 33), 32},
		{"q4_0 long", Q4_0, make([]byte, 19), 32},
		{"i32 unsupported", I32, make([]byte, 8), 2},
		{"invalid dtype", DType(0), nil, 0},
	}
	for _, tc := range tests {
		dst := make([]float32, tc.n)
		for i := range dst {
			dst[i] = 42
		}
		if err := DequantizeRow(tc.d, tc.src, dst); err == nil {
			t.Errorf("%s: DequantizeRow succeeded, want error", tc.name)
		}
		for _, v := range dst {
			if v != 42 {
				t.Errorf("%s: dst modified on error", tc.name)
				break
			}
		}
	}
}

func TestQuantizeRow(t *testing.T) {
	// Q8_0 by hand: max |x| = 127 gives scale 1 and q = round(x).
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j) - 15.5 // ties round away from zero
	}
	x[31] = -127
	got := make([]byte, 34)
	if err := QuantizeRow(Q8_0, x, got); err != nil {
		t.Fatal(err)
	}
	want := le16(0x3c00)
	for j := range 31 {
		q := j - 15
		if j < 16 {
			q = j - 16
		}
		want = append(want, byte(int8(q)))
	}
	want = append(want, byte(0x81)) // -127
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("QuantizeRow(Q8_0) mismatch (-want +got):\n%s", diff)
	}

	// Q4_0 by hand: the largest-magnitude element is -8, so d = 1 and
	// q = min(15, trunc(x + 8.5)).
	x4 := make([]float32, 32)
	want4 := le16(0x3c00)
	x4[0] = -8 // q 0
	x4[1] = 7  // q 15
	x4[2] = 7.9
	x4[16] = 0.4  // q 8
	x4[17] = 0.5  // q 9
	x4[18] = -0.6 // q 7
	lo := []byte{0, 15, 15}
	hi := []byte{8, 9, 7}
	for j := range 16 {
		var l, h byte = 8, 8
		if j < 3 {
			l, h = lo[j], hi[j]
		}
		want4 = append(want4, l|h<<4)
	}
	got4 := make([]byte, 18)
	if err := QuantizeRow(Q4_0, x4, got4); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want4, got4); diff != "" {
		t.Errorf("QuantizeRow(Q4_0) mismatch (-want +got):\n%s", diff)
	}

	// All zeros quantize to a zero scale and dequantize to zeros.
	z := make([]byte, 34)
	if err := QuantizeRow(Q8_0, make([]float32, 32), z); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(make([]byte, 34), z); diff != "" {
		t.Errorf("zero Q8_0 block mismatch:\n%s", diff)
	}

	if err := QuantizeRow(Q8_0, make([]float32, 32), make([]byte, 33)); err == nil {
		t.Error("QuantizeRow with short dst succeeded")
	}
	if err := QuantizeRow(I32, make([]float32, 2), make([]byte, 8)); err == nil {
		t.Error("QuantizeRow(I32) succeeded")
	}
}

// TestQuantizeRoundTrip checks the error bound of quantize-then-dequantize on
// random rows for every float and quantized dtype.
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 256
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	for _, d := range []DType{F32, F16, BF16, Q8_0, Q4_0} {
		nb, err := d.RowBytes(n)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, nb)
		if err := QuantizeRow(d, x, buf); err != nil {
			t.Fatal(err)
		}
		y := make([]float32, n)
		if err := DequantizeRow(d, buf, y); err != nil {
			t.Fatal(err)
		}
		for b := 0; b < n; b += 32 {
			var amax float64
			for _, v := range x[b : b+32] {
				amax = max(amax, math.Abs(float64(v)))
			}
			for i := b; i < b+32; i++ {
				var tol float64
				switch d {
				case F16:
					tol = math.Abs(float64(x[i])) * 0x1p-11
				case BF16:
					tol = math.Abs(float64(x[i])) * 0x1p-8
				case Q8_0:
					tol = amax / 127 * 0.6
				case Q4_0:
					tol = amax / 8 * 1.01
				}
				if e := math.Abs(float64(x[i] - y[i])); e > tol {
					t.Errorf("%v: element %d: %g -> %g, error %g > %g", d, i, x[i], y[i], e, tol)
				}
			}
		}
	}
}

func BenchmarkF16ToF32(b *testing.B) {
	src := make([]byte, 2*4096)
	for i := range 4096 {
		binary.LittleEndian.PutUint16(src[2*i:], uint16(i*13))
	}
	dst := make([]float32, 4096)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := DequantizeRow(F16, src, dst); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDequantizeQ8_0(b *testing.B) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i%97) - 48
	}
	src := make([]byte, 4096/32*34)
	if err := QuantizeRow(Q8_0, x, src); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if err := DequantizeRow(Q8_0, src, x); err != nil {
			b.Fatal(err)
		}
	}
}
