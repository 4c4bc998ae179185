package httpfront

import (
	"embed"
	"net/http"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

// webuiFiles is the built-in web UI: index.html at /, the rest under
// WebUIPrefix. Plain ES modules and CSS, no third-party code, nothing
// fetched from elsewhere.
//
//go:embed webui
var webuiFiles embed.FS

// WebUIPrefix is the path the web UI's scripts and styles are served under.
const WebUIPrefix = "/webui/"

// WebUICSP is the Content-Security-Policy of every web UI response: the
// page may load scripts, styles and images from this server only, talk to
// this server only, and run no inline script or style.
const WebUICSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

var webuiTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// isWebUI reports whether path belongs to the web UI.
func isWebUI(path string) bool { return path == "/" || strings.HasPrefix(path, WebUIPrefix) }

// webui serves the web UI's files (GET and HEAD). The page needs no key:
// it holds no data, and asks for the key when a /v1 call answers 401.
func (s *Server) webui(ctx *fasthttp.RequestCtx, p string) {
	if !ctx.IsGet() && !ctx.IsHead() {
		s.fail(ctx, methodNotAllowed(ctx, "GET"))
		return
	}
	name := "webui/index.html"
	if p != "/" {
		rest := strings.TrimPrefix(p, WebUIPrefix)
		if rest == "" || strings.Contains(rest, "..") || path.Clean("/"+rest) != "/"+rest {
			s.fail(ctx, notFound(p))
			return
		}
		name = "webui/" + rest
	}
	typ, known := webuiTypes[path.Ext(name)]
	body, err := webuiFiles.ReadFile(name)
	if err != nil || !known {
		s.fail(ctx, notFound(p))
		return
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", WebUICSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ctx.SetStatusCode(http.StatusOK)
	ctx.SetContentType(typ)
	ctx.SetBody(body)
}
