package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// encodePNG returns img as PNG bytes.
func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withPNGSize returns a copy of a PNG whose IHDR declares w x h, with the
// chunk's CRC fixed so the header itself is valid.
func withPNGSize(t testing.TB, data []byte, w, h uint32) []byte {
	t.Helper()
	out := bytes.Clone(data)
	binary.BigEndian.PutUint32(out[16:], w)
	binary.BigEndian.PutUint32(out[20:], h)
	binary.BigEndian.PutUint32(out[29:], crc32.ChecksumIEEE(out[12:29]))
	return out
}

func smallPNG(t testing.TB) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 4, 3))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	return encodePNG(t, img)
}

// tinyWebP is a 1x1 lossless WebP (VP8L) image.
const tinyWebP = "RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"

func TestDecodeWebP(t *testing.T) {
	img, format, err := Decode([]byte(tinyWebP), DecodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([3]any{"webp", 1, 1}, [3]any{format, img.Width, img.Height}); diff != "" {
		t.Errorf("format, width, height (-want +got):\n%s", diff)
	}
}

func TestDecodeRefusesBadImages(t *testing.T) {
	ok := smallPNG(t)
	gifBomb := []byte("GIF89a\xff\xff\xff\xff\x00\x00\x00;")
	tests := []struct {
		name string
		data []byte
		lim  DecodeLimits
		want error
	}{
		{"no bytes", nil, DecodeLimits{}, ErrCorrupt},
		{"text is not an image", []byte("hello, this is not an image"), DecodeLimits{}, ErrUnsupportedFormat},
		{"BMP is not supported", append([]byte("BM"), make([]byte, 60)...), DecodeLimits{}, ErrUnsupportedFormat},
		{"a PNG signature followed by garbage", append([]byte(pngSignature), "garbage garbage garbage"...), DecodeLimits{}, ErrCorrupt},
		{"a truncated PNG", ok[:len(ok)-20], DecodeLimits{}, ErrCorrupt},
		{"a truncated WebP", []byte(tinyWebP[:len(tinyWebP)-6]), DecodeLimits{}, ErrCorrupt},
		{"a PNG with a bad pixel CRC", corruptLastChunk(ok), DecodeLimits{}, ErrCorrupt},
		{"a zero-width PNG", withPNGSize(t, ok, 0, 3), DecodeLimits{}, ErrEmptyImage},
		{"a zero-height PNG", withPNGSize(t, ok, 4, 0), DecodeLimits{}, ErrEmptyImage},
		{"a 20000x20000 PNG header", withPNGSize(t, ok, 20000, 20000), DecodeLimits{}, ErrTooLarge},
		{"a 2^31-1 wide PNG header", withPNGSize(t, ok, 1<<31-1, 1), DecodeLimits{}, ErrTooLarge},
		{"a 65535x65535 GIF screen", gifBomb, DecodeLimits{}, ErrTooLarge},
		{"a 4x3 PNG over a 10-pixel limit", ok, DecodeLimits{MaxPixels: 10}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, _, err := Decode(tt.data, tt.lim)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, %v; want an error wrapping %q", img, err, tt.want)
			}
		})
	}
}

// corruptLastChunk flips a byte of the last IDAT's payload.
func corruptLastChunk(data []byte) []byte {
	out := bytes.Clone(data)
	i := bytes.LastIndex(out, []byte("IDAT"))
	out[i+6] ^= 0xff
	return out
}

