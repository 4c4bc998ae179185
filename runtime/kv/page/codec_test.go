package page

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func f32s(v ...float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func fill(n int, x float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = x
	}
	return out
}

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	sub  = float64(math.Float32frombits(1))        // smallest f32 subnormal, 2^-149
	subn = float64(math.Float32frombits(0x7FFFFF)) // largest f32 subnormal
)

func TestE4M3FromF32(t *testing.T) {
	tests := []struct {
		name string
		x    float64
		want uint8
	}{
		{"zero", 0, 0x00},
		{"negative zero keeps its sign", math.Copysign(0, -1), 0x80},
		{"one", 1, 0x38},
		{"largest finite", 448, 0x7E},
		{"negative largest finite", -448, 0xFE},
		{"just below 448 rounds to 448", 447, 0x7E},
		{"above 448 saturates", 449, 0x7E},
		{"huge saturates", 3e38, 0x7E},
		{"+Inf saturates", inf, 0x7E},
		{"-Inf saturates", -inf, 0xFE},
		{"NaN", nan, 0x7F},
		{"negative NaN", math.Copysign(nan, -1), 0xFF},
		{"tie between 1 and 1.125 goes to even 1", 1.0625, 0x38},
		{"tie between 1.125 and 1.25 goes to even 1.25", 1.1875, 0x3A},
		{"carry into the exponent", 1.96875, 0x40},
		{"smallest normal 2^-6", 0.015625, 0x08},
		{"largest subnormal 7*2^-9", 7.0 / 512, 0x07},
		{"smallest subnormal 2^-9", 1.0 / 512, 0x01},
		{"half the smallest subnormal ties to zero", 1.0 / 1024, 0x00},
		{"1.5 subnormal units ties to 2", 1.5 / 512, 0x02},
		{"just under the smallest normal rounds up to it", 7.6 / 512, 0x08},
		{"f32 subnormal flushes to zero", subn, 0x00},
		{"negative small", -0.5, 0xB0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := E4M3FromF32(float32(tt.x)); got != tt.want {
				t.Errorf("E4M3FromF32(%g) = %#02x, want %#02x", tt.x, got, tt.want)
			}
		})
	}
}

func TestE4M3EveryCodeRoundTrips(t *testing.T) {
	for b := range 256 {
		v := E4M3ToF32(uint8(b))
		if b&0x7F == 0x7F {
			if !math.IsNaN(float64(v)) {
				t.Errorf("E4M3ToF32(%#02x) = %g, want NaN", b, v)
			}
			continue
		}
		if got := E4M3FromF32(v); got != uint8(b) {
			t.Errorf("E4M3FromF32(E4M3ToF32(%#02x) = %g) = %#02x", b, v, got)
		}
	}
	if got := E4M3ToF32(0x7E); got != 448 {
		t.Errorf("E4M3ToF32(0x7E) = %g, want 448", got)
	}
	if got := E4M3ToF32(0x01); got != 1.0/512 {
		t.Errorf("E4M3ToF32(0x01) = %g, want 2^-9", got)
	}
}

