package tok

import (
	"strconv"
	"strings"
)

// piece computes the bytes token id stands for, as llama.cpp's
// token_to_piece with special=true: control, unknown and user-defined tokens
// give their text; SentencePiece normal tokens their text with "▁" as " ";
// byte tokens <0xNN> the byte; byte-level BPE normal tokens the bytes their
// characters encode; unused and undefined tokens nothing.
func (t *Tokenizer) piece(id int32) string {
	a, text := t.attrs[id], t.texts[id]
	switch {
	case a&(attrUnknown|attrControl|attrUser) != 0:
		return text
	case a&attrNormal != 0:
		if t.kind == kindSPM {
			return strings.ReplaceAll(text, "\u2581", " ")
		}
		return byteLevelDecode(text)
	case a&attrByte != 0:
		return string([]byte{tokenByte(text)})
	}
	return ""
}

// tokenByte parses the byte of a "<0xNN>" token the way strtol does: the
// leading hex digits of the two characters after "<0x", 0 when none.
func tokenByte(text string) byte {
	if len(text) < 3 {
		return 0
	}
	h := text[3:min(len(text), 5)]
	end := 0
	for end < len(h) && strings.IndexByte("0123456789abcdefABCDEF", h[end]) >= 0 {
		end++
	}
	v, _ := strconv.ParseUint(h[:end], 16, 8)
	return byte(v)
}

// Piece returns the bytes token id decodes to, as llama.cpp's
// token_to_piece with special=true: "▁" becomes a space in SentencePiece
// vocabularies, a byte token <0xNN> is that one byte, byte-level BPE
// characters become the bytes they stand for, and control and user-defined
// tokens give their text (e.g. "<|im_end|>"). A piece may be part of a
// UTF-8 sequence. Ids outside the vocabulary give nil. The caller owns the
// returned slice.
func (t *Tokenizer) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

// IsControl reports whether id is a control token (such as <|im_start|>,
// <|im_end|> or <|endoftext|>), whose text an API hides when asked to skip
// special tokens. User-defined tokens such as Qwen3's <think> are not
// control tokens. Ids outside the vocabulary report false.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&attrControl != 0
}

// Decode returns the concatenated pieces of ids: the exact bytes, which may
// hold invalid or incomplete UTF-8 (a Decoder replaces those). Unlike
// llama.cpp's llama_detokenize it strips no leading space and does not
// clean up spaces around punctuation. Ids outside the vocabulary are
// skipped.
func (t *Tokenizer) Decode(ids []int32) string {
	var b strings.Builder
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.pieces) {
			b.WriteString(t.pieces[id])
		}
	}
	return b.String()
}

// Decoder turns a stream of token ids into text without ever splitting a
// UTF-8 sequence: bytes that may still become a character are held back
// until the tokens completing them arrive. A Decoder is not safe for
// concurrent use.
type Decoder struct {
	t   *Tokenizer
	buf []byte
}

// NewDecoder returns an incremental decoder for t's tokens.
func (t *Tokenizer) NewDecoder() *Decoder { return &Decoder{t: t} }

// Add appends id's piece and returns the text it completes, which is valid
// UTF-8 and may be empty. Byte sequences that can no longer become a valid
// character are returned as U+FFFD, one per maximal invalid subpart (as
// Python's and WHATWG's decoders do); an incomplete sequence at the end is
// kept for the next call. Ids outside the vocabulary add nothing.
func (d *Decoder) Add(id int32) string {
	if id < 0 || int(id) >= len(d.t.pieces) {
		return ""
	}
	d.buf = append(d.buf, d.t.pieces[id]...)
	return d.drain(false)
}

// Flush returns the bytes still held, with an incomplete sequence as
// U+FFFD, and empties the decoder for reuse.
func (d *Decoder) Flush() string { return d.drain(true) }

// drain emits the longest decodable prefix of the buffer (all of it when
// final) and keeps the rest.
func (d *Decoder) drain(final bool) string {
	var out strings.Builder
	i := 0
	for i < len(d.buf) {
		n, ok, incomplete := scanUTF8(d.buf[i:])
		if incomplete && !final {
			break
		}
		if ok {
			out.Write(d.buf[i : i+n])
		} else {
			out.WriteString("\uFFFD")
		}
		i += n
	}
	d.buf = d.buf[:copy(d.buf, d.buf[i:])]
	return out.String()
}

// scanUTF8 reads the sequence at the start of p (len(p) > 0) by the
// well-formed ranges of the Unicode standard (table 3-7). It returns its
// length n and ok for a valid character; otherwise n is the length of the
// maximal invalid subpart, and incomplete reports that those n bytes are a
// valid prefix cut short by the end of p.
func scanUTF8(p []byte) (n int, ok, incomplete bool) {
	b := p[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case b < 0x80:
		return 1, true, false
	case b < 0xC2:
		return 1, false, false
	case b < 0xE0:
		need = 2
	case b == 0xE0:
		need, lo = 3, 0xA0
	case b == 0xED:
		need, hi = 3, 0x9F
	case b < 0xF0:
		need = 3
	case b == 0xF0:
		need, lo = 4, 0x90
	case b < 0xF4:
		need = 4
	case b == 0xF4:
		need, hi = 4, 0x8F
	default:
		return 1, false, false
	}
	for k := 1; k < need; k++ {
		if k >= len(p) {
			return k, false, true
		}
		if c := p[k]; c < lo || c > hi {
			return k, false, false
		}
		lo, hi = 0x80, 0xBF
	}
	return need, true, false
}
