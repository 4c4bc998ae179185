// Package hint finds the closest spelling of a misspelt name among candidates,
// for "did you mean" diagnostics. It has no dependencies so that both the node
// registry and the graph parser can use it.
package hint

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate nearest to name by edit distance (insertions,
// deletions, substitutions and transpositions of adjacent characters, compared
// case-insensitively), or "" when none is close enough to be a plausible typo.
// A candidate equal to name is never suggested. Ties go to the earliest
// candidate, so callers control the result by the order they pass.
func Closest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	limit := Limit(name)
	best, bestD := "", limit+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := Distance(strings.ToLower(name), strings.ToLower(c))
		if d < bestD && d < utf8.RuneCountInString(name) {
			best, bestD = c, d
		}
	}
	return best
}

// Limit is the largest edit distance Closest accepts for name: one edit per
// three characters, and at least one.
func Limit(name string) int {
	n := utf8.RuneCountInString(name)
	if n < 3 {
		return 1
	}
	return (n + 1) / 3
}

// Distance is the optimal-string-alignment distance between a and b, counted
// in runes: the fewest insertions, deletions, substitutions and adjacent
// transpositions that turn a into b.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// Three rolling rows of the classic dynamic programme.
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
