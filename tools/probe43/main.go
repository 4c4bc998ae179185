// Command probe43 re-runs issue 43's reliability probe against a ninfer
// binary and prints its table (case | before | now | target | met?) as
// Markdown. Every server it needs it starts itself, on a free port of
// 127.0.0.1; the file cases run the binary's CLI under /usr/bin/time -v.
//
//	go build -o bin/ninfer ./cmd/ninfer
//	go run ./tools/probe43 -bin bin/ninfer -models ../shared/models [-only REGEXP]
//
// The timeout case needs a model slow enough that one generation outlasts
// a minute on the host (-slow-model, default the 0.6B Qwen3 Q8_0 bench
// model); it takes about two minutes. The whole probe takes about six.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	binPath   = flag.String("bin", "bin/ninfer", "the ninfer binary to probe")
	modelsDir = flag.String("models", "../shared/models", "folder of the test models (tiny-qwen3-f32.gguf, tiny-qwen35-f32.gguf)")
	slowModel = flag.String("slow-model", "/work/bench/q06b-q8_0.gguf", "a model whose generation of a few thousand tokens outlasts a minute (the timeout case)")
	only      = flag.String("only", "", "run only the cases whose name matches this regular expression")
	threads   = flag.Int("threads", 2, "--threads of the servers started")
)

// row is one line of the table.
type row struct{ name, before, now, target, met string }

var rows []row

func report(name, before, now, target string, ok bool) {
	met := "yes"
	if !ok {
		met = "**no**"
	}
	rows = append(rows, row{name, before, now, target, met})
	fmt.Fprintf(os.Stderr, "probe43: %s: %s (%s)\n", name, now, met)
}

func selected(name string) bool {
	if *only == "" {
		return true
	}
	return regexp.MustCompile(*only).MatchString(name)
}

func main() {
	flag.Parse()
	tmp, err := os.MkdirTemp("", "probe43-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, c := range []struct {
		name string
		run  func(tmp string)
	}{
		{"grammars", probeGrammars},
		{"constraints", probeLargeConstraints},
		{"timeout", probeTimeout},
		{"files", probeFiles},
		{"slow readers", probeSlowReaders},
		{"statuses", probeStatuses},
	} {
		if selected(c.name) {
			c.run(tmp)
		}
	}
	fmt.Println("| case | before (issue 43) | now | target | met? |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.name, r.before, r.now, r.target, r.met)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "probe43:", err)
	os.Exit(1)
}

// server is a `ninfer serve` started by the probe.
type server struct {
	cmd  *exec.Cmd
	base string
}

const readyPrefix = "ninfer serve: ready on "

func serve(args ...string) *server {
	args = append([]string{"serve", "--port", "0", "--threads", strconv.Itoa(*threads), "--no-request-log"}, args...)
	cmd := exec.Command(*binPath, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		fatal(err)
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, readyPrefix) {
		cmd.Process.Kill()
		fatal(fmt.Errorf("serve %v: ready line %q: %v", args, line, err))
	}
	go io.Copy(io.Discard, out)
	return &server{cmd: cmd, base: strings.Fields(strings.TrimPrefix(line, readyPrefix))[0]}
}

func (s *server) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func (s *server) rssMB() float64 { return rssMB(s.cmd.Process.Pid) }

func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return -1
}

// post sends body and returns the status, the body and the time taken.
func (s *server) post(ctx context.Context, path, body string) (int, string, time.Duration) {
	began := time.Now()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error(), time.Since(began)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), time.Since(began)
}

func (s *server) health() map[string]any {
	resp, err := http.Get(s.base + "/health")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	return h
}

// waitIdle waits until nothing runs and no KV block is used (30 s at most).
func (s *server) waitIdle() bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		h := s.health()
		if h != nil && h["requests_in_flight"] == 0.0 && h["kv_blocks_used"] == 0.0 {
			return true
		}
	}
	return false
}

