package hint

import "testing"

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"nodes", "nodes", 0},
		{"nodse", "nodes", 1},
		{"model.foward", "model.forward", 1},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3},
		{"größe", "grösse", 2},
	}
	for _, tt := range tests {
		if got := Distance(tt.a, tt.b); got != tt.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestClosest(t *testing.T) {
	tests := []struct {
		name       string
		candidates []string
		want       string
	}{
		{"nodse", []string{"graph", "doc", "params", "nodes", "out", "tests"}, "nodes"},
		{"Nodes", []string{"graph", "nodes"}, "nodes"},
		{"tokns", []string{"positions", "tokens"}, "tokens"},
		{"logit", []string{"logits", "hidden"}, "logits"},
		{"xyz", []string{"graph", "nodes"}, ""},
		{"nodes", []string{"nodes"}, ""},
		{"", []string{"a"}, ""},
		{"ab", []string{"ac", "ab_"}, "ac"},
		{"b", []string{"a"}, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.name, tt.candidates); got != tt.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tt.name, tt.candidates, got, tt.want)
		}
	}
}
