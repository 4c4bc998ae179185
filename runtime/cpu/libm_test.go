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
