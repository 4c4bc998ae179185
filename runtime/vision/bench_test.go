package vision

import (
	"fmt"
	"image"
	"testing"
)

// BenchmarkPreprocess measures decode, resize and normalisation of a
// 1024x768 PNG (kept), a 1000x700 one (resized to 992x704) and a 100x90
// one (resized and padded to 96x96).
func BenchmarkPreprocess(b *testing.B) {
	for _, size := range []image.Point{{1024, 768}, {100, 90}, {1000, 700}} {
		img := image.NewNRGBA(image.Rect(0, 0, size.X, size.Y))
		for i := range img.Pix {
			img.Pix[i] = byte(i*31 + i/7)
		}
		data := encodePNG(b, img)
		b.Run(fmt.Sprintf("%dx%d", size.X, size.Y), func(b *testing.B) {
			o := qwenOptions()
			for b.Loop() {
				if _, err := Preprocess(data, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
