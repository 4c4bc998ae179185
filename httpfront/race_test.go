//go:build race

package httpfront_test

// raceDetector is true in `go test -race` builds, which skip the tests
// that only measure how much CPU work stays off the engine (their
// concurrency is covered by the smaller tests).
const raceDetector = true
