// Package httpfront serves a model over an OpenAI-compatible HTTP API on
// fasthttp: POST /v1/chat/completions and /v1/completions (JSON or SSE
// streaming), POST /v1/responses (the stateless Responses API), POST
// /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API), GET
// /v1/models, POST /tokenize and /detokenize, and GET /health; GET /v1/graph
// and /v1/stats/live show the plan and the engine's figures to the built-in
// web UI served at /. It decodes and validates
// requests, renders chat templates, tokenizes, submits each choice to the
// engine and turns the engine's token events into responses. It talks to
// nothing but the engine and the tokenizer.
package httpfront

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/traces"
)

// Model is the served model: the engine that runs it and what turns text
// into its tokens and back.
type Model struct {
	ID        string // the name clients pass as "model"
	Engine    *engine.Engine
	Tokenizer *tok.Tokenizer
	// Chat renders chat messages; when nil, /v1/chat/completions answers 400
	// with ChatErr (the model's template does not compile).
	Chat    *tok.ChatTemplate
	ChatErr error
	Created time.Time
	// TrainContext is the model's training context (GGUF context_length),
	// shown in /v1/models; 0 shows the engine's context length.
	TrainContext int
	// Plan is the compiled plan the engine runs, shown by GraphPath; nil
	// answers 404 there.
	Plan *plan.Plan
	// Path is the model's file or folder, shown in /props.
	Path string
	// Images encodes the images of chat requests (the model's vision
	// tower); nil answers 400 to a request with images.
	Images ImageEncoder
}

// Config configures a Server. Zero fields take the documented defaults.
type Config struct {
	// APIKey, when set, must be sent by every /v1/ call as
	// "Authorization: Bearer KEY" or "x-api-key: KEY" (Anthropic's
	// header); other calls get 401.
	APIKey string
	// MaxQueue is how many sequences (choices) may wait beyond those the
	// engine runs at once; more get 429. Default 256.
	MaxQueue int
	// Timeout bounds every request from arrival to its last token; a request
	// past it is aborted (504, or an error event when streaming). Default 10 min.
	Timeout time.Duration
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default 4 MiB.
	MaxBodyBytes int
	// StreamPing is how long a /v1/messages stream goes without an event
	// before the server sends a ping (Anthropic's keep-alive), so that a
	// request waiting in the queue or in a long prefill keeps its
	// connection through idle timeouts. Default 10 s.
	StreamPing time.Duration
	// MaxStreamLag bounds how far a streaming client may fall behind: when
	// more than this many tokens of one choice wait unread (the client
	// stopped reading), the choice is aborted, the unread tokens are
	// dropped and the stream ends with a slow_reader error event. Default
	// 2048.
	MaxStreamLag int
	// ReadTimeout bounds reading one request (its headers and body) and
	// how long an idle keep-alive connection is held. It does not bound
	// the response: that is Timeout's. Default 1 min.
	ReadTimeout time.Duration
	// Traces receives each request's phase spans; nil means tracing off.
	Traces *traces.Provider
	// StrictFields rejects requests carrying fields the server does not
	// know (400 naming the field); by default they are ignored and each
	// name is logged once.
	StrictFields bool
	// AllowedOrigins are the browser origins (e.g. "https://app.example")
	// allowed cross-origin calls (CORS); "*" allows any origin, without
	// credentials. None by default.
	AllowedOrigins []string
	// NoWebUI turns off the built-in web UI (/ and WebUIPrefix then
	// answer 404).
	NoWebUI bool
	// RequestLog, when set, receives one line per request (requestLog);
	// nil means off.
	RequestLog io.Writer
	// Media bounds the images of a request and where they may come from.
	Media MediaOptions
}

// Config defaults.
const (
	DefaultMaxQueue     = 256
	DefaultTimeout      = 10 * time.Minute
	DefaultMaxBodyBytes = 4 << 20
	DefaultReadTimeout  = time.Minute
	DefaultMaxStreamLag = 2048
	DefaultStreamPing   = 10 * time.Second
)

