package vision

import (
	"bytes"
	"fmt"
)

// This file decodes a GIF's first frame into the RGB bytes stb_image 2.30
// produces with 3 requested channels (GIF89a/87a, LZW as in the GIF spec):
//   - the frame is drawn on a black logical screen; pixels of a transparent
//     palette entry are not drawn and stay black;
//   - when the screen's background index is above 0, pixels the frame never
//     reaches (outside its rectangle, or past the end of its data) take the
//     global palette's background entry with red and blue swapped (stb_image
//     copies that entry in its internal BGR order);
//   - palette indices past a palette's end are black;
//   - a raster that does not start with a clear code is refused.
// Where stb_image would read zeros past the end of the file this decoder
// reports the file as truncated.

// gifMaxCodes is the size of the LZW string table (12-bit codes).
const gifMaxCodes = 4096

type gifColour struct {
	r, g, b byte
	opaque  bool
}

type gifDecoder struct {
	data      []byte
	pos       int
	truncated bool

	width, height int
	flags         byte // logical screen flags: bit 7 global palette, low 3 bits its size
	bgIndex       int
	global        [256]gifColour
	transparent   int // index the last graphic control extension made transparent, or -1

	pix     []byte // [height, width, 3]
	drawn   []bool // [height, width]
	palette *[256]gifColour

	stringBytes int // LZW string bytes walked, so tests can bound the work a raster costs
}

func (d *gifDecoder) get8() byte {
	if d.pos < len(d.data) {
		d.pos++
		return d.data[d.pos-1]
	}
	d.truncated = true
	return 0
}

func (d *gifDecoder) get16() int {
	lo := int(d.get8())
	return lo | int(d.get8())<<8
}

func (d *gifDecoder) skip(n int) {
	if len(d.data)-d.pos < n {
		d.pos = len(d.data)
		d.truncated = true
		return
	}
	d.pos += n
}

