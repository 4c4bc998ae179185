package vision

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
)

// This file decodes baseline and progressive Huffman JPEG (ITU T.81) into
// the RGB bytes stb_image 2.30 produces with 3 requested channels, which is
// what llama.cpp's libmtmd feeds its preprocessing. Every step that decides
// a pixel follows stb_image's arithmetic:
//   - the islow integer IDCT with 12-bit constants, 2 extra bits kept
//     between the column and row passes, and the +128 level shift folded
//     into the final rounding;
//   - coefficients dequantized into int16 (wrapping), progressive ones after
//     the last scan;
//   - chroma upsampling by the "fancy" triangle filters for 2x1, 1x2 and 2x2
//     subsampling and by pixel replication for every other ratio;
//   - YCbCr -> RGB in 20-bit fixed point with the Cb term of green truncated
//     to its high 16 bits;
//   - Adobe CMYK and YCCK through stb's 8x8-bit multiply, three components
//     named 'R','G','B' (or an Adobe transform 0 without JFIF) as RGB.
// EXIF orientation is ignored, as stb_image ignores it.
//
// Where stb_image keeps going on broken data this decoder stops with an
// error instead: entropy-coded data that runs past the end of the file, a
// restart interval that ends without its RST marker before the last MCU, a
// component no scan decoded, a progressive image whose scans end without EOI,
// an undefined Huffman table. (stb_image would fill such images with zero
// bits or uninitialized memory.) A marker met inside entropy-coded data makes
// the rest of the scan decode from zero bits, as in stb_image.

// jpegNoMarker stands for "no marker pending" (0xff is never a marker code).
const jpegNoMarker = 0xff

// JPEG marker codes (T.81 table B.1) this decoder acts on.
const (
	jpegSOF0 = 0xc0 // baseline
	jpegSOF1 = 0xc1 // extended sequential, Huffman
	jpegSOF2 = 0xc2 // progressive, Huffman
	jpegDHT  = 0xc4
	jpegRST0 = 0xd0
	jpegRST7 = 0xd7
	jpegSOI  = 0xd8
	jpegEOI  = 0xd9
	jpegSOS  = 0xda
	jpegDQT  = 0xdb
	jpegDNL  = 0xdc
	jpegDRI  = 0xdd
	jpegAPP0 = 0xe0
	jpegAP14 = 0xee
	jpegAP15 = 0xef
	jpegCOM  = 0xfe
)

// errJPEGTruncated marks entropy-coded data that ran past the end of the file.
var errJPEGTruncated = errors.New("entropy-coded data runs past the end of the file")

// isJPEG reports whether data starts the way stb_image recognizes a JPEG:
// 0xff, any number of 0xff fill bytes, then SOI.
func isJPEG(data []byte) bool {
	if len(data) < 2 || data[0] != 0xff {
		return false
	}
	i := 1
	for i < len(data) && data[i] == 0xff {
		i++
	}
	return i < len(data) && data[i] == jpegSOI
}

// jpegDezigzag maps a zigzag position to its row-major index in the 8x8
// block; positions past 63 (reachable only through corrupt run lengths)
// land on 63 as in stb_image.
var jpegDezigzag = [64 + 15]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
	63, 63, 63, 63, 63, 63, 63, 63,
	63, 63, 63, 63, 63, 63, 63,
}

// jpegMaxScans bounds the scans of one image. Encoders write at most a few
// dozen.
const jpegMaxScans = 256

// A scan walks every block of its components even when its data is a few
// bytes (past a marker the decoder reads zero bits), so a small file of
// near-empty scans would cost time in proportion to scans x pixels. The
// blocks all scans visit are bounded by these multiples of the frame's block
// count: a baseline image needs one pass, a progressive one a pass per
// spectral band and refinement bit of each component (a few dozen at most).
const (
	jpegBaselinePasses    = 4
	jpegProgressivePasses = 64
)

// jpegFastBits is the width of a Huffman table's direct lookup.
const jpegFastBits = 9

// jpegHuffman is one Huffman table in canonical form (T.81 annex C): codes
// of up to 9 bits are looked up directly, longer ones found by comparing the
// next 16 bits with each length's largest code.
type jpegHuffman struct {
	defined bool
	fast    [1 << jpegFastBits]uint8 // symbol index, or 255 for "longer code"
	size    [257]uint8               // code length of each symbol index
	code    [256]uint16
	values  [256]uint8
	maxcode [18]uint32 // [length] one past the largest code, left-aligned to 16 bits
	delta   [17]int32  // [length] symbol index minus code
}

