package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ninfer/ninfer-go/suites/bench"
	"github.com/ninfer/ninfer-go/suites/corpus"
)

const corpusUsage = `usage: ninfer corpus --model FILE [--graph FILE] [--concurrency 1,2,4,8] [--out DIR]
                     [--manifest FILE] [--api chat|completions] [--greedy] [--url URL]

Runs the serving corpus (suites/corpus/fixtures.json: every fixture with
every seed, sent in one order shuffled with the manifest's seed) at each
concurrency C with exactly C persistent workers, each on a fresh
'ninfer serve', and writes corpus.json, corpus.md and PNG plots to --out.

`

// corpusOptions are the parsed flags of `ninfer corpus`.
type corpusOptions struct {
	model, graph, manifest, out, api, url, serverBin, kvCapacity string
	conc                                                         intList
	greedy                                                       bool
	warmup, limit                                                int
	timeout                                                      time.Duration
	serverArgs                                                   []string
	// serverLog is the file name under out of the next started server's
	// log (default serve-c<C>.log).
	serverLog string
}

func runCorpus(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("corpus", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, corpusUsage)
		fs.PrintDefaults()
	}
	var o corpusOptions
	fs.StringVar(&o.model, "model", "", "GGUF model file the servers load (required unless --url)")
	fs.StringVar(&o.graph, "graph", "", "graph the servers run (default theirs)")
	fs.StringVar(&o.kvCapacity, "kv-capacity", "", "passed to ninfer serve --kv-capacity")
	fs.Var(&o.conc, "concurrency", "concurrency points, comma-separated (default 1,2,4,8)")
	fs.StringVar(&o.manifest, "manifest", "", "fixture manifest (default the built-in suites/corpus/fixtures.json)")
	fs.StringVar(&o.out, "out", "corpus-out", "directory for corpus.json, corpus.md, the plots and server logs")
	fs.StringVar(&o.api, "api", "chat", "chat (/v1/chat/completions) or completions (/v1/completions)")
	fs.BoolVar(&o.greedy, "greedy", false, "greedy sampling instead of the seed's stochastic settings")
	fs.StringVar(&o.url, "url", "", "use this running server for every point instead of starting fresh ones")
	fs.StringVar(&o.serverBin, "server-bin", "", "ninfer binary to start servers with (default this one)")
	fs.IntVar(&o.warmup, "warmup", 1, "discarded warm-up requests per server before the workers are released")
	fs.IntVar(&o.limit, "limit", 0, "send only the first N requests of the send order (0 = all)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "deadline of each request")
	fs.Func("server-arg", "extra argument for ninfer serve (repeatable)", func(s string) error {
		o.serverArgs = append(o.serverArgs, s)
		return nil
	})
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	if o.conc == nil {
		o.conc = intList{1, 2, 4, 8}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, err := corpusRun(ctx, &o, args, stderr)
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fail(err)
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fail(err)
	}
	md := rep.Markdown()
	plots, err := corpus.Plots(rep, o.out)
	if err != nil {
		return fail(fmt.Errorf("plots: %w", err))
	}
	for _, p := range plots {
		md += fmt.Sprintf("\n![%s](%s)\n", strings.TrimSuffix(filepath.Base(p), ".png"), filepath.Base(p))
	}
	if err := errors.Join(os.WriteFile(filepath.Join(o.out, "corpus.json"), append(data, '\n'), 0o644),
		os.WriteFile(filepath.Join(o.out, "corpus.md"), []byte(md), 0o644)); err != nil {
		return fail(err)
	}
	io.WriteString(stdout, md)
	fmt.Fprintf(stderr, "ninfer corpus: wrote %s\n", o.out)
	return 0
}

