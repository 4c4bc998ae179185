package vision

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stbDir holds JPEG and GIF files with the hashes of stb_image's pixels.
const stbDir = "testdata/stb"

// stbGolden reads testdata/stb/stb.sha256: for each file, the size and the
// SHA-256 of the RGB bytes llama.cpp's stb_image decodes (just stb-golden).
func stbGolden(t testing.TB) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(stbDir, "stb.sha256"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, sizeAndHash, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("bad stb.sha256 line %q", sc.Text())
		}
		want[name] = sizeAndHash
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return want
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stbDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestDecodeMatchesStbImage decodes every JPEG and GIF variant in
// testdata/stb and compares its pixels bit for bit (by SHA-256) with
// stb_image's.
func TestDecodeMatchesStbImage(t *testing.T) {
	golden := stbGolden(t)
	tests := []struct{ file, variant string }{
		{"video-001.q50.444.jpeg", "baseline 4:4:4"},
		{"video-001.q50.422.jpeg", "baseline 4:2:2 (horizontal triangle filter)"},
		{"video-001.q50.440.jpeg", "baseline 4:4:0 (vertical triangle filter)"},
		{"video-001.q50.420.jpeg", "baseline 4:2:0 (2x2 triangle filter)"},
		{"video-001.q50.411.jpeg", "baseline 4:1:1 (replication)"},
		{"video-001.q50.410.jpeg", "baseline 4:1:0 (replication)"},
		{"video-001.221212.jpeg", "baseline, luma subsampled against chroma"},
		{"video-001.q50.444.progressive.jpeg", "progressive 4:4:4"},
		{"video-001.q50.422.progressive.jpeg", "progressive 4:2:2"},
		{"video-001.q50.440.progressive.jpeg", "progressive 4:4:0"},
		{"video-001.q50.420.progressive.jpeg", "progressive 4:2:0"},
		{"video-001.q50.411.progressive.jpeg", "progressive 4:1:1"},
		{"video-001.q50.410.progressive.jpeg", "progressive 4:1:0"},
		{"video-001.progressive.jpeg", "progressive with successive approximation"},
		{"video-001.progressive.truncated.jpeg", "progressive, scans stop early before EOI"},
		{"video-001.separate.dc.progression.progressive.jpeg", "progressive, one DC scan per component"},
		{"video-001.restart2.jpeg", "restart markers"},
		{"video-001.rgb.jpeg", "RGB components (Adobe transform 0)"},
		{"video-001.cmyk.jpeg", "Adobe CMYK"},
		{"video-005.gray.q50.jpeg", "greyscale"},
		{"video-005.gray.q50.progressive.jpeg", "greyscale progressive"},
		{"video-005.gray.q50.2x2.progressive.jpeg", "greyscale with 2x2 sampling factors"},
		{"go.420.exif-orientation-6.12x5.jpeg", "EXIF orientation 6 is ignored, as stb_image does"},
		{"gif.rect-transparent-bg.7x5.gif", "GIF frame inside its screen, transparency, background swapped to BGR"},
		{"gif.interlaced.9x11.gif", "GIF interlaced rows"},
		{"gif.local-palette.6x6.gif", "GIF local palette with a transparent entry"},
		{"gif.short-data.5x4.gif", "GIF frame taller than its data"},
	}
	for _, size := range []string{"1x1", "1x9", "2x2", "17x1", "33x17"} {
		tests = append(tests,
			struct{ file, variant string }{"go.420.q75." + size + ".jpeg", "4:2:0 " + size},
			struct{ file, variant string }{"go.420.q100." + size + ".jpeg", "4:2:0 quality 100 " + size},
			struct{ file, variant string }{"go.gray.q90." + size + ".jpeg", "greyscale " + size})
	}
	if len(tests) != len(golden) {
		t.Errorf("%d cases for %d golden files", len(tests), len(golden))
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			want, ok := golden[tt.file]
			if !ok {
				t.Fatalf("%s has no stb_image hash", tt.file)
			}
			img, format, err := Decode(readTestdata(t, tt.file), DecodeLimits{})
			if err != nil {
				t.Fatal(err)
			}
			got := fmt.Sprintf("%dx%d %x", img.Width, img.Height, sha256.Sum256(img.Pix))
			if diff := cmp.Diff(filepath.Ext(tt.file)[1:]+" "+want, format+" "+got); diff != "" {
				t.Errorf("%s: format, size and pixel hash (-stb_image +ours):\n%s", tt.file, diff)
			}
		})
	}
}

