package tok

import (
	"fmt"
	"unicode/utf8"
)

// byteEnc maps a byte to the UTF-8 of its GPT-2 bytes_to_unicode character;
// byteDec is the inverse, keyed by that character.
var byteEnc, byteDec = byteTables()

// byteTables builds GPT-2's byte <-> printable-character tables: the bytes
// '!'..'~', '¡'..'¬' and '®'..'ÿ' stand for themselves, the remaining 68
// bytes take U+0100 onwards in byte order.
func byteTables() ([256]string, map[rune]byte) {
	var enc [256]string
	dec := make(map[rune]byte, 256)
	self := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	next := rune(256)
	for b := range 256 {
		r := rune(b)
		if !self(b) {
			r = next
			next++
		}
		enc[b] = string(r)
		dec[r] = byte(b)
	}
	return enc, dec
}

// decodeCodepoints splits s into code points as llama.cpp does: well-formed
// sequences by their bit patterns (overlong forms and surrogates are not
// rejected), and each byte that starts no complete sequence as U+FFFD. Code
// points above U+10FFFF also become U+FFFD.
func decodeCodepoints(s string, dst []rune) []rune {
	cont := func(i int) bool { return i < len(s) && s[i]&0xC0 == 0x80 }
	for i := 0; i < len(s); {
		b := rune(s[i])
		switch {
		case b < 0x80:
			dst = append(dst, b)
			i++
		case b&0x40 == 0:
			dst = append(dst, utf8.RuneError)
			i++
		case b&0x20 == 0 && cont(i+1):
			dst = append(dst, (b&0x1F)<<6|rune(s[i+1])&0x3F)
			i += 2
		case b&0x20 != 0 && b&0x10 == 0 && cont(i+1) && cont(i+2):
			dst = append(dst, (b&0x0F)<<12|(rune(s[i+1])&0x3F)<<6|rune(s[i+2])&0x3F)
			i += 3
		case b&0x30 == 0x30 && b&0x08 == 0 && cont(i+1) && cont(i+2) && cont(i+3):
			c := (b&0x07)<<18 | (rune(s[i+1])&0x3F)<<12 | (rune(s[i+2])&0x3F)<<6 | rune(s[i+3])&0x3F
			if c > utf8.MaxRune {
				c = utf8.RuneError
			}
			dst = append(dst, c)
			i += 4
		default:
			dst = append(dst, utf8.RuneError)
			i++
		}
	}
	return dst
}

// appendCodepoint appends c's UTF-8 encoding by bit pattern alone, so that
// surrogate code points round-trip the bytes decodeCodepoints read.
func appendCodepoint(dst []byte, c rune) []byte {
	switch {
	case c < 0x80:
		return append(dst, byte(c))
	case c < 0x800:
		return append(dst, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F)
	case c < 0x10000:
		return append(dst, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
	return append(dst, 0xF0|byte(c>>18), 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
}

// byteLevelDecode turns a byte-level BPE token's text back into bytes. A
// character outside the byte table is written as llama.cpp writes it:
// "[UNK_BYTE_0x<hex of its UTF-8>" followed by the whole text and "]".
func byteLevelDecode(text string) string {
	if utf8.ValidString(text) { // the common case, without a code point slice
		out := make([]byte, 0, len(text))
		for _, c := range text {
			b, ok := byteDec[c]
			if !ok {
				return byteLevelDecodeSlow(text)
			}
			out = append(out, b)
		}
		return string(out)
	}
	return byteLevelDecodeSlow(text)
}

// byteLevelDecodeSlow is byteLevelDecode for text with characters outside
// the byte table or invalid UTF-8.
func byteLevelDecodeSlow(text string) string {
	var out []byte
	var tmp [4]byte
	for _, c := range decodeCodepoints(text, nil) {
		if b, ok := byteDec[c]; ok {
			out = append(out, b)
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, u := range appendCodepoint(tmp[:0], c) {
			out = fmt.Appendf(out, "%02x", u)
		}
		out = append(out, text...)
		out = append(out, ']')
	}
	return string(out)
}