// corpusRun validates the options and measures every concurrency point.
func corpusRun(ctx context.Context, o *corpusOptions, args []string, log io.Writer) (*corpus.Report, error) {
	switch {
	case o.model == "" && o.url == "":
		return nil, errors.New("--model is required (or --url of a running server)")
	case o.api != "chat" && o.api != "completions":
		return nil, fmt.Errorf("--api %q: want chat or completions", o.api)
	case o.limit < 0 || o.warmup < 0:
		return nil, errors.New("--limit and --warmup must be >= 0")
	}
	for _, c := range o.conc {
		if c < 1 {
			return nil, fmt.Errorf("--concurrency %d must be >= 1", c)
		}
	}
	m, err := corpus.Builtin()
	name := "suites/corpus/fixtures.json"
	if o.manifest != "" {
		m, err = corpus.LoadManifest(o.manifest)
		name = o.manifest
	}
	if err != nil {
		return nil, err
	}
	reqs := m.SendOrder()
	if o.limit > 0 && o.limit < len(reqs) {
		reqs = reqs[:o.limit]
	}
	samp := corpus.SeedSampling()
	if o.greedy {
		samp = corpus.Greedy()
	}
	endpoint := "/v1/chat/completions"
	if o.api == "completions" {
		endpoint = "/v1/completions"
	}
	rep := &corpus.Report{Tool: "ninfer_corpus", SchemaVersion: 1, Command: commandLine(append([]string{"ninfer", "corpus"}, args...)),
		Model: filepath.Base(o.model), Manifest: name + " (" + m.Name + ")", Endpoint: endpoint, Sampling: samp, Seeds: m.Seeds,
		ShuffleSeed: m.ShuffleSeed, FreshServer: o.url == "", Notes: []string{},
		Environment: hostEnvironment("cpu", 0)}
	for _, r := range reqs {
		rep.SendOrder = append(rep.SendOrder, fmt.Sprintf("%s:%d", r.Fixture, r.Seed))
	}
	if o.limit > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Only the first %d requests of the send order were sent (--limit).", len(reqs)))
	}
	if o.url != "" && o.model == "" {
		rep.Model = o.url
	}
	hc := &http.Client{Timeout: o.timeout}
	for _, c := range o.conc {
		base, modelID := o.url, "ninfer"
		var srv *serveProcess
		if o.url == "" {
			fmt.Fprintf(log, "ninfer corpus: C=%d: starting ninfer serve\n", c)
			if srv, err = startServe(ctx, o, c); err != nil {
				return nil, fmt.Errorf("C=%d: %w", c, err)
			}
			base, modelID = srv.url, srv.model
		} else if id, err := serverModel(ctx, hc, base); err == nil {
			modelID = id
		}
		client := &corpus.Client{BaseURL: base, Model: modelID, Chat: o.api == "chat", Sampling: samp, HTTP: hc}
		for i := range o.warmup {
			w := client.Send(ctx, corpus.Request{Fixture: "warmup", Seed: uint64(i), Prompt: "Hello. Tell me a short story.", MaxTokens: 8}, time.Now())
			if w.Error != "" {
				srv.stop()
				return nil, fmt.Errorf("C=%d: warm-up request: %s", c, w.Error)
			}
		}
		fmt.Fprintf(log, "ninfer corpus: C=%d: %d requests, %d workers\n", c, len(reqs), c)
		results, makespan, release := corpus.Run(ctx, client, reqs, c)
		ivs, ivErr := corpus.FetchIntervals(ctx, hc, base, release)
		srvErr := srv.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		note := ""
		if ivErr != nil {
			note = ivErr.Error()
		}
		for i := range results {
			corpus.Check(&results[i])
		}
		pt := corpus.NewPoint(c, results, makespan, ivs, note)
		rep.Points = append(rep.Points, pt)
		fmt.Fprintf(log, "ninfer corpus: C=%d: makespan %s s, corpus decode %s tok/s, %d failed\n", c, bench.Seconds(makespan), bench.Rate(pt.CorpusDecodeTPS), pt.Failures)
		if srvErr != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("The C=%d server did not stop cleanly: %v.", c, srvErr))
		}
		if c == 1 {
			rep.Phase = corpus.Phase(results, m.Categories())
		}
	}
	corpus.SetSpeedups(rep.Points)
	rep.Checks = corpus.Summarize(rep.Points)
	if rep.Phase == nil {
		rep.Phase = []corpus.PhaseRow{}
	}
	return rep, nil
}

// serverModel asks a running server for its first model id.
func serverModel(ctx context.Context, hc *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/models", nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Data) == 0 {
		return "", fmt.Errorf("GET /v1/models: no model (%v)", err)
	}
	return doc.Data[0].ID, nil
}

// serveProcess is a `ninfer serve` child.
type serveProcess struct {
	cmd   *exec.Cmd
	url   string
	model string
	log   *os.File
	done  chan error
}

// startServe starts `ninfer serve` on a free loopback port with
// --max-concurrency c and waits for its ready line.
func startServe(ctx context.Context, o *corpusOptions, c int) (*serveProcess, error) {
	bin := o.serverBin
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	args := []string{"serve", "--model", o.model, "--host", "127.0.0.1", "--port", "0", "--max-concurrency", fmt.Sprint(c)}
	if o.graph != "" {
		args = append(args, "--graph", o.graph)
	}
	if o.kvCapacity != "" {
		args = append(args, "--kv-capacity", o.kvCapacity)
	}
	args = append(args, o.serverArgs...)
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return nil, err
	}
	logName := o.serverLog
	if logName == "" {
		logName = fmt.Sprintf("serve-c%d.log", c)
	}
	logf, err := os.Create(filepath.Join(o.out, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	p := &serveProcess{cmd: cmd, log: logf, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			if rest, ok := strings.CutPrefix(line, serveReady); ok {
				select {
				case ready <- rest:
				default:
				}
			}
		}
		p.done <- cmd.Wait()
		close(ready)
	}()
	select {
	case rest, ok := <-ready:
		if !ok {
			logf.Close()
			return nil, fmt.Errorf("ninfer serve exited before it was ready (log: %s)", logf.Name())
		}
		// "http://127.0.0.1:PORT model=ID max_concurrency=C kv_blocks=N"
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			p.stop()
			return nil, fmt.Errorf("ninfer serve: unreadable ready line %q", rest)
		}
		p.url = fields[0]
		for _, f := range fields[1:] {
			if id, ok := strings.CutPrefix(f, "model="); ok {
				p.model = id
			}
		}
		return p, nil
	case <-time.After(2 * time.Minute):
		p.stop()
		return nil, errors.New("ninfer serve was not ready within 2 minutes")
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// stop sends SIGTERM (the server drains and exits), kills the server if it
// has not exited within 30 s, and returns its exit error. A nil p is a no-op.
func (p *serveProcess) stop() error {
	if p == nil {
		return nil
	}
	defer p.log.Close()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
		return errors.New("killed after 30 s without exiting")
	}
}