// jpegSegment returns the offset of the first segment with marker m (its
// 0xff byte), walking the segments that follow SOI.
func jpegSegment(t testing.TB, data []byte, m byte) int {
	t.Helper()
	for i := 2; i+4 <= len(data); {
		if data[i] != 0xff {
			t.Fatalf("no marker at %d", i)
		}
		if data[i+1] == m {
			return i
		}
		if data[i+1] == jpegSOS {
			break
		}
		i += 2 + int(binary.BigEndian.Uint16(data[i+2:]))
	}
	t.Fatalf("no marker 0x%02x", m)
	return 0
}

// patched returns a copy of data with the bytes at off replaced by b.
func patched(data []byte, off int, b ...byte) []byte {
	out := bytes.Clone(data)
	copy(out[off:], b)
	return out
}

// withoutRST drops every RST marker from the entropy-coded data.
func withoutRST(data []byte) []byte {
	var out []byte
	for i := 0; i < len(data); i++ {
		if data[i] == 0xff && i+1 < len(data) && data[i+1] >= jpegRST0 && data[i+1] <= jpegRST7 {
			i++
			continue
		}
		out = append(out, data[i])
	}
	return out
}

// refusal is a broken file and the error Decode must wrap for it.
type refusal struct {
	name string
	data []byte
	want error
}

func checkRefusals(t *testing.T, tests []refusal) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img, _, err := Decode(tt.data, DecodeLimits{})
			if !errors.Is(err, tt.want) {
				t.Fatalf("Decode = %v, %v; want an error wrapping %v", img, err, tt.want)
			}
		})
	}
}

// withScans returns a baseline JPEG with its one scan written n times.
func withScans(t testing.TB, data []byte, n int) []byte {
	sos := jpegSegment(t, data, jpegSOS)
	eoi := len(data) - 2
	out := bytes.Clone(data[:sos])
	for range n {
		out = append(out, data[sos:eoi]...)
	}
	return append(out, data[eoi:]...)
}

// TestDecodeJPEGRepeatedScan checks that a scan decoded again gives the same
// pixels, and that the block budget leaves room for it.
func TestDecodeJPEGRepeatedScan(t *testing.T) {
	data := readTestdata(t, "video-001.q50.444.jpeg")
	want, _, err := Decode(data, DecodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := Decode(withScans(t, data, jpegBaselinePasses), DecodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pixels (-one scan +%d scans):\n%s", jpegBaselinePasses, diff)
	}
}

// jpegEmptyScans returns a one-component JPEG of n scans whose Huffman
// tables hold one code each (DC difference 0, end of block), so each scan is
// ten bytes that still walk every block: zeros are read past its end.
func jpegEmptyScans(width, height, n int, progressive bool) []byte {
	out := []byte{0xff, jpegSOI, 0xff, jpegDHT, 0, 2 + 2*18}
	for _, class := range []byte{0x00, 0x10} {
		out = append(out, class, 1)
		out = append(out, make([]byte, 15+1)...)
	}
	sof, se := byte(jpegSOF0), byte(63)
	if progressive {
		sof, se = jpegSOF2, 0
	}
	out = append(out, 0xff, sof, 0, 11, 8, byte(height>>8), byte(height), byte(width>>8), byte(width), 1, 1, 0x11, 0)
	for range n {
		out = append(out, 0xff, jpegSOS, 0, 8, 1, 1, 0, 0, se, 0)
	}
	return append(out, 0xff, jpegEOI)
}

// TestDecodeJPEGBlockBudget checks that the scans of an image may visit its
// blocks only a few times over: ten-byte scans of a large frame cost
// seconds each, so a file of 256 of them is refused after a few.
func TestDecodeJPEGBlockBudget(t *testing.T) {
	for _, tt := range []struct {
		name        string
		progressive bool
		passes      int
	}{
		{"baseline", false, jpegBaselinePasses},
		{"progressive", true, jpegProgressivePasses},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := Decode(jpegEmptyScans(64, 64, tt.passes, tt.progressive), DecodeLimits{}); err != nil {
				t.Fatalf("%d scans: %v", tt.passes, err)
			}
			d := &jpegDecoder{data: jpegEmptyScans(512, 512, jpegMaxScans, tt.progressive), marker: jpegNoMarker, app14Transform: -1}
			if err := d.readHeader(DefaultMaxPixels); err != nil {
				t.Fatal(err)
			}
			if err := d.readScans(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d scans: %v, want an error wrapping %v", jpegMaxScans, err, ErrCorrupt)
			}
			if frame := 512 * 512 / 64; d.blocks > tt.passes*frame+1 {
				t.Errorf("visited %d blocks of a %d-block frame, want at most %d passes", d.blocks, frame, tt.passes)
			}
		})
	}
}

