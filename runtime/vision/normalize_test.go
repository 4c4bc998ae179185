package vision

import (
	"errors"
	"testing"
)

func TestPreprocessRGBRefusesMalformedImages(t *testing.T) {
	tests := []struct {
		name string
		img  *RGB
		want error
	}{
		{"zero width", &RGB{Width: 0, Height: 3}, ErrEmptyImage},
		{"negative height", &RGB{Width: 3, Height: -1}, ErrEmptyImage},
		{"too few bytes", &RGB{Width: 2, Height: 2, Pix: make([]byte, 11)}, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := PreprocessRGB(tt.img, qwenOptions()); !errors.Is(err, tt.want) {
				t.Errorf("PreprocessRGB = %v, want an error wrapping %q", err, tt.want)
			}
		})
	}
	o := qwenOptions()
	o.Budget.Factor = 0
	if _, err := PreprocessRGB(&RGB{Width: 1, Height: 1, Pix: make([]byte, 3)}, o); err == nil {
		t.Error("PreprocessRGB accepted a zero resize factor")
	}
}