// TestRoundTrip pins what each format decodes edge values to (zeros with
// their sign).
func TestRoundTrip(t *testing.T) {
	negZero := math.Copysign(0, -1)
	f16max, bf16max := 65504.0, float64(math.Float32frombits(0x7F7F0000))
	tests := []struct {
		name   string
		format string
		in     []float32
		want   []float32
	}{
		{"f32 is exact", "f32", f32s(0, negZero, sub, 1e38, -3.5, inf, nan), f32s(0, negZero, sub, 1e38, -3.5, inf, nan)},
		{"f16 keeps exact values", "f16", f32s(0, 1, -2.5, f16max, 1.0/(1<<24)), f32s(0, 1, -2.5, f16max, 1.0/(1<<24))},
		{"f16 overflows to Inf", "f16", f32s(65520, -1e9, inf), f32s(inf, -inf, inf)},
		{"f16 flushes below half its smallest subnormal", "f16", f32s(1.0/(1<<26), sub), f32s(0, 0)},
		{"f16 keeps NaN", "f16", f32s(nan, 1), f32s(nan, 1)},
		{"f16 rounds ties to even", "f16", f32s(1+1.0/2048, 1+3.0/2048), f32s(1, 1+4.0/2048)},
		{"bf16 keeps exact values", "bf16", f32s(0, 1, -2.5, bf16max, 1.0/(1<<126)), f32s(0, 1, -2.5, bf16max, 1.0/(1<<126))},
		{"bf16 rounds ties to even", "bf16", f32s(1+1.0/256, 1+3.0/256), f32s(1, 1+4.0/256)},
		{"bf16 overflows to Inf", "bf16", f32s(math.MaxFloat32, inf), f32s(inf, inf)},
		{"bf16 keeps NaN", "bf16", f32s(nan), f32s(nan)},
		{"int8 zeros", "int8-g64", f32s(0, 0, 0, 0), f32s(0, 0, 0, 0)},
		{"int8 scale 1 rounds half away from zero", "int8-g64", f32s(127, -63.5, 1, 0.5, -0.4), f32s(127, -64, 1, 1, 0)},
		{"int8 negative max", "int8-g64", f32s(-254, 3, 1), f32s(-254, 4, 2)},
		{"int8 NaN poisons its group", "int8-g64", f32s(1, nan, 2), f32s(nan, nan, nan)},
		{"int8 Inf poisons its group", "int8-g64", f32s(1, -inf), f32s(nan, nan)},
		{"int8 scale underflows to zero", "int8-g64", f32s(sub, -sub), f32s(0, 0)},
		{"int8 groups of 64 are independent", "int8-g64",
			append(f32s(fill(64, 127)...), f32s(254, 3)...), append(f32s(fill(64, 127)...), f32s(254, 4)...)},
		{"int8 NaN poisons only its own group", "int8-g64",
			append(f32s(fill(64, 1)...), f32s(nan)...), append(f32s(fill(64, 1)...), f32s(nan)...)},
		{"fp8 zeros", "fp8-e4m3-row256", f32s(0, 0), f32s(0, 0)},
		{"fp8 scale 1 keeps ±448", "fp8-e4m3-row256", f32s(448, -448, 1, 0), f32s(448, -448, 1, 0)},
		{"fp8 scale 1 rounds to 3 mantissa bits", "fp8-e4m3-row256", f32s(448, 1.0625, 1.1875, 100), f32s(448, 1, 1.25, 96)},
		{"fp8 scale 1 subnormals", "fp8-e4m3-row256", f32s(448, 1.0/512, 1.0/1024, 1.5/512), f32s(448, 1.0/512, 0, 2.0/512)},
		{"fp8 scale 2", "fp8-e4m3-row256", f32s(-896, 3, 0.25), f32s(-896, 3, 0.25)},
		{"fp8 NaN poisons its group", "fp8-e4m3-row256", f32s(nan, 1), f32s(nan, nan)},
		{"fp8 Inf poisons its group", "fp8-e4m3-row256", f32s(2, inf), f32s(nan, nan)},
		{"fp8 huge values keep their scale", "fp8-e4m3-row256", f32s(448e30, -224e30), f32s(448e30, -224e30)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := roundTrip(t, tt.format, tt.in)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateNaNs()); diff != "" {
				t.Errorf("decode(encode(%v)) (-want +got):\n%s", tt.in, diff)
			}
			for i, w := range tt.want {
				if w == 0 && i < len(got) && math.Signbit(float64(w)) != math.Signbit(float64(got[i])) {
					t.Errorf("value %d: decoded %g, want %g (sign of zero)", i, got[i], w)
				}
			}
		})
	}
}

func roundTrip(t testing.TB, format string, in []float32) []float32 {
	t.Helper()
	c, err := NewCodec(format, len(in))
	if err != nil {
		t.Fatal(err)
	}
	row := make([]byte, c.RowBytes())
	c.Encode(row, in)
	out := make([]float32, len(in))
	c.Decode(out, row, 0)
	return out
}

func TestRowLayout(t *testing.T) {
	tests := []struct {
		format string
		n      int
		bytes  int
	}{
		{"f32", 8, 32},
		{"f16", 8, 16},
		{"bf16", 8, 16},
		{"int8-g64", 32, 32 + 4},   // a row shorter than the group is one group
		{"int8-g64", 64, 64 + 4},   // one full group
		{"int8-g64", 70, 70 + 2*4}, // the last group is short
		{"int8-g64", 1024, 1024 + 16*4},
		{"fp8-e4m3-row256", 32, 32 + 4},
		{"fp8-e4m3-row256", 1024, 1024 + 4*4},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s row of %d", tt.format, tt.n), func(t *testing.T) {
			c, err := NewCodec(tt.format, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.RowBytes(); got != tt.bytes {
				t.Errorf("RowBytes() = %d, want %d", got, tt.bytes)
			}
		})
	}
	c, _ := NewCodec("int8-g64", 70)
	row := make([]byte, c.RowBytes())
	c.Encode(row, append(f32s(fill(64, 127)...), f32s(fill(6, -254)...)...))
	scales := []float32{math.Float32frombits(binary.LittleEndian.Uint32(row[70:])), math.Float32frombits(binary.LittleEndian.Uint32(row[74:]))}
	if diff := cmp.Diff([]float32{1, 2}, scales); diff != "" {
		t.Errorf("scales after the 70 values (-want +got):\n%s", diff)
	}
	if row[0] != 127 || int8(row[64]) != -127 {
		t.Errorf("values = %d, %d, want 127, -127", row[0], int8(row[64]))
	}
}