// TestDecodeJPEGAllocatesAtTheFirstScan checks that a header declaring a
// large frame costs no memory until a scan names its components.
func TestDecodeJPEGAllocatesAtTheFirstScan(t *testing.T) {
	base := readTestdata(t, "video-001.q50.420.progressive.jpeg")
	sof := jpegSegment(t, base, jpegSOF2)
	sos := jpegSegment(t, base, jpegSOS)
	// 4096x4096 and no scan: 48 MiB of planes and coefficients per component.
	data := append(patched(base[:sos], sof+5, 4096>>8, 0, 4096>>8, 0), 0xff, jpegEOI)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Decode(data, DecodeLimits{})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Decode = %v, want an error wrapping %v", err, ErrCorrupt)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("allocated %d bytes for a header without scans", got)
	}
}

func TestDecodeJPEGRefusesBadFiles(t *testing.T) {
	base := readTestdata(t, "video-001.q50.420.jpeg")
	prog := readTestdata(t, "video-001.q50.420.progressive.jpeg")
	sof := jpegSegment(t, base, jpegSOF0)
	sos := jpegSegment(t, base, jpegSOS)
	dht := jpegSegment(t, base, jpegDHT)
	tests := []refusal{
		{"only SOI", base[:2], ErrCorrupt},
		{"truncated in the tables", base[:sof-10], ErrCorrupt},
		{"truncated in the frame header", base[:sof+8], ErrCorrupt},
		{"truncated in the scan header", base[:sos+6], ErrCorrupt},
		{"truncated in the entropy-coded data", base[:len(base)/2+sos/2], ErrCorrupt},
		{"progressive without EOI", prog[:len(prog)-2], ErrCorrupt},
		{"restart interval without its RST markers", withoutRST(readTestdata(t, "video-001.restart2.jpeg")), ErrCorrupt},
		{"12-bit samples", patched(base, sof+4, 12), ErrUnsupportedFormat},
		{"lossless process (SOF3)", patched(base, sof+1, 0xc3), ErrUnsupportedFormat},
		{"zero height", patched(base, sof+5, 0, 0), ErrEmptyImage},
		{"zero width", patched(base, sof+7, 0, 0), ErrEmptyImage},
		{"a 20000x20000 header", patched(base, sof+5, 20000>>8, 20000&0xff, 20000>>8, 20000&0xff), ErrTooLarge},
		{"two components", patched(base, sof+9, 2), ErrCorrupt},
		{"sampling factor 3 against 2", patched(patched(base, sof+11, 0x32), sof+14, 0x22), ErrCorrupt},
		{"Huffman table class 2", patched(base, dht+4, 0x20), ErrCorrupt},
		{"scan names an unknown component", patched(base, sos+5, 9), ErrCorrupt},
		{"more scans than the limit", withScans(t, readTestdata(t, "video-001.q50.444.jpeg"), jpegMaxScans+1), ErrCorrupt},
		{"sequential scan with a spectral start", patched(base, sos+4+2*3+1, 1), ErrCorrupt},
	}
	checkRefusals(t, tests)
}

// gifWithCodes returns a 64x64 GIF whose raster is the clear code followed
// by n codes, packed at the code widths a decoder uses: each code is pixel 0,
// or with chain each code after the first is the one it defines (the KwKwK
// case), so the strings grow by one pixel a code.
func gifWithCodes(n int, chain bool) []byte {
	const minCodeSize, clear = 2, 4
	var raster []byte
	acc, accBits := 0, 0
	emit := func(code, width int) {
		acc |= code << accBits
		for accBits += width; accBits >= 8; accBits -= 8 {
			raster = append(raster, byte(acc))
			acc >>= 8
		}
	}
	width, avail := minCodeSize+1, clear+2
	emit(clear, width)
	for i := range n {
		if chain && i > 0 {
			emit(avail, width)
		} else {
			emit(0, width)
		}
		if i > 0 { // the first code after a clear defines no string
			avail++
		}
		if avail&(1<<width-1) == 0 && avail <= 0xfff {
			width++
		}
	}
	emit(clear+1, width)
	if accBits > 0 {
		raster = append(raster, byte(acc))
	}
	out := []byte("GIF89a\x40\x00\x40\x00\x81\x00\x00\x11\x22\x33\xff\xff\xff\x00\x00\x00\xff\xff\xff")
	out = append(out, 0x2c, 0, 0, 0, 0, 0x40, 0, 0x40, 0, 0, minCodeSize)
	for len(raster) > 0 {
		k := min(len(raster), 255)
		out = append(append(out, byte(k)), raster[:k]...)
		raster = raster[k:]
	}
	return append(out, 0, ';')
}

