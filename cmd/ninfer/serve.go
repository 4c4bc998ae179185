package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/traces"
)

// serveReady starts the line `ninfer serve` prints on stdout once the model
// is loaded and /health answers 200; the URL follows it. Tools that start a
// server wait for this line.
const serveReady = "ninfer serve: ready on "

// errInterrupted is the cause of serve's context ending on SIGINT
// (Ctrl-C), as opposed to SIGTERM.
var errInterrupted = errors.New("interrupted")

func runServe(args []string, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		first := <-sigs
		if first == os.Interrupt {
			cancel(errInterrupted)
		} else {
			cancel(nil)
		}
		<-sigs
		fmt.Fprintln(stderr, "ninfer serve: exiting now, requests in flight cut off")
		os.Exit(130)
	}()
	return serve(ctx, args, stdout, stderr)
}

// serve runs the HTTP server until ctx ends. On SIGTERM (ctx done without
// errInterrupted) it drains for gateways: /ready answers 503 and the agent
// "drain" at once, requests are still served for --drain-grace so that
// the gateway's health checks notice, then the listener closes, the
// requests in flight finish (up to --drain-timeout) and serve returns 0.
// On Ctrl-C (errInterrupted) an idle server stops at once, a busy one
// closes its listener and lets the requests in flight finish, saying that
// a second Ctrl-C exits now.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0 exposes the server to the network)")
	port := fs.Int("port", 8080, "TCP port (0 = any free port; the ready line names it)")
	maxConc := fs.Int("max-concurrency", 16, "most sequences that share an engine step")
	stepTokens := fs.Int("step-tokens", 0, "most tokens one engine step computes: decode rows first, then prefill chunks (vLLM's max_num_batched_tokens); smaller trades time to first token for steadier inter-token latency (default the graph's prefill chunk + one decode row per --max-concurrency)")
	apiKey := fs.String("api-key", "", "require 'Authorization: Bearer KEY' or 'x-api-key: KEY' on /v1/ calls (visible in ps: prefer --api-key-file or $"+apiKeyEnv+")")
	apiKeyFile := fs.String("api-key-file", "", "read the API key from this file (its first line)")
	modelID := fs.String("model-id", "", "model name clients pass (default: the file name without .gguf)")
	maxQueue := fs.Int("max-queue", httpfront.DefaultMaxQueue, "sequences that may wait beyond --max-concurrency before 429")
	timeout := fs.Duration("timeout", httpfront.DefaultTimeout, "deadline of every request")
	maxBody := fs.Int("max-body", httpfront.DefaultMaxBodyBytes, "largest request body in bytes (413 above)")
	drain := fs.Duration("drain-timeout", 0, "on SIGTERM, how long to wait for requests in flight once the listener has closed (0 = --timeout)")
	grace := fs.Duration("drain-grace", 5*time.Second, "on SIGTERM, how long to keep serving new requests while /ready answers 503 and the agent \"drain\", before the listener closes (gateways need their health-check detection time)")
	agentPort := fs.Int("agent-port", 0, "serve HAProxy's agent check on this TCP port of --host (0 = off)")
	otlp := fs.String("otlp-endpoint", "", "send OpenTelemetry spans over OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (default $OTEL_EXPORTER_OTLP_ENDPOINT; off when empty)")
	sampleRatio := fs.Float64("trace-sample-ratio", 1, "fraction of requests traced when tracing is on")
	strictFields := fs.Bool("strict-fields", false, "reject requests with fields the server does not know (400 naming the field); by default they are ignored and each name is logged once")
	pprofAddr := fs.String("pprof", "", "serve Go's net/http/pprof profiles (/debug/pprof/) on this address, e.g. 127.0.0.1:6060 (default off; it exposes internals: keep it on loopback)")
	allowedOrigins := fs.String("allowed-origins", "", "comma-separated browser origins allowed cross-origin calls (CORS), e.g. https://app.example; \"*\" allows any origin without credentials (default none)")
	noWebUI := fs.Bool("no-webui", false, "do not serve the built-in web UI at / (chat, the running graph, live engine figures)")
	maxImages := fs.Int("max-images", httpfront.DefaultMaxImages, "most images one request may carry (400 above)")
	maxImageBytes := fs.Int("max-image-bytes", httpfront.DefaultMaxImageBytes, "largest image file in bytes (400 above; --max-body bounds data URLs too)")
	maxImagePixels := fs.Int("max-image-pixels", vision.DefaultMaxPixels, "largest image width x height, checked on its header before decoding (400 above)")
	localMedia := fs.String("allowed-local-media-path", "", "let requests name images as file:// URLs of files inside this folder (default: none)")
	mediaDomainList := fs.String("allowed-media-domains", "", "comma-separated hosts whose http(s) image URLs the server fetches (default: none; other remote URLs get 400)")
	noRequestLog := fs.Bool("no-request-log", false, "do not log a line per request on stderr (method, path, status, tokens in/out, time to first token, duration)")
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	origins, err := parseOrigins(*allowedOrigins)
	if err != nil {
		return fail(err)
	}
	mediaDomains, err := parseMediaDomains(*mediaDomainList)
	if err != nil {
		return fail(err)
	}
	switch {
	case *port < 0 || *port > 65535:
		return fail(fmt.Errorf("--port %d must be in [0, 65535]", *port))
	case *maxConc < 1:
		return fail(fmt.Errorf("--max-concurrency %d must be >= 1", *maxConc))
	case *stepTokens < 0:
		return fail(fmt.Errorf("--step-tokens %d must be >= 0", *stepTokens))
	case *maxQueue < 1:
		return fail(fmt.Errorf("--max-queue %d must be >= 1", *maxQueue))
	case *timeout <= 0:
		return fail(fmt.Errorf("--timeout %v must be > 0", *timeout))
	case *maxBody < 1:
		return fail(fmt.Errorf("--max-body %d must be >= 1", *maxBody))
	case *drain < 0:
		return fail(fmt.Errorf("--drain-timeout %v must be >= 0", *drain))
	case *grace < 0:
		return fail(fmt.Errorf("--drain-grace %v must be >= 0", *grace))
	case *agentPort < 0 || *agentPort > 65535:
		return fail(fmt.Errorf("--agent-port %d must be in [0, 65535]", *agentPort))
	case !(*sampleRatio > 0 && *sampleRatio <= 1):
		return fail(fmt.Errorf("--trace-sample-ratio %g must be in (0, 1]", *sampleRatio))
	case *maxImages < 1 || *maxImageBytes < 1 || *maxImagePixels < 1:
		return fail(fmt.Errorf("--max-images %d, --max-image-bytes %d and --max-image-pixels %d must be >= 1", *maxImages, *maxImageBytes, *maxImagePixels))
	}
	if *localMedia != "" {
		if st, err := os.Stat(*localMedia); err != nil || !st.IsDir() {
			return fail(fmt.Errorf("--allowed-local-media-path %s is not a folder", *localMedia))
		}
	}
	key, err := resolveAPIKey(*apiKey, *apiKeyFile, os.Getenv(apiKeyEnv))
	if err != nil {
		return fail(err)
	}
	tp, err := traces.Start(context.Background(), traces.ConfigFromEnv(traces.Config{Endpoint: *otlp, SampleRatio: *sampleRatio}))
	if err != nil {
		return fail(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			fmt.Fprintf(stderr, "ninfer serve: flushing traces: %v\n", err)
		}
	}()
	opts, err := mf.options()
	if err != nil {
		return fail(err)
	}
	opts.MaxRunning, opts.StepTokens = *maxConc, *stepTokens
	if tp.Enabled {
		opts.Observer = tp
	}
	id := *modelID
	if id == "" {
		id = strings.TrimSuffix(filepath.Base(opts.Model), ".gguf")
	}
	if *drain == 0 {
		*drain = *timeout
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fail(err)
	}
	if *pprofAddr != "" {
		pln, err := net.Listen("tcp", *pprofAddr)
		if err != nil {
			ln.Close()
			return fail(fmt.Errorf("--pprof: %w", err))
		}
		defer pln.Close()
		go http.Serve(pln, pprofMux())
		fmt.Fprintf(stderr, "ninfer serve: pprof on http://%s/debug/pprof/\n", pln.Addr())
	}
	var requestLog io.Writer
	if !*noRequestLog {
		requestLog = stderr
	}
	srv := httpfront.New(httpfront.Config{APIKey: key, MaxQueue: *maxQueue, Timeout: *timeout, MaxBodyBytes: *maxBody, Traces: tp,
		StrictFields: *strictFields, AllowedOrigins: origins, NoWebUI: *noWebUI, RequestLog: requestLog,
		Media: httpfront.MediaOptions{MaxImages: *maxImages, MaxImageBytes: *maxImageBytes, MaxImagePixels: *maxImagePixels, LocalPath: *localMedia,
			AllowedDomains: mediaDomains}})
	opts.Observer = httpfront.StepObservers(opts.Observer, srv)
	agent := ""
	if *agentPort != 0 {
		aln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*agentPort)))
		if err != nil {
			ln.Close()
			return fail(fmt.Errorf("--agent-port: %w", err))
		}
		// The agent answers until serve returns, so it says "drain" for
		// the whole drain, requests in flight included.
		defer aln.Close()
		go func() {
			if err := srv.ServeAgent(aln); err != nil {
				fmt.Fprintf(stderr, "ninfer serve: %v\n", err)
			}
		}()
		agent = " agent=" + aln.Addr().String()
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	url := "http://" + ln.Addr().String()
	size := modelBytes(opts.Model)
	fmt.Fprintf(stderr, "ninfer serve: loading %s (%s); /health answers 503 until it is open\n", opts.Model, bytesText(size))

	loaded := make(chan error, 1)
	var inst *instance.Instance
	go func() {
		var err error
		inst, err = openInstance(opts)
		loaded <- err
	}()
	stopProgress := loadProgress(stderr, opts.Model, size)
	select {
	case err := <-loaded:
		stopProgress()
		if err != nil {
			srv.Shutdown(context.Background()) //nolint:errcheck // nothing is in flight
			return fail(err)
		}
	case <-ctx.Done():
		stopProgress()
		srv.Shutdown(context.Background()) //nolint:errcheck // nothing is in flight
		if err := <-loaded; err == nil {
			inst.Close()
		}
		return 0
	}
	defer inst.Close()
	serveSummary{ID: id, Path: opts.Model, Graph: mf.graph, Threads: opts.Threads, APIKey: key != "", StepTokens: *stepTokens}.write(stderr, inst)
	if inst.BackendReport != "" {
		fmt.Fprintf(stderr, "ninfer serve: %s\n", inst.BackendReport)
	}
	srv.SetModel(&httpfront.Model{ID: id, Engine: inst.Engine, Tokenizer: inst.Tokenizer, Chat: inst.Chat,
		ChatErr: inst.ChatErr, Created: time.Now(), TrainContext: inst.Engine.Model().ContextLength, Plan: inst.Plan, Path: opts.Model,
		Images: imageEncoder(inst)})
	snap := inst.Engine.Snapshot()
	fmt.Fprintf(stderr, "ninfer serve: listening on %s%s\n", url, agent)
	fmt.Fprintf(stdout, "%s%s model=%s max_concurrency=%d kv_blocks=%d%s\n", serveReady, url, id, snap.MaxRunning, snap.KVBlocksTotal, agent)
	go releaseWhenIdle(ctx, func() bool {
		s := inst.Engine.Snapshot()
		return srv.InFlight() == 0 && s.Running == 0 && s.Waiting == 0
	})

	select {
	case err := <-served:
		if err != nil {
			return fail(err)
		}
		return 0
	case <-ctx.Done():
	}
	if errors.Is(context.Cause(ctx), errInterrupted) {
		return interrupted(srv, *drain, stderr)
	}
	srv.Drain()
	if *grace > 0 {
		fmt.Fprintf(stderr, "ninfer serve: draining: /ready answers 503, still serving for %v before the listener closes\n", *grace)
		t := time.NewTimer(*grace)
		select {
		case <-t.C:
		case err := <-served:
			t.Stop()
			if err != nil {
				return fail(err)
			}
			return 0
		}
	}
	fmt.Fprintf(stderr, "ninfer serve: closing the listener, draining %d requests in flight\n", srv.InFlight())
	dctx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		return fail(fmt.Errorf("drain: %w", errors.Join(err, fmt.Errorf("%d requests still in flight", srv.InFlight()))))
	}
	fmt.Fprintln(stderr, "ninfer serve: stopped")
	return 0
}