// TestDecodeBombAllocatesLittle checks that refusing a PNG whose header
// declares 20000x20000 (1.2 GB of RGB), a JPEG whose frame header does and a
// GIF with a 60000x60000 screen allocates a few kilobytes at most.
func TestDecodeBombAllocatesLittle(t *testing.T) {
	jpg := readTestdata(t, "video-001.q50.420.jpeg")
	sof := jpegSegment(t, jpg, jpegSOF0)
	bombs := map[string][]byte{
		"png":  withPNGSize(t, smallPNG(t), 20000, 20000),
		"jpeg": patched(jpg, sof+5, 20000>>8, 20000&0xff, 20000>>8, 20000&0xff),
		"gif":  patched(readTestdata(t, "gif.interlaced.9x11.gif"), 6, 0x60, 0xea, 0x60, 0xea),
	}
	for format, bomb := range bombs {
		t.Run(format, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			const runs = 10
			for range runs {
				if _, _, err := Decode(bomb, DecodeLimits{}); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("Decode(bomb) = %v, want ErrTooLarge", err)
				}
			}
			runtime.ReadMemStats(&after)
			if perRun := (after.TotalAlloc - before.TotalAlloc) / runs; perRun > 64<<10 {
				t.Errorf("refusing the bomb allocated %d bytes per call, want under 64 KiB", perRun)
			}
		})
	}
}

// TestDecodeColourModels checks stb_image's forced-RGB conversion: alpha is
// dropped without compositing, grey is replicated, 16-bit keeps the high
// byte, palettes are looked up, and GIF gives its first frame.
func TestDecodeColourModels(t *testing.T) {
	want := []byte{10, 20, 30, 200, 100, 0}
	rect := image.Rect(0, 0, 2, 1)

	nrgba := image.NewNRGBA(rect)
	copy(nrgba.Pix, []byte{10, 20, 30, 0, 200, 100, 0, 128})
	rgb := image.NewRGBA(rect)
	copy(rgb.Pix, []byte{10, 20, 30, 255, 200, 100, 0, 255})
	nrgba64 := image.NewNRGBA64(rect)
	nrgba64.SetNRGBA64(0, 0, color.NRGBA64{R: 10<<8 | 0xff, G: 20 << 8, B: 30<<8 | 0x80, A: 0x1234})
	nrgba64.SetNRGBA64(1, 0, color.NRGBA64{R: 200 << 8, G: 100 << 8, B: 0, A: 0xffff})
	pal := image.NewPaletted(rect, color.Palette{color.NRGBA{10, 20, 30, 7}, color.NRGBA{200, 100, 0, 255}})
	pal.Pix = []byte{0, 1}
	gray := image.NewGray16(rect)
	gray.SetGray16(0, 0, color.Gray16{Y: 10<<8 | 0xff})
	gray.SetGray16(1, 0, color.Gray16{Y: 200 << 8})

	var gifBytes bytes.Buffer
	frame := func(idx byte) *image.Paletted {
		p := image.NewPaletted(rect, color.Palette{color.RGBA{10, 20, 30, 255}, color.RGBA{200, 100, 0, 255}, color.RGBA{1, 2, 3, 255}})
		p.Pix = []byte{0, idx}
		return p
	}
	if err := gif.EncodeAll(&gifBytes, &gif.GIF{Image: []*image.Paletted{frame(1), frame(2)}, Delay: []int{0, 0}}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		data []byte
		want []byte
	}{
		{"NRGBA keeps the colour of transparent pixels", encodePNG(t, nrgba), want},
		{"opaque RGBA", encodePNG(t, rgb), want},
		{"16-bit NRGBA keeps the high byte", encodePNG(t, nrgba64), want},
		{"a palette with transparency", encodePNG(t, pal), want},
		{"16-bit grey is replicated", encodePNG(t, gray), []byte{10, 10, 10, 200, 200, 200}},
		{"GIF gives its first frame", gifBytes.Bytes(), want},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, _, err := Decode(tt.data, DecodeLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&RGB{Width: 2, Height: 1, Pix: tt.want}, img); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
		})
	}
}

// fuzzOptions keeps fuzzed images small so each input runs fast.
func fuzzOptions() Options {
	o := qwenOptions()
	o.Limits.MaxPixels = 1 << 16
	return o
}

