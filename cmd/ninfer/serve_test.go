package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lockedBuffer is a bytes.Buffer safe for one writer and one reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServeRejectsBadFlags(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{}, "--model is required"},
		{"a port out of range", []string{"--model", model, "--port", "70000"}, "--port 70000"},
		{"zero concurrency", []string{"--model", model, "--max-concurrency", "0"}, "--max-concurrency 0"},
		{"a zero timeout", []string{"--model", model, "--timeout", "0s"}, "--timeout 0s"},
		{"a stray argument", []string{"--model", model, "extra"}, "unexpected arguments"},
		{"a pprof address that cannot be bound", []string{"--model", model, "--port", "0", "--pprof", "127.0.0.1:99999"}, "--pprof: listen tcp"},
		{"a draft graph without a draft model", []string{"--model", model, "--port", "0", "--graph", "draft"}, "give it with --model ALIAS=FILE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"serve"}, tc.args...)...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
		})
	}
}

// serve prints a ready line naming its URL once /health answers 200,
// requires the API key on /v1/, serves pprof only on the --pprof listener,
// and exits 0 when its context ends (SIGTERM).
func TestServeReadyLineAndShutdown(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- serve(ctx, []string{"--model", model, "--port", "0", "--threads", "1", "--api-key", "k", "--max-concurrency", "2", "--pprof", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	var url string
	deadline := time.Now().Add(20 * time.Second)
	for url == "" {
		if line, ok := strings.CutPrefix(stdout.String(), serveReady); ok {
			url = strings.Fields(line)[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("url %q does not bind 127.0.0.1 by default", url)
	}
	resp, err := http.Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h["status"] != "ok" || h["model"] != "stories260K" || h["max_running"] != 2.0 {
		t.Errorf("/health: %d %v", resp.StatusCode, h)
	}
	for _, tc := range []struct {
		key  string
		want int
	}{{"", 401}, {"Bearer k", 200}} {
		req, _ := http.NewRequest("GET", url+"/v1/models", nil)
		if tc.key != "" {
			req.Header.Set("Authorization", tc.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if diff := cmp.Diff(tc.want, resp.StatusCode); diff != "" {
			t.Errorf("/v1/models with key %q (-want +got):\n%s", tc.key, diff)
		}
	}
	_, pprofLine, _ := strings.Cut(stderr.String(), "ninfer serve: pprof on ")
	pprofURL := strings.Fields(pprofLine + " ")[0]
	for _, tc := range []struct {
		url  string
		want int
	}{{pprofURL + "cmdline", 200}, {url + "/debug/pprof/cmdline", 404}} {
		resp, err := http.Get(tc.url)
		if err != nil {
			t.Fatalf("GET %s: %v (stderr %q)", tc.url, err, stderr.String())
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.url, resp.StatusCode, tc.want)
		}
	}
	cancel()
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after shutdown; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after its context ended")
	}
}

func TestResolveAPIKey(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	os.WriteFile(keyFile, []byte("  s3cret \nsecond line\n"), 0o600)
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	for _, tc := range []struct {
		name, flag, file, env string
		want, wantErr         string
	}{
		{name: "none", want: ""},
		{name: "the environment", env: "envkey", want: "envkey"},
		{name: "the flag wins over the environment", flag: "flagkey", env: "envkey", want: "flagkey"},
		{name: "a file's first line, trimmed", file: keyFile, env: "envkey", want: "s3cret"},
		{name: "both flags", flag: "k", file: keyFile, wantErr: "exclusive"},
		{name: "a missing file", file: filepath.Join(dir, "nope"), wantErr: "--api-key-file"},
		{name: "an empty file", file: empty, wantErr: "first line is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveAPIKey(tc.flag, tc.file, tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("key %q, err %v; want %q", got, err, tc.want)
			}
		})
	}
}
