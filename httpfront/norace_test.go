//go:build !race

package httpfront_test

const raceDetector = false
