package httpfront

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// The HAProxy agent check (HAProxy's configuration manual, "agent-check"):
// HAProxy connects to the agent port, may send a line of its own
// ("agent-send"), and reads one line of words that set the server's state
// and weight; the agent then closes the connection. The replies are:
//
//	down #loading   the model is not loaded yet (operating state DOWN)
//	drain           Drain or Shutdown was called: no new connections
//	up ready 0%     the queue is full (/ready answers 503 "busy")
//	up ready P%     ready, with weight P% of the configured weight
//
// "ready" cancels a DRAIN that an earlier process on the same port left
// (only the agent can undo what the agent set), and "up" brings the server
// back once the health checks pass too. P is agentWeight.

// agentWeight is the share of the configured HAProxy weight, in percent,
// that a ready replica asks for: its free cache capacity (KV blocks and, for
// a hybrid model, recurrent state slots: engine.Snapshot.CacheUsage) times
// its free batch capacity,
//
//	P = round(100 * (1 - cache_usage) * max_running / (max_running + running + waiting))
//
// clamped to [1, 100]. KV blocks that only hold a cached prefix count as
// free (they are reclaimed on demand). An idle replica answers 100%; one
// whose batch is full and whose queue is as long again answers 33%; a
// replica started with a smaller --max-concurrency drops faster under the
// same load. The floor of 1% keeps a ready replica in the farm: 0% is kept
// for a full queue.
func agentWeight(s engine.Snapshot) int {
	kvFree := 1 - min(s.CacheUsage(), 1) // KV blocks and a hybrid model's state slots, by bytes
	slots := float64(max(s.MaxRunning, 1))
	p := int(100*kvFree*slots/(slots+float64(s.Running+s.Waiting)) + 0.5)
	return min(max(p, 1), 100)
}

// agentReply is the agent line for a replica whose readiness (the /ready
// status) is status and whose engine reports snap.
func agentReply(status string, snap engine.Snapshot) string {
	switch status {
	case "loading":
		return "down #loading\n"
	case "draining":
		return "drain\n"
	case "busy":
		return "up ready 0%\n"
	}
	return fmt.Sprintf("up ready %d%%\n", agentWeight(snap))
}

// AgentReply is the line the HAProxy agent check reads now: see agentReply.
func (s *Server) AgentReply() string {
	st := s.readiness()
	var snap engine.Snapshot
	if m := s.model.Load(); m != nil {
		snap = m.Engine.Snapshot()
	}
	return agentReply(st, snap)
}

// agentTimeout bounds one agent-check connection: writing the reply and
// waiting for HAProxy to close its side.
const agentTimeout = 2 * time.Second

// ServeAgent answers HAProxy agent checks on ln: each connection gets
// AgentReply and is closed. It returns nil once ln is closed (the caller
// owns ln and closes it after Shutdown, so that the agent says "drain"
// until the process exits), or the first accept error that is not
// temporary.
func (s *Server) ServeAgent(ln net.Listener) error {
	backoff := time.Duration(0)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("agent: %w", err)
		}
		backoff = 0
		go s.answerAgent(c)
	}
}

// isTemporary reports accept errors worth retrying (out of file
// descriptors, a connection aborted before it was accepted).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// answerAgent writes the reply, half-closes, and reads whatever HAProxy
// sent (agent-send) until it closes: closing with unread input would reset
// the connection, and a reset may discard the reply before HAProxy reads it.
func (s *Server) answerAgent(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(agentTimeout)) //nolint:errcheck // a failed deadline only leaves the read unbounded by it
	if _, err := io.WriteString(c, s.AgentReply()); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // the reply is written; the close below ends the connection anyway
	}
	io.Copy(io.Discard, io.LimitReader(c, 4096)) //nolint:errcheck // only drains what HAProxy sent
}