// Server is the HTTP front end. Create it with New, start it with Serve,
// make it ready with SetModel, stop it with Shutdown. Its methods are safe
// for concurrent use.
type Server struct {
	cfg      Config
	srv      *fasthttp.Server
	model    atomic.Pointer[Model]
	draining atomic.Bool  // Drain or Shutdown called: /ready 503, agent "drain"
	closing  atomic.Bool  // Shutdown called: new generations get 503
	inflight atomic.Int64 // choices submitted to the engine and not yet finished
	aborted  atomic.Int64 // streams whose client left before the end
	// abandoned counts non-streaming requests whose client left before
	// the response.
	abandoned atomic.Int64
	metrics   *Metrics
	recent    recentPhases // phases of the last finished sequences (LivePath)
	log       *log.Logger  // the request log; nil when off
	jobs      sync.Map     // *job -> nil: the generation requests in flight (/slots)
	tasks     atomic.Int64 // requests numbered so far (job.task)
	// generations is the parent of every generation's context; Shutdown
	// cancels it when its drain ends with generations still running,
	// which aborts them (and stops their grammar masks) at once.
	generations     context.Context
	stopGenerations context.CancelCauseFunc
}

// errShuttingDown is the cause of the generations Shutdown aborts.
var errShuttingDown = errors.New("the server is shutting down")

// New returns a server that answers 503 until SetModel is called.
func New(cfg Config) *Server {
	if cfg.Traces == nil {
		cfg.Traces = traces.Off()
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	cfg.Media = cfg.Media.withDefaults()
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxStreamLag <= 0 {
		cfg.MaxStreamLag = DefaultMaxStreamLag
	}
	if cfg.StreamPing <= 0 {
		cfg.StreamPing = DefaultStreamPing
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	s := &Server{cfg: cfg}
	if cfg.RequestLog != nil {
		s.log = log.New(cfg.RequestLog, "", 0)
	}
	s.generations, s.stopGenerations = context.WithCancelCause(context.Background())
	s.metrics = newMetrics(s)
	s.srv = &fasthttp.Server{
		Handler:            s.Handle,
		ErrorHandler:       s.readError,
		ExpectHandler:      s.expect,
		Name:               "ninfer",
		MaxRequestBodySize: cfg.MaxBodyBytes,
		ReadTimeout:        cfg.ReadTimeout,
		IdleTimeout:        cfg.ReadTimeout,
		CloseOnShutdown:    true,
		Logger:             quiet{},
	}
	return s
}

// quiet discards fasthttp's connection-level logs (malformed requests,
// bodies over the limit): the client gets the error response.
type quiet struct{}

func (quiet) Printf(string, ...any) {}

// SetModel makes the server ready: /health answers 200 and /v1/ calls are
// served by m from now on; m's metrics start from zero.
func (s *Server) SetModel(m *Model) {
	s.metrics.setModel(m)
	s.model.Store(m)
}

// Serve accepts connections on ln until Shutdown; it returns nil after a
// Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.srv.Serve(ln) }

// Drain tells load balancers to stop sending requests while still serving
// them: /ready and /health answer 503 "draining" and the agent check
// "drain" from now on, but new requests are served as before, since a
// gateway keeps sending a few until its health check notices. Call
// Shutdown after the gateway's detection time (ninfer serve's
// --drain-grace).
func (s *Server) Drain() { s.draining.Store(true) }

// Shutdown drains (see Drain), stops accepting connections and new
// requests (503 shutting_down), waits until the requests in flight have
// finished (streams included), and returns. If ctx ends first it aborts
// the generations still running (the engine frees them at its next step)
// and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	s.closing.Store(true)
	err := s.srv.ShutdownWithContext(ctx)
	if err != nil {
		s.stopGenerations(errShuttingDown)
	}
	return err
}

// InFlight reports the choices submitted to the engine and not yet finished.
func (s *Server) InFlight() int { return int(s.inflight.Load()) }

// servingModel gates an API request: it answers 401 when an API key is set
// and the request does not carry it, 503 while no model is loaded, and
// otherwise returns the loaded model. A nil result means the request has
// been answered.
func (s *Server) servingModel(ctx *fasthttp.RequestCtx) *Model {
	if s.cfg.APIKey != "" && !s.authorized(ctx) {
		s.fail(ctx, &Error{Status: http.StatusUnauthorized, Type: typeInvalid, Code: "invalid_api_key",
			Message: "Incorrect API key provided. Send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'."})
		return nil
	}
	m := s.model.Load()
	if m == nil {
		s.fail(ctx, &Error{Status: http.StatusServiceUnavailable, Type: typeUnavailable, Code: "model_loading",
			Message: "The model is still loading; retry shortly."})
	}
	return m
}

// expect answers a request that sent "Expect: 100-continue" from its
// headers, before its body is read: 401 when the path needs the API key
// and the request does not carry it, 413 when its Content-Length is over
// MaxBodyBytes, else 100 (send the body). A refused request's connection
// is closed, as the client may already be sending the body.
func (s *Server) expect(ctx *fasthttp.RequestCtx) int {
	path := string(ctx.Path())
	needsKey := strings.HasPrefix(path, "/v1/") || path == TokenizePath || path == DetokenizePath
	switch {
	case needsKey && s.cfg.APIKey != "" && !s.authorized(ctx):
		return http.StatusUnauthorized
	case ctx.Request.Header.ContentLength() > s.cfg.MaxBodyBytes:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusContinue
}

// Handle serves one HTTP request (the fasthttp handler) and logs it.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	if s.log == nil {
		s.route(ctx)
		return
	}
	received := time.Now()
	s.route(ctx)
	if !ctx.Response.IsBodyStream() { // a stream logs its line when it ends
		j, _ := ctx.UserValue(jobKey).(*job)
		s.logRequest(string(ctx.Method()), string(ctx.Path()), ctx.Response.StatusCode(), received, j)
	}
}

