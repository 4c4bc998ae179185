package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFlagMistakes: a mistyped flag or command gets the error and the
// nearest name, not the whole usage; --help lists the flags and exits 0.
func TestFlagMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // lines stderr must hold
	}{
		{"a misspelt serve flag", []string{"serve", "--mdoel", "x"}, 2,
			[]string{"ninfer serve: flag provided but not defined: -mdoel", "did you mean --model?", "run 'ninfer serve --help' to list its flags"}},
		{"a flag missing a letter", []string{"serve", "--max-concurency", "2"}, 2, []string{"did you mean --max-concurrency?"}},
		{"a run flag cut short", []string{"run", "--max-token", "2"}, 2, []string{"did you mean --max-tokens?"}},
		{"a misspelt command", []string{"serv"}, 2, []string{`ninfer: unknown command "serv"`, "did you mean 'ninfer serve'?"}},
		{"serve --help", []string{"serve", "--help"}, 0, []string{"usage: ninfer serve [flags]"}},
		{"run -h", []string{"run", "-h"}, 0, []string{"usage: ninfer run [flags]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(tc.args...)
			var missing []string
			for _, w := range tc.want {
				if !strings.Contains(stderr, w+"\n") {
					missing = append(missing, w)
				}
			}
			if diff := cmp.Diff([]any{tc.code, []string(nil)}, []any{code, missing}); diff != "" {
				t.Errorf("exit code and missing lines (-want +got):\n%s\nstderr:\n%s", diff, stderr)
			}
			listsFlags := strings.Contains(stderr, "-max-concurrency int")
			if isHelp := tc.code == 0; listsFlags != (isHelp && tc.args[0] == "serve") {
				t.Errorf("stderr lists the flags: %v, want only for serve --help:\n%s", listsFlags, stderr)
			}
		})
	}
}

// TestModelFolderWithoutConfig: a --model folder that is no Hugging Face
// checkpoint says what a model path must be and what the folder holds.
func TestModelFolderWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/model.gguf.part", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI("run", "--model", dir, "--prompt", "hi")
	for _, want := range []string{"is a folder without config.json", "expected a GGUF file, or a Hugging Face checkpoint folder", "tokenizer.json", "it holds model.gguf.part"} {
		if code != 1 || !strings.Contains(stderr, want) {
			t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
		}
	}
}

// cliServer is a real `ninfer serve` process: the test binary run as the
// CLI (NINFER_TEST_AS_CLI), its stderr collected line by line.
type cliServer struct {
	cmd    *exec.Cmd
	url    string
	mu     sync.Mutex
	lines  []string // stderr so far
	seen   int      // lines waitLine has looked at
	exited chan error
}

// startCLIServer starts `ninfer serve --port 0 --threads 1 ARGS...` (later
// flags win) and waits for its ready line; it is killed at cleanup.
func startCLIServer(t *testing.T, args ...string) *cliServer {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := &cliServer{cmd: exec.Command(bin, append([]string{"serve", "--port", "0", "--threads", "1"}, args...)...),
		exited: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), "NINFER_TEST_AS_CLI=1")
	stdout, _ := c.cmd.StdoutPipe()
	stderr, _ := c.cmd.StderrPipe()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.mu.Unlock()
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, serveReady) {
		t.Fatalf("ready line %q: %v\nstderr:\n%s", line, err, c.log())
	}
	go func() { io.Copy(io.Discard, stdout); c.exited <- c.cmd.Wait() }()
	c.url = strings.Fields(strings.TrimPrefix(line, serveReady))[0]
	return c
}

// log is the stderr so far.
func (c *cliServer) log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// waitLine waits for a stderr line containing s, after the lines earlier
// calls looked at.
func (c *cliServer) waitLine(t *testing.T, s string) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c.mu.Lock()
		for ; c.seen < len(c.lines); c.seen++ {
			if l := c.lines[c.seen]; strings.Contains(l, s) {
				c.seen++
				c.mu.Unlock()
				return l
			}
		}
		c.mu.Unlock()
	}
	t.Fatalf("no stderr line with %q:\n%s", s, c.log())
	return ""
}

// exitCode waits for the process to end and returns its exit code.
func (c *cliServer) exitCode(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case err := <-c.exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("serve still runs %v later:\n%s", within, c.log())
		return -1
	}
}

