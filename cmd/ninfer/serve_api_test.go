package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOrigins(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"https://app.example, http://localhost:3000/", []string{"https://app.example", "http://localhost:3000"}, true},
		{"*", []string{"*"}, true},
		{"app.example", nil, false},
		{"https://app.example/path", nil, false},
		{"ftp://x", nil, false},
	} {
		got, err := parseOrigins(tc.in)
		if (err == nil) != tc.ok || cmp.Diff(tc.want, got) != "" {
			t.Errorf("parseOrigins(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