// route serves one HTTP request.
func (s *Server) route(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	if s.cors(ctx) {
		return
	}
	if v1, ok := unprefixed[path]; ok {
		path = v1
	}
	switch {
	case path == TokenizePath || path == DetokenizePath:
		s.tokenizer(ctx, path)
		return
	case llamaMethods[path] != "":
		s.llama(ctx, path)
		return
	case path == "/health":
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.health(ctx)
		return
	case path == "/ready":
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.ready(ctx)
		return
	case path == "/metrics":
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.metrics.handler(ctx)
		return
	case !s.cfg.NoWebUI && isWebUI(path):
		s.webui(ctx, path)
		return
	case !strings.HasPrefix(path, "/v1/"):
		s.fail(ctx, notFound(path))
		return
	}
	m := s.servingModel(ctx)
	if m == nil {
		return
	}
	switch path {
	case "/v1/models":
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.writeJSON(ctx, http.StatusOK, map[string]any{"object": "list", "data": []any{modelObject(m)}})
	case IntervalsPath:
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.intervals(ctx, m)
	case GraphPath:
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.graph(ctx, m)
	case LivePath:
		if !ctx.IsGet() {
			s.fail(ctx, methodNotAllowed(ctx, "GET"))
			return
		}
		s.live(ctx, m)
	case "/v1/chat/completions", "/v1/completions", "/v1/responses", EmbeddingsPath, MessagesPath, CountTokensPath:
		if !ctx.IsPost() {
			s.fail(ctx, methodNotAllowed(ctx, "POST"))
			return
		}
		if e := jsonContentType(ctx); e != nil {
			s.fail(ctx, e)
			return
		}
		if s.refuseWhileClosing(ctx) {
			return
		}
		switch path {
		case "/v1/chat/completions":
			s.chat(ctx, m)
		case "/v1/responses":
			s.responses(ctx, m)
		case MessagesPath:
			s.messages(ctx, m)
		case CountTokensPath:
			s.countTokens(ctx, m)
		case EmbeddingsPath:
			s.embeddings(ctx, m)
		default:
			s.completion(ctx, m)
		}
	default:
		if id, ok := strings.CutPrefix(path, "/v1/models/"); ok && ctx.IsGet() {
			if id != m.ID {
				s.fail(ctx, unknownModel(id))
				return
			}
			s.writeJSON(ctx, http.StatusOK, modelObject(m))
			return
		}
		s.fail(ctx, notFound(path))
	}
}

