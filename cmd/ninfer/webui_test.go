//go:build browser

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/plan"
)

// TestWebUI drives the built-in web UI in real headless Chromium against a
// real `ninfer serve` (the hybrid tiny-qwen35 with Qwen3's template
// changed to open a <think> block unless thinking is off, the mtp graph,
// behind an API key): the page asks for the key, sends the sampling
// controls, streams a chat reply, shows the live figures moving while the
// request runs (tokens/s, running, KV and state use, prefix-cache hit
// rate),
// stops a request, shows a reply's reasoning collapsed and a tool call,
// and draws every step of the plan, its loop, carried value and cache
// groups. The page must log no console error and request nothing from any
// host but the server. Screenshots go to $WEBUI_SCREENSHOTS
// (`just webui-screenshots` writes docs/webui-chat.png and
// docs/webui-graph.png).
func TestWebUI(t *testing.T) {
	bin := os.Getenv("NINFER_BIN")
	if bin == "" {
		t.Skip("NINFER_BIN not set (run `just webui-test`)")
	}
	browser := os.Getenv("CHROMIUM")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	if _, err := os.Stat(browser); err != nil {
		t.Fatalf("no Chromium at %s (set $CHROMIUM; .ci/run installs Debian's chromium): %v", browser, err)
	}
	shots := os.Getenv("WEBUI_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	const key = "webui-test-key"
	// The thinking model: tiny-qwen35 whose generation prompt opens a
	// <think> block unless enable_thinking is false. A hybrid model under
	// the mtp graph has every figure the page shows: KV and recurrent
	// state groups, the prefix cache, a draft loop with a carried value.
	thinker := filepath.Join(t.TempDir(), "tiny-qwen35-thinking.gguf")
	gen := exec.Command("go", "run", "./suites/sdk/toolmodel", "-in", sharedPath(t, "models", "tiny-qwen35-f32.gguf"),
		"-template", filepath.Join("runtime", "tok", "testdata", "chat", "qwen3.jinja"), "-open-thinking", "-out", thinker)
	gen.Dir = filepath.Join("..", "..")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("toolmodel: %v\n%s", err, out)
	}
	srv, err := startServe(context.Background(), &corpusOptions{serverBin: bin, model: thinker,
		graph: "mtp", out: t.TempDir(), serverArgs: []string{"--threads", "1", "--api-key", key}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.stop() })
	base := srv.url
	server, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(browser),
		chromedp.WindowSize(1440, 900),
		// Nothing but the server resolves: a stray request fails here
		// too, and is still seen (and failed) by the listener below.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 45*time.Second)
	defer cancel()

	var mu sync.Mutex
	var problems, requests []string
	var chats []map[string]any // the bodies of the page's chat requests
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			requests = append(requests, e.Request.URL)
			if strings.HasSuffix(e.Request.URL, "/v1/chat/completions") {
				var body []byte
				for _, p := range e.Request.PostDataEntries {
					body = append(body, p.Bytes...)
				}
				var doc map[string]any
				if err := json.Unmarshal(body, &doc); err != nil {
					problems = append(problems, fmt.Sprintf("a chat request body is not JSON: %v: %.200s", err, body))
				}
				chats = append(chats, doc)
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				problems = append(problems, fmt.Sprintf("console.%s: %s", e.Type, consoleArgs(e.Args)))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, "exception: "+exceptionText(e.ExceptionDetails))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.EntryLevelError {
				problems = append(problems, fmt.Sprintf("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && len(problems) > 0 {
			t.Logf("the page logged:\n%s", strings.Join(problems, "\n"))
		}
	})

	started := time.Now()
	defer func() { t.Logf("browser part took %v", time.Since(started).Round(time.Millisecond)) }()
	// The page loads without the key, then asks for it.
	run(t, ctx, "load / and give the key",
		enableDomains,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#key-dialog[open] #key-input")),
		chromedp.SendKeys(chromedp.CSS("#key-input"), key),
		chromedp.Click(chromedp.CSS("#key-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#model-info[data-model]")),
		chromedp.WaitVisible(chromedp.CSS("#figures[data-polls] #plot-tps svg")),
	)
	model := value(t, ctx, "read the model", chromedp.AttributeValue(chromedp.CSS("#model-info"), "data-model")).Value
	if model != "tiny-qwen35-thinking" {
		t.Errorf("model info shows %q, want tiny-qwen35-thinking", model)
	}

	// A long reply: its tokens must arrive in several pieces, and the live
	// figures must move while it runs; then Stop ends it.
	t.Logf("page ready after %v", time.Since(started).Round(time.Millisecond))
	before := readUI(t, ctx)
	run(t, ctx, "send a long prompt",
		chromedp.SetValue(chromedp.CSS("#max_tokens"), "3000"),
		chromedp.SetValue(chromedp.CSS("#temperature"), "0.8"),
		chromedp.SetValue(chromedp.CSS("#seed"), "7"),
		chromedp.SetValue(chromedp.CSS("#top_k"), "40"),
		chromedp.SetValue(chromedp.CSS("#thinking"), "off"),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "Tell me a long story about the sea."),
		chromedp.Click(chromedp.CSS("#send")),
	)
	lengths := map[int]bool{}
	var moved string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ui := readUI(t, ctx)
		if ui.Generating && ui.Reply > 0 {
			lengths[ui.Reply] = true
			if moved == "" && ui.Polls > before.Polls && (strings.HasPrefix(ui.Load, "1 running") && ui.Load != before.Load) && ui.TPS != before.TPS &&
				ui.Cache != before.Cache && ui.PrefixLines > 0 {
				moved = fmt.Sprintf("tokens/s %q -> %q, load %q -> %q, cache %q -> %q, prefix cache %q -> %q",
					before.TPS, ui.TPS, before.Load, ui.Load, before.Cache, ui.Cache, before.Prefix, ui.Prefix)
				if !prefixRate.MatchString(ui.Prefix) {
					t.Errorf("the prefix-cache figure shows %q once a prompt was looked up, want its hit rate", ui.Prefix)
				}
			}
		}
		if moved != "" && len(lengths) >= 3 {
			break
		}
		if !ui.Generating && ui.Reply > 0 {
			t.Fatalf("the reply ended before the figures moved (%d stream lengths seen): %+v", len(lengths), ui)
		}
		time.Sleep(40 * time.Millisecond)
	}
	if len(lengths) < 3 {
		t.Fatalf("saw the reply at %d lengths while it streamed, want >= 3 (tokens streaming in)", len(lengths))
	}
	if moved == "" {
		t.Fatalf("the live figures did not change while the request ran: before %+v, now %+v", before, readUI(t, ctx))
	}
	t.Logf("live figures while streaming: %s; reply seen at %d lengths", moved, len(lengths))
	if before.Prefix != "no prompt yet" || before.PrefixLines != 0 {
		t.Errorf("before any request the prefix-cache figure shows %q with %d lines", before.Prefix, before.PrefixLines)
	}
	// The controls went out with the request.
	mu.Lock()
	first := map[string]any{}
	if len(chats) > 0 {
		for _, k := range []string{"model", "max_tokens", "temperature", "top_p", "top_k", "seed", "stream", "chat_template_kwargs"} {
			first[k] = chats[0][k]
		}
	}
	mu.Unlock()
	if d := cmp.Diff(map[string]any{"model": "tiny-qwen35-thinking", "max_tokens": 3000.0, "temperature": 0.8, "top_p": 1.0, "top_k": 40.0, "seed": 7.0,
		"stream": true, "chat_template_kwargs": map[string]any{"enable_thinking": false}}, first); d != "" {
		t.Errorf("the first chat request (-want +got):\n%s", d)
	}
	run(t, ctx, "stop the reply", chromedp.Click(chromedp.CSS("#stop")),
		chromedp.WaitVisible(chromedp.CSS("#send:not([disabled])")))
	stopped := value(t, ctx, "read the stopped reply", chromedp.Text(chromedp.CSS(".msg.assistant .meta")))
	if !strings.HasSuffix(stopped, "stopped") {
		t.Errorf("the stopped reply's footer is %q, want it to end in \"stopped\"", stopped)
	}
	waitIdleOnServer(t, base, key)

	// A short reply with thinking on, in a new conversation (the stopped
	// reply may fill most of the context): the model never closes its
	// <think> block, so the reply is reasoning, shown collapsed.
	run(t, ctx, "send a short prompt with thinking on",
		chromedp.Click(chromedp.CSS("#clear")),
		chromedp.SetValue(chromedp.CSS("#max_tokens"), "60"),
		chromedp.SetValue(chromedp.CSS("#thinking"), "on"),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "Once upon a time"),
		chromedp.Click(chromedp.CSS("#send")),
		chromedp.WaitVisible(chromedp.CSS(".msg.assistant .meta:not(:empty)")),
		chromedp.WaitVisible(chromedp.CSS("#plot-phases rect.bar")),
		chromedp.WaitVisible(chromedp.CSS("#plot-spec rect.bar")),
	)
	type reasoningView struct {
		Shown, Open, TextShown bool
		Reasoning              int
	}
	readReasoning := func() reasoningView {
		return value(t, ctx, "read the reasoning", chromedp.Evaluate[reasoningView](`(() => {
			const d = document.querySelector('.msg.assistant:last-child details.reasoning');
			const text = d.querySelector('.reasoning-text');
			return {Shown: d.checkVisibility(), Open: d.open, TextShown: text.checkVisibility(), Reasoning: text.textContent.length};
		})()`))
	}
	if r := readReasoning(); !r.Shown || r.Open || r.TextShown || r.Reasoning == 0 {
		t.Errorf("the reasoning shows as %+v, want a collapsed box holding the reasoning", r)
	}
	run(t, ctx, "open the reasoning", chromedp.Click(chromedp.CSS(".msg.assistant:last-child details.reasoning summary")))
	if r := readReasoning(); !r.Open || !r.TextShown {
		t.Errorf("opened, the reasoning shows as %+v", r)
	}
	run(t, ctx, "close the reasoning", chromedp.Click(chromedp.CSS(".msg.assistant:last-child details.reasoning summary")),
		chromedp.Sleep(1200*time.Millisecond)) // one idle poll redraws the plots at rest
	// A forced tool call (grammar-constrained) is shown with its name and
	// arguments.
	const tools = `[{"type":"function","function":{"name":"get_weather","description":"The weather in a city.",` +
		`"parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":12}},"required":["city"],"additionalProperties":false}}}]`
	run(t, ctx, "ask for a tool call",
		chromedp.Click(chromedp.CSS("#settings summary")),
		chromedp.SetValue(chromedp.CSS("#tools"), tools),
		chromedp.SetValue(chromedp.CSS("#tool_choice"), "required"),
		chromedp.SetValue(chromedp.CSS("#thinking"), "off"),
		chromedp.SetValue(chromedp.CSS("#max_tokens"), "200"),
		chromedp.SendKeys(chromedp.CSS("#prompt"), "What is the weather in Paris?"),
		chromedp.Click(chromedp.CSS("#send")),
		chromedp.WaitVisible(chromedp.CSS(".msg.assistant:last-child .meta:not(:empty)")),
		chromedp.Click(chromedp.CSS("#settings summary")),
	)
	type toolView struct{ Name, Args, Meta string }
	call := value(t, ctx, "read the tool call", chromedp.Evaluate[toolView](`(() => {
		const last = [...document.querySelectorAll('.msg.assistant')].pop();
		const q = (s) => (last.querySelector(s) || {}).textContent || '';
		return {Name: q('.tool-name'), Args: q('.tool-args'), Meta: q('.meta')};
	})()`))
	var args struct {
		City *string `json:"city"`
	}
	if call.Name != "tool call: get_weather" || json.Unmarshal([]byte(call.Args), &args) != nil || args.City == nil || !strings.HasSuffix(call.Meta, "tool_calls") {
		t.Errorf("the forced tool call shows as %+v, want get_weather with {\"city\": ...} arguments, finished by tool_calls", call)
	}
	if n := value(t, ctx, "count errors", chromedp.Evaluate[int](`document.querySelectorAll('#messages .error').length`)); n != 0 {
		t.Errorf("the chat shows %d errors", n)
	}
	saveScreenshot(t, ctx, filepath.Join(shots, "webui-chat.png"))

	// The graph view draws every step of the plan the server runs.
	var g httpfront.Graph
	getJSON(t, base+httpfront.GraphPath, key, &g)
	run(t, ctx, "open the graph view", chromedp.Click(chromedp.CSS("#tab-graph")),
		chromedp.WaitVisible(chromedp.CSS("#graph svg.plan g.node")))
	type drawing struct {
		Steps  []string
		Carry  int
		Next   int
		Loops  int
		Caches []string
	}
	drawn := value(t, ctx, "read the drawn graph", chromedp.Evaluate[drawing](`({
		Steps: [...document.querySelectorAll('#graph svg.plan [data-step]')].map(e => e.dataset.step),
		Carry: document.querySelectorAll('#graph .edge.carry').length,
		Next: document.querySelectorAll('#graph .edge.next').length,
		Loops: document.querySelectorAll('#graph g.loop').length,
		Caches: [...document.querySelectorAll('#graph g.cache')].map(e => e.dataset.cache),
	})`))
	var want []string
	var loops, next int
	var walk func([]plan.StepDoc)
	walk = func(steps []plan.StepDoc) {
		for _, s := range steps {
			want = append(want, s.ID)
			if s.Loop != nil {
				loops++
				next += len(s.Loop.Next)
				walk(s.Loop.Steps)
			}
		}
	}
	walk(g.Plan.Steps)
	slices.Sort(want)
	slices.Sort(drawn.Steps)
	if !slices.Equal(want, drawn.Steps) {
		t.Errorf("drawn steps %v, want the plan's %v", drawn.Steps, want)
	}
	if loops == 0 || drawn.Loops != loops || drawn.Next != next {
		t.Errorf("drawn %d loops with %d feedback edges, want %d and %d (and the mtp plan has a loop)", drawn.Loops, drawn.Next, loops, next)
	}
	if drawn.Carry != len(g.Plan.Carry) || drawn.Carry == 0 {
		t.Errorf("drawn %d carried-value edges, want %d (one per $prev read of the mtp plan)", drawn.Carry, len(g.Plan.Carry))
	}
	var groups []string
	for _, c := range g.CacheGroups {
		groups = append(groups, c.Name)
	}
	if !slices.Equal(groups, drawn.Caches) || len(groups) < 2 {
		t.Errorf("drawn cache groups %v, want %v (the target's KV and its recurrent state)", drawn.Caches, groups)
	}
	saveScreenshot(t, ctx, filepath.Join(shots, "webui-graph.png"))

	mu.Lock()
	defer mu.Unlock()
	var thinking []any
	for _, c := range chats {
		thinking = append(thinking, c["chat_template_kwargs"])
	}
	off, on := map[string]any{"enable_thinking": false}, map[string]any{"enable_thinking": true}
	if d := cmp.Diff([]any{off, on, off}, thinking); d != "" {
		t.Errorf("the chat requests' chat_template_kwargs (-want +got):\n%s", d)
	}
	if len(problems) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
	}
	for _, r := range requests {
		u, err := url.Parse(r)
		if err != nil || u.Host != server.Host || u.Scheme != server.Scheme {
			t.Errorf("the page requested %q, which is not on the server %s", r, base)
		}
	}
	if len(requests) < 5 {
		t.Errorf("saw only %d requests; the listener is not seeing the page's traffic", len(requests))
	}
}

