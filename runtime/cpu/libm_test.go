package cpu

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// TestSinCosF32 checks sinf32 and cosf32 against glibc's own results
// (testdata/sincosf.txt, from ctypes calls into libm.so.6), RoPE angles
// where glibc is not correctly rounded among them.
func TestSinCosF32(t *testing.T) {
	f, err := os.Open("testdata/sincosf.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n, offRounding := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var y, c, s uint32
		if _, err := fmt.Sscanf(line, "%x %x %x", &y, &c, &s); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		x := math.Float32frombits(y)
		if got := math.Float32bits(cosf32(x)); got != c {
			t.Errorf("cosf32(%g) = %#x, glibc %#x", x, got, c)
		}
		if got := math.Float32bits(sinf32(x)); got != s {
			t.Errorf("sinf32(%g) = %#x, glibc %#x", x, got, s)
		}
		if math.Float32bits(float32(math.Cos(float64(x)))) != c || math.Float32bits(float32(math.Sin(float64(x)))) != s {
			offRounding++
		}
		n++
	}
	if n < 200 || offRounding < 100 {
		t.Fatalf("%d values, %d of them off correct rounding: the table does not test what it should", n, offRounding)
	}
}

// TestExpfV checks expfV and siluV against ggml's own AVX-512 ggml_v_expf
// and ggml_v_silu (testdata/expfv.txt, from that code built with gcc),
// out to where they saturate.
func TestExpfV(t *testing.T) {
	f, err := os.Open("testdata/expfv.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		var x, e, s uint32
		if _, err := fmt.Sscanf(line, "%x %x %x", &x, &e, &s); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		v := math.Float32frombits(x)
		if got := math.Float32bits(expfV(v)); got != e {
			t.Errorf("expfV(%g) = %#x, ggml %#x", v, got, e)
		}
		if got := math.Float32bits(siluV(v)); got != s && !(got&0x7fffffff > 0x7f800000 && s&0x7fffffff > 0x7f800000) {
			t.Errorf("siluV(%g) = %#x, ggml %#x", v, got, s)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("%d values", n)
	}
}