// refuseWhileClosing answers 503 to a new generation once Shutdown has
// been called (true), else does nothing.
func (s *Server) refuseWhileClosing(ctx *fasthttp.RequestCtx) bool {
	if !s.closing.Load() {
		return false
	}
	ctx.Response.Header.Set("Retry-After", "5")
	s.fail(ctx, shuttingDownError())
	return true
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	if key := ctx.Request.Header.Peek("x-api-key"); key != nil {
		return subtle.ConstantTimeCompare(key, []byte(s.cfg.APIKey)) == 1
	}
	got := ctx.Request.Header.Peek("Authorization")
	want := []byte("Bearer " + s.cfg.APIKey)
	return subtle.ConstantTimeCompare(got, want) == 1
}

func notFound(path string) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalid, Code: "not_found", Message: fmt.Sprintf("Unknown path %.64q.", path)}
}

// methodNotAllowed is the 405 for a known path; it sets the Allow header
// to the one method the path serves.
func methodNotAllowed(ctx *fasthttp.RequestCtx, allow string) *Error {
	ctx.Response.Header.Set("Allow", allow)
	return &Error{Status: http.StatusMethodNotAllowed, Type: typeInvalid, Code: "method_not_allowed",
		Message: fmt.Sprintf("Method %.16s is not allowed on %.64s; use %s.", ctx.Method(), ctx.Path(), allow)}
}

// jsonContentType is the 415 for a request body that is not declared as
// JSON. Requiring it keeps a web page from starting generations on a
// key-less server with a "simple" cross-origin POST (form or text/plain
// bodies need no CORS preflight).
func jsonContentType(ctx *fasthttp.RequestCtx) *Error {
	ct := string(ctx.Request.Header.ContentType())
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return nil
	}
	got := "no Content-Type"
	if ct != "" {
		got = fmt.Sprintf("Content-Type %.64q", ct)
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Type: typeInvalid, Code: "unsupported_media_type",
		Message: fmt.Sprintf("The request body must be JSON, sent with the header 'Content-Type: application/json' (got %s); with curl, add -H 'Content-Type: application/json'.", got)}
}

func unknownModel(id string) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalid, Param: "model", Code: "model_not_found",
		Message: fmt.Sprintf("The model '%s' does not exist.", id)}
}

// Health is the /health body.
type Health struct {
	Status          string `json:"status"` // "ok", "loading" or "draining"
	Model           string `json:"model,omitempty"`
	RequestsRunning int    `json:"requests_running"`
	RequestsWaiting int    `json:"requests_waiting"`
	KVBlocksUsed    int    `json:"kv_blocks_used"`
	KVBlocksTotal   int    `json:"kv_blocks_total"`
	KVBlockTokens   int    `json:"kv_block_tokens"`
	KVBlocksCached  int    `json:"kv_blocks_cached"` // free blocks that hold a cached prefix
	// StateSlotsUsed and StateSlotsTotal count a hybrid model's recurrent
	// state slots; both are present, zero included, for a hybrid model and
	// absent (nil) for other models.
	StateSlotsUsed  *int `json:"state_slots_used,omitempty"`
	StateSlotsTotal *int `json:"state_slots_total,omitempty"`
	// StateCheckpoints counts a hybrid model's recurrent state checkpoints
	// held (its prefix cache), StateCheckpointBytes their memory and
	// StateCheckpointsMax the most its budget holds; absent without them.
	StateCheckpoints     *int   `json:"state_checkpoints,omitempty"`
	StateCheckpointBytes *int64 `json:"state_checkpoint_bytes,omitempty"`
	StateCheckpointsMax  *int   `json:"state_checkpoints_max,omitempty"`
	MaxRunning           int    `json:"max_running"`
	RequestsInFlight     int    `json:"requests_in_flight"` // choices submitted and not finished
	StreamsAborted       int64  `json:"streams_aborted"`    // streams whose client left early, since start
	// RequestsAbandoned counts non-streaming requests whose client left
	// before the response, since start.
	RequestsAbandoned int64 `json:"requests_abandoned"`
	// APIKeyRequired says that /v1/ calls need the API key (the web UI
	// asks for it before its first call).
	APIKeyRequired bool `json:"api_key_required,omitempty"`
}

