package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Error is an API error in OpenAI's shape: it is written as
// {"error":{"message","type","param","code"}} with HTTP status Status.
type Error struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"` // the offending request field, or nil
	Code    any    `json:"code"`  // a machine-readable reason, or nil
}

// Error implements error.
func (e *Error) Error() string {
	if p, ok := e.Param.(string); ok {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Type, p, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message)
}

// body is the JSON document of e.
func (e *Error) body() []byte {
	b, _ := json.Marshal(struct {
		Error *Error `json:"error"`
	}{e})
	return b
}

// Error types, as OpenAI names them.
const (
	typeInvalid     = "invalid_request_error"
	typeAuth        = "authentication_error"
	typeRateLimit   = "rate_limit_error"
	typeServer      = "server_error"
	typeUnavailable = "service_unavailable_error"
	typeTimeout     = "timeout_error"
)

// badParam is a 400 naming the request field param.
func badParam(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalid, Param: param, Message: fmt.Sprintf(format, args...)}
}

// deadlineError is the 504 of a request past the server's --timeout.
func deadlineError() *Error {
	return &Error{Status: http.StatusGatewayTimeout, Type: typeTimeout, Code: "deadline_exceeded",
		Message: "The request exceeded the server's deadline."}
}

// shuttingDownError is the 503 of a request the server will not finish
// because it is shutting down.
func shuttingDownError() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "shutting_down",
		Message: "The server is shutting down."}
}

// clientClosedError is the 499 of a request its client abandoned; message
// says how.
func clientClosedError(message string) *Error {
	return &Error{Status: 499, Type: typeInvalid, Code: "client_closed_request", Message: message}
}

// abortError is the failure of a request whose context ctx ended: 504 past
// the server's deadline, 503 when Shutdown aborted it, else 499 (its client
// or the server cancelled it).
func abortError(ctx context.Context) *Error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return deadlineError()
	case errors.Is(context.Cause(ctx), errShuttingDown):
		return shuttingDownError()
	default:
		return clientClosedError("The request was cancelled.")
	}
}

// badRequest is a 400 that names no single field.
func badRequest(code, format string, args ...any) *Error {
	e := &Error{Status: http.StatusBadRequest, Type: typeInvalid, Message: fmt.Sprintf(format, args...)}
	if code != "" {
		e.Code = code
	}
	return e
}