// FuzzPreprocess feeds arbitrary bytes through Decode and Preprocess: they
// must return an error or an image that satisfies the budget, never panic.
func FuzzPreprocess(f *testing.F) {
	f.Add(smallPNG(f))
	f.Add(withPNGSize(f, smallPNG(f), 20000, 20000))
	f.Add(withPNGSize(f, smallPNG(f), 0, 3))
	f.Add([]byte("GIF89a\x02\x00\x01\x00\x00\x00\x00;"))
	f.Add([]byte(tinyWebP))
	f.Add([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00"))
	if names, err := filepath.Glob(filepath.Join(goldenDir, "images", "*.png")); err == nil {
		for _, n := range names {
			if data, err := os.ReadFile(n); err == nil {
				f.Add(data)
			}
		}
	}
	o := fuzzOptions()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Preprocess(data, o)
		if err != nil {
			return
		}
		w, h := p.Image.Width, p.Image.Height
		if w%32 != 0 || h%32 != 0 || w*h < o.Budget.MinPixels || w*h > o.Budget.MaxPixels {
			t.Fatalf("%dx%d source gave %dx%d outside the budget", p.SourceWidth, p.SourceHeight, w, h)
		}
		if len(p.Image.Pix) != 3*w*h || len(p.Pixels) != 3*w*h || p.Grid.Tokens()*32*32 != w*h {
			t.Fatalf("inconsistent result: %dx%d, %d bytes, %d floats, grid %+v", w, h, len(p.Image.Pix), len(p.Pixels), p.Grid)
		}
	})
}

// TestDigestKeysPixelsNotBytes checks that the same pixels in two encodings
// share a digest and that one changed pixel or a transposed size does not.
func TestDigestKeysPixelsNotBytes(t *testing.T) {
	img := image.NewNRGBA(image.Rect(0, 0, 4, 3))
	for i := range img.Pix {
		img.Pix[i] = byte(i*7) | 1
	}
	var fast bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&fast, img); err != nil {
		t.Fatal(err)
	}
	best := encodePNG(t, img)
	if bytes.Equal(fast.Bytes(), best) {
		t.Fatal("the two encodings are identical; the test needs different bytes")
	}
	digest := func(data []byte) [32]byte {
		m, _, err := Decode(data, DecodeLimits{})
		if err != nil {
			t.Fatal(err)
		}
		return m.Digest()
	}
	if digest(fast.Bytes()) != digest(best) {
		t.Error("the same pixels in two PNG encodings have different digests")
	}
	changed := image.NewNRGBA(img.Rect)
	copy(changed.Pix, img.Pix)
	changed.Pix[5]++
	if digest(encodePNG(t, changed)) == digest(best) {
		t.Error("a changed pixel kept the digest")
	}
	m := &RGB{Width: 3, Height: 4, Pix: bytes.Clone(toRGB(img).Pix)}
	if m.Digest() == toRGB(img).Digest() {
		t.Error("the same bytes as 3x4 and 4x3 share a digest")
	}
}

// TestDecodeGIFFirstFrameOnItsScreen checks stb_image's canvas (as
// tools/stbdump prints it): a first frame smaller than the logical screen is
// placed at its offset, its transparent pixels stay black, and the pixels it
// does not reach take the global palette's background colour with red and
// blue swapped.
func TestDecodeGIFFirstFrameOnItsScreen(t *testing.T) {
	pal := color.Palette{color.RGBA{0, 0, 0, 0}, color.RGBA{9, 8, 7, 255}, color.RGBA{200, 100, 0, 255}}
	frame := image.NewPaletted(image.Rect(1, 0, 3, 1), pal)
	frame.Pix = []byte{2, 0} // (1,0) drawn, (2,0) transparent
	second := image.NewPaletted(image.Rect(0, 0, 4, 2), pal)
	var b bytes.Buffer
	err := gif.EncodeAll(&b, &gif.GIF{
		Image: []*image.Paletted{frame, second}, Delay: []int{0, 0},
		Config:          image.Config{ColorModel: pal, Width: 4, Height: 2},
		BackgroundIndex: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Decode(b.Bytes(), DecodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	bg := []byte{7, 8, 9}
	var want []byte
	for i := range 8 {
		switch i {
		case 1:
			want = append(want, 200, 100, 0)
		case 2:
			want = append(want, 0, 0, 0)
		default:
			want = append(want, bg...)
		}
	}
	if diff := cmp.Diff(&RGB{Width: 4, Height: 2, Pix: want}, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}