// interrupted stops srv after Ctrl-C: at once when nothing is in flight,
// else once the requests in flight have finished (up to drain), saying so
// and that a second Ctrl-C (runServe) exits now.
func interrupted(srv *httpfront.Server, drain time.Duration, stderr io.Writer) int {
	if n := srv.InFlight(); n > 0 {
		fmt.Fprintf(stderr, "ninfer serve: draining %d requests in flight (new ones get 503); press Ctrl-C again to exit now\n", n)
	}
	dctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(dctx); err != nil {
		fmt.Fprintf(stderr, "ninfer serve: drain: %v (%d requests still in flight)\n", err, srv.InFlight())
		return 1
	}
	fmt.Fprintln(stderr, "ninfer serve: stopped")
	return 0
}

// idleRelease is how long the server must have been idle after a busy
// spell before it returns the memory the spell freed to the system.
const idleRelease = 2 * time.Second

// releaseWhenIdle returns freed heap memory to the system once per busy
// spell, when idle has reported true for idleRelease. The Go runtime keeps
// the heap it grew to under load until a later collection shrinks its goal
// (up to two minutes without allocation); a server that has gone quiet
// should give it back at once.
func releaseWhenIdle(ctx context.Context, idle func() bool) {
	t := time.NewTicker(idleRelease / 4)
	defer t.Stop()
	busy, quietSince := false, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			switch {
			case !idle():
				busy, quietSince = true, time.Time{}
			case !busy:
			case quietSince.IsZero():
				quietSince = now
			case now.Sub(quietSince) >= idleRelease:
				debug.FreeOSMemory()
				busy = false
			}
		}
	}
}

