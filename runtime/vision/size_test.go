package vision

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestQwen3VLBudgetTarget(t *testing.T) {
	b := Qwen3VLBudget(16, 2)
	tests := []struct {
		w, h         int
		wantW, wantH int
	}{
		{64, 64, 96, 96},         // below the minimum: scaled up, sides rounded up
		{160, 64, 160, 64},       // already multiples of 32 within the budget
		{75, 100, 96, 128},       // tall, below the minimum
		{100, 90, 96, 96},        // nearest multiples
		{80, 80, 96, 96},         // 2.5 rounds half away from zero (C roundf), not to even
		{1, 10000, 32, 10016},    // a side never drops below 32; 312.5 rounds up
		{1, 1, 96, 96},           // one pixel still gives 8 tokens or more
		{448, 448, 448, 448},     // Qwen's canonical 448
		{2048, 2048, 2048, 2048}, // exactly the maximum
		{2049, 2049, 2048, 2048}, // above it: scaled down, sides rounded down
		{4000, 3000, 2336, 1760}, // a photo
		{3000, 20, 3008, 32},
		{47, 17, 160, 64},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%dx%d", tt.w, tt.h), func(t *testing.T) {
			w, h := b.Target(tt.w, tt.h)
			if diff := cmp.Diff([2]int{tt.wantW, tt.wantH}, [2]int{w, h}); diff != "" {
				t.Errorf("Target (-want +got):\n%s", diff)
			}
			if w%32 != 0 || h%32 != 0 || w*h > b.MaxPixels {
				t.Errorf("Target %dx%d breaks the budget %+v", w, h, b)
			}
		})
	}
}

func TestFitPadsWithBlackAtTheCentre(t *testing.T) {
	src := &RGB{Width: 100, Height: 90, Pix: make([]byte, 3*100*90)}
	for i := range src.Pix {
		src.Pix[i] = 200
	}
	got := Fit(src, 96, 96)
	// scale 0.96 -> 96x87 pasted at row 4: rows 0-3 and 91-95 stay black.
	var blackRows []int
	for y := range 96 {
		black := true
		for x := range 96 {
			if got.At(x, y) != [3]byte{} {
				black = false
			}
		}
		if black {
			blackRows = append(blackRows, y)
		}
	}
	want := []int{0, 1, 2, 3, 91, 92, 93, 94, 95}
	if diff := cmp.Diff(want, blackRows); diff != "" {
		t.Errorf("black rows (-want +got):\n%s", diff)
	}
	if px := got.At(50, 50); px != [3]byte{200, 200, 200} {
		t.Errorf("a uniform image resampled to %v, want 200s", px)
	}
}
