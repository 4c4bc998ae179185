//go:build load

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestLoadWithDisconnects runs a real `ninfer serve` (NINFER_BIN) in four
// phases of LOAD_DURATION (default 60s) each:
//
//   - stories260K: 64 streaming and 16 non-streaming clients, a quarter of
//     whose requests hang up early (streams after a few events,
//     non-streaming ones after a random delay);
//   - ngram: the same load on stories260K drafting through graphs/ngram.yaml
//     (speculative, prompt lookup);
//   - hybrid + mtp: the same load on tiny-qwen35 (recurrent state slots)
//     decoding through graphs/mtp.yaml (speculative, multi-token
//     prediction);
//   - slow readers: the same load on tiny-qwen3 (a context long enough to
//     outgrow a stream's unread-token cap), while 16 more SSE clients stop
//     reading their 4000-token chat streams: each must end with a slow_reader
//     error after its text, not hold the server's memory.
//
// Each phase checks that every completed request's usage equals the tokens
// it received, that /metrics accounts for every request exactly once, that
// KV blocks (and state slots) return to 0, and that the server's RSS comes
// back within 10% of what it was after a warm-up (see below). `just
// load-test` runs it; it talks only to 127.0.0.1.
func TestLoadWithDisconnects(t *testing.T) {
	bin := os.Getenv("NINFER_BIN")
	if bin == "" {
		t.Skip("NINFER_BIN not set (run `just load-test`)")
	}
	duration := time.Minute
	if v := os.Getenv("LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("LOAD_DURATION: %v", err)
		}
		duration = d
	}
	t.Run("stories260K", func(t *testing.T) {
		loadPhase(t, bin, duration, "stories260K", 0, "--model", sharedPath(t, "models", "stories260K.gguf"))
	})
	t.Run("ngram", func(t *testing.T) {
		loadPhase(t, bin, duration, "stories260K", 0, "--model", sharedPath(t, "models", "stories260K.gguf"),
			"--graph", "ngram")
	})
	t.Run("hybrid + mtp", func(t *testing.T) {
		loadPhase(t, bin, duration, "tiny-qwen35-f32", 0, "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"),
			"--graph", "mtp")
	})
	t.Run("slow readers", func(t *testing.T) {
		loadPhase(t, bin, duration, "tiny-qwen3-f32", 16, "--model", sharedPath(t, "models", "tiny-qwen3-f32.gguf"))
	})
}

// loadPhase serves model (the id clients send) with args and runs the load
// for duration beside slowReaders SSE clients that stop reading, then
// checks the server's accounting and memory.
func loadPhase(t *testing.T, bin string, duration time.Duration, model string, slowReaders int, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), duration+3*time.Minute)
	defer cancel()
	srv := exec.CommandContext(ctx, bin, append(append([]string{"serve"}, args...),
		"--port", "0", "--max-concurrency", "16", "--threads", "2")...)
	srv.Stderr = os.Stderr
	out, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, serveReady) {
		t.Fatalf("ready line %q: %v", line, err)
	}
	base := strings.Fields(strings.TrimPrefix(line, serveReady))[0]
	c := &loadClient{base: base, model: model}

	// Warm-up: every running slot generates to the context length, so the
	// KV pages the load will use are resident, then a few seconds of the
	// same load fill the backend's cache of prepared batch shapes (bounded,
	// 32 shapes): the baseline is a server that has seen this workload.
	var warm sync.WaitGroup
	for i := range 16 {
		warm.Add(1)
		go func() {
			defer warm.Done()
			c.complete(context.Background(), false, fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time %d","temperature":1,"seed":%d}`, model, i, i))
		}()
	}
	warm.Wait()
	c.load(min(duration/4, 10*time.Second), 1000)
	c.waitIdle(t)
	time.Sleep(2 * idleRelease)
	rssStart := rssOf(t, srv.Process.Pid)
	before := c.scrape(t)
	c.reset()

	slow := c.stopReading(t, slowReaders)
	c.load(duration, 0)
	h := c.waitIdle(t)
	after := c.scrape(t)
	time.Sleep(2 * idleRelease) // serve returns freed memory once idle
	rssEnd := rssOf(t, srv.Process.Pid)
	endedSlow := slow.finish(t)

	sent, completed, left := c.sent.Load(), c.completed.Load(), c.left.Load()
	delta := func(name string, labels ...string) float64 {
		return metric(after, name, labels...) - metric(before, name, labels...)
	}
	finished := delta("ninfer:request_success_total")
	stopped := delta("ninfer:request_success_total", "finished_reason", "stop") + delta("ninfer:request_success_total", "finished_reason", "length")
	aborted := delta("ninfer:request_success_total", "finished_reason", "abort")
	generated := delta("ninfer:generation_tokens_total")
	t.Logf("%v: %d requests (%d completed, %d hung up; %d failed; %d more hung up before they were sent), %d tokens received by completed requests, %.1f tok/s; %d of %d slow readers ended with slow_reader; server: %g finished (%g stop/length, %g aborted), %g tokens generated; RSS %.1f -> %.1f MB; health %+v",
		duration, sent, completed, left, c.failed.Load(), c.unsent.Load(), c.tokens.Load(), float64(c.tokens.Load())/duration.Seconds(), endedSlow, slowReaders,
		finished, stopped, aborted, generated, float64(rssStart)/(1<<20), float64(rssEnd)/(1<<20), h)
	if n := c.failed.Load(); n > 0 {
		t.Errorf("%d requests failed or were truncated; first: %s", n, c.firstFailure())
	}
	if finished != float64(sent)+float64(slowReaders) {
		t.Errorf("request_success_total grew by %g, %d requests were sent and %d slow readers", finished, sent, slowReaders)
	}
	// A client that hung up after its last token counts as finished there;
	// a slow reader's request is aborted.
	if stopped != float64(completed)+float64(left)-(aborted-float64(slowReaders)) || aborted-float64(slowReaders) > float64(left) {
		t.Errorf("server: %g stop/length + %g aborted; clients: %d completed, %d hung up, %d slow readers", stopped, aborted, completed, left, slowReaders)
	}
	if endedSlow != slowReaders {
		t.Errorf("%d of %d slow readers got their text and a slow_reader error", endedSlow, slowReaders)
	}
	if generated < float64(c.tokens.Load()) {
		t.Errorf("generation_tokens_total grew by %g, completed requests received %d tokens", generated, c.tokens.Load())
	}
	if h != (loadHealth{}) {
		t.Errorf("not idle after the load: %+v", h)
	}
	if float64(rssEnd) > 1.1*float64(rssStart) {
		t.Errorf("RSS %d MB after the load, %d MB before", rssEnd>>20, rssStart>>20)
	}
}

