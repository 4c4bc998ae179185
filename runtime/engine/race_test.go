//go:build race

package engine_test

// raceDetector is true in `go test -race` builds, whose tests run the
// speculative equivalence matrix on fewer draft windows (the race detector
// needs the interleavings, not every k; the plain build runs them all).
const raceDetector = true
