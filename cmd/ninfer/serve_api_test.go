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

func TestParseMediaDomains(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"images.example, 127.0.0.1,", []string{"images.example", "127.0.0.1"}, true},
		{"https://images.example", nil, false},
		{"images.example:8080", nil, false},
		{"images.example/pics", nil, false},
		{"*.example", nil, false},
		{"user@images.example", nil, false},
		{"[::1]", nil, false},
	} {
		got, err := parseMediaDomains(tc.in)
		if (err == nil) != tc.ok || cmp.Diff(tc.want, got) != "" {
			t.Errorf("parseMediaDomains(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
