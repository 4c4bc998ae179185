package vision

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
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

// BenchmarkDecodeJPEG measures Decode (stb_image's arithmetic, to RGB)
// beside Go's image/jpeg (to YCbCr planes, and to RGB as Decode did before)
// on the same 1024x768 JPEG, baseline 4:2:0 at quality 90.
func BenchmarkDecodeJPEG(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 1024, 768))
	for y := range 768 {
		for x := range 1024 {
			i := img.PixOffset(x, y)
			img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = byte(x^y), byte(x*y>>8), byte(x+2*y), 255
		}
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.Run("vision.Decode", func(b *testing.B) {
		b.SetBytes(1024 * 768)
		for b.Loop() {
			if _, _, err := Decode(data, DecodeLimits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image/jpeg", func(b *testing.B) { // YCbCr planes only
		b.SetBytes(1024 * 768)
		for b.Loop() {
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image/jpeg+toRGB", func(b *testing.B) { // Decode's JPEG path before decodeJPEG
		b.SetBytes(1024 * 768)
		for b.Loop() {
			img, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			toRGB(img)
		}
	})
}
