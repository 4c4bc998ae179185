package httpfront_test

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
)

// TestRequestLog: one line per request, streams included (logged when
// they end), with tokens in and out and the time to first token; probes
// that succeed are not logged, and a path cannot forge a line.
func TestRequestLog(t *testing.T) {
	var buf lockedLog
	s := start(t, "stories260K.gguf", httpfront.Config{RequestLog: &buf}, 2)
	s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"Lily","max_tokens":4,"ignore_eos":true}`)
	s.stream(t, "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true,"stream":true}`)
	s.call(t, "GET", "/health", "")
	s.call(t, "GET", "/nope%0aninfer: forged", "")
	var lines []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if lines = strings.Split(strings.TrimSpace(buf.String()), "\n"); len(lines) >= 3 {
			break
		}
	}
	shape := regexp.MustCompile(`^ninfer: (\S+ .+? \d{3}) in=(\S+) out=(\S+) ttft=(\S+) [\d.]+[µm]?s$`)
	var got [][]string
	for _, l := range lines {
		m := shape.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("log line %q does not match %s", l, shape)
		}
		ttft := "-"
		if m[4] != "-" {
			ttft = "set"
		}
		got = append(got, []string{m[1], m[2], m[3], ttft})
	}
	prompt := len(s.inst.Tokenizer.Encode("Lily", true, true))
	want := [][]string{
		{"POST /v1/completions 200", strconv.Itoa(prompt), "4", "set"},
		{"POST /v1/chat/completions 200", got[1][1], "3", "set"},
		{"GET /nope?ninfer: forged 404", "-", "-", "-"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request log (-want +got):\n%s", diff)
	}
}

// lockedLog is a buffer the server's log goroutines may write to while
// the test reads it.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
