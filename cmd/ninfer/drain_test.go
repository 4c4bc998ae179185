package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestServeRejectsBadDrainFlags(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a negative grace", []string{"--drain-grace", "-1s"}, "--drain-grace -1s"},
		{"an agent port out of range", []string{"--agent-port", "70000"}, "--agent-port 70000"},
		{"a negative agent port", []string{"--agent-port", "-1"}, "--agent-port -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"serve", "--model", model, "--port", "0"}, tc.args...)...)
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, tc.want)
			}
		})
	}
}

// freePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// agentSays is what the agent-check listener at addr answers.
func agentSays(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("agent %s: %v", addr, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("agent %s: %v", addr, err)
	}
	return string(b)
}

// On SIGTERM, serve drains for gateways: /ready turns 503 and the agent
// says "drain" at once, new requests are still served for --drain-grace,
// and only then does the listener refuse connections.
func TestServeDrainGrace(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	const grace = 1500 * time.Millisecond
	agentAddr, url, stderr, exit, cancel := serveWithAgent(t, model, grace)
	defer cancel()
	readyIs := func(when string, wantCode int, wantStatus string) {
		t.Helper()
		resp, err := http.Get(url + "/ready")
		if err != nil {
			t.Fatalf("%s: /ready: %v", when, err)
		}
		var r struct{ Status string }
		json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode != wantCode || r.Status != wantStatus {
			t.Errorf("%s: /ready %d %q, want %d %q", when, resp.StatusCode, r.Status, wantCode, wantStatus)
		}
	}
	complete := func(when string) {
		t.Helper()
		resp, err := http.Post(url+"/v1/completions", "application/json",
			strings.NewReader(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":8}`))
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":`) {
			t.Errorf("%s: a completion got %d %s", when, resp.StatusCode, b)
		}
	}
	readyIs("before SIGTERM", 200, "ready")
	if got := agentSays(t, agentAddr); got != "up ready 100%\n" {
		t.Errorf("an idle replica's agent says %q, want %q", got, "up ready 100%\n")
	}

	cancel()
	signalled := time.Now()
	waitFor(t, "the drain to start", func() bool { return strings.Contains(stderr.String(), "draining") })
	readyIs("in the grace period", 503, "draining")
	if diff := cmp.Diff("drain\n", agentSays(t, agentAddr)); diff != "" {
		t.Errorf("the agent in the grace period (-want +got):\n%s", diff)
	}
	complete("in the grace period")
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "http://"), time.Second)
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		if time.Since(signalled) > grace+10*time.Second {
			t.Fatal("the listener is still open long after the grace period")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(signalled); d < grace {
		t.Errorf("the listener closed %v after SIGTERM, before the %v grace", d, grace)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Errorf("exit %d after the drain; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after the drain")
	}
	if c, err := net.DialTimeout("tcp", agentAddr, time.Second); err == nil {
		c.Close()
		t.Error("the agent still listens after serve returned")
	}
}

// serveWithAgent starts serve with an agent port and the drain grace,
// waits for its ready line and returns the agent's address, the server's
// URL, its stderr, its exit code's channel and its cancel (SIGTERM). The
// free port freePort found can be taken before serve binds it; serve then
// exits at once, and another port is tried.
func serveWithAgent(t *testing.T, model string, grace time.Duration) (agentAddr, url string, stderr *lockedBuffer, exit chan int, cancel context.CancelFunc) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		agentAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		stdout := new(lockedBuffer)
		stderr = new(lockedBuffer)
		exit = make(chan int, 1)
		go func() {
			exit <- serve(ctx, []string{"--model", model, "--port", "0", "--threads", "1", "--max-concurrency", "2",
				"--agent-port", strings.TrimPrefix(agentAddr, "127.0.0.1:"), "--drain-grace", grace.String()}, stdout, stderr)
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if l, ok := strings.CutPrefix(stdout.String(), serveReady); ok {
				url = strings.Fields(l)[0]
				if !strings.Contains(l, " agent="+agentAddr) {
					t.Errorf("the ready line %q does not name the agent %s", l, agentAddr)
				}
				return agentAddr, url, stderr, exit, cancel
			}
			select {
			case <-exit:
				cancel()
				if attempt < 3 && strings.Contains(stderr.String(), "address already in use") {
					break
				}
				t.Fatalf("serve exited before its ready line; stderr:\n%s", stderr.String())
			default:
				if time.Now().After(deadline) {
					t.Fatalf("no ready line; stderr:\n%s", stderr.String())
				}
				time.Sleep(5 * time.Millisecond)
				continue
			}
			break
		}
	}
}

// waitFor polls cond every few milliseconds for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