// health answers 200 once a model is set (503 while loading and draining).
func (s *Server) health(ctx *fasthttp.RequestCtx) {
	h := Health{Status: "loading", RequestsInFlight: s.InFlight(), StreamsAborted: s.aborted.Load(), RequestsAbandoned: s.abandoned.Load(),
		APIKeyRequired: s.cfg.APIKey != ""}
	status := http.StatusServiceUnavailable
	if m := s.model.Load(); m != nil {
		snap := m.Engine.Snapshot()
		h.Model, h.RequestsRunning, h.RequestsWaiting = m.ID, snap.Running, snap.Waiting
		h.KVBlocksUsed, h.KVBlocksTotal, h.KVBlockTokens, h.MaxRunning = snap.KVBlocksUsed, snap.KVBlocksTotal, snap.KVBlockTokens, snap.MaxRunning
		h.KVBlocksCached = snap.KVBlocksCached
		if snap.StateSlotsTotal > 0 {
			h.StateSlotsUsed, h.StateSlotsTotal = &snap.StateSlotsUsed, &snap.StateSlotsTotal
		}
		if snap.CheckpointsMax > 0 {
			bytes := snap.CheckpointBytes()
			h.StateCheckpoints, h.StateCheckpointBytes, h.StateCheckpointsMax = &snap.Checkpoints, &bytes, &snap.CheckpointsMax
		}
		h.Status, status = "ok", http.StatusOK
		if s.draining.Load() {
			h.Status, status = "draining", http.StatusServiceUnavailable
		}
	}
	s.writeJSON(ctx, status, h)
}

// Readiness is the /ready body.
type Readiness struct {
	Status string `json:"status"` // "ready", "loading", "draining" or "busy"
}

// ready answers whether a load balancer should send this replica new
// requests: 200 once the model is loaded, 503 while loading, draining, or
// while the queue is full (every running and queue slot is taken, so a new
// request would get 429).
func (s *Server) ready(ctx *fasthttp.RequestCtx) {
	st := s.readiness()
	status := http.StatusServiceUnavailable
	if st == "ready" {
		status = http.StatusOK
	}
	s.writeJSON(ctx, status, Readiness{Status: st})
}

// readiness is the /ready status.
func (s *Server) readiness() string {
	m := s.model.Load()
	switch {
	case m == nil:
		return "loading"
	case s.draining.Load():
		return "draining"
	case s.inflight.Load() >= int64(m.Engine.Snapshot().MaxRunning+s.cfg.MaxQueue):
		return "busy"
	}
	return "ready"
}

// readError answers requests fasthttp could not read: 413 for a body over
// the limit, 431 for headers over the read buffer, 408 for a read that
// timed out, 400 otherwise. It echoes nothing of the request: fasthttp's
// errors quote the bytes they could not parse, which may hold headers
// such as Authorization.
func (s *Server) readError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.fail(ctx, &Error{Status: http.StatusRequestEntityTooLarge, Type: typeInvalid, Code: "request_too_large",
			Message: fmt.Sprintf("The request body exceeds the limit of %d bytes.", s.cfg.MaxBodyBytes)})
	case errors.As(err, &small):
		s.fail(ctx, &Error{Status: http.StatusRequestHeaderFieldsTooLarge, Type: typeInvalid, Code: "headers_too_large",
			Message: "The request headers are too large."})
	case errors.As(err, &timeout) && timeout.Timeout():
		s.fail(ctx, &Error{Status: http.StatusRequestTimeout, Type: typeInvalid, Code: "request_timeout",
			Message: "The request was not received in time."})
	default:
		s.fail(ctx, badRequest("malformed_http", "The request could not be read as HTTP/1.1."))
	}
}

