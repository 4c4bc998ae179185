// Package vision turns encoded images into the pixels a vision tower sees,
// exactly as llama.cpp's libmtmd does for Qwen3-VL / Qwen3.5 projectors, and
// reads the tower's hyper-parameters and tensors from an mmproj GGUF.
//
// The pipeline is Decode (bytes -> 8-bit RGB, checked against a pixel limit
// before any pixel is allocated), Budget.Target (the aspect-preserving size in
// multiples of patch x merge), Resize (Pillow's bicubic and black padding) and
// Normalize (mean/std in float32, then the fp16 rounding of the patch
// convolution's im2col). Preprocess runs all four.
package vision

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/png" // registers PNG with image.DecodeConfig / image.Decode

	_ "golang.org/x/image/webp" // registers WebP
)

// RGB is an 8-bit RGB image, row-major, 3 bytes per pixel (stb_image's
// layout with 3 requested channels).
type RGB struct {
	Width, Height int
	Pix           []byte // [Height, Width, 3]
}

// At returns the R, G, B bytes of pixel (x, y).
func (m *RGB) At(x, y int) [3]byte {
	i := (y*m.Width + x) * 3
	return [3]byte{m.Pix[i], m.Pix[i+1], m.Pix[i+2]}
}

// DefaultMaxPixels is the pixel limit Decode applies when DecodeLimits
// leaves MaxPixels zero: 64 Mpx, far above what the resize keeps (4 Mpx for
// Qwen3-VL) and far below a decompression bomb.
const DefaultMaxPixels = 64 << 20

// DecodeLimits bounds what Decode accepts.
type DecodeLimits struct {
	// MaxPixels is the largest width x height accepted; 0 means
	// DefaultMaxPixels. The check runs on the header alone.
	MaxPixels int
}

// Errors Decode wraps; callers map them to a 400 naming the image.
var (
	ErrUnsupportedFormat = errors.New("unsupported image format (want PNG, JPEG, GIF or WebP)")
	ErrEmptyImage        = errors.New("image has zero width or height")
	ErrTooLarge          = errors.New("image exceeds the pixel limit")
	ErrCorrupt           = errors.New("corrupt image")
)

