package httpfront

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

func TestAgentWeight(t *testing.T) {
	for _, tc := range []struct {
		name string
		snap engine.Snapshot
		want int
	}{
		{"an idle replica asks for its full weight", engine.Snapshot{KVBlocksTotal: 256, MaxRunning: 8}, 100},
		{"cached prefix blocks count as free", engine.Snapshot{KVBlocksTotal: 256, KVBlocksCached: 200, MaxRunning: 8}, 100},
		{"half the KV used halves it", engine.Snapshot{KVBlocksUsed: 128, KVBlocksTotal: 256, MaxRunning: 8}, 50},
		{"a full batch halves it", engine.Snapshot{Running: 8, KVBlocksTotal: 256, MaxRunning: 8}, 50},
		{"a full batch and as many waiting leave a third", engine.Snapshot{Running: 8, Waiting: 8, KVBlocksTotal: 256, MaxRunning: 8}, 33},
		{"a smaller batch drops faster under the same load", engine.Snapshot{Running: 1, Waiting: 3, KVBlocksTotal: 256, MaxRunning: 1}, 20},
		{"KV and queue multiply", engine.Snapshot{Running: 4, Waiting: 4, KVBlocksUsed: 192, KVBlocksTotal: 256, MaxRunning: 8}, 13},
		{"a ready replica never drops below 1%", engine.Snapshot{Running: 1, Waiting: 500, KVBlocksUsed: 255, KVBlocksTotal: 256, MaxRunning: 1}, 1},
		{"all KV used still leaves 1%", engine.Snapshot{Running: 2, KVBlocksUsed: 256, KVBlocksTotal: 256, MaxRunning: 2}, 1},
		{"no KV pool reported counts as free", engine.Snapshot{MaxRunning: 4}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, agentWeight(tc.snap)); diff != "" {
				t.Errorf("agentWeight(%+v) (-want +got):\n%s", tc.snap, diff)
			}
		})
	}
}

func TestAgentReply(t *testing.T) {
	busy := engine.Snapshot{Running: 2, Waiting: 6, KVBlocksUsed: 64, KVBlocksTotal: 256, MaxRunning: 2}
	for _, tc := range []struct {
		name, status string
		snap         engine.Snapshot
		want         string
	}{
		{"a loading replica is down", "loading", engine.Snapshot{}, "down #loading\n"},
		{"a draining replica drains whatever its load", "draining", busy, "drain\n"},
		{"a full queue takes the weight to 0", "busy", busy, "up ready 0%\n"},
		{"a ready replica is up, cancels an old drain, and gives its weight", "ready", busy, "up ready 15%\n"},
		{"an idle one asks for 100%", "ready", engine.Snapshot{KVBlocksTotal: 256, MaxRunning: 8}, "up ready 100%\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, agentReply(tc.status, tc.snap)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// ServeAgent answers each connection with one line and closes it, whether
// or not the checker sends a line first (HAProxy's agent-send), and stops
// when its listener closes.
func TestServeAgent(t *testing.T) {
	s := New(Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.ServeAgent(ln) }()
	for _, send := range []string{"", "ninfer/r1\n"} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if send != "" {
			io.WriteString(c, send)
		}
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("agent-send %q: reading the reply: %v", send, err)
		}
		if diff := cmp.Diff("down #loading\n", line); diff != "" {
			t.Errorf("agent-send %q (-want +got):\n%s", send, diff)
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
			t.Errorf("agent-send %q: after the line: %q, %v; want the connection closed", send, rest, err)
		}
		c.Close()
	}
	ln.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("ServeAgent after the listener closed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeAgent did not return after its listener closed")
	}
}