// TestDecodeGIFLongRaster decodes a raster that stays within the LZW table
// (as stb_image does): the first 4096 of its 5000 pixels of palette entry 0
// fill the 64x64 screen, the rest are dropped.
func TestDecodeGIFLongRaster(t *testing.T) {
	img, _, err := Decode(gifWithCodes(5000, false), DecodeLimits{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bytes.Repeat([]byte{0x11, 0x22, 0x33}, 64*64), img.Pix); diff != "" {
		t.Errorf("pixels (-want +got):\n%s", diff)
	}
}

// TestDecodeGIFFullFrameStopsDrawing bounds the work of a raster whose codes
// go on after its frame is full: 4000 ever longer strings (8 million pixels)
// for a 4096-pixel frame. Only the strings up to the full frame are walked;
// the rest are still read and checked, as the pixels stb_image gives show.
func TestDecodeGIFFullFrameStopsDrawing(t *testing.T) {
	d := newGIFDecoder(gifWithCodes(4000, true))
	img, err := d.decode(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bytes.Repeat([]byte{0x11, 0x22, 0x33}, 64*64), img.Pix); diff != "" {
		t.Errorf("pixels (-want +got):\n%s", diff)
	}
	// The strings drawn are 1, 2, ..., 91 pixels long: 4186 bytes.
	if d.stringBytes > 64*64+2*gifMaxCodes {
		t.Errorf("walked %d LZW string bytes for a %d-pixel frame", d.stringBytes, 64*64)
	}
}

func TestDecodeGIFRefusesBadFiles(t *testing.T) {
	rect := readTestdata(t, "gif.rect-transparent-bg.7x5.gif")
	desc := bytes.IndexByte(rect[13+3*4:], 0x2c) + 13 + 3*4 // after the 4-entry global palette and the GCE
	// The raster's first byte holds the first 3-bit code, the clear code 4;
	// code 0 there is a pixel before any clear code.
	withoutClear := patched(rect, desc+12, rect[desc+12]&^7)
	tests := []refusal{
		{"only the signature", rect[:6], ErrCorrupt},
		{"truncated in the palette", rect[:20], ErrCorrupt},
		{"truncated in the raster", rect[:len(rect)-8], ErrCorrupt},
		{"no trailer and no terminator", rect[:len(rect)-2], ErrCorrupt},
		{"the frame leaves the screen", patched(rect, desc+5, 7), ErrCorrupt},
		{"LZW code size 13", patched(rect, desc+10, 13), ErrCorrupt},
		{"the raster does not start with a clear code", withoutClear, ErrCorrupt},
		{"more than 8192 LZW codes without a clear code", gifWithCodes(8200, false), ErrCorrupt},
		{"no image before the trailer", []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"), ErrCorrupt},
		{"zero width", patched(rect, 6, 0, 0), ErrEmptyImage},
		{"a 60000x60000 screen", patched(rect, 6, 0x60, 0xea, 0x60, 0xea), ErrTooLarge},
	}
	checkRefusals(t, tests)
}

// FuzzDecode feeds mutated JPEGs and GIFs to Decode: it must return an error or
// an image within the pixel limit whose buffer matches its size, never panic.
func FuzzDecode(f *testing.F) {
	jpegs, err := filepath.Glob(filepath.Join(stbDir, "*.jpeg"))
	if err != nil {
		f.Fatal(err)
	}
	gifs, err := filepath.Glob(filepath.Join(stbDir, "*.gif"))
	if err != nil {
		f.Fatal(err)
	}
	names := append(jpegs, gifs...)
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	lim := DecodeLimits{MaxPixels: 1 << 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, _, err := Decode(data, lim)
		if err != nil {
			return
		}
		if img.Width <= 0 || img.Height <= 0 || img.Width*img.Height > lim.MaxPixels || len(img.Pix) != 3*img.Width*img.Height {
			t.Fatalf("bad image: %dx%d with %d bytes", img.Width, img.Height, len(img.Pix))
		}
	})
}