func gifCorrupt(format string, args ...any) error {
	return fmt.Errorf("decode gif: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// isGIF reports whether data starts with a GIF signature.
func isGIF(data []byte) bool {
	return bytes.HasPrefix(data, []byte("GIF87a")) || bytes.HasPrefix(data, []byte("GIF89a"))
}

// readPalette reads n RGB entries; entry transparent (if any) is not drawn.
func (d *gifDecoder) readPalette(pal *[256]gifColour, n, transparent int) {
	for i := range n {
		pal[i] = gifColour{r: d.get8(), g: d.get8(), b: d.get8(), opaque: i != transparent}
	}
}

// decodeGIF decodes the first frame of a GIF whose logical screen must not
// exceed maxPixels; the limit is checked before the screen is allocated.
func decodeGIF(data []byte, maxPixels int) (*RGB, error) {
	return newGIFDecoder(data).decode(maxPixels)
}

func newGIFDecoder(data []byte) *gifDecoder {
	return &gifDecoder{data: data, pos: 6, transparent: -1}
}

func (d *gifDecoder) decode(maxPixels int) (*RGB, error) {
	data := d.data
	if !isGIF(data) {
		return nil, gifCorrupt("no GIF signature")
	}
	d.width, d.height = d.get16(), d.get16()
	d.flags = d.get8()
	d.bgIndex = int(d.get8())
	d.get8() // pixel aspect ratio
	if d.truncated {
		return nil, gifCorrupt("logical screen descriptor is truncated")
	}
	if err := checkSize("gif", d.width, d.height, maxPixels); err != nil {
		return nil, err
	}
	if d.flags&0x80 != 0 {
		d.readPalette(&d.global, 2<<(d.flags&7), -1)
	}
	for !d.truncated {
		switch tag := d.get8(); tag {
		case 0x2c: // image descriptor
			return d.readFrame()
		case 0x21: // extension
			if d.get8() == 0xf9 { // graphic control
				n := int(d.get8())
				if n != 4 {
					d.skip(n)
					continue
				}
				flags := d.get8()
				d.get16() // delay
				if d.transparent >= 0 {
					d.global[d.transparent].opaque = true
				}
				if flags&1 != 0 {
					d.transparent = int(d.get8())
					d.global[d.transparent].opaque = false
				} else {
					d.get8()
					d.transparent = -1
				}
			}
			for n := int(d.get8()); n != 0 && !d.truncated; n = int(d.get8()) {
				d.skip(n)
			}
		case 0x3b: // trailer
			return nil, gifCorrupt("no image before the trailer")
		default:
			if !d.truncated {
				return nil, gifCorrupt("unknown block 0x%02x", tag)
			}
		}
	}
	return nil, gifCorrupt("truncated before the first image")
}

// readFrame reads the first image descriptor and its raster onto the screen.
func (d *gifDecoder) readFrame() (*RGB, error) {
	x, y, w, h := d.get16(), d.get16(), d.get16(), d.get16()
	if x+w > d.width || y+h > d.height {
		return nil, gifCorrupt("frame %dx%d at (%d,%d) lies outside the %dx%d screen", w, h, x, y, d.width, d.height)
	}
	lflags := d.get8()
	var local [256]gifColour
	switch {
	case lflags&0x80 != 0:
		d.readPalette(&local, 2<<(lflags&7), d.transparent)
		d.palette = &local
	case d.flags&0x80 != 0:
		d.palette = &d.global
	default:
		return nil, gifCorrupt("frame has no colour table")
	}
	if d.truncated {
		return nil, gifCorrupt("image descriptor is truncated")
	}
	d.pix = make([]byte, 3*d.width*d.height)
	d.drawn = make([]bool, d.width*d.height)
	if err := d.readRaster(x, y, w, h, lflags&0x40 != 0); err != nil {
		return nil, err
	}
	if d.truncated {
		return nil, gifCorrupt("image data is truncated")
	}
	if d.bgIndex > 0 {
		bg := d.global[d.bgIndex]
		for i, drawn := range d.drawn {
			if !drawn {
				d.pix[3*i], d.pix[3*i+1], d.pix[3*i+2] = bg.b, bg.g, bg.r
			}
		}
	}
	return &RGB{Width: d.width, Height: d.height, Pix: d.pix}, nil
}

// gifCursor walks a frame's pixels in raster or interlaced row order.
type gifCursor struct {
	startX, maxX, startY, maxY int
	x, y, step, pass           int // step in rows; pass counts the interlace passes left
}

// put draws one pixel of palette index c, unless the frame is full.
func (d *gifDecoder) put(cur *gifCursor, c byte) {
	if cur.y >= cur.maxY {
		return
	}
	i := cur.y*d.width + cur.x
	d.drawn[i] = true
	if col := d.palette[c]; col.opaque {
		d.pix[3*i], d.pix[3*i+1], d.pix[3*i+2] = col.r, col.g, col.b
	}
	cur.x++
	if cur.x >= cur.maxX {
		cur.x = cur.startX
		cur.y += cur.step
		for cur.y >= cur.maxY && cur.pass > 0 {
			cur.step = 1 << cur.pass
			cur.y = cur.startY + cur.step>>1
			cur.pass--
		}
	}
}

// readRaster decodes the frame's LZW data (variable-width codes, clear and
// end codes, the KwKwK case) and draws each string as it is decoded.
func (d *gifDecoder) readRaster(x, y, w, h int, interlaced bool) error {
	cur := gifCursor{startX: x, maxX: x + w, startY: y, maxY: y + h, x: x, y: y, step: 1}
	if interlaced {
		cur.step, cur.pass = 8, 3
	}
	if w == 0 {
		cur.y = cur.maxY
	}
	minCodeSize := int(d.get8())
	if minCodeSize > 12 {
		return gifCorrupt("LZW code size %d", minCodeSize)
	}
	type entry struct {
		prefix        int16
		first, suffix byte
	}
	var codes [2 * gifMaxCodes]entry
	clear := 1 << minCodeSize
	for i := range clear {
		codes[i] = entry{prefix: -1, first: byte(i), suffix: byte(i)}
	}
	codeSize := minCodeSize + 1
	codeMask := 1<<codeSize - 1
	avail, oldCode := clear+2, -1
	seenClear := false
	bits, validBits, blockLeft := 0, 0, 0
	var str [2 * gifMaxCodes]byte
	for !d.truncated {
		if validBits < codeSize {
			if blockLeft == 0 {
				if blockLeft = int(d.get8()); blockLeft == 0 {
					return nil
				}
			}
			blockLeft--
			bits |= int(d.get8()) << validBits
			validBits += 8
			continue
		}
		code := bits & codeMask
		bits >>= codeSize
		validBits -= codeSize
		switch {
		case code == clear:
			codeSize = minCodeSize + 1
			codeMask = 1<<codeSize - 1
			avail, oldCode = clear+2, -1
			seenClear = true
		case code == clear+1: // end of information: skip the remaining sub-blocks
			d.skip(blockLeft)
			for n := int(d.get8()); n > 0 && !d.truncated; n = int(d.get8()) {
				d.skip(n)
			}
			return nil
		case code <= avail:
			if !seenClear {
				return gifCorrupt("raster does not start with a clear code")
			}
			if oldCode >= 0 {
				if avail >= len(codes) {
					return gifCorrupt("too many LZW codes without a clear code")
				}
				p := &codes[avail]
				avail++
				p.prefix = int16(oldCode)
				p.first = codes[oldCode].first
				p.suffix = codes[code].first
			} else if code == avail {
				return gifCorrupt("LZW code %d is not yet defined", code)
			}
			if cur.y < cur.maxY { // once the frame is full, later codes are only validated
				n := 0
				for c := code; c >= 0; c = int(codes[c].prefix) {
					if n == len(str) {
						return gifCorrupt("LZW string loops")
					}
					str[n] = codes[c].suffix
					n++
				}
				d.stringBytes += n
				for i := n - 1; i >= 0; i-- {
					d.put(&cur, str[i])
				}
			}
			if avail&codeMask == 0 && avail <= 0xfff {
				codeSize++
				codeMask = 1<<codeSize - 1
			}
			oldCode = code
		default:
			return gifCorrupt("LZW code %d is not yet defined", code)
		}
	}
	return nil
}
