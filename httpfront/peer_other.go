//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package httpfront

import "net"

// peerClosed cannot ask the socket on this system: ok is false, and a
// non-streaming request whose client left runs to its end.
func peerClosed(net.Conn) (closed, ok bool) { return false, false }
