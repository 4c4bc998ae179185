package httpfront

import (
	"net/http"
	"slices"
	"strings"

	"github.com/valyala/fasthttp"
)

// cors applies Config.AllowedOrigins to a request and reports whether it
// has been answered (a CORS preflight). A request from an allowed origin
// gets Access-Control-Allow-Origin: its origin, with credentials allowed,
// or "*" (never with credentials) when the list holds "*". A preflight
// (OPTIONS with Access-Control-Request-Method) from an allowed origin gets
// 204 with the methods and headers allowed; from another origin, 403.
// Without allowed origins nothing changes: browsers refuse cross-origin
// reads.
func (s *Server) cors(ctx *fasthttp.RequestCtx) bool {
	origin := string(ctx.Request.Header.Peek("Origin"))
	if origin == "" || len(s.cfg.AllowedOrigins) == 0 {
		return false
	}
	preflight := ctx.IsOptions() && len(ctx.Request.Header.Peek("Access-Control-Request-Method")) > 0
	h := &ctx.Response.Header
	h.Add("Vary", "Origin")
	switch {
	case slices.ContainsFunc(s.cfg.AllowedOrigins, func(o string) bool { return strings.EqualFold(o, origin) }):
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	case slices.Contains(s.cfg.AllowedOrigins, "*"):
		h.Set("Access-Control-Allow-Origin", "*")
	default:
		if preflight {
			s.fail(ctx, &Error{Status: http.StatusForbidden, Type: typeInvalid, Code: "origin_not_allowed",
				Message: "This origin is not allowed cross-origin calls (ninfer serve --allowed-origins)."})
			return true
		}
		return false
	}
	h.Set("Access-Control-Expose-Headers", TraceIDHeader+", Retry-After")
	if !preflight {
		return false
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
	allow := "Authorization, Content-Type"
	if req := string(ctx.Request.Header.Peek("Access-Control-Request-Headers")); req != "" {
		allow = req
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", "600")
	ctx.SetStatusCode(http.StatusNoContent)
	return true
}