// apiKeyEnv names the environment variable that holds the API key.
const apiKeyEnv = "NINFER_API_KEY"

// resolveAPIKey picks the server's API key from --api-key, --api-key-file
// or $NINFER_API_KEY (env): at most one of the flags, and a flag wins over
// the environment. The file's first line is the key, without surrounding
// whitespace; an empty one is an error, never an open server.
func resolveAPIKey(flagKey, file, env string) (string, error) {
	switch {
	case flagKey != "" && file != "":
		return "", errors.New("--api-key and --api-key-file are exclusive")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--api-key-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if key := strings.TrimSpace(line); key != "" {
			return key, nil
		}
		return "", fmt.Errorf("--api-key-file %s: the first line is empty", file)
	case flagKey != "":
		return flagKey, nil
	}
	return strings.TrimSpace(env), nil
}

// pprofMux serves net/http/pprof's handlers (and nothing else) for --pprof.
func pprofMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// imageEncoder is the server's httpfront.ImageEncoder for inst: nil
// without a vision tower.
func imageEncoder(inst *instance.Instance) httpfront.ImageEncoder {
	if inst.Vision == nil {
		return nil
	}
	return func(ctx context.Context, prompt string, images [][]byte, addSpecial bool, lim vision.DecodeLimits, encode bool) ([]int32, []engine.Image, []vision.Chunk, error) {
		p, err := inst.PromptWithImages(ctx, prompt, images, addSpecial, lim, encode)
		if err != nil {
			return nil, nil, nil, err
		}
		return p.IDs, p.Images, p.Chunks, nil
	}
}
