package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/ninfer/ninfer-go/suites/corpus"
)

const multiturnUsage = `usage: ninfer multiturn --model FILE [--compare-no-cache] [--url URL --label NAME]...
                        [--conversations 4] [--turns 4] [--system-words 900] [--user-words 150]
                        [--reply-tokens 32] [--concurrency 1] [--side-by-side] [--out DIR]

Multi-turn chat workload: conversations whose every turn resends the whole
history plus a new user message. Measures each turn's TTFT and the prompt
tokens the server reports cached (usage.prompt_tokens_details.cached_tokens,
or llama-server's timings.cache_n), on a fresh 'ninfer serve' (--model;
also one with --no-prefix-cache when --compare-no-cache) and on running
servers (--url, e.g. a llama-server, labelled with --label). With
--side-by-side every server runs at once and each turn goes to them one
after another (one request at a time), so a busy host's load falls on all
alike. Writes multiturn.json, multiturn.md and ttft_per_turn.png to --out.

`

func runMultiTurn(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("multiturn", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, multiturnUsage)
		fs.PrintDefaults()
	}
	var o corpusOptions
	var urls, labels []string
	mt := corpus.MultiTurn{}
	fs.StringVar(&o.model, "model", "", "GGUF model file a fresh ninfer serve loads")
	fs.StringVar(&o.kvCapacity, "kv-capacity", "", "passed to ninfer serve --kv-capacity")
	fs.StringVar(&o.out, "out", "multiturn-out", "directory for multiturn.json, multiturn.md, the plot and server logs")
	fs.StringVar(&o.serverBin, "server-bin", "", "ninfer binary to start servers with (default this one)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "deadline of each request")
	fs.Func("server-arg", "extra argument for ninfer serve (repeatable)", func(s string) error {
		o.serverArgs = append(o.serverArgs, s)
		return nil
	})
	noCache := fs.Bool("compare-no-cache", false, "also run the workload on a fresh ninfer serve --no-prefix-cache")
	sideBySide := fs.Bool("side-by-side", false, "start every server at once and send each turn to them one after another")
	fs.Func("url", "a running OpenAI-compatible server to measure as well (repeatable)", func(s string) error {
		urls = append(urls, s)
		return nil
	})
	fs.Func("label", "the name of the matching --url in the report (repeatable)", func(s string) error {
		labels = append(labels, s)
		return nil
	})
	fs.IntVar(&mt.Conversations, "conversations", 4, "conversations")
	fs.IntVar(&mt.Turns, "turns", 4, "turns per conversation")
	fs.IntVar(&mt.SystemWords, "system-words", 900, "words of each conversation's system prompt")
	fs.IntVar(&mt.UserWords, "user-words", 150, "words of each user message")
	fs.IntVar(&mt.ReplyTokens, "reply-tokens", 32, "max_tokens of each reply")
	fs.IntVar(&mt.Concurrency, "concurrency", 1, "conversations in flight at once")
	seed := fs.Uint64("seed", 1, "seed of the synthetic messages")
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	mt.Seed = *seed
	if err := mt.Validate(); err != nil {
		return fail(err)
	}
	switch {
	case o.model == "" && len(urls) == 0:
		return fail(errors.New("--model or --url is required"))
	case *noCache && o.model == "":
		return fail(errors.New("--compare-no-cache needs --model"))
	case len(labels) > len(urls):
		return fail(errors.New("more --label than --url"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fail(err)
	}
	rep := &corpus.MultiTurnReport{Tool: "ninfer_multiturn", Command: commandLine(append([]string{"ninfer", "multiturn"}, args...)),
		Model: filepath.Base(o.model), Workload: mt, Notes: []string{},
		Environment: hostEnvironment("cpu", 0)}
	hc := &http.Client{Timeout: o.timeout}
	// target is one server measured: a fresh ninfer serve (stop set) or
	// a running one.
	type target struct {
		label, base, model string
		stop               func() error
	}
	client := func(t target) *corpus.Client {
		c := &corpus.Client{BaseURL: t.base, Model: t.model, Chat: true, Sampling: corpus.Greedy(), HTTP: hc}
		// One warm-up request, discarded: it shares nothing with the workload.
		c.Send(ctx, corpus.Request{Fixture: "warmup", Prompt: "Warm up.", MaxTokens: 4}, time.Now())
		return c
	}
	record := func(t target, results []corpus.TurnResult) {
		run := corpus.NewMultiTurnRun(t.label, t.base, mt.Turns, results)
		rep.Runs = append(rep.Runs, run)
		fmt.Fprintf(stderr, "ninfer multiturn: %s: hit rate %.1f%%, last turn TTFT %.1f ms, %d failed\n", t.label, 100*run.HitRate,
			run.Turns[len(run.Turns)-1].TTFT.Mean, run.Failures)
	}
	stopServer := func(t target) {
		if t.stop == nil {
			return
		}
		if err := t.stop(); err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("The %s server did not stop cleanly: %v.", t.label, err))
		}
	}
	var fresh []target
	if o.model != "" {
		configs := []struct {
			label string
			args  []string
		}{{"ninfer, prefix cache on", nil}}
		if *noCache {
			configs = append(configs, struct {
				label string
				args  []string
			}{"ninfer, prefix cache off", []string{"--no-prefix-cache"}})
		}
		base := o.serverArgs
		for i, cfg := range configs {
			o.serverArgs = append(append([]string(nil), base...), cfg.args...)
			o.serverLog = fmt.Sprintf("serve-%d.log", i+1)
			srv, err := startServe(ctx, &o, mt.Concurrency)
			if err != nil {
				for _, t := range fresh {
					stopServer(t)
				}
				return fail(fmt.Errorf("%s: %w", cfg.label, err))
			}
			t := target{label: cfg.label, base: srv.url, model: srv.model, stop: srv.stop}
			if *sideBySide {
				fresh = append(fresh, t)
				continue
			}
			fmt.Fprintf(stderr, "ninfer multiturn: %s: %d conversations x %d turns\n", t.label, mt.Conversations, mt.Turns)
			record(t, mt.Run(ctx, client(t)))
			stopServer(t)
			if ctx.Err() != nil {
				return fail(ctx.Err())
			}
		}
	}
	running := fresh
	for i, u := range urls {
		label := u
		if i < len(labels) {
			label = labels[i]
		}
		model, err := serverModel(ctx, hc, u)
		if err != nil {
			for _, t := range fresh {
				stopServer(t)
			}
			return fail(fmt.Errorf("%s: %w", u, err))
		}
		t := target{label: label, base: u, model: model}
		if *sideBySide {
			running = append(running, t)
			continue
		}
		fmt.Fprintf(stderr, "ninfer multiturn: %s: %d conversations x %d turns\n", label, mt.Conversations, mt.Turns)
		record(t, mt.Run(ctx, client(t)))
	}
	if *sideBySide {
		fmt.Fprintf(stderr, "ninfer multiturn: %d servers side by side: %d conversations x %d turns\n", len(running), mt.Conversations, mt.Turns)
		clients := make([]*corpus.Client, len(running))
		for i, t := range running {
			clients[i] = client(t)
		}
		for i, results := range mt.RunSideBySide(ctx, clients) {
			record(running[i], results)
		}
		for _, t := range fresh {
			stopServer(t)
		}
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		rep.Notes = append(rep.Notes, "Side by side: every server ran at once, each turn sent to them one after another, one request at a time.")
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fail(err)
	}
	md := rep.Markdown()
	plotPath, err := rep.Plot(o.out)
	if err != nil {
		return fail(fmt.Errorf("plot: %w", err))
	}
	md += fmt.Sprintf("\n![ttft per turn](%s)\n", filepath.Base(plotPath))
	if err := errors.Join(os.WriteFile(filepath.Join(o.out, "multiturn.json"), append(data, '\n'), 0o644),
		os.WriteFile(filepath.Join(o.out, "multiturn.md"), []byte(md), 0o644)); err != nil {
		return fail(err)
	}
	io.WriteString(stdout, md)
	fmt.Fprintf(stderr, "ninfer multiturn: wrote %s\n", o.out)
	return 0
}
