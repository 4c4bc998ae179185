package graphdef

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Pos is a place in a graph file. Line and Col are 1-based; Col counts
// characters, as the YAML parser does. A zero Line means the position is
// unknown (a hand-built graph, or a YAML error without a line).
type Pos struct {
	File      string
	Line, Col int
}

// IsValid reports whether the position has a line.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "file:line:col", leaving out the parts that are unknown
// ("file:line" without a column, "file" without a line, "-" when all are).
func (p Pos) String() string {
	s := p.File
	if p.Line > 0 {
		if s != "" {
			s += ":"
		}
		s += fmt.Sprint(p.Line)
		if p.Col > 0 {
			s += fmt.Sprintf(":%d", p.Col)
		}
	}
	if s == "" {
		s = "-"
	}
	return s
}

// Compare orders positions by file, line and column.
func (p Pos) Compare(q Pos) int {
	return cmp.Or(strings.Compare(p.File, q.File), cmp.Compare(p.Line, q.Line), cmp.Compare(p.Col, q.Col))
}

// lineCol is the short form used inside messages that point at another place
// in the same file.
func (p Pos) lineCol() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Error is one problem in a graph file, at the position it concerns.
type Error struct {
	Pos Pos
	Msg string
}

// Error returns "file:line:col: msg".
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// ErrorList collects every problem found in a graph, like go/scanner's
// ErrorList. The zero value is an empty list ready to use.
type ErrorList []*Error

// Add appends an error at pos.
func (l *ErrorList) Add(pos Pos, msg string) { *l = append(*l, &Error{Pos: pos, Msg: msg}) }

// Addf appends an error at pos with a formatted message.
func (l *ErrorList) Addf(pos Pos, format string, args ...any) {
	l.Add(pos, fmt.Sprintf(format, args...))
}

// Sort orders the list by position, then message; errors at the same place
// with the same message keep their relative order.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(a.Pos.Compare(b.Pos), strings.Compare(a.Msg, b.Msg))
	})
}

// Err returns the list as an error, or nil when it is empty. The result is
// the list itself, so callers can recover it with errors.As.
func (l ErrorList) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// Error returns every error on its own line, in list order.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}
