//go:build cluster

package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/runtime/tok"
)

// TestCluster is the scale-out end to end: three `ninfer serve` replicas
// (NINFER_BIN) behind a real HAProxy configured by deploy/haproxy (its
// render.sh on its haproxy.cfg), all on 127.0.0.1. It sends 300 mixed
// streaming and non-streaming requests through the gateway while replica
// r1 is SIGTERMed and restarted, and checks that none fails or is cut
// short, that every usage is exact (tokens counted by their logprobs, and
// prompt tokens against the tokenizer), that HAProxy stops sending to r1
// before its listener closes and sends to it again after the restart,
// that the slow replica r3 gets fewer requests than r2 and a lower agent
// weight, that HAProxy never had to retry or redispatch (the drain alone
// kept requests off the stopping replica), and that an SSE stream reaches
// curl through HAProxy unbuffered. It logs requests per replica and
// p50/p99 latency through the gateway and direct. `just cluster-test`
// runs it.
func TestCluster(t *testing.T) {
	bin := os.Getenv("NINFER_BIN")
	if bin == "" {
		t.Skip("NINFER_BIN not set (run `just cluster-test`)")
	}
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed (Debian: apt-get install haproxy; .ci/run installs it)")
	}
	began := time.Now()
	model := sharedPath(t, "models", "stories260K.gguf")
	tk, err := tok.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 8)
	gateway := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	statsURL := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/stats;csv"
	// The replicas share one CPU, so that they compete for it on any
	// machine, and r3 is the slow one: a batch of one and nice 10 (about a
	// tenth of the CPU the others get). --max-concurrency alone does not
	// slow a replica of this model on a CPU: a batch of 8 decodes no faster
	// than one sequence, so the nice value makes r3 slower in fact.
	cpu := firstCPU(t)
	pin := []string{"taskset", "-c", cpu}
	reps := []*replica{
		{name: "r1", port: ports[2], agent: ports[3], conc: 8, wrap: pin},
		{name: "r2", port: ports[4], agent: ports[5], conc: 8, wrap: pin},
		{name: "r3", port: ports[6], agent: ports[7], conc: 1, wrap: append(slices.Clone(pin), "nice", "-n", "10")},
	}
	for _, r := range reps {
		if err := r.start(bin, model); err != nil {
			t.Fatal(err)
		}
		defer r.kill()
	}

	_, file, _, _ := runtime.Caller(0)
	render := filepath.Join(filepath.Dir(file), "..", "..", "deploy", "haproxy", "render.sh")
	args := []string{render, strconv.Itoa(ports[0]), strconv.Itoa(ports[1])}
	for _, r := range reps {
		args = append(args, fmt.Sprintf("%d:%d", r.port, r.agent))
	}
	cfg, err := exec.Command("bash", args...).Output()
	if err != nil {
		t.Fatalf("render.sh: %v", err)
	}
	cfgFile := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	var hlog lockedBuffer
	hp := exec.Command(haproxy, "-db", "-f", cfgFile)
	hp.Stdout, hp.Stderr = &hlog, &hlog
	if err := hp.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { hp.Process.Kill(); hp.Wait() }()
	waitUntil(t, 20*time.Second, "HAProxy to see every replica up", func() bool {
		st := haproxyStats(statsURL)
		for _, r := range reps {
			if s := st["ninfer/"+r.name]; s["status"] != "UP" || s["check_status"] != "L7OK" {
				return false
			}
		}
		return true
	})
	setup := time.Since(began)

	c := &clusterClient{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second},
		tk: tk, chatPrompt: map[string]int{}}

	// Latency through the gateway and direct, one request at a time (the
	// same greedy request, so every answer must also be the same text).
	const same = `{"model":"stories260K","prompt":"Once upon a time","max_tokens":16,"temperature":0,"logprobs":1}`
	var viaGateway, direct []time.Duration
	texts := map[string]int{}
	for i := range 100 {
		base := gateway
		if i%2 == 1 {
			base = reps[(i/2)%3].url
		}
		res := c.do(context.Background(), base, clusterRequest{body: same, prompt: "Once upon a time", maxTokens: 16})
		if res.err != nil {
			t.Fatalf("latency request %d to %s: %v", i, base, res.err)
		}
		texts[res.text]++
		if base == gateway {
			viaGateway = append(viaGateway, res.end.Sub(res.start))
		} else {
			direct = append(direct, res.end.Sub(res.start))
		}
	}
	if len(texts) != 1 {
		t.Errorf("one greedy request gave %d different texts: %v", len(texts), texts)
	}

	// The load: 16 clients, each sending its next request as soon as the
	// last one is answered. After request 30 has gone out, r1 gets SIGTERM
	// once it has requests in flight; the clients go on through its drain,
	// and the last 100 requests wait until HAProxy sees r1 up again, so
	// that the restarted replica takes its share.
	const total, workers = 300, 16
	work := make(chan int)
	results := make([]clusterResult, total)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				results[i] = c.do(context.Background(), gateway, mixedRequest(i))
			}
		}()
	}
	r1 := reps[0]
	var sigterm, noticed, closed, back time.Time
	var r1Exit error
	terminate, restarted := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(restarted)
		<-terminate
		waitUntil(t, 10*time.Second, "r1 to have requests in flight", func() bool { return r1.inFlight() > 0 })
		sigterm = time.Now()
		r1.cmd.Process.Signal(syscall.SIGTERM)
		waitUntil(t, 10*time.Second, "HAProxy to take r1 out", func() bool {
			st := haproxyStats(statsURL)["ninfer/r1"]["status"]
			return strings.HasPrefix(st, "DRAIN") || strings.HasPrefix(st, "DOWN") || strings.HasPrefix(st, "MAINT")
		})
		noticed = time.Now()
		waitUntil(t, 10*time.Second, "r1 to close its listener", func() bool {
			conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(r1.port), time.Second)
			if err == nil {
				conn.Close()
			}
			return err != nil
		})
		closed = time.Now()
		select {
		case r1Exit = <-r1.exited:
		case <-time.After(20 * time.Second):
			r1Exit = fmt.Errorf("no exit 20 s after SIGTERM")
		}
		if !strings.Contains(r1.stderr.String(), "ninfer serve: stopped") {
			r1Exit = fmt.Errorf("%v; stderr:\n%s", r1Exit, r1.stderr.String())
		}
		if err := r1.start(bin, model); err != nil {
			t.Errorf("restarting r1: %v", err)
			return
		}
		waitUntil(t, 20*time.Second, "HAProxy to bring r1 back", func() bool {
			s := haproxyStats(statsURL)["ninfer/r1"]
			return s["status"] == "UP" && s["weight"] != "0"
		})
		back = time.Now()
	}()
	loadStart := time.Now()
	// The lowest weight HAProxy gave each replica during the load: the
	// agent's reply reaching the balancer.
	minWeight := map[string]int{"r1": 100, "r2": 100, "r3": 100}
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			st := haproxyStats(statsURL)
			for name := range minWeight {
				if w, err := strconv.Atoi(st["ninfer/"+name]["weight"]); err == nil && strings.HasPrefix(st["ninfer/"+name]["status"], "UP") {
					minWeight[name] = min(minWeight[name], w)
				}
			}
			select {
			case <-stopSampling:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	i := 0
	for ; i < total-100; i++ {
		work <- i
		if i == 30 {
			close(terminate)
		}
	}
	<-restarted
	for ; i < total; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	loadTime := time.Since(loadStart)
	close(stopSampling)
	<-sampled
	if t.Failed() {
		t.FailNow() // a wait above timed out
	}

	perReplica := map[string]int{}
	busy := map[string]time.Duration{} // request-seconds per replica
	var failed []string
	var lat []time.Duration
	inFlightAtSigterm, inGrace, whileOut, afterBack := 0, 0, 0, 0
	for i, res := range results {
		if res.err != nil {
			failed = append(failed, fmt.Sprintf("request %d (%s): %v", i, mixedRequest(i).body, res.err))
			continue
		}
		perReplica[res.replica]++
		busy[res.replica] += res.end.Sub(res.start)
		lat = append(lat, res.end.Sub(res.start))
		if res.replica != "r1" {
			continue
		}
		switch {
		case res.start.Before(sigterm) && res.end.After(sigterm):
			inFlightAtSigterm++
		case res.start.After(noticed) && res.start.Before(back):
			whileOut++
		case res.start.After(sigterm) && res.start.Before(closed):
			inGrace++
		case res.start.After(back):
			afterBack++
		}
	}
	st := haproxyStats(statsURL)
	be := st["ninfer/BACKEND"]
	// A buffering proxy fails every try; a descheduled test process on a
	// loaded host fails one now and then, so three tries are allowed.
	var sse sseCheck
	for try := 0; try < 3; try++ {
		if sse = streamThroughCurl(gateway); sse.err != nil || !sse.buffered() {
			break
		}
	}

	t.Logf("setup %v; load %v for %d requests (%d clients); whole test %v", setup.Round(time.Millisecond), loadTime.Round(time.Millisecond), total, workers, time.Since(began).Round(time.Millisecond))
	t.Logf("requests per replica: r1 %d (restarted), r2 %d, r3 %d (slow: --max-concurrency 1, nice 10); failed %d", perReplica["r1"], perReplica["r2"], perReplica["r3"], len(failed))
	t.Logf("mean requests in flight over the load: r1 %.1f, r2 %.1f, r3 %.1f; lowest agent weight HAProxy applied: r1 %d%%, r2 %d%%, r3 %d%%",
		busy["r1"].Seconds()/loadTime.Seconds(), busy["r2"].Seconds()/loadTime.Seconds(), busy["r3"].Seconds()/loadTime.Seconds(), minWeight["r1"], minWeight["r2"], minWeight["r3"])
	t.Logf("r1: %d requests in flight at SIGTERM, %d sent to it in its grace period before HAProxy took it out, %d after, %d after it came back; HAProxy took it out %v after SIGTERM, its listener closed after %v, it was back after %v",
		inFlightAtSigterm, inGrace, whileOut, afterBack, noticed.Sub(sigterm).Round(time.Millisecond), closed.Sub(sigterm).Round(time.Millisecond), back.Sub(sigterm).Round(time.Millisecond))
	t.Logf("latency at 1 request at a time, 16 tokens: through HAProxy p50 %v p99 %v; direct p50 %v p99 %v",
		pct(viaGateway, 50), pct(viaGateway, 99), pct(direct, 50), pct(direct, 99))
	t.Logf("latency under the mixed load through HAProxy: p50 %v p99 %v", pct(lat, 50), pct(lat, 99))
	t.Logf("HAProxy backend: %s sessions, 5xx %s, connection errors %s, response errors %s, retries %s, redispatches %s",
		be["stot"], be["hrsp_5xx"], be["econ"], be["eresp"], be["wretr"], be["wredis"])
	t.Logf("SSE through HAProxy with curl: %d events (%d tokens), the first %v after curl started, the last %v after the first; the replica decoded for %v",
		sse.events, sse.tokens, sse.first.Round(time.Microsecond), (sse.last - sse.first).Round(time.Microsecond), sse.generation.Round(time.Microsecond))

	if len(failed) > 0 {
		t.Errorf("%d requests failed; the first ones:\n%s", len(failed), strings.Join(failed[:min(len(failed), 5)], "\n"))
	}
	if r1Exit != nil {
		t.Errorf("r1 after SIGTERM: %v", r1Exit)
	}
	if inFlightAtSigterm == 0 {
		t.Error("no request was in flight on r1 at SIGTERM")
	}
	if whileOut > 0 {
		t.Errorf("HAProxy sent r1 %d requests after it had taken r1 out", whileOut)
	}
	if afterBack == 0 {
		t.Error("r1 served no request after its restart")
	}
	if closed.Sub(sigterm) < 5*time.Second {
		t.Errorf("r1 closed its listener %v after SIGTERM, before the 5 s default --drain-grace", closed.Sub(sigterm))
	}
	if noticed.After(sigterm.Add(5 * time.Second)) {
		t.Errorf("HAProxy took r1 out %v after SIGTERM, after its 5 s grace", noticed.Sub(sigterm))
	}
	if perReplica["r3"] >= perReplica["r2"] || 3*perReplica["r3"] >= total {
		t.Errorf("the slow r3 got %d requests, r2 %d: it should get fewer than r2, and under a third", perReplica["r3"], perReplica["r2"])
	}
	if minWeight["r3"] >= 100 {
		t.Error("HAProxy never lowered r3's weight under load: the agent's load signal did not reach it")
	}
	for _, k := range []string{"hrsp_5xx", "econ", "eresp", "wretr", "wredis"} {
		if be[k] != "0" {
			t.Errorf("HAProxy backend %s = %q, want 0", k, be[k])
		}
	}
	if sse.err != nil {
		t.Errorf("SSE through curl: %v", sse.err)
	} else if sse.buffered() {
		t.Errorf("SSE through HAProxy looks buffered: three times its events arrived within %v, the replica took %v to generate them", sse.last-sse.first, sse.generation)
	}
}