// build fills the table from the 16 code-length counts of a DHT segment.
func (h *jpegHuffman) build(counts *[16]int) error {
	k := 0
	for i := range 16 {
		for range counts[i] {
			if k >= 256 {
				return fmt.Errorf("huffman table has more than 256 codes")
			}
			h.size[k] = uint8(i + 1)
			k++
		}
	}
	h.size[k] = 0
	code := uint32(0)
	k = 0
	for j := 1; j <= 16; j++ {
		h.delta[j] = int32(k) - int32(code)
		if int(h.size[k]) == j {
			for int(h.size[k]) == j {
				h.code[k] = uint16(code)
				k++
				code++
			}
			if code-1 >= 1<<j {
				return fmt.Errorf("huffman code lengths overflow %d bits", j)
			}
		}
		h.maxcode[j] = code << (16 - j)
		code <<= 1
	}
	h.maxcode[17] = 0xffffffff
	for i := range h.fast {
		h.fast[i] = 255
	}
	for i := range k {
		s := int(h.size[i])
		if s <= jpegFastBits {
			c := int(h.code[i]) << (jpegFastBits - s)
			for j := range 1 << (jpegFastBits - s) {
				h.fast[c+j] = uint8(i)
			}
		}
	}
	h.defined = true
	return nil
}

// jpegComponent is one colour component of the frame.
type jpegComponent struct {
	id, h, v, tq int // identifier, sampling factors, quantization table
	hd, ha       int // Huffman tables of the current scan
	dcPred       int32
	x, y         int     // samples this component covers
	w2, h2       int     // plane size, padded to whole MCUs
	data         []byte  // [h2, w2] samples after the IDCT
	coeff        []int16 // progressive: [h2/8 * w2/8][64] coefficients
	coeffW       int     // blocks per row of coeff
	decoded      bool    // a scan decoded it (baseline) or its DC (progressive)
}

// jpegDecoder holds the state of one decode.
type jpegDecoder struct {
	data []byte
	pos  int

	width, height int
	comps         []jpegComponent
	hMax, vMax    int
	mcuX, mcuY    int // MCUs per row and column
	blocks        int // blocks the scans have visited so far
	maxBlocks     int // the most blocks the scans may visit

	progressive bool
	dequant     [4][64]uint16
	huffDC      [4]jpegHuffman
	huffAC      [4]jpegHuffman

	jfif               bool
	app14Transform     int // -1 when there is no Adobe segment
	rgbIDs             int // components named 'R','G','B' in order
	restartInterval    int
	scan               []int // component indices of the current scan
	specStart, specEnd int
	succHigh, succLow  int
	eobRun             int
	todo               int // MCUs left in the restart interval

	codeBuf  uint32 // entropy-coded bits, left-aligned
	codeBits int
	marker   byte // marker met while filling codeBuf
	noMore   bool
	padBits  int  // trailing bits of codeBuf that lie past the end of the file
	overrun  bool // a bit past the end of the file was consumed
}

func (d *jpegDecoder) atEOF() bool { return d.pos >= len(d.data) }

// get8 returns the next byte, or 0 past the end (stb_image's convention;
// header readers check atEOF themselves).
func (d *jpegDecoder) get8() byte {
	if d.pos < len(d.data) {
		d.pos++
		return d.data[d.pos-1]
	}
	return 0
}

// segment reads a marker segment's length field and returns the length of
// the payload after it, which must lie within the file.
func (d *jpegDecoder) segment(what string) (int, error) {
	if len(d.data)-d.pos < 2 {
		return 0, jpegCorrupt("%s is truncated", what)
	}
	l := d.get16() - 2
	if l < 0 {
		return 0, jpegCorrupt("bad %s length", what)
	}
	if len(d.data)-d.pos < l {
		return 0, jpegCorrupt("%s is truncated", what)
	}
	return l, nil
}

func (d *jpegDecoder) get16() int {
	hi := int(d.get8())
	return hi<<8 | int(d.get8())
}

