package httpfront

import (
	"testing"
	"time"
)

// The Messages stream pings when its ping period passes with nothing
// written, deltas or not: whitespace a blockBuilder holds back (heldSpace)
// arriving every millisecond writes nothing, so the pings go on.
func TestPipeReplyPingsWhileDeltasAreHeldBack(t *testing.T) {
	j := &job{choices: 1, out: make(chan delta)}
	go func() {
		for range 80 {
			j.out <- delta{text: "\n"}
			time.Sleep(time.Millisecond)
		}
		j.out <- delta{final: true, finish: "stop"}
	}()
	var events []string
	quiet := newQuietTimer(10 * time.Millisecond)
	b := &blockBuilder{}
	b.emit = func(typ string, _ map[string]any) bool {
		quiet.touch()
		events = append(events, typ)
		return true
	}
	ok := j.pipeReply(b.add, func(delta) bool { return true }, func(*Error) bool { return false },
		quiet, func() bool { return b.emit("ping", nil) })
	if !ok {
		t.Fatal("pipeReply failed")
	}
	pings := 0
	for _, e := range events {
		if e != "ping" {
			t.Fatalf("events %v: want only pings (the whitespace is held back)", events)
		}
		pings++
	}
	if pings < 2 {
		t.Errorf("%d pings over ~80 ms of held-back deltas with a 10 ms ping period, want several", pings)
	}
}