// replica is one `ninfer serve` process of the cluster.
type replica struct {
	name              string
	port, agent, conc int
	wrap              []string // the command that runs ninfer (taskset, nice), exec-ing it in place
	url               string
	cmd               *exec.Cmd
	stderr            *lockedBuffer
	exited            chan error
}

// start runs the replica on its ports and waits for its ready line.
func (r *replica) start(bin, model string) error {
	r.url = "http://127.0.0.1:" + strconv.Itoa(r.port)
	r.stderr = &lockedBuffer{}
	args := append(slices.Clone(r.wrap), bin, "serve", "--model", model, "--port", strconv.Itoa(r.port), "--agent-port", strconv.Itoa(r.agent),
		"--max-concurrency", strconv.Itoa(r.conc), "--threads", "1")
	r.cmd = exec.Command(args[0], args[1:]...)
	r.cmd.Stderr = r.stderr
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := r.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	r.exited = exited
	cmd := r.cmd
	go func() { exited <- cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(out).ReadString('\n')
		line <- l
		io.Copy(io.Discard, out)
	}()
	select {
	case l := <-line:
		if !strings.HasPrefix(l, serveReady+r.url+" ") {
			return fmt.Errorf("%s: ready line %q; stderr:\n%s", r.name, l, r.stderr.String())
		}
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s: no ready line in 30 s; stderr:\n%s", r.name, r.stderr.String())
	}
	return nil
}