// fail answers with e: in Anthropic's shape and status on the Messages
// API's paths (anthropicError), in OpenAI's elsewhere.
func (s *Server) fail(ctx *fasthttp.RequestCtx, e *Error) {
	e.Message = capText(e.Message, maxErrorMessage)
	status, body := e.Status, e.body()
	if isMessagesPath(ctx.Path()) {
		status, body = anthropicError(e)
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(body)
}

// maxErrorMessage bounds an error message, whatever of the request it
// quotes (a field name, a model id, a decoder's complaint).
const maxErrorMessage = 1024

// capText cuts s to at most n bytes on a UTF-8 boundary, marking the cut.
func capText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func (s *Server) writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		s.fail(ctx, &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: err.Error()})
		return
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}

// generate admits the request against the queue limit, starts its choices
// and answers with one JSON response or an SSE stream of chat or text
// completions.
func (s *Server) generate(ctx *fasthttp.RequestCtx, m *Model, chat bool, p Params, prompts [][]int32, received time.Time) {
	resp := &response{id: newID("chatcmpl-"), created: time.Now().Unix(), model: m.ID, chat: chat, tk: m.Tokenizer}
	promptParam := "messages"
	if !chat {
		resp.id, promptParam = newID("cmpl-"), "prompt"
	}
	s.serveAnswer(ctx, m, resp, promptParam, p, prompts, received)
}

// answer builds the documents of one request's answer: response (chat and
// text completions) or responsesAnswer (/v1/responses).
type answer interface {
	// ident is the answer's id (it names the request's trace).
	ident() string
	// complete is the non-streaming document of a finished job.
	complete(j *job, res []*choiceResult) any
	// stream writes the job's output as SSE and reports whether the
	// client received it all.
	stream(w *bufio.Writer, j *job) bool
	// rename gives e the endpoint's name of the field it names.
	rename(e *Error) *Error
}

func (r *response) ident() string          { return r.id }
func (r *response) rename(e *Error) *Error { return e }

// serveAnswer admits the request against the queue limit, starts its
// choices and answers with a's JSON document or SSE stream; promptParam
// names the field the prompts came from in errors.
// takeSlots counts k more sequences in flight, or answers 429 (false) when
// that would pass limit (--max-concurrency + --max-queue).
func (s *Server) takeSlots(ctx *fasthttp.RequestCtx, k, limit int64) bool {
	if s.inflight.Add(k) > limit {
		s.inflight.Add(-k)
		s.fail(ctx, queueFullError(ctx, limit))
		return false
	}
	return true
}

// queueFull is the 429 of a request whose n choices the queue has no room
// for now (nil when it has), checked before the request is prepared so
// that one that cannot be admitted reads and encodes no images; takeSlots
// still admits it after.
func (s *Server) queueFull(ctx *fasthttp.RequestCtx, m *Model, n int) *Error {
	limit := int64(m.Engine.Snapshot().MaxRunning + s.cfg.MaxQueue)
	if k := int64(n); k <= limit && s.inflight.Load()+k > limit {
		return queueFullError(ctx, limit)
	}
	return nil
}

// queueFullError is the 429 of a full queue of limit sequences; it sets
// ctx's Retry-After.
func queueFullError(ctx *fasthttp.RequestCtx, limit int64) *Error {
	ctx.Response.Header.Set("Retry-After", "1")
	return &Error{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_full",
		Message: fmt.Sprintf("The server's queue is full (%d sequences); retry later.", limit)}
}

