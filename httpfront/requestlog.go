package httpfront

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// jobKey is the fasthttp user value that holds a generation request's job,
// for its log line.
const jobKey = "ninfer.job"

// logRequest writes the request log's line for one request:
//
//	ninfer: METHOD PATH STATUS in=PROMPT_TOKENS out=GENERATED_TOKENS ttft=DURATION DURATION
//
// with "-" for the token counts and TTFT of requests that generate nothing
// (j nil). Successful probes (/health, /ready, /metrics) are not logged: a
// load balancer or Prometheus polls them every few seconds.
func (s *Server) logRequest(method, path string, status int, received time.Time, j *job) {
	if s.log == nil {
		return
	}
	switch path {
	case "/health", "/ready", "/metrics":
		if status == http.StatusOK {
			return
		}
	}
	in, out, ttft := "-", "-", "-"
	if j != nil {
		var prompt, generated int
		for _, p := range j.prompts {
			prompt += len(p)
		}
		var first time.Time
		j.mu.Lock()
		for _, st := range j.stats {
			generated += st.GeneratedTokens
			if !st.FirstToken.IsZero() && (first.IsZero() || st.FirstToken.Before(first)) {
				first = st.FirstToken
			}
		}
		j.mu.Unlock()
		in, out = fmt.Sprint(prompt), fmt.Sprint(generated)
		if !first.IsZero() {
			ttft = roundDuration(first.Sub(received))
		}
	}
	s.log.Printf("ninfer: %s %s %d in=%s out=%s ttft=%s %s", method, printable(capText(path, 128)), status,
		in, out, ttft, roundDuration(time.Since(received)))
}

// printable is s with control characters and invalid UTF-8 as '?', so
// that a request path cannot forge log lines.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return '?'
		}
		return r
	}, s)
}

// roundDuration prints d to three significant figures or so: 1.23s,
// 45.6ms, 789µs.
func roundDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