func TestNewCodecErrors(t *testing.T) {
	for _, tt := range []struct {
		format string
		n      int
	}{{"int4", 8}, {"f16", 0}} {
		if _, err := NewCodec(tt.format, tt.n); err == nil {
			t.Errorf("NewCodec(%q, %d) succeeded", tt.format, tt.n)
		}
	}
}

// TestDecodeRange checks that decoding a slice of a row (one attention
// head) gives the same values as decoding the whole row, across group edges.
func TestDecodeRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 200)
	for i := range src {
		src[i] = float32(r.NormFloat64()) * float32(1+i/50)
	}
	for _, f := range FormatNames() {
		c, _ := NewCodec(f, len(src))
		row := make([]byte, c.RowBytes())
		c.Encode(row, src)
		all := make([]float32, len(src))
		c.Decode(all, row, 0)
		for _, span := range [][2]int{{0, 8}, {60, 70}, {64, 128}, {120, 200}, {199, 200}} {
			part := make([]float32, span[1]-span[0])
			c.Decode(part, row, span[0])
			if diff := cmp.Diff(all[span[0]:span[1]], part); diff != "" {
				t.Errorf("%s: Decode [%d,%d) (-whole row +range):\n%s", f, span[0], span[1], diff)
			}
		}
	}
}

// TestEncodeSlice checks that encoding a row slice by slice (KV heads of
// 128 or of 64 where the groups allow, the last one short, in reverse
// order, into a row holding garbage) stores exactly the bytes of one Encode, and which slices
// SliceAligned accepts.
func TestEncodeSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]float32, 320)
	for i := range src {
		src[i] = float32(r.NormFloat64()) * float32(1+i/40)
	}
	src[70] = float32(inf) // one poisoned group in the grouped formats
	for _, f := range FormatNames() {
		c, _ := NewCodec(f, len(src))
		want := make([]byte, c.RowBytes())
		c.Encode(want, src)
		for _, w := range []int{128, 64, len(src)} {
			if !c.SliceAligned(0, w) {
				continue // fp8-e4m3-row256: one group of 256
			}
			got := make([]byte, c.RowBytes())
			for i := range got {
				got[i] = byte(r.Uint32())
			}
			for lo := (len(src) - 1) / w * w; lo >= 0; lo -= w {
				hi := min(lo+w, len(src))
				c.EncodeSlice(got, src[lo:hi], lo)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: slices of %d (-Encode +EncodeSlice):\n%s", f, w, diff)
			}
		}
	}
	c8, _ := NewCodec(Int8G64.Name, 200)
	c16, _ := NewCodec(F16.Name, 200)
	for _, tc := range []struct {
		lo, n     int
		int8, f16 bool
	}{
		{0, 64, true, true}, {64, 128, true, true}, {192, 8, true, true}, {0, 200, true, true},
		{32, 32, false, true}, {0, 40, false, true}, {128, 8, false, true}, {190, 20, false, false}, {-1, 2, false, false},
	} {
		if got := [2]bool{c8.SliceAligned(tc.lo, tc.n), c16.SliceAligned(tc.lo, tc.n)}; got != [2]bool{tc.int8, tc.f16} {
			t.Errorf("SliceAligned(%d, %d) int8-g64, f16 = %v, want %v", tc.lo, tc.n, got, [2]bool{tc.int8, tc.f16})
		}
	}
}