// uiState is what the test reads of the page while it streams.
type uiState struct {
	Generating               bool
	Reply                    int // characters of the last assistant reply
	Polls                    int
	TPS, Load, Cache, Prefix string
	PrefixLines              int // hit-rate lines drawn
}

// prefixRate is the prefix-cache figure once a prompt was looked up.
var prefixRate = regexp.MustCompile(`^\d+\.\d% of \d+ prompt tokens$`)

func readUI(t *testing.T, ctx context.Context) uiState {
	t.Helper()
	return value(t, ctx, "read the page", chromedp.Evaluate[uiState](`(() => {
		const replies = document.querySelectorAll('.msg.assistant .content');
		const last = replies[replies.length - 1];
		return {
			Generating: document.body.classList.contains('generating'),
			Reply: last ? last.textContent.length : 0,
			Polls: Number(document.getElementById('figures').dataset.polls || 0),
			TPS: document.getElementById('fig-tps').textContent,
			Load: document.getElementById('fig-load').textContent,
			Cache: document.getElementById('fig-cache').textContent,
			Prefix: document.getElementById('fig-prefix').textContent,
			PrefixLines: document.querySelectorAll('#plot-prefix polyline.series').length,
		};
	})()`))
}

// run runs steps in order, failing the test at the first error.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs a and returns its value, failing the test on an error.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// enableDomains turns on the events the test listens to: requests, console
// calls and exceptions, and the browser's log (CSP violations).
func enableDomains(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		return chromedp.Void{}, err
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		return chromedp.Void{}, err
	}
	_, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{})
	return chromedp.Void{}, err
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil && d.Exception.Description != "" {
		return d.Text + " " + d.Exception.Description
	}
	return d.Text
}

func saveScreenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+path, chromedp.CaptureScreenshot())
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

func consoleArgs(args []*runtime.RemoteObject) string {
	var parts []string
	for _, a := range args {
		if len(a.Value) > 0 {
			parts = append(parts, string(a.Value))
		} else {
			parts = append(parts, a.Description)
		}
	}
	return strings.Join(parts, " ")
}

func getJSON(t *testing.T, u, key string, v any) {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
}

// waitIdleOnServer waits until the stopped request has left the engine.
func waitIdleOnServer(t *testing.T, base, key string) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var live httpfront.LiveStats
		getJSON(t, base+httpfront.LivePath, key, &live)
		if live.Running == 0 && live.Waiting == 0 {
			return
		}
	}
	t.Fatal("the stopped request still runs on the server 5 s after Stop")
}
