package tok

import (
	"strings"
)

// fragment is a piece of the input after special tokens are split out:
// either a token (tok >= 0) or the text text[off:off+n].
type fragment struct {
	tok    int32
	off, n int
}

// Encode returns the token ids of text, exactly as llama.cpp's
// llama_tokenize does.
//
// With addSpecial, BOS is prepended when AddBOS() is true and EOS appended
// when the file's tokenizer.ggml.add_eos_token is true. With parseSpecial,
// the text of control tokens (such as "<|im_start|>" or "<s>") becomes that
// single token; user-defined tokens are always split out as single tokens.
// SentencePiece vocabularies escape spaces as "▁" and, unless the file sets
// tokenizer.ggml.add_space_prefix to false, prefix a space to the text and
// to every text fragment that follows a special token; their characters
// without a token of their own become byte tokens (<0xNN>), or the unknown
// token when the vocabulary has no byte token. Encode never fails: invalid
// UTF-8 is tokenized byte-wise (SentencePiece) or as U+FFFD (byte-level
// BPE). Out-of-range ids are never returned.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	var frags []fragment
	if text != "" {
		frags = t.partition(text, parseSpecial)
	}
	out := make([]int32, 0, len(text)/3+2)
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	var sc scratch
	prevSpecial := true
	for _, f := range frags {
		if f.tok >= 0 {
			out = append(out, f.tok)
			prevSpecial = true
			continue
		}
		s := text[f.off : f.off+f.n]
		switch t.kind {
		case kindSPM:
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			out = t.encodeSPM(strings.ReplaceAll(s, " ", "\u2581"), out, &sc)
		case kindBPE:
			out = t.encodeBPE(s, out, &sc)
		}
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out
}

// partition splits text at the occurrences of special tokens, longest token
// first, as llama.cpp's tokenizer_st_partition does. Without parseSpecial,
// control and unknown tokens stay text.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	frags := []fragment{{tok: -1, off: 0, n: len(text)}}
	var next []fragment
	for _, id := range t.special {
		a := t.attrs[id]
		if !parseSpecial && a&(attrControl|attrUnknown) != 0 {
			continue
		}
		tt := t.texts[id]
		if !strings.Contains(text, tt) {
			continue
		}
		next = next[:0]
		for _, f := range frags {
			if f.tok >= 0 {
				next = append(next, f)
				continue
			}
			off, n := f.off, f.n
			for n > 0 {
				k := strings.Index(text[off:off+n], tt)
				if k < 0 {
					break
				}
				if k > 0 {
					next = append(next, fragment{tok: -1, off: off, n: k})
				}
				next = append(next, fragment{tok: id})
				end := off + k + len(tt)
				n -= end - off
				off = end
				if a&attrRStrip != 0 {
					for n > 0 && isCSpace(text[off]) {
						off++
						n--
					}
				}
			}
			if n > 0 {
				next = append(next, fragment{tok: -1, off: off, n: n})
			}
		}
		frags, next = next, frags
	}
	return frags
}

// isCSpace reports whether b is whitespace in the C locale.
func isCSpace(b byte) bool { return b == ' ' || (b >= '\t' && b <= '\r') }

// utf8Len is the length of the UTF-8 sequence a lead byte announces,
// counting a stray continuation byte as 1, as llama.cpp's unicode_len_utf8.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// symbol is a span of the text being merged; n == 0 once merged into its
// left neighbour. prev and next link the live symbols (-1 at the ends).
type symbol struct {
	start, n   int32
	prev, next int32
	id         int32 // BPE: the token of the symbol's text, -1 if none
}

// bigram is a candidate merge of symbols left and right. size is their
// combined length when queued, so a stale entry is recognized. SentencePiece
// orders by score (higher first), BPE by rank (lower first); ties go to the
// leftmost pair.
type bigram struct {
	left, right int32
	size        int32
	rank        int32
	result      int32 // BPE: the id of the merged text, -1 if none
	score       float32
}

// scratch holds buffers reused across the fragments of one Encode call.
type scratch struct {
	syms []symbol
	spm  queue
	bpe  queue
	cps  []rune
	cls  []class
	raw  []byte
	word []byte
}

// splitSymbols sets sc.syms to the characters of s, per utf8Len.
func (sc *scratch) splitSymbols(s string) []symbol {
	syms := sc.syms[:0]
	for off := 0; off < len(s); {
		l := min(utf8Len(s[off]), len(s)-off)
		i := int32(len(syms))
		next := i + 1
		if off+l == len(s) {
			next = -1
		}
		syms = append(syms, symbol{start: int32(off), n: int32(l), prev: i - 1, next: next})
		off += l
	}
	sc.syms = syms
	return syms
}

// join merges symbol b.right into b.left and relinks the chain.
func join(syms []symbol, b bigram) {
	l, r := &syms[b.left], &syms[b.right]
	l.n += r.n
	r.n = 0
	l.next = r.next
	if r.next >= 0 {
		syms[r.next].prev = b.left
	}
}