// watcher is another client's long stream: it records when each event
// came, so the longest pause within a window is what a request sent
// meanwhile cost it.
type watcher struct {
	mu     sync.Mutex
	events []time.Time
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *server) watch(model string) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{cancel: cancel, done: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		defer close(w.done)
		once := sync.Once{}
		defer once.Do(func() { close(first) })
		// Streams of 2000 tokens, one after another, until stopped.
		body := fmt.Sprintf(`{"model":%q,"prompt":"Once","max_tokens":2000,"ignore_eos":true,"stream":true}`, model)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				fatal(fmt.Errorf("the watching stream: status %d: %s", resp.StatusCode, b))
			}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					w.mu.Lock()
					w.events = append(w.events, time.Now())
					w.mu.Unlock()
					once.Do(func() { close(first) })
				}
			}
			resp.Body.Close()
		}
	}()
	<-first
	return w
}

// maxGap is the longest pause between events from..to (the pause that
// spans from, or to, counts), and the number of events in between.
func (w *watcher) maxGap(from, to time.Time) (time.Duration, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var gap time.Duration
	n := 0
	prev := time.Time{}
	for _, e := range w.events {
		if e.Before(from) {
			prev = e
			continue
		}
		if !prev.IsZero() {
			gap = max(gap, e.Sub(prev))
		}
		prev = e
		if e.After(to) {
			break
		}
		n++
	}
	if !prev.IsZero() && prev.Before(to) {
		gap = max(gap, to.Sub(prev)) // a pause still going at the end
	}
	return gap, n
}

func (w *watcher) stop() { w.cancel(); <-w.done }

// ttft is the time to the first event of a short stream.
func (s *server) ttft(model string) time.Duration {
	began := time.Now()
	body := fmt.Sprintf(`{"model":%q,"prompt":"Hello","max_tokens":2,"stream":true}`, model)
	resp, err := http.Post(s.base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			d := time.Since(began)
			io.Copy(io.Discard, resp.Body)
			return d
		}
	}
	return -1
}