// getMarker returns the pending marker, or reads one: 0xff, fill bytes, the
// code. A byte other than 0xff gives jpegNoMarker.
func (d *jpegDecoder) getMarker() byte {
	if d.marker != jpegNoMarker {
		m := d.marker
		d.marker = jpegNoMarker
		return m
	}
	if d.atEOF() || d.get8() != 0xff {
		return jpegNoMarker
	}
	x := byte(0xff)
	for x == 0xff && !d.atEOF() {
		x = d.get8()
	}
	return x
}

// grow appends entropy-coded bytes to codeBuf until it holds more than 24
// bits, undoing byte stuffing; at a marker it stops reading and appends
// zeros, past the end of the file it appends zeros and counts them.
func (d *jpegDecoder) grow() {
	for {
		var b uint32
		if !d.noMore {
			eof := d.atEOF()
			b = uint32(d.get8())
			if eof {
				d.padBits += 8
			}
		}
		if b == 0xff {
			c := d.get8()
			for c == 0xff {
				c = d.get8()
			}
			if c != 0 {
				d.marker = c
				d.noMore = true
				return
			}
		}
		d.codeBuf |= b << (24 - d.codeBits)
		d.codeBits += 8
		if d.codeBits > 24 {
			return
		}
	}
}

// consume drops n bits from codeBuf's count and notes a read past the end.
func (d *jpegDecoder) consume(n int) {
	d.codeBits -= n
	if d.padBits > d.codeBits {
		d.overrun = true
		d.padBits = max(d.codeBits, 0)
	}
}

// huffDecode returns the next symbol coded with h, or -1 for a bad code.
func (d *jpegDecoder) huffDecode(h *jpegHuffman) int {
	if d.codeBits < 16 {
		d.grow()
	}
	c := d.codeBuf >> (32 - jpegFastBits)
	if k := h.fast[c]; k < 255 {
		s := int(h.size[k])
		if s > d.codeBits {
			return -1
		}
		d.codeBuf <<= s
		d.consume(s)
		return int(h.values[k])
	}
	temp := d.codeBuf >> 16
	k := jpegFastBits + 1
	for temp >= h.maxcode[k] {
		k++
	}
	if k == 17 {
		d.consume(16)
		return -1
	}
	if k > d.codeBits {
		return -1
	}
	idx := int32(d.codeBuf>>(32-k)&(1<<k-1)) + h.delta[k]
	if idx < 0 || idx >= 256 {
		return -1
	}
	d.codeBuf <<= k
	d.consume(k)
	return int(h.values[idx])
}

// receiveExtend reads n bits as a signed magnitude category (T.81 F.2.2.1);
// 0 when the stream has no bits left.
func (d *jpegDecoder) receiveExtend(n int) int32 {
	if d.codeBits < n {
		d.grow()
	}
	if d.codeBits < n {
		return 0
	}
	negative := d.codeBuf>>31 == 0
	k := bits.RotateLeft32(d.codeBuf, n)
	mask := uint32(1)<<n - 1
	d.codeBuf = k &^ mask
	d.consume(n)
	v := int32(k & mask)
	if negative {
		v += -(1 << n) + 1
	}
	return v
}

// getBits reads n unsigned bits; 0 when the stream has no bits left.
func (d *jpegDecoder) getBits(n int) int {
	if d.codeBits < n {
		d.grow()
	}
	if d.codeBits < n {
		return 0
	}
	k := bits.RotateLeft32(d.codeBuf, n)
	mask := uint32(1)<<n - 1
	d.codeBuf = k &^ mask
	d.consume(n)
	return int(k & mask)
}

func (d *jpegDecoder) getBit() bool {
	if d.codeBits < 1 {
		d.grow()
	}
	if d.codeBits < 1 {
		return false
	}
	set := d.codeBuf&0x80000000 != 0
	d.codeBuf <<= 1
	d.consume(1)
	return set
}

// reset restarts the entropy decoder and the DC predictions (at the start
// of a scan and after each RST marker).
func (d *jpegDecoder) reset() {
	d.codeBuf, d.codeBits, d.padBits = 0, 0, 0
	d.noMore = false
	for i := range d.comps {
		d.comps[i].dcPred = 0
	}
	d.marker = jpegNoMarker
	d.todo = 0x7fffffff
	if d.restartInterval > 0 {
		d.todo = d.restartInterval
	}
	d.eobRun = 0
}

