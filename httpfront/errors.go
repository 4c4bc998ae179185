package httpfront

import (
	"encoding/json"
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

// badRequest is a 400 that names no single field.
func badRequest(code, format string, args ...any) *Error {
	e := &Error{Status: http.StatusBadRequest, Type: typeInvalid, Message: fmt.Sprintf(format, args...)}
	if code != "" {
		e.Code = code
	}
	return e
}
