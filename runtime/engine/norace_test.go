//go:build !race

package engine_test

// raceDetector is true in `go test -race` builds (see race_test.go).
const raceDetector = false