// decodeJPEG decodes a JPEG whose width x height must not exceed maxPixels;
// the limit is checked on the frame header before any plane is allocated.
func decodeJPEG(data []byte, maxPixels int) (*RGB, error) {
	d := &jpegDecoder{data: data, marker: jpegNoMarker, app14Transform: -1}
	if err := d.readHeader(maxPixels); err != nil {
		return nil, err
	}
	if err := d.readScans(); err != nil {
		return nil, err
	}
	return d.toRGB(), nil
}

// corrupt wraps a reason in ErrCorrupt.
func jpegCorrupt(format string, args ...any) error {
	return fmt.Errorf("decode jpeg: %w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// readHeader reads SOI, the tables before the frame, and the frame header,
// then allocates the component planes.
func (d *jpegDecoder) readHeader(maxPixels int) error {
	if d.getMarker() != jpegSOI {
		return jpegCorrupt("no SOI marker")
	}
	m := d.getMarker()
	for m != jpegSOF0 && m != jpegSOF1 && m != jpegSOF2 {
		if err := d.processMarker(m); err != nil {
			return err
		}
		m = d.getMarker()
		for m == jpegNoMarker {
			if d.atEOF() {
				return jpegCorrupt("no frame header (SOF) before the end of the file")
			}
			m = d.getMarker()
		}
	}
	d.progressive = m == jpegSOF2
	return d.readFrame(maxPixels)
}

// processMarker reads a table, restart interval, APPn or COM segment.
func (d *jpegDecoder) processMarker(m byte) error {
	switch {
	case m == jpegNoMarker:
		return jpegCorrupt("expected a marker")
	case m == jpegDRI:
		if l, err := d.segment("DRI segment"); err != nil || l != 2 {
			return cmp.Or(err, jpegCorrupt("bad DRI length"))
		}
		d.restartInterval = d.get16()
		return nil
	case m == jpegDQT:
		return d.readDQT()
	case m == jpegDHT:
		return d.readDHT()
	case m >= jpegAPP0 && m <= jpegAP15 || m == jpegCOM:
		return d.readAPP(m)
	case m >= 0xc3 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
		return fmt.Errorf("decode jpeg: %w: JPEG process SOF%d (lossless, hierarchical or arithmetic-coded)",
			ErrUnsupportedFormat, m-0xc0)
	}
	return jpegCorrupt("unknown marker 0x%02x", m)
}

func (d *jpegDecoder) readDQT() error {
	l, err := d.segment("DQT segment")
	if err != nil {
		return err
	}
	for l > 0 {
		q := d.get8()
		precision, t := q>>4, int(q&15)
		if precision > 1 {
			return jpegCorrupt("bad DQT precision %d", precision)
		}
		if t > 3 {
			return jpegCorrupt("bad DQT table %d", t)
		}
		n := 64 * (1 + int(precision))
		if l < n+1 {
			return jpegCorrupt("bad DQT length")
		}
		for i := range 64 {
			v := uint16(d.get8())
			if precision == 1 {
				v = v<<8 | uint16(d.get8())
			}
			d.dequant[t][jpegDezigzag[i]] = v
		}
		l -= n + 1
	}
	if l != 0 {
		return jpegCorrupt("bad DQT length")
	}
	return nil
}

func (d *jpegDecoder) readDHT() error {
	l, err := d.segment("DHT segment")
	if err != nil {
		return err
	}
	for l > 0 {
		if l < 17 {
			return jpegCorrupt("bad DHT length")
		}
		q := d.get8()
		class, th := int(q>>4), int(q&15)
		if class > 1 || th > 3 {
			return jpegCorrupt("bad DHT class %d or table %d", class, th)
		}
		var counts [16]int
		n := 0
		for i := range counts {
			counts[i] = int(d.get8())
			n += counts[i]
		}
		if n > 256 {
			return jpegCorrupt("DHT table has %d codes, more than 256", n)
		}
		l -= 17
		h := &d.huffDC[th]
		if class == 1 {
			h = &d.huffAC[th]
		}
		*h = jpegHuffman{}
		if err := h.build(&counts); err != nil {
			return jpegCorrupt("%v", err)
		}
		if l < n {
			return jpegCorrupt("bad DHT length")
		}
		for i := range n {
			h.values[i] = d.get8()
		}
		l -= n
	}
	if l != 0 {
		return jpegCorrupt("bad DHT length")
	}
	return nil
}

// readAPP skips an APPn or COM segment, noting a JFIF APP0 and an Adobe
// APP14's colour transform on the way.
func (d *jpegDecoder) readAPP(m byte) error {
	l, err := d.segment("APP/COM segment")
	if err != nil {
		return err
	}
	switch {
	case m == jpegAPP0 && l >= 5:
		if string(d.data[d.pos:d.pos+5]) == "JFIF\x00" {
			d.jfif = true
		}
	case m == jpegAP14 && l >= 12:
		if string(d.data[d.pos:d.pos+6]) == "Adobe\x00" {
			d.app14Transform = int(d.data[d.pos+11])
		}
	}
	d.pos += l
	return nil
}

// readFrame reads the SOF segment, checks the pixel limit and sizes the
// planes; the first scan naming a component allocates them.
func (d *jpegDecoder) readFrame(maxPixels int) error {
	l, err := d.segment("frame header")
	if err != nil {
		return err
	}
	if l < 9 {
		return jpegCorrupt("bad SOF length")
	}
	if p := d.get8(); p != 8 {
		return fmt.Errorf("decode jpeg: %w: %d-bit samples (only 8-bit)", ErrUnsupportedFormat, p)
	}
	d.height = d.get16()
	d.width = d.get16()
	if err := checkSize("jpeg", d.width, d.height, maxPixels); err != nil {
		return err
	}
	c := int(d.get8())
	if c != 1 && c != 3 && c != 4 {
		return jpegCorrupt("bad component count %d", c)
	}
	if l != 6+3*c {
		return jpegCorrupt("bad SOF length")
	}
	d.comps = make([]jpegComponent, c)
	d.hMax, d.vMax = 1, 1
	for i := range d.comps {
		comp := &d.comps[i]
		comp.id = int(d.get8())
		if c == 3 && comp.id == int("RGB"[i]) {
			d.rgbIDs++
		}
		q := d.get8()
		comp.h, comp.v = int(q>>4), int(q&15)
		if comp.h == 0 || comp.h > 4 || comp.v == 0 || comp.v > 4 {
			return jpegCorrupt("bad sampling factors %dx%d", comp.h, comp.v)
		}
		comp.tq = int(d.get8())
		if comp.tq > 3 {
			return jpegCorrupt("bad quantization table %d", comp.tq)
		}
		d.hMax, d.vMax = max(d.hMax, comp.h), max(d.vMax, comp.v)
	}
	for _, comp := range d.comps {
		if d.hMax%comp.h != 0 || d.vMax%comp.v != 0 {
			return jpegCorrupt("sampling factors %dx%d do not divide %dx%d", comp.h, comp.v, d.hMax, d.vMax)
		}
	}
	mcuW, mcuH := 8*d.hMax, 8*d.vMax
	d.mcuX = (d.width + mcuW - 1) / mcuW
	d.mcuY = (d.height + mcuH - 1) / mcuH
	passes := jpegBaselinePasses
	if d.progressive {
		passes = jpegProgressivePasses
	}
	for i := range d.comps {
		comp := &d.comps[i]
		comp.x = (d.width*comp.h + d.hMax - 1) / d.hMax
		comp.y = (d.height*comp.v + d.vMax - 1) / d.vMax
		comp.w2 = d.mcuX * comp.h * 8
		comp.h2 = d.mcuY * comp.v * 8
		comp.coeffW = comp.w2 / 8
		d.maxBlocks += passes * comp.w2 * comp.h2 / 64
	}
	return nil
}

// allocate gives a component its plane (and progressive coefficients) the
// first time a scan names it.
func (d *jpegDecoder) allocate(comp *jpegComponent) {
	if comp.data != nil {
		return
	}
	comp.data = make([]byte, comp.w2*comp.h2)
	if d.progressive {
		comp.coeff = make([]int16, comp.w2*comp.h2)
	}
}

// readScans decodes every scan up to EOI, then runs the progressive IDCT.
func (d *jpegDecoder) readScans() error {
	var endErr error // what ended the image before EOI, as stb_image stops there
	scans := 0
	m := d.getMarker()
	for m != jpegEOI {
		switch {
		case m == jpegSOS:
			if scans++; scans > jpegMaxScans {
				return jpegCorrupt("more than %d scans", jpegMaxScans)
			}
			if err := d.readScanHeader(); err != nil {
				return err
			}
			if err := d.decodeScan(); err != nil {
				return err
			}
			if d.marker == jpegNoMarker {
				d.marker = d.skipJunk()
			}
			m = d.getMarker()
			if m >= jpegRST0 && m <= jpegRST7 {
				m = d.getMarker()
			}
		case m == jpegDNL:
			if l, err := d.segment("DNL segment"); err != nil || l != 2 {
				return cmp.Or(err, jpegCorrupt("bad DNL length"))
			}
			if nl := d.get16(); nl != d.height {
				return jpegCorrupt("DNL height %d is not the frame's %d", nl, d.height)
			}
			m = d.getMarker()
		default:
			endErr = d.processMarker(m)
			m = d.getMarker()
		}
		if endErr != nil {
			break
		}
	}
	for i, comp := range d.comps {
		if !comp.decoded {
			return cmp.Or(endErr, jpegCorrupt("no scan decoded component %d", i))
		}
	}
	if d.progressive {
		if endErr != nil {
			return fmt.Errorf("progressive scans end without EOI: %w", endErr)
		}
		d.finishProgressive()
	}
	return nil
}

// skipJunk skips bytes after a scan up to what looks like a marker.
func (d *jpegDecoder) skipJunk() byte {
	for !d.atEOF() {
		x := d.get8()
		for x == 0xff {
			if d.atEOF() {
				return jpegNoMarker
			}
			x = d.get8()
			if x != 0 && x != 0xff {
				return x
			}
		}
	}
	return jpegNoMarker
}

func (d *jpegDecoder) readScanHeader() error {
	l, err := d.segment("scan header")
	if err != nil {
		return err
	}
	if l < 1 {
		return jpegCorrupt("bad SOS length")
	}
	n := int(d.get8())
	if n < 1 || n > 4 || n > len(d.comps) {
		return jpegCorrupt("bad scan component count %d", n)
	}
	if l != 4+2*n {
		return jpegCorrupt("bad SOS length")
	}
	d.scan = d.scan[:0]
	for range n {
		id, q := int(d.get8()), d.get8()
		which := -1
		for i, comp := range d.comps {
			if comp.id == id {
				which = i
				break
			}
		}
		if which < 0 {
			return jpegCorrupt("scan names component %d the frame lacks", id)
		}
		comp := &d.comps[which]
		comp.hd, comp.ha = int(q>>4), int(q&15)
		if comp.hd > 3 || comp.ha > 3 {
			return jpegCorrupt("bad Huffman table selector")
		}
		d.scan = append(d.scan, which)
	}
	d.specStart, d.specEnd = int(d.get8()), int(d.get8())
	a := d.get8()
	d.succHigh, d.succLow = int(a>>4), int(a&15)
	if d.progressive {
		if d.specStart > 63 || d.specEnd > 63 || d.specStart > d.specEnd || d.succHigh > 13 || d.succLow > 13 {
			return jpegCorrupt("bad progressive scan parameters")
		}
	} else {
		if d.specStart != 0 || d.succHigh != 0 || d.succLow != 0 {
			return jpegCorrupt("bad sequential scan parameters")
		}
		d.specEnd = 63
	}
	return nil
}

// decodeScan decodes one scan's entropy-coded data.
func (d *jpegDecoder) decodeScan() error {
	d.reset()
	for _, n := range d.scan {
		comp := &d.comps[n]
		if (!d.progressive || d.specStart == 0 && d.succHigh == 0) && !d.huffDC[comp.hd].defined {
			return jpegCorrupt("scan uses undefined DC Huffman table %d", comp.hd)
		}
		if (!d.progressive || d.specStart != 0) && !d.huffAC[comp.ha].defined {
			return jpegCorrupt("scan uses undefined AC Huffman table %d", comp.ha)
		}
		d.allocate(comp)
	}
	var block [64]int16
	decodeAt := func(n, bx, by int) error { // block (bx, by) of component n
		if d.blocks++; d.blocks > d.maxBlocks {
			return jpegCorrupt("the scans visit more than the %d blocks allowed (a few passes over the frame)", d.maxBlocks)
		}
		comp := &d.comps[n]
		if d.progressive {
			coeff := (*[64]int16)(comp.coeff[64*(bx+by*comp.coeffW):])
			if d.specStart == 0 {
				return d.decodeBlockProgDC(coeff, n)
			}
			return d.decodeBlockProgAC(coeff, &d.huffAC[comp.ha])
		}
		if err := d.decodeBlock(&block, n); err != nil {
			return err
		}
		idctBlock(comp.data[comp.w2*by*8+bx*8:], comp.w2, &block)
		return nil
	}
	// restart ends each MCU: it stops a scan that has read past the end of
	// the file, counts the restart interval down and expects RST at its end;
	// done reports that the scan ends here, last whether this MCU is its last.
	restart := func(last bool) (done bool, err error) {
		if d.overrun {
			return true, jpegCorrupt("%v", errJPEGTruncated)
		}
		d.todo--
		if d.todo > 0 {
			return false, nil
		}
		if d.codeBits < 24 {
			d.grow()
		}
		if d.marker < jpegRST0 || d.marker > jpegRST7 {
			if !last {
				return true, jpegCorrupt("restart interval ends without an RST marker")
			}
			return true, nil
		}
		d.reset()
		return false, nil
	}
	if len(d.scan) == 1 {
		n := d.scan[0]
		comp := &d.comps[n]
		w, h := (comp.x+7)>>3, (comp.y+7)>>3
	single:
		for j := range h {
			for i := range w {
				if err := decodeAt(n, i, j); err != nil {
					return err
				}
				done, err := restart(j == h-1 && i == w-1)
				if err != nil {
					return err
				}
				if done {
					break single
				}
			}
		}
	} else {
		if d.progressive && d.specStart != 0 {
			return jpegCorrupt("interleaved progressive AC scan")
		}
	interleaved:
		for j := range d.mcuY {
			for i := range d.mcuX {
				for _, n := range d.scan {
					comp := &d.comps[n]
					for y := range comp.v {
						for x := range comp.h {
							if err := decodeAt(n, i*comp.h+x, j*comp.v+y); err != nil {
								return err
							}
						}
					}
				}
				done, err := restart(j == d.mcuY-1 && i == d.mcuX-1)
				if err != nil {
					return err
				}
				if done {
					break interleaved
				}
			}
		}
	}
	if d.overrun {
		return jpegCorrupt("%v", errJPEGTruncated)
	}
	for _, n := range d.scan {
		if !d.progressive || d.specStart == 0 && d.succHigh == 0 {
			d.comps[n].decoded = true
		}
	}
	return nil
}

// decodeDC decodes component n's next DC difference, updates its
// prediction and returns the DC value times scale (the quantizer step, or
// 2^Al in a progressive scan), refusing values int16 cannot hold.
func (d *jpegDecoder) decodeDC(n int, scale int32) (int16, error) {
	t := d.huffDecode(&d.huffDC[d.comps[n].hd])
	if t < 0 || t > 15 {
		return 0, jpegCorrupt("bad Huffman code")
	}
	var diff int32
	if t != 0 {
		diff = d.receiveExtend(t)
	}
	dc := int64(d.comps[n].dcPred) + int64(diff)
	if dc != int64(int32(dc)) {
		return 0, jpegCorrupt("DC prediction overflows")
	}
	d.comps[n].dcPred = int32(dc)
	if p := dc * int64(scale); p < -1<<15 || p >= 1<<15 {
		return 0, jpegCorrupt("DC coefficient overflows")
	}
	return int16(dc * int64(scale)), nil
}

// decodeBlock decodes one sequential block of component n, dequantized, in
// row-major order.
func (d *jpegDecoder) decodeBlock(data *[64]int16, n int) error {
	comp := &d.comps[n]
	dq := &d.dequant[comp.tq]
	if d.codeBits < 16 {
		d.grow()
	}
	dc, err := d.decodeDC(n, int32(dq[0]))
	if err != nil {
		return err
	}
	*data = [64]int16{}
	data[0] = dc
	ac := &d.huffAC[comp.ha]
	for k := 1; k < 64; {
		r, s, err := d.decodeRunSize(ac)
		if err != nil {
			return err
		}
		if s == 0 {
			if r != 15 {
				break // end of block
			}
			k += 16
			continue
		}
		k += r
		zig := jpegDezigzag[k]
		k++
		data[zig] = int16(d.receiveExtend(s) * int32(dq[zig]))
	}
	return nil
}

// decodeBlockProgDC decodes a progressive DC scan's bits for one block.
func (d *jpegDecoder) decodeBlockProgDC(data *[64]int16, n int) error {
	if d.specEnd != 0 {
		return jpegCorrupt("progressive DC scan includes AC coefficients")
	}
	if d.codeBits < 16 {
		d.grow()
	}
	if d.succHigh != 0 {
		if d.getBit() {
			data[0] += int16(1 << d.succLow)
		}
		return nil
	}
	dc, err := d.decodeDC(n, 1<<d.succLow)
	if err != nil {
		return err
	}
	*data = [64]int16{}
	data[0] = dc
	return nil
}

// refine applies a correction bit to a non-zero coefficient (T.81 G.1.2.3).
func (d *jpegDecoder) refine(p *int16, bit int16) {
	if d.getBit() && *p&bit == 0 {
		if *p > 0 {
			*p += bit
		} else {
			*p -= bit
		}
	}
}

// decodeRunSize decodes an AC symbol: a run r of zero coefficients and the
// size s of the next one's magnitude.
func (d *jpegDecoder) decodeRunSize(h *jpegHuffman) (r, s int, err error) {
	rs := d.huffDecode(h)
	if rs < 0 {
		return 0, 0, jpegCorrupt("bad Huffman code")
	}
	return rs >> 4, rs & 15, nil
}

// startEOBRun reads an end-of-band run of 2^r plus the next r bits blocks,
// counting the current one (T.81 G.1.2.2).
func (d *jpegDecoder) startEOBRun(r int) {
	d.eobRun = 1<<r - 1
	if r != 0 {
		d.eobRun += d.getBits(r)
	}
}

// decodeBlockProgAC decodes a progressive AC scan's bits for one block.
func (d *jpegDecoder) decodeBlockProgAC(data *[64]int16, h *jpegHuffman) error {
	if d.specStart == 0 {
		return jpegCorrupt("progressive AC scan includes the DC coefficient")
	}
	if d.succHigh == 0 {
		if d.eobRun > 0 {
			d.eobRun--
			return nil
		}
		for k := d.specStart; k <= d.specEnd; {
			r, s, err := d.decodeRunSize(h)
			if err != nil {
				return err
			}
			if s == 0 {
				if r < 15 {
					d.startEOBRun(r)
					break
				}
				k += 16
				continue
			}
			k += r
			zig := jpegDezigzag[k]
			k++
			data[zig] = int16(d.receiveExtend(s) * (1 << d.succLow))
		}
		return nil
	}
	bit := int16(1 << d.succLow)
	if d.eobRun > 0 {
		d.eobRun--
		for k := d.specStart; k <= d.specEnd; k++ {
			if p := &data[jpegDezigzag[k]]; *p != 0 {
				d.refine(p, bit)
			}
		}
		return nil
	}
	for k := d.specStart; k <= d.specEnd; {
		r, s, err := d.decodeRunSize(h)
		if err != nil {
			return err
		}
		var value int16
		if s == 0 {
			if r < 15 {
				d.startEOBRun(r)
				r = 64 // the rest of the band only refines
			}
		} else {
			if s != 1 {
				return jpegCorrupt("bad Huffman code in a refinement scan")
			}
			value = -bit
			if d.getBit() {
				value = bit
			}
		}
		for k <= d.specEnd {
			p := &data[jpegDezigzag[k]]
			k++
			if *p != 0 {
				d.refine(p, bit)
			} else {
				if r == 0 {
					*p = value
					break
				}
				r--
			}
		}
	}
	return nil
}

// finishProgressive dequantizes the coefficients and runs the IDCT.
func (d *jpegDecoder) finishProgressive() {
	for n := range d.comps {
		comp := &d.comps[n]
		dq := &d.dequant[comp.tq]
		w, h := (comp.x+7)>>3, (comp.y+7)>>3
		for j := range h {
			for i := range w {
				block := (*[64]int16)(comp.coeff[64*(i+j*comp.coeffW):])
				for k := range block {
					block[k] = int16(int32(block[k]) * int32(dq[k]))
				}
				idctBlock(comp.data[comp.w2*j*8+i*8:], comp.w2, block)
			}
		}
	}
}