// slowReaders are SSE connections that sent a long request and read
// nothing since.
type slowReaders []net.Conn

// stopReading opens n chat streams of 4000 tokens with 20 top logprobs
// each (about 10 MB, more than the sockets' buffers hold) whose clients
// read nothing until finish, with 4 KiB receive buffers.
func (c *loadClient) stopReading(t *testing.T, n int) slowReaders {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4000,"ignore_eos":true,"logprobs":true,"top_logprobs":20,"stream":true}`, c.model)
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	var conns slowReaders
	for range n {
		conn, err := d.Dial("tcp", strings.TrimPrefix(c.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns = append(conns, conn)
	}
	return conns
}

// finish reads each slow reader's stream to its end and closes it; it
// returns how many ended with a slow_reader error event after text.
func (s slowReaders) finish(t *testing.T) int {
	ended := 0
	for _, conn := range s {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("slow reader: %v", err)
			conn.Close()
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var last string
		texts := 0
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				texts++
				last = data
			}
		}
		var doc struct {
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(last), &doc) == nil && doc.Error != nil && doc.Error.Code == "slow_reader" && texts > 1 {
			ended++
		} else {
			t.Logf("slow reader: %s, %d events (%v), the last %.300s", resp.Status, texts, sc.Err(), last)
		}
		resp.Body.Close()
		conn.Close()
	}
	return ended
}

// load runs 64 streaming and 16 non-streaming clients for d, a quarter of
// whose requests hang up early; seed varies the requests.
func (c *loadClient) load(d time.Duration, seed int) {
	deadline := time.Now().Add(d)
	var clients sync.WaitGroup
	for w := range 80 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			rng := rand.New(rand.NewPCG(uint64(seed+w), 7))
			stream := w < 64
			for n := 0; time.Now().Before(deadline); n++ {
				chat := rng.IntN(2) == 0
				body := requestBody(rng, c.model, chat, stream, seed+w, n)
				hangUp := rng.IntN(4) == 0
				rctx, rcancel := context.WithCancel(context.Background())
				if hangUp && !stream {
					rctx, rcancel = context.WithTimeout(context.Background(), time.Duration(20+rng.IntN(400))*time.Millisecond)
				}
				leaveAfter := -1
				if hangUp && stream {
					leaveAfter = rng.IntN(6)
				}
				c.run(rctx, chat, stream, body, leaveAfter)
				rcancel()
			}
		}()
	}
	clients.Wait()
}

var loadPrompts = []string{"Once upon a time", "The little dog", "Lily and Ben went to the park", "One day", "Tom had a red ball"}

// requestBody is a random request for model of worker w: a prompt, 8..96 tokens,
// greedy or sampled, stop sequences sometimes, logprobs so that the client
// can count the tokens it receives.
func requestBody(rng *rand.Rand, model string, chat, stream bool, w, n int) string {
	prompt := fmt.Sprintf("%s %d %d", loadPrompts[rng.IntN(len(loadPrompts))], w, n)
	fields := []string{fmt.Sprintf(`"model":%q`, model), fmt.Sprintf(`"max_tokens":%d`, 8+rng.IntN(89)),
		fmt.Sprintf(`"temperature":%g`, float64(rng.IntN(2))*0.8), fmt.Sprintf(`"seed":%d`, rng.IntN(1000))}
	if chat {
		fields = append(fields, fmt.Sprintf(`"messages":[{"role":"user","content":%q}]`, prompt), `"logprobs":true`)
	} else {
		fields = append(fields, fmt.Sprintf(`"prompt":%q`, prompt), `"logprobs":1`)
	}
	if rng.IntN(3) == 0 {
		fields = append(fields, `"stop":[".","!"]`)
	}
	if stream {
		fields = append(fields, `"stream":true`, `"stream_options":{"include_usage":true}`)
	}
	return "{" + strings.Join(fields, ",") + "}"
}

// loadClient sends requests and keeps the client-side totals.
type loadClient struct {
	base, model                                   string
	sent, completed, left, failed, tokens, unsent atomic.Int64 // unsent: hung up before the request was written in full
	mu                                            sync.Mutex
	failure                                       string
}

func (c *loadClient) reset() {
	c.sent.Store(0)
	c.completed.Store(0)
	c.left.Store(0)
	c.failed.Store(0)
	c.tokens.Store(0)
	c.unsent.Store(0)
}

func (c *loadClient) fail(format string, args ...any) {
	c.failed.Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure == "" {
		c.failure = fmt.Sprintf(format, args...)
	}
}

func (c *loadClient) firstFailure() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failure
}

func (c *loadClient) post(ctx context.Context, chat bool, body string) (*http.Response, error) {
	path := "/v1/completions"
	if chat {
		path = "/v1/chat/completions"
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return http.DefaultClient.Do(req)
}

// complete sends a non-streaming request and discards the answer.
func (c *loadClient) complete(ctx context.Context, chat bool, body string) {
	if resp, err := c.post(ctx, chat, body); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// run sends one request; a stream is left after leaveAfter events (>= 0),
// a non-streaming request when ctx ends. Completed requests are checked:
// usage.completion_tokens must equal the tokens received (one logprob
// each) and the answer must end properly. A request counts as sent once
// it has been written in full.
func (c *loadClient) run(ctx context.Context, chat, stream bool, body string, leaveAfter int) {
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) { wrote.Store(w.Err == nil) }})
	resp, err := c.post(ctx, chat, body)
	if err != nil && ctx.Err() != nil && !wrote.Load() {
		c.unsent.Add(1) // it left before the server had the whole request: the server has nothing to count
		return
	}
	c.sent.Add(1)
	if err != nil {
		if ctx.Err() != nil {
			c.left.Add(1)
			return
		}
		c.fail("%s: %v", body, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		c.fail("%s: status %d: %s", body, resp.StatusCode, b)
		return
	}
	received, usage, finish := 0, -1, ""
	countLogprobs := func(ch map[string]any) {
		switch lp := ch["logprobs"].(type) {
		case map[string]any:
			if chat {
				content, _ := lp["content"].([]any)
				received += len(content)
			} else {
				tokens, _ := lp["tokens"].([]any)
				received += len(tokens)
			}
		}
		if f, ok := ch["finish_reason"].(string); ok {
			finish = f
		}
	}
	if !stream {
		var doc map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
			if ctx.Err() != nil {
				c.left.Add(1)
				return
			}
			c.fail("%s: %v", body, err)
			return
		}
		for _, ch := range doc["choices"].([]any) {
			countLogprobs(ch.(map[string]any))
		}
		usage = int(doc["usage"].(map[string]any)["completion_tokens"].(float64))
	} else {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		events, done := 0, false
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if data == "[DONE]" {
				done = true
				break
			}
			if events == leaveAfter {
				resp.Body.Close()
				c.left.Add(1)
				return
			}
			events++
			var doc map[string]any
			if err := json.Unmarshal([]byte(data), &doc); err != nil {
				c.fail("%s: event %q: %v", body, data, err)
				return
			}
			if e, ok := doc["error"]; ok {
				c.fail("%s: error event %v", body, e)
				return
			}
			for _, ch := range doc["choices"].([]any) {
				countLogprobs(ch.(map[string]any))
			}
			if u, ok := doc["usage"].(map[string]any); ok {
				usage = int(u["completion_tokens"].(float64))
			}
		}
		if !done {
			c.fail("%s: stream ended without [DONE] after %d events", body, events)
			return
		}
	}
	if usage != received || (finish != "stop" && finish != "length") {
		c.fail("%s: usage.completion_tokens %d, received %d tokens, finish %q", body, usage, received, finish)
		return
	}
	c.completed.Add(1)
	c.tokens.Add(int64(received))
}

type loadHealth struct {
	KVBlocksUsed     int `json:"kv_blocks_used"`
	StateSlotsUsed   int `json:"state_slots_used"`
	RequestsInFlight int `json:"requests_in_flight"`
	RequestsRunning  int `json:"requests_running"`
	RequestsWaiting  int `json:"requests_waiting"`
}

func (c *loadClient) waitIdle(t *testing.T) loadHealth {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var h loadHealth
		resp, err := http.Get(c.base + "/health")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if h == (loadHealth{}) || time.Now().After(deadline) {
			return h
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *loadClient) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	return scrapeMetrics(t, c.base)
}

// metric sums a family's counter values whose labels include the given
// name/value pairs.
func metric(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		if m.Counter != nil {
			sum += m.Counter.GetValue()
		}
	}
	return sum
}

// rssOf is process pid's resident set size in bytes.
func rssOf(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
