package tok

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The two large parts of a tokenizer.json, model.vocab (an object of
// text -> id) and model.merges (a list of strings or of string pairs), are
// read by this small scanner instead of encoding/json's reflection, which
// is several times slower on 150k-entry values. encoding/json has already
// checked that they are well-formed JSON; the scanner still checks the
// shapes it needs and reports what it found where.

// jsonScan reads JSON values from b, which holds one complete value.
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *jsonScan) peek() byte {
	s.space()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// describe names the value starting at the next non-space byte for errors.
func (s *jsonScan) describe() string {
	switch c := s.peek(); {
	case c == 0:
		return "the end of the value"
	case c == '"':
		return "a string"
	case c == '{':
		return "an object"
	case c == '[':
		return "a list"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	case c == 't' || c == 'f' || c == 'n':
		return "a literal"
	default:
		return fmt.Sprintf("%q", c)
	}
}

// expect consumes byte c.
func (s *jsonScan) expect(c byte, what string) error {
	if s.peek() != c {
		return fmt.Errorf("want %s, found %s", what, s.describe())
	}
	s.i++
	return nil
}

// more reports whether a list or object continues after an element,
// consuming the comma or the closing byte.
func (s *jsonScan) more(end byte) (bool, error) {
	switch s.peek() {
	case ',':
		s.i++
		return true, nil
	case end:
		s.i++
		return false, nil
	}
	return false, fmt.Errorf("want ',' or '%c', found %s", end, s.describe())
}

// str reads a string. Strings without escapes (nearly all) are copied
// directly; others, and invalid UTF-8 (which encoding/json replaces with
// U+FFFD), go through encoding/json so the text is exactly what it gives.
func (s *jsonScan) str() (string, error) {
	if s.peek() != '"' {
		return "", fmt.Errorf("want a string, found %s", s.describe())
	}
	start := s.i
	s.i++
	plain := true
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			s.i++
			raw := s.b[start+1 : s.i-1]
			if plain && utf8.Valid(raw) {
				return string(raw), nil
			}
			var v string
			if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
				return "", err
			}
			return v, nil
		}
		if c == '\\' {
			plain = false
			s.i++
		}
		s.i++
	}
	return "", fmt.Errorf("unterminated string")
}

// integer reads a JSON number that must be an integer.
func (s *jsonScan) integer() (int64, error) {
	s.space()
	start := s.i
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	var v int64
	digits := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		if v > (1<<62)/10 {
			return 0, fmt.Errorf("integer %s too large", s.b[start:s.i+1])
		}
		v = v*10 + int64(s.b[s.i]-'0')
		s.i++
		digits++
	}
	if digits == 0 {
		s.i = start
		return 0, fmt.Errorf("want an integer, found %s", s.describe())
	}
	if s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		return 0, fmt.Errorf("want an integer, found %s...", s.b[start:s.i+1])
	}
	if neg {
		v = -v
	}
	return v, nil
}

// vocabEntry is one model.vocab entry.
type vocabEntry struct {
	text string
	id   int64
}

// parseVocab reads model.vocab, in file order.
func parseVocab(raw []byte) ([]vocabEntry, error) {
	s := &jsonScan{b: raw}
	if err := s.expect('{', "an object"); err != nil {
		return nil, err
	}
	entries := make([]vocabEntry, 0, len(raw)/16)
	if s.peek() == '}' {
		return entries, nil
	}
	for {
		text, err := s.str()
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", len(entries), err)
		}
		if err := s.expect(':', "':'"); err != nil {
			return nil, fmt.Errorf("entry %q: %w", text, err)
		}
		id, err := s.integer()
		if err != nil {
			return nil, fmt.Errorf("entry %q: %w", text, err)
		}
		entries = append(entries, vocabEntry{text, id})
		more, err := s.more('}')
		if err != nil {
			return nil, fmt.Errorf("after entry %q: %w", text, err)
		}
		if !more {
			return entries, nil
		}
	}
}

// parseMerges reads model.merges in either form: "left right" strings, or
// [left, right] pairs, written as "left right" with a space inside a part
// as U+0120 (as llama.cpp's converter does). The error's index says which
// merge is malformed.
func parseMerges(raw []byte) ([]string, int, error) {
	s := &jsonScan{b: raw}
	if s.peek() == 'n' { // null
		return nil, -1, nil
	}
	if err := s.expect('[', "a list"); err != nil {
		return nil, -1, err
	}
	var out []string
	if s.peek() == ']' {
		return out, -1, nil
	}
	pairs := s.peek() == '['
	out = make([]string, 0, len(raw)/12)
	for {
		i := len(out)
		if pairs {
			if err := s.expect('[', "an [a, b] pair like the first merge"); err != nil {
				return nil, i, err
			}
			l, err := s.str()
			if err != nil {
				return nil, i, err
			}
			if err := s.expect(',', "',' and a second part"); err != nil {
				return nil, i, err
			}
			r, err := s.str()
			if err != nil {
				return nil, i, err
			}
			if err := s.expect(']', "']' after 2 parts"); err != nil {
				return nil, i, err
			}
			out = append(out, strings.ReplaceAll(l, " ", "\u0120")+" "+strings.ReplaceAll(r, " ", "\u0120"))
		} else {
			m, err := s.str()
			if err != nil {
				return nil, i, fmt.Errorf("%w (like the first merge)", err)
			}
			out = append(out, m)
		}
		more, err := s.more(']')
		if err != nil {
			return nil, i, err
		}
		if !more {
			return out, -1, nil
		}
	}
}