func (s *Server) serveAnswer(ctx *fasthttp.RequestCtx, m *Model, a answer, promptParam string, p Params, prompts [][]int32, received time.Time) {
	k := int64(len(prompts) * p.N)
	limit := int64(m.Engine.Snapshot().MaxRunning + s.cfg.MaxQueue)
	if k > limit {
		param := "n"
		if p.N == 1 {
			param = "prompt"
		}
		s.fail(ctx, a.rename(badParam(param, "The request asks for %d sequences (%d prompts x n=%d), more than the server ever holds at once (%d running + %d queued); send fewer prompts or a smaller n.",
			k, len(prompts), p.N, m.Engine.Snapshot().MaxRunning, s.cfg.MaxQueue)))
		return
	}
	if !s.takeSlots(ctx, k, limit) {
		return
	}
	rt, traceID := s.startTrace(ctx, received, a.ident(), m.ID, p)
	if traceID != "" {
		ctx.Response.Header.Set(TraceIDHeader, traceID)
	}
	jctx, cancel := context.WithTimeout(s.generations, s.cfg.Timeout)
	j := &job{ctx: jctx, cancel: cancel, m: m, p: p, prompts: prompts, promptParam: promptParam, tag: trace.SpanContextFromContext(rt.ctx),
		series: s.metrics.series.Load(), task: s.tasks.Add(1), received: received, maxLag: math.MaxInt}
	if p.Stream {
		j.maxLag = s.cfg.MaxStreamLag
	}
	if e := s.start(j); e != nil {
		s.finishTrace(rt, prompts, nil, nil, e)
		s.inflight.Add(-k)
		s.fail(ctx, a.rename(e))
		return
	}
	s.jobs.Store(j, nil)
	ctx.SetUserValue(jobKey, j)
	go func() {
		j.done.Wait()
		s.jobs.Delete(j)
		cancel()
		// The choices leave the in-flight count only once their figures
		// are in /metrics: an idle /health implies complete counters.
		s.metrics.observeRequest(received, p.N, j.maxTokens, p.Vision, j.stats, j.finishReasons)
		s.finishTrace(rt, prompts, j.stats, j.finishReasons, j.err)
		s.inflight.Add(-k)
	}()
	if p.Stream {
		ctx.SetContentType("text/event-stream")
		ctx.Response.Header.Set("Cache-Control", "no-cache")
		ctx.Response.Header.Set("X-Accel-Buffering", "no")
		method, path := string(ctx.Method()), string(ctx.Path())
		ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
			if !a.stream(w, j) {
				s.aborted.Add(1)
			}
			s.logRequest(method, path, http.StatusOK, received, j)
		})
		return
	}
	stop := s.watchPeer(ctx, j)
	res, e := j.collect()
	stop()
	if e != nil {
		s.fail(ctx, a.rename(e))
		return
	}
	s.writeJSON(ctx, http.StatusOK, a.complete(j, res))
}

// peerPollInterval is how often a non-streaming request checks that its
// client is still connected.
const peerPollInterval = 100 * time.Millisecond

// watchPeer polls the connection of a non-streaming request while its
// choices run and, once the client has gone (closed or reset), leaves j:
// its choices are aborted at the engine's next step and their KV freed, as
// a streaming request's are when a write fails. The returned func stops
// the watch.
func (s *Server) watchPeer(ctx *fasthttp.RequestCtx, j *job) (stop func()) {
	conn := ctx.Conn()
	if _, ok := peerClosed(conn); !ok {
		return func() {}
	}
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(peerPollInterval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if closed, _ := peerClosed(conn); closed {
					s.abandoned.Add(1)
					j.leave()
					return
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// IntervalsPath serves the engine's per-second intervals (engine.Interval):
// GET IntervalsPath?since_unix_ms=MS answers {"interval_seconds":1,
// "intervals":[...]}, oldest first, the current second last with
// "complete":false.
const IntervalsPath = "/v1/stats/intervals"

func (s *Server) intervals(ctx *fasthttp.RequestCtx, m *Model) {
	var since int64
	if v := ctx.QueryArgs().Peek("since_unix_ms"); v != nil {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || n < 0 {
			s.fail(ctx, badParam("since_unix_ms", "since_unix_ms must be a non-negative integer (milliseconds since the epoch), got %q.", v))
			return
		}
		since = n
	}
	s.writeJSON(ctx, http.StatusOK, map[string]any{"interval_seconds": 1, "intervals": m.Engine.Intervals(since)})
}