// TestDecodeRows checks that decoding one slice of several consecutive rows
// in one call equals decoding each row's slice.
func TestDecodeRows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n, rows = 136, 3
	for _, f := range FormatNames() {
		c, _ := NewCodec(f, n)
		page := make([]byte, rows*c.RowBytes())
		for i := range rows {
			src := make([]float32, n)
			for j := range src {
				src[j] = float32(r.NormFloat64() * float64(1+j))
			}
			c.Encode(page[i*c.RowBytes():(i+1)*c.RowBytes()], src)
		}
		for _, span := range [][2]int{{0, 8}, {56, 72}, {64, 128}, {128, 136}, {0, 136}} {
			w := span[1] - span[0]
			want := make([]float32, rows*w)
			for i := range rows {
				c.Decode(want[i*w:(i+1)*w], page[i*c.RowBytes():(i+1)*c.RowBytes()], span[0])
			}
			got := make([]float32, rows*w)
			c.DecodeRows(got, page, span[0], w)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: DecodeRows [%d,%d) (-Decode +DecodeRows):\n%s", f, span[0], span[1], diff)
			}
		}
	}
}

// checkBound reports the first value of row that decodes outside the error
// bound of its format, or "" when all are within it. Groups with a NaN or
// ±Inf must decode to NaN.
func checkBound(format string, in, out []float32) string {
	f, _ := LookupFormat(format)
	g := f.Group
	if g == 0 {
		g = len(in)
	}
	const slack = 1e-42 // subnormal scales lose relative precision
	for lo := 0; lo < len(in); lo += g {
		hi := min(lo+g, len(in))
		var amax float64
		finite := true
		for _, x := range in[lo:hi] {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				finite = false
			}
			amax = max(amax, math.Abs(float64(x)))
		}
		for i := lo; i < hi; i++ {
			x, y := float64(in[i]), float64(out[i])
			bad := false
			switch format {
			case "f32":
				bad = math.Float32bits(in[i]) != math.Float32bits(out[i])
			case "f16", "bf16":
				switch {
				case math.IsNaN(x):
					bad = !math.IsNaN(y)
				case math.IsInf(y, 0) && !math.IsInf(x, 0):
					limit := 65520.0
					if format == "bf16" {
						limit = float64(math.Float32frombits(0x7F7F8000))
					}
					bad = math.Abs(x) < limit || math.Signbit(x) != math.Signbit(y)
				default:
					rel, abs := 1.0/2048, 1.0/(1<<25)
					if format == "bf16" {
						rel, abs = 1.0/256, 1.0/(1<<62)/(1<<62)/(1<<10) // half the bf16 subnormal spacing 2^-133
					}
					bad = math.Abs(x-y) > max(math.Abs(x)*rel, abs)
				}
			case "int8-g64":
				if !finite {
					bad = !math.IsNaN(y)
					break
				}
				d := float64(float32(amax) / 127)
				bad = math.Abs(x-y) > d/2*(1+1e-6)+amax*1.2e-7+slack
			case "fp8-e4m3-row256":
				if !finite {
					bad = !math.IsNaN(y)
					break
				}
				d := float64(float32(amax) / 448)
				bad = math.Abs(x-y) > max(math.Abs(x)/16, d/1024)*(1+1e-6)+amax*2.4e-7+slack
			}
			if bad {
				return fmt.Sprintf("value %d: %g decodes to %g (group max %g)", i, x, y, amax)
			}
		}
	}
	return ""
}

// TestBounds round-trips random rows of several magnitudes through every
// format and checks each value against its format's error bound.
func TestBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range FormatNames() {
		for _, n := range []int{1, 8, 64, 100, 256, 300} {
			for _, mag := range []float64{1e-41, 1e-30, 1, 1e4, 1e30} {
				in := make([]float32, n)
				for i := range in {
					in[i] = float32(r.NormFloat64() * mag)
				}
				if msg := checkBound(f, in, roundTrip(t, f, in)); msg != "" {
					t.Errorf("%s, %d values of magnitude %g: %s", f, n, mag, msg)
				}
			}
		}
	}
}

// FuzzCodecs reads float32 values from the fuzzer's bytes and checks that
// every format round-trips them within its error bound, deterministically.
func FuzzCodecs(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f})
	f.Add(binary.LittleEndian.AppendUint32(nil, 0x7F7FFFFF))
	f.Add(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 1), 0x43E00000))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := len(data) / 4
		if n == 0 || n > 600 {
			return
		}
		in := make([]float32, n)
		for i := range in {
			in[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		for _, format := range FormatNames() {
			out := roundTrip(t, format, in)
			if msg := checkBound(format, in, out); msg != "" {
				t.Fatalf("%s: %s", format, msg)
			}
			again := roundTrip(t, format, in)
			if diff := cmp.Diff(out, again, cmpopts.EquateNaNs()); diff != "" {
				t.Fatalf("%s: two encodings differ:\n%s", format, diff)
			}
		}
	})
}