func (r *replica) kill() {
	r.cmd.Process.Kill()
	<-r.exited
}

// inFlight is the replica's requests_in_flight (0 when /health fails).
func (r *replica) inFlight() int {
	var h struct {
		InFlight int `json:"requests_in_flight"`
	}
	resp, err := http.Get(r.url + "/health")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&h)
	return h.InFlight
}

// firstCPU is the first CPU this process may run on.
func firstCPU(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
			first, _, _ := strings.Cut(strings.TrimSpace(v), ",")
			first, _, _ = strings.Cut(first, "-")
			return first
		}
	}
	t.Fatal("no Cpus_allowed_list in /proc/self/status")
	return ""
}

// freePorts are n distinct TCP ports on 127.0.0.1 that nothing listened on
// a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// waitUntil polls cond every 20 ms for up to d; it fails the test (without
// stopping it, so that it may be called from any goroutine) and returns
// when d passes first.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("timed out after %v waiting for %s", d, what)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// haproxyStats reads HAProxy's CSV stats page: one map of column to value
// per "proxy/server" (the backend's totals are "ninfer/BACKEND"); nil when
// the page cannot be read.
func haproxyStats(url string) map[string]map[string]string {
	resp, err := http.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	rows, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || len(rows) == 0 {
		return nil
	}
	head := rows[0]
	head[0] = strings.TrimPrefix(head[0], "# ")
	out := map[string]map[string]string{}
	for _, row := range rows[1:] {
		m := map[string]string{}
		for i, v := range row {
			if i < len(head) {
				m[head[i]] = v
			}
		}
		out[m["pxname"]+"/"+m["svname"]] = m
	}
	return out
}