// Decode decodes a PNG, JPEG, GIF (first frame) or WebP image into 8-bit
// RGB the way stb_image does with 3 requested channels: alpha is dropped
// (not composited), grey is replicated, 16-bit samples keep their high
// byte. The header is read first and an image wider, taller or larger than
// the limit is refused before its pixels are allocated. It returns the image
// and the format's name ("png", "jpeg", "gif" or "webp"); every error wraps
// one of ErrUnsupportedFormat, ErrEmptyImage, ErrTooLarge or ErrCorrupt.
//
// PNG, JPEG (decodeJPEG) and GIF (decodeGIF) are bit-exact with stb_image
// 2.30; stb_image has no WebP decoder (see docs/vision.md).
func Decode(data []byte, lim DecodeLimits) (*RGB, string, error) {
	maxPixels := lim.MaxPixels
	if maxPixels <= 0 {
		maxPixels = DefaultMaxPixels
	}
	if len(data) == 0 {
		return nil, "", fmt.Errorf("decode image: %w: no bytes", ErrCorrupt)
	}
	if isJPEG(data) {
		img, err := decodeJPEG(data, maxPixels)
		return img, "jpeg", err
	}
	if isGIF(data) {
		img, err := decodeGIF(data, maxPixels)
		return img, "gif", err
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if errors.Is(err, image.ErrFormat) {
		return nil, "", fmt.Errorf("decode image: %w", ErrUnsupportedFormat)
	}
	if err != nil {
		if w, h, ok := pngSize(data); ok && (w == 0 || h == 0) {
			return nil, "png", fmt.Errorf("decode png: %w: %dx%d", ErrEmptyImage, w, h)
		}
		return nil, format, fmt.Errorf("decode %s header: %w: %v", cmp.Or(format, "image"), ErrCorrupt, err)
	}
	if err := checkSize(format, cfg.Width, cfg.Height, maxPixels); err != nil {
		return nil, format, err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, format, fmt.Errorf("decode %s: %w: %v", format, ErrCorrupt, err)
	}
	b := img.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 {
		return nil, format, fmt.Errorf("decode %s: %w: %dx%d", format, ErrEmptyImage, b.Dx(), b.Dy())
	}
	if b.Dx() > cfg.Width || b.Dy() > cfg.Height {
		return nil, format, fmt.Errorf("decode %s: %w: frame %dx%d is larger than the header's %dx%d",
			format, ErrCorrupt, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	return toRGB(img), format, nil
}

// checkSize refuses a header's width x height when it is empty or over
// maxPixels; decoders call it before allocating any pixel.
func checkSize(format string, w, h, maxPixels int) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("decode %s: %w: %dx%d", format, ErrEmptyImage, w, h)
	}
	if w > maxPixels || h > maxPixels/w {
		return fmt.Errorf("decode %s: %w: %dx%d is more than %d pixels", format, ErrTooLarge, w, h, maxPixels)
	}
	return nil
}

// toRGB copies img into 8-bit RGB, dropping alpha without compositing.
func toRGB(img image.Image) *RGB {
	b := img.Bounds()
	out := &RGB{Width: b.Dx(), Height: b.Dy(), Pix: make([]byte, 3*b.Dx()*b.Dy())}
	i := 0
	put := func(r, g, bl byte) {
		out.Pix[i], out.Pix[i+1], out.Pix[i+2] = r, g, bl
		i += 3
	}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			switch m := img.(type) {
			case *image.NRGBA:
				p := m.Pix[m.PixOffset(x, y):]
				put(p[0], p[1], p[2])
			case *image.RGBA: // Go decodes opaque truecolour PNGs to RGBA
				p := m.Pix[m.PixOffset(x, y):]
				put(p[0], p[1], p[2])
			case *image.Gray:
				v := m.Pix[m.PixOffset(x, y)]
				put(v, v, v)
			default:
				r, g, bl := rgb8(img.At(x, y))
				put(r, g, bl)
			}
		}
	}
	return out
}

// rgb8 returns the non-premultiplied colour of c in 8 bits per channel,
// keeping the high byte of 16-bit samples (stb_image's 16 -> 8 conversion).
// Palette entries and NRGBA colours are taken as stored, so a transparent
// pixel keeps its colour as stb_image does.
func rgb8(c color.Color) (r, g, b byte) {
	switch c := c.(type) {
	case color.NRGBA:
		return c.R, c.G, c.B
	case color.RGBA:
		if c.A == 0xff {
			return c.R, c.G, c.B
		}
	case color.NRGBA64:
		return byte(c.R >> 8), byte(c.G >> 8), byte(c.B >> 8)
	case color.Gray:
		return c.Y, c.Y, c.Y
	case color.Gray16:
		return byte(c.Y >> 8), byte(c.Y >> 8), byte(c.Y >> 8)
	}
	n := color.NRGBA64Model.Convert(c).(color.NRGBA64)
	return byte(n.R >> 8), byte(n.G >> 8), byte(n.B >> 8)
}

// pngSignature starts every PNG file; its IHDR chunk follows at once.
const pngSignature = "\x89PNG\r\n\x1a\n"

// pngSize reads the width and height a PNG's IHDR declares, so that a
// zero-size PNG (which Go's decoder reports as malformed) gets its own error.
func pngSize(data []byte) (w, h uint32, ok bool) {
	if len(data) < 24 || string(data[:8]) != pngSignature || string(data[12:16]) != "IHDR" {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(data[16:20]), binary.BigEndian.Uint32(data[20:24]), true
}

// Digest returns a SHA-256 of the image's size and pixels: the key under
// which a prefix cache stores the image's tokens, so the same pixels hit
// whatever their encoding and different pixels never collide in practice.
func (m *RGB) Digest() [32]byte {
	h := sha256.New()
	var size [16]byte
	binary.LittleEndian.PutUint64(size[:8], uint64(m.Width))
	binary.LittleEndian.PutUint64(size[8:], uint64(m.Height))
	h.Write(size[:])
	h.Write(m.Pix)
	var out [32]byte
	h.Sum(out[:0])
	return out
}
