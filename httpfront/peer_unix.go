//go:build linux || darwin || freebsd || netbsd || openbsd

package httpfront

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed reports whether the peer of c has closed or reset the
// connection, without consuming a byte: a non-blocking MSG_PEEK receive
// that returns 0 bytes (EOF) or fails with anything but EAGAIN. A peer
// that sent more data (a pipelined request) is still there. ok is false
// when c exposes no socket to ask.
//
// The peek goes through Control, not Read: Read first checks the
// connection's read deadline, which fasthttp set to bound reading the
// request and which has passed by the time a long request is still
// running; that would take the deadline for a closed peer.
func peerClosed(c net.Conn) (closed, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false
	}
	var n int
	var rerr error
	var buf [1]byte
	if err := raw.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return true, true // the socket is closed on our side
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN), errors.Is(rerr, syscall.EWOULDBLOCK), errors.Is(rerr, syscall.EINTR):
		return false, true
	case rerr != nil:
		return true, true
	}
	return n == 0, true
}
