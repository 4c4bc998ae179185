// Package graphdeftest checks reported graph errors against annotations in the
// test input, in the manner of Go's errorcheck tests: a line of a YAML test
// file that should draw errors ends with a comment
//
//	# ERROR "regexp" "another regexp"
//
// holding one Go-quoted (or back-quoted) regular expression per expected
// error on that line. Every error must match an annotation on its own line,
// and every annotation must be matched.
package graphdeftest

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/graphdef"
)

// Want is one expected error: on Line, with a message matching Re.
type Want struct {
	Line int
	Re   *regexp.Regexp
}

var annotation = regexp.MustCompile(`#\s*ERROR\b(.*)$`)

// Wants reads the "# ERROR" annotations in src. It fails on an annotation
// without a pattern, an unterminated string, or an invalid regular expression.
func Wants(src []byte) ([]Want, error) {
	var wants []Want
	for i, line := range strings.Split(string(src), "\n") {
		m := annotation.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rest := strings.TrimSpace(m[1])
		if rest == "" {
			return nil, fmt.Errorf("line %d: ERROR annotation without a pattern", i+1)
		}
		for rest != "" {
			q, err := strconv.QuotedPrefix(rest)
			if err != nil {
				return nil, fmt.Errorf("line %d: bad ERROR pattern %s: %v", i+1, rest, err)
			}
			pat, _ := strconv.Unquote(q)
			re, err := regexp.Compile(pat)
			if err != nil {
				return nil, fmt.Errorf("line %d: %v", i+1, err)
			}
			wants = append(wants, Want{Line: i + 1, Re: re})
			rest = strings.TrimSpace(rest[len(q):])
		}
	}
	return wants, nil
}

// Check compares err, the result of parsing or compiling src as file, with the
// annotations in src, and reports each difference through t: errors that are
// not a graphdef.ErrorList, errors in another file or without a line and
// column (YAML syntax errors, which carry only a line, are exempt from the
// column), unexpected errors, and expected errors that did not occur.
func Check(t testing.TB, file string, src []byte, err error) {
	t.Helper()
	wants, werr := Wants(src)
	if werr != nil {
		t.Fatalf("%s: %v", file, werr)
	}
	var list graphdef.ErrorList
	if err != nil && !errors.As(err, &list) {
		t.Fatalf("%s: error is %T, not a graphdef.ErrorList: %v", file, err, err)
	}
	used := make([]bool, len(wants))
	for _, e := range list {
		if e.Pos.File != file || e.Pos.Line < 1 || (e.Pos.Col < 1 && !strings.HasPrefix(e.Msg, "yaml:")) {
			t.Errorf("%s: error without a full position: %v", file, e)
		}
		matched := false
		for i, w := range wants {
			if !used[i] && w.Line == e.Pos.Line && w.Re.MatchString(e.Msg) {
				used[i], matched = true, true
				break
			}
		}
		if !matched {
			t.Errorf("unexpected error: %v", e)
		}
	}
	for i, w := range wants {
		if !used[i] {
			t.Errorf("%s:%d: missing error matching %q", file, w.Line, w.Re)
		}
	}
}