// encodeSPM tokenizes one escaped text fragment with SentencePiece bigram
// merges: repeatedly merge the adjacent pair whose concatenation is the
// highest-scoring vocabulary token, then emit each symbol's token or its
// bytes' fallback tokens.
func (t *Tokenizer) encodeSPM(s string, out []int32, sc *scratch) []int32 {
	syms := sc.splitSymbols(s)
	q := &sc.spm
	q.reset(spmBefore)
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l], syms[r]
		id, ok := t.ids[s[a.start:a.start+a.n+b.n]]
		if !ok {
			return
		}
		q.push(bigram{left: l, right: r, score: t.scores[id], size: a.n + b.n})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := syms[b.left], syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		join(syms, b)
		add(syms[b.left].prev, b.left)
		add(b.left, syms[b.left].next)
	}
	if len(syms) == 0 {
		return out
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		sym := syms[i]
		piece := s[sym.start : sym.start+sym.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			if id := t.byteToks[piece[j]]; id >= 0 {
				out = append(out, id)
			}
		}
	}
	return out
}

// encodeBPE tokenizes one text fragment with byte-level BPE: pre-tokenize
// into words, map each word's bytes to GPT-2 characters, merge by rank.
func (t *Tokenizer) encodeBPE(s string, out []int32, sc *scratch) []int32 {
	sc.cps = decodeCodepoints(s, sc.cps[:0])
	cls := sc.cls[:0]
	for _, c := range sc.cps {
		cls = append(cls, classOf(c))
	}
	sc.cls = cls
	t.pre.split(sc.cps, cls, func(a, b int) {
		raw := sc.raw[:0]
		for _, c := range sc.cps[a:b] {
			raw = appendCodepoint(raw, c)
		}
		sc.raw = raw
		out = t.bpeWord(raw, out, sc)
	})
	return out
}

// bpeWord merges the GPT-2 characters of one word (given as its raw bytes)
// by merge rank and appends the resulting tokens. A merged symbol missing
// from the vocabulary falls back to the tokens of its single bytes, skipping
// those that have none (as llama.cpp does).
func (t *Tokenizer) bpeWord(raw []byte, out []int32, sc *scratch) []int32 {
	word := sc.word[:0]
	syms := sc.syms[:0]
	for i, c := range raw {
		next := int32(i + 1)
		if i == len(raw)-1 {
			next = -1
		}
		enc := byteEnc[c]
		syms = append(syms, symbol{start: int32(len(word)), n: int32(len(enc)), prev: int32(i - 1), next: next, id: t.byteIDs[c]})
		word = append(word, enc...)
	}
	sc.word, sc.syms = word, syms
	if t.ignoreMerges {
		if id, ok := t.ids[string(word)]; ok {
			return append(out, id)
		}
	}
	q := &sc.bpe
	q.reset(bpeBefore)
	add := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		a, b := syms[l], syms[r]
		bg := bigram{left: l, right: r, size: a.n + b.n}
		if a.id >= 0 && b.id >= 0 {
			m, ok := t.idRanks[idPair(a.id, b.id)]
			if !ok {
				return
			}
			bg.rank, bg.result = m.rank, m.result
		} else {
			if len(t.textRanks) == 0 {
				return
			}
			rank, ok := t.textRanks[pair{string(word[a.start : a.start+a.n]), string(word[b.start : b.start+b.n])}]
			if !ok {
				return
			}
			bg.rank, bg.result = rank, -1
			if id, ok := t.ids[string(word[a.start:b.start+b.n])]; ok {
				bg.result = id
			}
		}
		q.push(bg)
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		add(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := syms[b.left], syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue
		}
		join(syms, b)
		syms[b.left].id = b.result
		add(syms[b.left].prev, b.left)
		add(b.left, syms[b.left].next)
	}
	if len(syms) == 0 {
		return out
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		sym := syms[i]
		if sym.id >= 0 {
			out = append(out, sym.id)
			continue
		}
		for _, c := range word[sym.start : sym.start+sym.n] {
			if id, ok := t.ids[string([]byte{c})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// spmBefore orders SentencePiece bigrams: higher score first, then leftmost.
func spmBefore(a, b *bigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// bpeBefore orders BPE bigrams: lower rank first, then leftmost.
func bpeBefore(a, b *bigram) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.left < b.left)
}

// queue is a binary heap of bigrams; the first by before is popped first.
type queue struct {
	items  []bigram
	before func(a, b *bigram) bool
}

func (q *queue) reset(before func(a, b *bigram) bool) {
	q.items = q.items[:0]
	q.before = before
}

func (q *queue) len() int { return len(q.items) }

func (q *queue) push(b bigram) {
	q.items = append(q.items, b)
	h := q.items
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.before(&h[i], &h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() bigram {
	h := q.items
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && q.before(&h[c+1], &h[c]) {
			c++
		}
		if !q.before(&h[c], &h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	q.items = h
	return top
}