// pct is the p-th percentile of ds (nearest rank), to 0.1 ms.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)].Round(100 * time.Microsecond)
}

// clusterRequest is one request of the test and what its answer is
// checked against.
type clusterRequest struct {
	body         string
	chat, stream bool
	prompt       string // the completion prompt or the chat message
	maxTokens    int
}

var clusterPrompts = []string{"Once upon a time", "The little dog", "Lily and Ben went to the park", "One day", "Tom had a red ball"}

// mixedRequest is request i of the load: chat or completion, streaming or
// not, 32..288 tokens, greedy or sampled, stop sequences sometimes, with
// logprobs so that the client can count the tokens it receives.
func mixedRequest(i int) clusterRequest {
	rng := rand.New(rand.NewPCG(uint64(i), 21))
	r := clusterRequest{chat: rng.IntN(2) == 0, stream: rng.IntN(2) == 0, maxTokens: 32 + rng.IntN(257),
		prompt: fmt.Sprintf("%s %d", clusterPrompts[rng.IntN(len(clusterPrompts))], i)}
	fields := []string{`"model":"stories260K"`, fmt.Sprintf(`"max_tokens":%d`, r.maxTokens),
		fmt.Sprintf(`"temperature":%g`, float64(rng.IntN(2))*0.8), fmt.Sprintf(`"seed":%d`, rng.IntN(1000))}
	if r.chat {
		fields = append(fields, fmt.Sprintf(`"messages":[{"role":"user","content":%q}]`, r.prompt), `"logprobs":true`)
	} else {
		fields = append(fields, fmt.Sprintf(`"prompt":%q`, r.prompt), `"logprobs":1`)
	}
	if rng.IntN(3) == 0 {
		fields = append(fields, `"stop":[".","!"]`)
	}
	if r.stream {
		fields = append(fields, `"stream":true`, `"stream_options":{"include_usage":true}`)
	}
	r.body = "{" + strings.Join(fields, ",") + "}"
	return r
}

