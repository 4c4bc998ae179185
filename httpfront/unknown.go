package httpfront

import (
	"log"
	"strconv"
	"sync"
)

// maxUnknownNames bounds the distinct unknown field names remembered (and
// logged): clients choose the names, so the set must not grow without end.
const maxUnknownNames = 1024

// unknownFields logs each unknown request field name once per process, the
// first time a request carries it, as vLLM does; the request is served
// without it.
type unknownFields struct {
	mu    sync.Mutex
	seen  map[string]bool
	full  bool
	print func(string) // log.Print by default; tests replace it
}

var unknown = &unknownFields{print: func(s string) { log.Print(s) }}

// note records that a request carried the unknown field name.
func (u *unknownFields) note(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.seen[name] || u.full {
		return
	}
	if u.seen == nil {
		u.seen = map[string]bool{}
	}
	if len(u.seen) == maxUnknownNames {
		u.full = true
		u.print("ninfer: more unknown request fields are ignored without being logged")
		return
	}
	u.seen[name] = true
	u.print("ninfer: ignoring unknown request field " + quoteName(name) + " (each name is logged once; ninfer serve --strict-fields rejects such requests)")
}

// quoteName quotes a client-chosen field name for a log line, cut to 64
// bytes.
func quoteName(name string) string { return strconv.Quote(capText(name, 64)) }