// TestServeIntroducesItself: the real binary says what it loaded once the
// model is open, "listening" only then, never the API key, logs one line
// per request, and on Ctrl-C while idle exits at once.
func TestServeIntroducesItself(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	const key = "sk-secret-4242"
	c := startCLIServer(t, "--model", model, "--api-key", key, "--max-concurrency", "2")
	c.waitLine(t, "ninfer serve: listening on "+c.url)
	log := c.log()
	loaded := strings.Index(log, "ninfer serve: loaded tiny-qwen3-f32 in ")
	if loaded < 0 || strings.Index(log, "listening") < loaded || !strings.HasPrefix(log, "ninfer serve: loading "+model) {
		t.Errorf("want 'loading', then 'loaded ... in', then 'listening':\n%s", log)
	}
	summary := map[string]string{}
	for _, l := range strings.Split(log, "\n") {
		if name, value, ok := strings.Cut(strings.TrimPrefix(l, "  "), "  "); ok && strings.HasPrefix(l, "  ") {
			summary[name] = strings.TrimSpace(value)
		}
	}
	want := map[string]*regexp.Regexp{
		"model":        regexp.MustCompile(`tiny-qwen3-f32\.gguf \(qwen3\)$`),
		"weights":      regexp.MustCompile(`^f32 x \d+ \([\d.]+ MiB\)$`),
		"context":      regexp.MustCompile(`^4096 tokens per request \(trained 4096\)$`),
		"kv cache":     regexp.MustCompile(`^\d+ tokens, [\d.]+ MiB, f32 \(\d+ blocks of 16 tokens\)$`),
		"compute":      regexp.MustCompile(`^cpu, 1 threads, \w+ kernels$`),
		"graph":        regexp.MustCompile(`^plain \(max concurrency 2, `),
		"prefix cache": regexp.MustCompile(`^on`),
		"chat":         regexp.MustCompile(`^the model's template .*, tool parser hermes$`),
		"api key":      regexp.MustCompile(`^on `),
	}
	for name, re := range want {
		if !re.MatchString(summary[name]) {
			t.Errorf("summary line %q = %q, want it to match %s", name, summary[name], re)
		}
	}
	req, _ := http.NewRequest("POST", c.url+"/v1/completions", strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"hi","max_tokens":3,"ignore_eos":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	line := c.waitLine(t, "ninfer: POST /v1/completions")
	if re := regexp.MustCompile(`^ninfer: POST /v1/completions 200 in=\d+ out=3 ttft=[\d.]+[µm]?s [\d.]+[µm]?s$`); !re.MatchString(line) {
		t.Errorf("request log line %q does not match %s", line, re)
	}
	began := time.Now()
	c.cmd.Process.Signal(os.Interrupt)
	if code := c.exitCode(t, 5*time.Second); code != 0 {
		t.Errorf("exit %d after Ctrl-C", code)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("an idle server took %v to stop on Ctrl-C", d)
	}
	if strings.Contains(c.log(), key) {
		t.Errorf("stderr shows the API key:\n%s", c.log())
	}
}

// TestServeCtrlCWhileBusy: Ctrl-C with requests in flight says the server
// drains and that a second Ctrl-C exits now, which it then does.
func TestServeCtrlCWhileBusy(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	c := startCLIServer(t, "--model", model, "--max-concurrency", "2", "--no-request-log")
	started := make(chan struct{}, 4)
	for range 4 {
		go func() {
			resp, err := http.Post(c.url+"/v1/completions", "application/json",
				strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"hi","max_tokens":4000,"ignore_eos":true,"stream":true}`))
			if err != nil {
				return
			}
			defer resp.Body.Close()
			started <- struct{}{}
			io.Copy(io.Discard, resp.Body)
		}()
	}
	<-started
	c.cmd.Process.Signal(os.Interrupt)
	line := c.waitLine(t, "ninfer serve: draining")
	if !strings.Contains(line, "requests in flight") || !strings.Contains(line, "Ctrl-C again to exit now") {
		t.Errorf("drain line %q", line)
	}
	c.cmd.Process.Signal(syscall.SIGINT)
	if code := c.exitCode(t, 5*time.Second); code != 130 {
		t.Errorf("exit %d after a second Ctrl-C, want 130:\n%s", code, c.log())
	}
	if !strings.Contains(c.log(), "ninfer serve: exiting now") {
		t.Errorf("no 'exiting now' line:\n%s", c.log())
	}
	if strings.Contains(c.log(), "ninfer: POST") {
		t.Errorf("--no-request-log still logs requests:\n%s", c.log())
	}
}