// clusterResult is how one request went: which replica answered (the
// X-Ninfer-Replica header HAProxy adds; "" direct), when, its text, and
// why it failed.
type clusterResult struct {
	replica    string
	start, end time.Time
	text       string
	err        error
}

// clusterClient sends requests and checks every answer.
type clusterClient struct {
	http *http.Client
	tk   *tok.Tokenizer
	mu   sync.Mutex
	// chatPrompt is the prompt_tokens first seen per chat message: every
	// replica must count the same.
	chatPrompt map[string]int
}

type clusterUsage struct {
	Prompt     int `json:"prompt_tokens"`
	Completion int `json:"completion_tokens"`
	Total      int `json:"total_tokens"`
}

type clusterChoice struct {
	Text     string `json:"text"`
	Message  struct{ Content string }
	Delta    struct{ Content string }
	Logprobs *struct {
		Tokens  []string `json:"tokens"`
		Content []any    `json:"content"`
	} `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type clusterAnswer struct {
	Choices []clusterChoice `json:"choices"`
	Usage   *clusterUsage   `json:"usage"`
	Error   any             `json:"error"`
}

// do sends r to base and checks the answer: 200, a proper end (finish
// stop or length, [DONE] for a stream), usage.completion_tokens equal to
// the tokens received (one logprob each) and to max_tokens when the finish
// is length, prompt_tokens equal to the tokenizer's count (completions) or
// to every other replica's (chat), total = prompt + completion.
func (c *clusterClient) do(ctx context.Context, base string, r clusterRequest) (res clusterResult) {
	res.start = time.Now()
	defer func() { res.end = time.Now() }()
	path := "/v1/completions"
	if r.chat {
		path = "/v1/chat/completions"
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+path, strings.NewReader(r.body))
	if err != nil {
		res.err = err
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	res.replica = resp.Header.Get("X-Ninfer-Replica")
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		res.err = fmt.Errorf("status %d from %q: %s", resp.StatusCode, res.replica, b)
		return res
	}
	received, finish := 0, ""
	var u *clusterUsage
	var text strings.Builder
	add := func(a clusterAnswer) {
		for _, ch := range a.Choices {
			if ch.Logprobs != nil {
				received += len(ch.Logprobs.Tokens) + len(ch.Logprobs.Content)
			}
			text.WriteString(ch.Text + ch.Message.Content + ch.Delta.Content)
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
		if a.Usage != nil {
			u = a.Usage
		}
	}
	if !r.stream {
		var a clusterAnswer
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
			res.err = fmt.Errorf("from %q: %v", res.replica, err)
			return res
		}
		add(a)
	} else {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		done := false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				done = true
				break
			}
			var a clusterAnswer
			if err := json.Unmarshal([]byte(data), &a); err != nil {
				res.err = fmt.Errorf("from %q: event %q: %v", res.replica, data, err)
				return res
			}
			if a.Error != nil {
				res.err = fmt.Errorf("from %q: error event %v", res.replica, a.Error)
				return res
			}
			add(a)
		}
		if !done {
			res.err = fmt.Errorf("from %q: the stream ended without [DONE] (%v)", res.replica, sc.Err())
			return res
		}
	}
	res.text = text.String()
	switch {
	case u == nil:
		res.err = fmt.Errorf("from %q: no usage", res.replica)
	case finish != "stop" && finish != "length":
		res.err = fmt.Errorf("from %q: finish_reason %q", res.replica, finish)
	case u.Completion != received || (finish == "length" && received != r.maxTokens):
		res.err = fmt.Errorf("from %q: usage.completion_tokens %d, %d tokens received, finish %s, max_tokens %d", res.replica, u.Completion, received, finish, r.maxTokens)
	case u.Total != u.Prompt+u.Completion:
		res.err = fmt.Errorf("from %q: usage %+v does not add up", res.replica, *u)
	}
	if res.err != nil {
		return res
	}
	if !r.chat {
		if want := len(c.tk.Encode(r.prompt, true, true)); u.Prompt != want {
			res.err = fmt.Errorf("from %q: usage.prompt_tokens %d, the prompt is %d tokens", res.replica, u.Prompt, want)
		}
		return res
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if first, ok := c.chatPrompt[r.prompt]; ok && first != u.Prompt {
		res.err = fmt.Errorf("from %q: usage.prompt_tokens %d, %d for the same messages before", res.replica, u.Prompt, first)
	}
	c.chatPrompt[r.prompt] = u.Prompt
	return res
}

// sseCheck is what streamThroughCurl saw.
type sseCheck struct {
	events      int
	tokens      int           // counted by their logprobs
	usage       int           // usage.completion_tokens
	first, last time.Duration // after curl started
	generation  time.Duration // the replica's decode time (timings.predicted_ms)
	err         error
}

// buffered reports whether the events arrived within an eighth of the
// time the replica took to generate them.
func (c sseCheck) buffered() bool { return 8*(c.last-c.first) < c.generation }

// streamThroughCurl streams a 400-token greedy completion through the
// gateway with curl -N and timestamps each event as curl prints it. A
// stream that is not buffered on the way spreads its events over about
// the time the replica took to generate them (the test wants an eighth of
// it at least, against scheduling noise; it sees a third to a half); a
// buffered one arrives in one piece, the first event with the last. The
// tokens received (one logprob each) must be the usage.
func streamThroughCurl(gateway string) (out sseCheck) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		out.err = fmt.Errorf("curl: %v", err)
		return out
	}
	cmd := exec.Command(curl, "-sS", "-N", "--fail", "-H", "Content-Type: application/json",
		"-d", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":400,"temperature":0,"logprobs":1,"stream":true,"stream_options":{"include_usage":true}}`,
		gateway+"/v1/completions")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		out.err = err
		return out
	}
	var errb lockedBuffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		out.err = err
		return out
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	done := false
	for sc.Scan() {
		now := time.Since(start)
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
			continue
		case data == "[DONE]":
			done = true
			continue
		}
		var a struct {
			clusterAnswer
			Timings *struct {
				PredictedMS float64 `json:"predicted_ms"`
			}
		}
		if err := json.Unmarshal([]byte(data), &a); err != nil {
			out.err = fmt.Errorf("event %q: %v", data, err)
		}
		if a.Timings != nil {
			out.generation = time.Duration(a.Timings.PredictedMS * float64(time.Millisecond))
		}
		if a.Usage != nil {
			out.usage = a.Usage.Completion
		}
		if len(a.Choices) == 0 {
			continue
		}
		if lp := a.Choices[0].Logprobs; lp != nil {
			out.tokens += len(lp.Tokens)
		}
		out.events++
		out.last = now
		if out.events == 1 {
			out.first = now
		}
	}
	if err := cmd.Wait(); err != nil {
		out.err = fmt.Errorf("curl: %v: %s", err, errb.String())
	} else if out.err == nil && (!done || out.tokens < 100 || out.tokens != out.usage || out.generation == 0) {
		out.err = fmt.Errorf("curl got %d events, %d tokens, usage.completion_tokens %d, [DONE] %v, timings.predicted_ms %v", out.events, out.tokens, out.usage, done, out.generation)
	}
	return out
}