// errorOf is "code: message" of an OpenAI-shaped error body, or its first
// 120 bytes.
func errorOf(body string) string {
	var doc struct {
		Error struct {
			Message, Code, Param, Type string
		}
	}
	if json.Unmarshal([]byte(body), &doc) == nil && doc.Error.Message != "" {
		m := doc.Error.Message
		if len(m) > 90 {
			m = m[:90] + "…"
		}
		e := "`" + doc.Error.Type + "`"
		if doc.Error.Code != "" {
			e = "`" + doc.Error.Code + "`"
		}
		if doc.Error.Param != "" {
			e += " param `" + doc.Error.Param + "`"
		}
		return e + ": " + m
	}
	if len(body) > 120 {
		body = body[:120] + "…"
	}
	return strings.ReplaceAll(body, "\n", " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

// chain is a grammar whose start state doubles its parses with each rule.
func chain(n int) string {
	var b strings.Builder
	b.WriteString("root ::= r0\n")
	for i := range n {
		fmt.Fprintf(&b, "r%d ::= p%d \"x\" | q%d \"y\"\np%d ::= r%d\nq%d ::= r%d\n", i, i, i, i, i+1, i, i+1)
	}
	fmt.Fprintf(&b, "r%d ::= \"a\"*\n", n)
	return b.String()
}

// probeGrammars: class 1, ambiguous and exponential grammars with
// logit_bias pushing "a", while another client streams and a third asks
// for its first token.
func probeGrammars(string) {
	const model = "tiny-qwen3-f32"
	s := serve("--model", filepath.Join(*modelsDir, model+".gguf"), "--max-concurrency", "4")
	defer s.stop()
	_, tb, _ := s.post(context.Background(), "/tokenize", `{"content":"a"}`)
	var tk struct{ Tokens []int }
	json.Unmarshal([]byte(tb), &tk)
	if len(tk.Tokens) == 0 {
		fatal(fmt.Errorf("/tokenize a: %s", tb))
	}
	bias := fmt.Sprintf(`{"%d":100}`, tk.Tokens[len(tk.Tokens)-1])
	w := s.watch(model)
	defer w.stop()
	for _, g := range []struct{ name, src, before string }{
		{"the issue's grammar", "root ::= x \"z\"\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"", "no byte to anyone for 100 s; SIGTERM ignored 30 s"},
		{"the same, unfactorable (a1/a2)", "root ::= x \"z\"\nx ::= a1 x \"b\" | a2 x \"c\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"", "(as above)"},
		{"three-way ambiguity", "root ::= x\nx ::= a1 x \"1\" | a2 x \"2\" | a3 x \"3\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"\na3 ::= [a]", "(not probed)"},
		{`nested stars (("a")*)* "b"`, `root ::= (("a")*)* "b"`, "400 left-recursive"},
		{`stars of stars (("a")* ("a")*)* "b"`, `root ::= (("a")* ("a")*)* "b"`, "(not probed)"},
		{"ambiguous alternation (a|aa|aaa)*", "root ::= (x)* \"!\"\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"", "(not probed)"},
		{"deep recursion: 40 doubling rules", chain(40), "(not probed)"},
		{"deep recursion: 60 nullable rules in a row", "root ::= " + strings.Repeat("n ", 60) + "\"x\"\nn ::= \"\" | \"\" | \"a\"", "(not probed)"},
	} {
		src, _ := json.Marshal(g.src)
		body := `{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":200,"temperature":0,"logit_bias":` + bias + `,"grammar":` + string(src) + `}`
		ttft := make(chan time.Duration, 1)
		go func() { time.Sleep(100 * time.Millisecond); ttft <- s.ttft(model) }()
		rss0 := s.rssMB()
		began := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		status, rb, took := s.post(ctx, "/v1/completions", body)
		cancel()
		gap, _ := w.maxGap(began, time.Now())
		t := <-ttft
		answer := fmt.Sprintf("%d", status)
		if status != 200 {
			answer += " " + errorOf(rb)
		}
		report("1 grammar: "+g.name, g.before,
			fmt.Sprintf("%s in %s; other client's TTFT %s, its max gap %s; RSS %.0f→%.0f MB", answer, ms(took), ms(t), ms(gap), rss0, s.rssMB()),
			"answered < 10 s, TTFT < 1 s",
			(status == 200 || status == 400) && took < 10*time.Second && t > 0 && t < time.Second)
	}
}

// probeLargeConstraints: class 1, 100,000-entry constraints compiled while
// another client streams: its longest pause must stay under 100 ms.
func probeLargeConstraints(string) {
	const model = "tiny-qwen3-f32"
	s := serve("--model", filepath.Join(*modelsDir, model+".gguf"), "--max-concurrency", "4")
	defer s.stop()
	w := s.watch(model)
	defer w.stop()
	// The stream's longest pause alone, over a window as long as the
	// costliest compilation's, is what the host's load costs it.
	time.Sleep(4 * time.Second)
	base, _ := w.maxGap(time.Now().Add(-3*time.Second), time.Now())
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	strs := func(n int) ([]string, []string) {
		items, quoted := make([]string, n), make([]string, n)
		for i := range items {
			items[i] = fmt.Sprintf("item%06d", i)
			quoted[i] = strconv.Quote(items[i])
		}
		return items, quoted
	}
	items, quoted := strs(100000)
	over, _ := strs(100001)
	for _, c := range []struct{ name, field, before string }{
		{"enum of 100,000 strings", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"enum":` + js(items) + `}}}`, "30.8 s; others held up to 16.6 s"},
		{"guided_choice ×100,000", `"guided_choice":` + js(items), "20.4 s (engine loop)"},
		{"GBNF of 100,000 alternatives", `"grammar":` + js("root ::= "+strings.Join(quoted, " | ")), "7.5 s (engine loop)"},
		{"enum of 100,001 strings", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"enum":` + js(over) + `}}}`, "(not probed)"},
	} {
		body := `{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":20,"temperature":0,` + c.field + `}`
		began := time.Now()
		status, rb, took := s.post(context.Background(), "/v1/completions", body)
		gap, n := w.maxGap(began, time.Now())
		answer := fmt.Sprintf("%d", status)
		if status != 200 {
			answer += " " + errorOf(rb)
		}
		want := 200
		if strings.Contains(c.name, "100,001") {
			want = 400
		}
		report("1 constraint: "+c.name, c.before,
			fmt.Sprintf("%s in %s; other stream's max gap %s over %d events (alone: %s)", answer, ms(took), ms(gap), n, ms(base)),
			fmt.Sprintf("%d; max gap < 100 ms", want),
			status == want && gap < 100*time.Millisecond)
	}
}

// probeTimeout: class 2, non-streaming requests that run, and wait, past
// a minute under --timeout 10m.
func probeTimeout(string) {
	s := serve("--model", *slowModel, "--max-concurrency", "1", "--timeout", "10m")
	defer s.stop()
	model := strings.TrimSuffix(filepath.Base(*slowModel), ".gguf")
	// Calibrate: tokens per second of one generation.
	_, _, took := s.post(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Once","max_tokens":64,"ignore_eos":true}`, model))
	rate := 64 / took.Seconds()
	n := int(75 * rate)
	type answer struct {
		status int
		body   string
		took   time.Duration
	}
	run := make(chan answer, 1)
	go func() {
		st, b, d := s.post(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Once","max_tokens":%d,"ignore_eos":true}`, model, n))
		run <- answer{st, b, d}
	}()
	time.Sleep(500 * time.Millisecond)
	st, qb, qtook := s.post(context.Background(), "/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"Hi","max_tokens":4}`, model))
	r := <-run
	answerOf := func(status int, body string, took time.Duration) string {
		a := fmt.Sprintf("%d after %.1f s", status, took.Seconds())
		if status != 200 {
			a += " " + errorOf(body)
		}
		return a
	}
	report("2 non-streaming request running > 60 s, --timeout 10m", "499 client_closed_request at 60 s",
		answerOf(r.status, r.body, r.took)+fmt.Sprintf(" (%d tokens at %.0f tok/s)", n, rate),
		"200", r.status == 200 && r.took > time.Minute)
	report("2 non-streaming request queued > 60 s, --timeout 10m", "499 client_closed_request at 60 s",
		answerOf(st, qb, qtook), "200", st == 200 && qtook > time.Minute)
}

// timed runs the binary with args under /usr/bin/time -v and returns its
// output (the first 300 bytes, then the lines that contain want), wall
// time and peak RSS.
func timed(want string, args ...string) (string, time.Duration, float64) {
	cmd := exec.Command("/usr/bin/time", append([]string{"-v", *binPath}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	cmd.Run()
	took := time.Since(began)
	peak := -1.0
	var msg []string
	for _, l := range strings.Split(out.String(), "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "Maximum resident set size (kbytes):") {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(t, "Maximum resident set size (kbytes):")))
			peak = float64(kb) / 1024
		} else if strings.HasPrefix(l, "\t") || strings.HasPrefix(t, "Command exited") || strings.HasPrefix(t, "Command terminated") || t == "" {
			continue
		} else {
			msg = append(msg, t)
		}
	}
	m := strings.Join(msg, " ")
	if len(m) > 300 {
		m = m[:300] + "…"
		for _, l := range msg {
			if want != "" && strings.Contains(l, want) && !strings.Contains(m, l) {
				m += " " + l
			}
		}
	}
	return m, took, peak
}

// hfFolder converts tiny-qwen3 into a Hugging Face folder under dir.
func hfFolder(dir string) string {
	out := filepath.Join(dir, "hf")
	if _, err := os.Stat(out); err == nil {
		return out
	}
	cmd := exec.Command(*binPath, "convert", "--model", filepath.Join(*modelsDir, "tiny-qwen3-f32.gguf"), "--to", "hf", "--out", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		fatal(fmt.Errorf("convert: %v\n%s", err, b))
	}
	return out
}

func copyDir(from, to string) {
	os.MkdirAll(to, 0o755)
	ents, _ := os.ReadDir(from)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			fatal(err)
		}
		os.WriteFile(filepath.Join(to, e.Name()), b, 0o644)
	}
}

// overlapSafetensors rewrites dir's model.safetensors so that its second
// tensor (by offset) of a size seen before takes the first one's bytes.
func overlapSafetensors(dir string) string {
	path := filepath.Join(dir, "model.safetensors")
	data, err := os.ReadFile(path)
	if err != nil {
		fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &hdr); err != nil {
		fatal(err)
	}
	type info struct {
		DType       string   `json:"dtype"`
		Shape       []int64  `json:"shape"`
		DataOffsets [2]int64 `json:"data_offsets"`
	}
	bySize := map[int64]string{}
	moved := ""
	var names []string
	for k := range hdr {
		names = append(names, k)
	}
	// sorted for a stable choice
	for i := range names {
		for j := i + 1; j < len(names); j++ {
			if names[j] < names[i] {
				names[i], names[j] = names[j], names[i]
			}
		}
	}
	for _, k := range names {
		if k == "__metadata__" {
			continue
		}
		var t info
		json.Unmarshal(hdr[k], &t)
		size := t.DataOffsets[1] - t.DataOffsets[0]
		if first, ok := bySize[size]; ok && moved == "" {
			var f info
			json.Unmarshal(hdr[first], &f)
			t.DataOffsets = f.DataOffsets
			hdr[k], _ = json.Marshal(t)
			moved = fmt.Sprintf("%s onto %s", k, first)
			continue
		}
		bySize[size] = k
	}
	h, _ := json.Marshal(hdr)
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var out bytes.Buffer
	binary.Write(&out, binary.LittleEndian, uint64(len(h)))
	out.Write(h)
	out.Write(data[8+n:])
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		fatal(err)
	}
	return moved
}

// probeFiles: class 3 (and the file cases of class 5).
func probeFiles(tmp string) {
	hf := hfFolder(tmp)
	layers := filepath.Join(tmp, "layers")
	copyDir(hf, layers)
	cfgPath := filepath.Join(layers, "config.json")
	var cfg map[string]any
	b, _ := os.ReadFile(cfgPath)
	json.Unmarshal(b, &cfg)
	cfg["num_hidden_layers"] = 16777216
	b, _ = json.Marshal(cfg)
	os.WriteFile(cfgPath, b, 0o644)

	overlap := filepath.Join(tmp, "overlap")
	copyDir(hf, overlap)
	moved := overlapSafetensors(overlap)

	nested := filepath.Join(tmp, "nested.yaml")
	os.WriteFile(nested, []byte("graph: a\ndoc: "+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+"\n"), 0o644)
	var nodes strings.Builder
	nodes.WriteString("graph: a\nnodes:\n")
	for i := range 120000 {
		fmt.Fprintf(&nodes, "  - {id: n%d, op: a.b}\n", i)
	}
	many := filepath.Join(tmp, "nodes.yaml")
	os.WriteFile(many, []byte(nodes.String()), 0o644)
	// The densest files under graphdef.MaxSourceBytes (256 KiB).
	nodes.Reset()
	nodes.WriteString("graph: a\nnodes:\n")
	for i := 0; nodes.Len() < 250<<10; i++ {
		fmt.Fprintf(&nodes, "- {id: n%d, op: a.b}\n", i)
	}
	under := filepath.Join(tmp, "nodes-under.yaml")
	os.WriteFile(under, []byte(nodes.String()), 0o644)
	nodes.Reset()
	nodes.WriteString("graph: a\nnodes:\n- id: x\n  op: a.b\n  with:\n")
	for i := 0; nodes.Len() < 250<<10; i++ {
		fmt.Fprintf(&nodes, "    k%d: v\n", i)
	}
	keys := filepath.Join(tmp, "keys.yaml")
	os.WriteFile(keys, []byte(nodes.String()), 0o644)

	for _, c := range []struct {
		name, before string
		args         []string
		want         string // the error must contain it
	}{
		{"3 HF config.json with num_hidden_layers 16777216", "Go out of memory at 3.75 GB", []string{"run", "--model", layers, "--prompt", "x", "--max-tokens", "1"}, "16777216"},
		{"3 graph YAML nested 100,000 deep (200 KB), graph check", "> 10 GB (quadratic)", []string{"graph", "check", nested}, "nested more than"},
		{"3 graph YAML with 120,000 nodes, graph check", "> 20 s", []string{"graph", "check", many}, "nodes"},
		{"3 graph YAML of 250 KB of nodes (under the size limit), graph check", "(not probed; 1 MB of them: 3.8 s, 302 MB)", []string{"graph", "check", under}, "more than 10000 nodes"},
		{"3 graph YAML with one mapping of 250 KB of keys, graph check", "(not probed; 1 MB of them: 111 s, 454 MB)", []string{"graph", "check", keys}, "more than 256 keys"},
		{"3 safetensors data_offsets overlapping (" + moved + ")", "loaded silently, generates from the wrong bytes", []string{"run", "--model", overlap, "--prompt", "x", "--max-tokens", "1"}, "overlap"},
	} {
		msg, took, peak := timed(c.want, c.args...)
		report(c.name, c.before, fmt.Sprintf("%s, peak RSS %.0f MB: %q", ms(took), peak, msg), "error naming it, < 2 s, < 300 MB",
			strings.Contains(msg, c.want) && took < 2*time.Second && peak < 300)
	}
}

// probeSlowReaders: class 4, 16 SSE clients that stop reading.
func probeSlowReaders(string) {
	const model = "tiny-qwen3-f32"
	s := serve("--model", filepath.Join(*modelsDir, model+".gguf"), "--max-concurrency", "16")
	defer s.stop()
	time.Sleep(time.Second)
	fresh := s.rssMB()
	// Warm-up: the same 16 streams, read to their end, so that the KV
	// pages they use are resident before the baseline is read.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.post(context.Background(), "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Once %d"}],"max_tokens":4000,"ignore_eos":true,"stream":true}`, model, i))
		}()
	}
	wg.Wait()
	s.waitIdle()
	time.Sleep(3 * time.Second)
	before := s.rssMB()
	conns := make([]net.Conn, 16)
	for i := range conns {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		if err != nil {
			fatal(err)
		}
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Once %d"}],"max_tokens":4000,"ignore_eos":true,"logprobs":true,"top_logprobs":20,"stream":true}`, model, i)
		fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns[i] = c
	}
	during := before
	idle := false
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		during = max(during, s.rssMB())
		if h := s.health(); h != nil && h["requests_in_flight"] == 0.0 && h["kv_blocks_used"] == 0.0 {
			idle = true
			break
		}
	}
	// Nothing runs while the clients stay connected: does RSS keep climbing?
	time.Sleep(5 * time.Second)
	connectedIdle := s.rssMB()
	time.Sleep(10 * time.Second)
	connectedLater := s.rssMB()
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(12 * time.Second) // the idle release
	after := s.rssMB()
	h := s.health()
	report("4 16 SSE clients that stop reading (tiny-qwen3, 4000 tokens, top_logprobs 20)",
		"RSS 31→101 MB, climbing 0.7 MB/s idle, 130 MB after close",
		fmt.Sprintf("RSS at start %.0f MB, after a warm-up (before) %.0f, peak during %.0f, idle with the clients connected %.0f then %.0f 10 s later, after they close %.0f (%+.1f%%); streams ended %v, streams_aborted %v",
			fresh, before, during, connectedIdle, connectedLater, after, 100*(after-before)/before, idle, h["streams_aborted"]),
		"after within 10% of before; no climb while idle", idle && after <= before*1.10 && connectedLater <= connectedIdle*1.02)
}

// probeStatuses: class 5.
func probeStatuses(tmp string) {
	s := serve("--model", filepath.Join(*modelsDir, "tiny-qwen3-f32.gguf"), "--api-key", "sekret", "--max-body", "4096")
	defer s.stop()
	call := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", s.base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer sekret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	msg := `"messages":[{"role":"user","content":"hi"}]`
	for _, c := range []struct {
		name, path, body string
		want             int
		param            string
	}{
		{"messages: [] (chat)", "", `{"model":"tiny-qwen3-f32","messages":[]}`, 400, "messages"},
		{"messages: [] (Anthropic /v1/messages)", "/v1/messages", `{"model":"tiny-qwen3-f32","max_tokens":8,"messages":[]}`, 400, "messages"},
		{"messages: [] (/v1/messages/count_tokens)", "/v1/messages/count_tokens", `{"model":"tiny-qwen3-f32","messages":[]}`, 400, "messages"},
		{"tool message with no matching call", "", `{"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"x"}]}`, 400, "messages[1].tool_call_id"},
		{"two tools with the same name", "", `{"model":"tiny-qwen3-f32",` + msg + `,"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]}`, 400, "tools[1].function.name"},
		{"tool parameters: [1]", "", `{"model":"tiny-qwen3-f32",` + msg + `,"tools":[{"type":"function","function":{"name":"a","parameters":[1]}}]}`, 400, "tools[0].function.parameters"},
		{`schema "type": []`, "", `{"model":"tiny-qwen3-f32",` + msg + `,"max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":[]}}}}`, 400, "response_format.json_schema.schema"},
		{`GBNF "\uD800"`, "", `{"model":"tiny-qwen3-f32",` + msg + `,"max_tokens":4,"grammar":"root ::= \"\\uD800\""}`, 400, "grammar"},
		{`GBNF "\U7FFFFFFF"`, "", `{"model":"tiny-qwen3-f32",` + msg + `,"max_tokens":4,"grammar":"root ::= \"\\U7FFFFFFF\""}`, 400, "grammar"},
		{`GBNF (("a")*)* "b" (valid)`, "", `{"model":"tiny-qwen3-f32",` + msg + `,"max_tokens":8,"grammar":"root ::= ((\"a\")*)* \"b\""}`, 200, ""},
	} {
		path := c.path
		if path == "" {
			path = "/v1/chat/completions"
		}
		st, b := call(path, c.body)
		ok := st == c.want
		switch {
		case c.want == 400 && strings.HasPrefix(path, "/v1/messages"): // Anthropic errors have no param: the message names it
			ok = ok && strings.Contains(b, `'`+c.param+`'`)
		case c.want == 400:
			ok = ok && strings.Contains(b, `"param":"`+c.param+`"`)
		}
		now := fmt.Sprintf("%d", st)
		if st != 200 {
			now += " " + errorOf(b)
		}
		before := "200"
		if strings.Contains(c.name, "valid") {
			before = "400 left-recursive naming an internal rule"
		} else if strings.Contains(c.name, "GBNF") {
			before = "accepted (200)"
		} else if strings.Contains(c.name, "type") {
			before = "200 with empty, non-JSON content"
		}
		want := fmt.Sprint(c.want)
		if c.param != "" {
			want += " naming " + c.param
		}
		report("5 "+c.name, before, now, want, ok)
	}
	// Expect: 100-continue: the interim answer comes after the key and the size.
	body := `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":2}`
	for _, c := range []struct {
		name, auth string
		length     int
		want       string
	}{
		{"without the key", "", len(body), "HTTP/1.1 401"},
		{"with the key, body over --max-body", "Bearer sekret", 8 << 10, "HTTP/1.1 413"},
		{"with the key, body that fits", "Bearer sekret", len(body), "HTTP/1.1 100 Continue"},
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
		if err != nil {
			fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		req := fmt.Sprintf("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", c.length)
		if c.auth != "" {
			req += "Authorization: " + c.auth + "\r\n"
		}
		conn.Write([]byte(req + "\r\n"))
		line, _ := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		line = strings.TrimSpace(line)
		report("5 Expect: 100-continue "+c.name, "100 Continue before the checks", fmt.Sprintf("first line %q", line), c.want, strings.HasPrefix(line, c.want))
	}
	s.stop()

	h := serve("--model", filepath.Join(*modelsDir, "tiny-qwen35-f32.gguf"))
	hb := h.health()
	h.stop()
	_, has := hb["state_slots_used"]
	report("5 hybrid model's /health", "no state_slots_used", fmt.Sprintf("state_slots_used %v, state_slots_total %v", hb["state_slots_used"], hb["state_slots_total"]), "state_slots_used listed", has)

	empty := filepath.Join(tmp, "empty")
	os.MkdirAll(empty, 0o755)
	m, took, _ := timed("config.json", "run", "--model", empty, "--prompt", "x", "--max-tokens", "1")
	report("5 a folder without config.json as --model", "`not a regular file`", fmt.Sprintf("%s: %q", ms(took), m), "says config.json is missing", strings.Contains(m, "config.json"))

	bom := filepath.Join(tmp, "bom.yaml")
	src, err := os.ReadFile(filepath.Join(filepath.Dir(*binPath), "..", "graphs", "plain.yaml"))
	if err != nil {
		fatal(err)
	}
	os.WriteFile(bom, append([]byte("\ufeff"), src...), 0o644)
	m, _, _ = timed("", "graph", "check", bom)
	report("5 graph file with a UTF-8 BOM (graphs/plain.yaml), graph check", "fails on its first key", fmt.Sprintf("%q", m), "ok", strings.HasSuffix(m, "ok"))
}
