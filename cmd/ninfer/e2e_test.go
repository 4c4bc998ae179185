package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/traces"
)

// TestE2EJaeger runs the real Jaeger and the real `ninfer serve`, sends a
// chat request with a traceparent and checks the trace through Jaeger's
// query API. `just e2e` runs it (NINFER_E2E_JAEGER names the Jaeger binary,
// NINFER_BIN the ninfer binary); it is skipped otherwise.
func TestE2EJaeger(t *testing.T) {
	jaegerBin, ninferBin := os.Getenv("NINFER_E2E_JAEGER"), os.Getenv("NINFER_BIN")
	if jaegerBin == "" || ninferBin == "" {
		t.Skip("NINFER_E2E_JAEGER and NINFER_BIN not set (run `just e2e`)")
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	jaeger := exec.CommandContext(ctx, jaegerBin, "--config", filepath.Join(root, "tools", "jaeger", "config.yaml"))
	var jlog bytes.Buffer
	jaeger.Stdout, jaeger.Stderr = &jlog, &jlog
	if err := jaeger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { jaeger.Process.Kill(); jaeger.Wait() }()
	waitHTTP(t, "http://127.0.0.1:16686/api/services", &jlog)

	serve := exec.CommandContext(ctx, ninferBin, "serve", "--model", sharedPath(t, "models", "stories260K.gguf"),
		"--port", "0", "--otlp-endpoint", "http://127.0.0.1:4318")
	serve.Stderr = os.Stderr
	out, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { serve.Process.Signal(os.Interrupt); serve.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, serveReady) {
		t.Fatalf("ready line %q: %v", line, err)
	}
	base := strings.Fields(strings.TrimPrefix(line, serveReady))[0]

	const traceID = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(
		`{"model":"stories260K","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Trace-Id") != traceID {
		t.Fatalf("status %d, X-Trace-Id %q", resp.StatusCode, resp.Header.Get("X-Trace-Id"))
	}

	// The batch exporter flushes within a second or so; poll Jaeger.
	var spans []traces.JaegerSpan
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		spans, err = traces.FetchTrace(ctx, "http://127.0.0.1:16686", traceID)
		if err == nil && hasPhases(spans) {
			break
		}
	}
	if !hasPhases(spans) {
		t.Fatalf("trace %s in Jaeger lacks the request phases (err %v): %+v\njaeger log:\n%s", traceID, err, spans, jlog.String())
	}
	var rootSpan traces.JaegerSpan
	for _, s := range spans {
		if s.OperationName == traces.SpanRequest {
			rootSpan = s
		}
	}
	tags := map[string]bool{}
	for _, tg := range rootSpan.Tags {
		tags[tg.Key] = true
	}
	for _, k := range []string{traces.AttrRequestID, traces.AttrMaxTokens, traces.AttrPromptTokens, traces.AttrCompletionTokens,
		traces.AttrTTFT, traces.AttrTimeInQueue, traces.AttrTimeInPrefill, traces.AttrTimeInDecode, traces.AttrE2E} {
		if !tags[k] {
			t.Errorf("llm_request in Jaeger lacks %s", k)
		}
	}
	if rootSpan.Parent() != "b7ad6b7169203331" {
		t.Errorf("llm_request parent %q, want the caller's span", rootSpan.Parent())
	}
	code, stdout, stderr := runCLI("trace", traceID)
	if code != 0 || !strings.Contains(stdout, traces.SpanRequest) || !strings.Contains(stdout, "  "+traces.SpanDecode) {
		t.Errorf("ninfer trace: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Logf("ninfer trace %s:\n%s", traceID, stdout)
}

func hasPhases(spans []traces.JaegerSpan) bool {
	var rootID string
	for _, s := range spans {
		if s.OperationName == traces.SpanRequest {
			rootID = s.SpanID
		}
	}
	want := map[string]bool{traces.SpanQueue: false, traces.SpanPrepare: false, traces.SpanPrefill: false, traces.SpanDecode: false}
	for _, s := range spans {
		if _, ok := want[s.OperationName]; ok && rootID != "" && s.Parent() == rootID {
			want[s.OperationName] = true
		}
	}
	for _, ok := range want {
		if !ok {
			return false
		}
	}
	return true
}

func waitHTTP(t *testing.T, url string, log *bytes.Buffer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(url); err == nil {
			var v any
			json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	t.Fatalf("%s did not come up; log:\n%s", url, log.String())
}
