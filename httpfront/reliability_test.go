package httpfront_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// A stop sequence ends the request at the token that completes it: the
// usage counts exactly the tokens returned (each has a logprob), the same
// on every run, streamed or not, with or without speculation, and
// /metrics' generation_tokens_total agrees.
func TestStopSequenceUsageIsExact(t *testing.T) {
	const runs = 50
	for _, graph := range []string{"plain", "ngram"} {
		t.Run(graph, func(t *testing.T) {
			s := startGraph(t, "stories260K.gguf", graph)
			before := sumMetric(scrape(t, s.url)["ninfer:generation_tokens_total"])
			billed := 0
			counts := map[string]int{}
			for i := range runs {
				for _, stream := range []bool{false, true} {
					body := `{"model":"stories260K","prompt":"Once upon a time","max_tokens":200,"temperature":0,"stop":["."],"logprobs":1}`
					if stream {
						body = strings.TrimSuffix(body, "}") + `,"stream":true,"stream_options":{"include_usage":true}}`
					}
					var text string
					var returned, completion int
					var finish any
					if stream {
						docs := s.stream(t, "/v1/completions", body)
						var b strings.Builder
						for _, d := range docs {
							if cs, _ := d["choices"].([]any); len(cs) > 0 {
								c := cs[0].(map[string]any)
								b.WriteString(c["text"].(string))
								if lp, ok := c["logprobs"].(map[string]any); ok {
									returned += len(lp["tokens"].([]any))
								}
								if c["finish_reason"] != nil {
									finish = c["finish_reason"]
								}
							}
							if u, ok := d["usage"].(map[string]any); ok {
								completion = int(u["completion_tokens"].(float64))
							}
						}
						text = b.String()
					} else {
						doc := s.completion(t, "/v1/completions", body)
						c := choices(doc)[0]
						text, finish = c["text"].(string), c["finish_reason"]
						returned = len(c["logprobs"].(map[string]any)["tokens"].([]any))
						completion = int(doc["usage"].(map[string]any)["completion_tokens"].(float64))
					}
					if completion != returned || finish != "stop" || strings.Contains(text, ".") {
						t.Fatalf("run %d stream=%v: completion_tokens %d, tokens returned %d, finish %v, text %q",
							i, stream, completion, returned, finish, text)
					}
					counts[fmt.Sprintf("%q/%d", text, completion)]++
					billed += completion
				}
			}
			if len(counts) != 1 {
				t.Errorf("outputs differ between runs: %v", counts)
			}
			s.waitIdle(t)
			if got := sumMetric(scrape(t, s.url)["ninfer:generation_tokens_total"]) - before; got != float64(billed) {
				t.Errorf("generation_tokens_total grew by %g, usage billed %d", got, billed)
			}
		})
	}
}

// /health and /metrics read the engine's published snapshot while
// speculative, batched decode runs (this test's point is `go test -race`).
func TestHealthAndMetricsDuringSpeculativeBatchedDecode(t *testing.T) {
	s := startWith(t, instance.Options{Model: modelPath(t, "stories260K.gguf"), Graph: "ngram", Threads: 1, MaxRunning: 4}, httpfront.Config{})
	done := make(chan struct{})
	var polls sync.WaitGroup
	for _, path := range []string{"/health", "/metrics"} {
		polls.Add(1)
		go func() {
			defer polls.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				resp, err := http.Get(s.url + path)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	var reqs sync.WaitGroup
	for i := range 8 {
		reqs.Add(1)
		go func() {
			defer reqs.Done()
			body := fmt.Sprintf(`{"model":"stories260K","prompt":"the cat sat on the mat. the cat sat on the mat %d","max_tokens":48,"temperature":0}`, i)
			status, doc := s.call(t, "POST", "/v1/completions", body)
			if status != 200 {
				t.Errorf("status %d: %v", status, doc)
			}
		}()
	}
	reqs.Wait()
	close(done)
	polls.Wait()
	s.waitIdle(t)
}

// Non-streaming clients that hang up are noticed (the connection is
// probed while their choices run): their sequences are aborted, the KV is
// freed within a second, and a new request is answered at once.
func TestNonStreamingDisconnectsAbortTheirWork(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 16)
	var clients sync.WaitGroup
	for i := range 16 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			body := fmt.Sprintf(`{"model":"tiny-qwen3-f32","prompt":"Once upon a time %d","max_tokens":3000,"n":16}`, i)
			req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Errorf("request %d was answered (%s) before its client left", i, resp.Status)
			}
		}()
	}
	clients.Wait()
	left := time.Now()
	for {
		h := s.health(t)
		if h.KVBlocksUsed == 0 && h.RequestsInFlight == 0 {
			if h.RequestsAbandoned != 16 {
				t.Errorf("requests_abandoned %d, want 16", h.RequestsAbandoned)
			}
			break
		}
		if time.Since(left) > time.Second {
			t.Fatalf("a second after the clients left: %+v", h)
		}
		time.Sleep(10 * time.Millisecond)
	}
	probe := time.Now()
	s.completion(t, "/v1/completions", `{"model":"tiny-qwen3-f32","prompt":"Hello","max_tokens":4}`)
	if d := time.Since(probe); d > time.Second {
		t.Errorf("a probe request took %v after the abandoned ones", d)
	}
}

// liveHeap is the Go heap's live bytes as a forced collection marked them.
// The KV cache is allocated when the server starts, so growth after that is
// what requests hold (RSS would also grow as the engine first writes KV
// pages). MemStats.HeapAlloc would also count the garbage the running
// engine made between the collection and the read. It collects twice: the
// first collection keeps what sync.Pools cache (earlier tests' servers
// pooled buffers too) as their victims, the second drops it.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	return int64(sample[0].Value.Uint64())
}

// settledLiveHeap is liveHeap once it has stopped falling (three readings
// 100 ms apart, none more than 64 KB below the lowest before it, within 10
// s).
func settledLiveHeap() int64 {
	low, steady := liveHeap(), 0
	for deadline := time.Now().Add(10 * time.Second); steady < 3 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if h := liveHeap(); h < low-64<<10 {
			low, steady = h, 0
		} else {
			low, steady = min(low, h), steady+1
		}
	}
	return low
}

// freshProcessEnv names the test a child process of this test binary runs
// (inFreshProcess).
const freshProcessEnv = "NINFER_TEST_FRESH_PROCESS"

// inFreshProcess reports whether t runs in a process of its own. If not, it
// runs t again in a new process of this test binary, fails t if that fails,
// and returns false: the caller returns. A heap measurement needs this,
// since earlier tests' servers, caches and pools free tens of MB at times
// no test controls.
func inFreshProcess(t *testing.T) bool {
	if os.Getenv(freshProcessEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), freshProcessEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a fresh process: %v\n%s", t.Name(), err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "_test.go:") {
			t.Log(strings.TrimSpace(line))
		}
	}
	return false
}

func TestManyLongChoicesMemoryIsBounded(t *testing.T) {
	const (
		produce        = 4000    // tokens produced before the heap is measured
		fixedBytes     = 8 << 20 // the 256 choices' requests and state, the sampler's scratch
		bytesPerToken  = 1 << 10 // a produced token's id, text and bookkeeping
		heldPerAllowed = 16      // what a server holding memory per token allowed holds at the least
	)
	if !inFreshProcess(t) {
		return
	}
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 16)
	allowed := 256 * s.inst.Engine.ContextLength()
	before := settledLiveHeap()
	prompts := make([]string, 16)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("%q", fmt.Sprintf("p%d", i))
	}
	body := `{"model":"tiny-qwen3-f32","prompt":[` + strings.Join(prompts, ",") + `],"n":16}`
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	generated := func() int { return int(sumMetric(scrape(t, s.url)["vllm:generation_tokens_total"])) }
	for deadline := time.Now().Add(time.Minute); generated() < produce; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens produced after a minute, want %d", generated(), produce)
		}
	}
	h := s.health(t)
	during := liveHeap()
	n := generated()
	cancel()
	if h.RequestsInFlight != 256 {
		t.Errorf("requests_in_flight %d, want 256 choices running or queued", h.RequestsInFlight)
	}
	s.waitIdle(t)
	grew := during - before
	bound := int64(fixedBytes + n*bytesPerToken)
	if int64(allowed*heldPerAllowed) <= bound {
		t.Fatalf("%d tokens allowed hold %d bytes at %d bytes each, within the bound of %d: the context is too short for the test to tell tokens allowed from tokens produced", allowed, allowed*heldPerAllowed, heldPerAllowed, bound)
	}
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	if grew > bound {
		t.Errorf("the live heap grew by %.1f MB with %d tokens produced, want at most %.1f MB (baseline %.1f MB)", mb(grew), n, mb(bound), mb(before))
	} else {
		t.Logf("the live heap grew by %.2f MB with %d tokens produced (%d allowed; baseline %.2f MB)", mb(grew), n, allowed, mb(before))
	}
}

// Requests that can never succeed get a 4xx that names the field (or the
// header) at fault, and no error echoes the request's headers.
func TestBadRequestsNameTheirCause(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{MaxQueue: 2}, 2)
	ctxLen := s.inst.Engine.ContextLength()
	long := strings.TrimSuffix(strings.Repeat("1,", ctxLen+1), ",")
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		param                    any
		allow                    string
	}{
		{name: "more sequences than running + queued", method: "POST", path: "/v1/completions",
			body: `{"model":"stories260K","prompt":"Once","max_tokens":2,"n":5}`, status: 400, param: "n"},
		{name: "more prompts than running + queued", method: "POST", path: "/v1/completions",
			body: `{"model":"stories260K","prompt":["a","b","c","d","e"],"max_tokens":2}`, status: 400, param: "prompt"},
		{name: "a prompt longer than the context", method: "POST", path: "/v1/completions",
			body: `{"model":"stories260K","prompt":[` + long + `],"max_tokens":2}`, status: 400, param: "prompt"},
		{name: "a prompt that fits but max_tokens does not", method: "POST", path: "/v1/completions",
			body: fmt.Sprintf(`{"model":"stories260K","prompt":"Once","max_tokens":%d}`, ctxLen), status: 400, param: "max_tokens"},
		{name: "chat messages longer than the context", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"stories260K","messages":[{"role":"user","content":"` + strings.Repeat("a b ", ctxLen) + `"}]}`, status: 400, param: "messages"},
		{name: "no Content-Type", method: "POST", path: "/v1/completions", header: []string{"Content-Type", ""},
			body: `{"model":"stories260K","prompt":"Once"}`, status: 415},
		{name: "a form body", method: "POST", path: "/v1/completions", header: []string{"Content-Type", "application/x-www-form-urlencoded"},
			body: `{"model":"stories260K","prompt":"Once"}`, status: 415},
		{name: "text/plain", method: "POST", path: "/v1/chat/completions", header: []string{"Content-Type", "text/plain"},
			body: `{}`, status: 415},
		{name: "GET on a POST path", method: "GET", path: "/v1/completions", status: 405, allow: "POST"},
		{name: "POST on a GET path", method: "POST", path: "/v1/models", body: "{}", status: 405, allow: "GET"},
		{name: "DELETE /health", method: "DELETE", path: "/health", status: 405, allow: "GET"},
		{name: "user must be a string", method: "POST", path: "/v1/completions",
			body: `{"model":"stories260K","prompt":"Once","user":5}`, status: 400, param: "user"},
		{name: "metadata must be an object of strings", method: "POST", path: "/v1/completions",
			body: `{"model":"stories260K","prompt":"Once","metadata":{"a":1}}`, status: 400, param: "metadata"},
		{name: "store must be a boolean", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"store":"yes"}`, status: 400, param: "store"},
		{name: "service_tier must be a string", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"service_tier":[]}`, status: 400, param: "service_tier"},
		{name: "a schema whose type list is empty", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":[]}}}}`, status: 400, param: "response_format.json_schema.schema"},
		{name: "a message name must be a string", method: "POST", path: "/v1/chat/completions",
			body: `{"model":"stories260K","messages":[{"role":"user","content":"hi","name":{}}]}`, status: 400, param: "messages[0].name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, s.url+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(tc.header); i += 2 {
				req.Header.Set(tc.header[i], tc.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var doc map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				t.Fatal(err)
			}
			e := errorOf(doc)
			if resp.StatusCode != tc.status || e == nil || e["param"] != tc.param || resp.Header.Get("Allow") != tc.allow {
				t.Errorf("status %d Allow %q %v; want %d, param %v, Allow %q", resp.StatusCode, resp.Header.Get("Allow"), doc, tc.status, tc.param, tc.allow)
			}
		})
	}

	// Malformed HTTP: the 400 quotes nothing of what was sent.
	const secret = "sk-do-not-echo-0123456789"
	for _, raw := range []string{
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nContent-Length: nope\r\n\r\n",
		"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + secret + "\r\nTransfer-Encoding: bogus\r\n\r\n",
		"P\x00ST /v1/completions HTTP/1.1\r\nAuthorization: Bearer " + secret + "\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte(raw))
		reply, _ := io.ReadAll(conn)
		conn.Close()
		if !strings.HasPrefix(string(reply), "HTTP/1.1 4") || strings.Contains(string(reply), secret) || strings.Contains(string(reply), "Authorization") {
			t.Errorf("malformed request %q answered:\n%s", raw, reply)
		}
	}
	s.waitIdle(t)
}

// A non-streaming request that waits in the queue, and one that runs,
// longer than the server's read deadline get their 200: the disconnect
// probe tells a connected client from a closed one after that deadline
// has passed (Timeout, not ReadTimeout, bounds a response).
func TestNonStreamingRequestsOutliveTheReadDeadline(t *testing.T) {
	const readTimeout = 100 * time.Millisecond
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{ReadTimeout: readTimeout}, 1)
	body := `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":3000,"ignore_eos":true,"temperature":0}`
	type answer struct {
		status int
		doc    map[string]any
		took   time.Duration
	}
	answers := make(chan answer, 2)
	for range 2 {
		go func() {
			began := time.Now()
			status, doc := s.call(t, "POST", "/v1/completions", body)
			answers <- answer{status, doc, time.Since(began)}
		}()
	}
	var slowest time.Duration
	for range 2 {
		a := <-answers
		if a.status != 200 {
			t.Errorf("status %d after %v: %v", a.status, a.took, a.doc)
		}
		slowest = max(slowest, a.took)
	}
	if slowest < 2*readTimeout {
		t.Fatalf("the queued request took %v, not past the read deadline %v: the test proves nothing", slowest, readTimeout)
	}
	if h := s.waitIdle(t); h.RequestsAbandoned != 0 {
		t.Errorf("requests_abandoned %d, want 0", h.RequestsAbandoned)
	}
}

// A request that sends "Expect: 100-continue" is told to send its body
// only once its headers pass the API key and body size checks; otherwise
// it gets the refusal before sending a byte of body.
func TestExpectContinueIsAnsweredAfterTheChecks(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{APIKey: "sekret", MaxBodyBytes: 1 << 10}, 1)
	body := `{"model":"stories260K","prompt":"Once","max_tokens":2}`
	for _, tc := range []struct {
		name, auth string
		length     int
		want       string
	}{
		{"without the key", "", len(body), "HTTP/1.1 401"},
		{"with a wrong key", "Bearer nope", len(body), "HTTP/1.1 401"},
		{"with the key and a body over the limit", "Bearer sekret", 4 << 10, "HTTP/1.1 413"},
		{"with the key and a body that fits", "Bearer sekret", len(body), "HTTP/1.1 100 Continue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			auth := ""
			if tc.auth != "" {
				auth = "Authorization: " + tc.auth + "\r\n"
			}
			fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n", auth, tc.length)
			br := bufio.NewReader(c)
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("no answer to the headers: %v", err)
			}
			if !strings.HasPrefix(line, tc.want) {
				t.Fatalf("first line %q, want %q", line, tc.want)
			}
			if tc.want != "HTTP/1.1 100 Continue" {
				return
			}
			br.ReadString('\n') // the blank line after 100 Continue
			c.Write([]byte(body))
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("after the body: %s, want 200", resp.Status)
			}
		})
	}
}

// /health lists a hybrid model's state slots and checkpoints, used ones
// included when none is, as the README's hybrid section says; a model without recurrent
// state has none of the keys.
func TestHealthListsStateSlotsOfHybridModels(t *testing.T) {
	for _, tc := range []struct {
		model string
		want  map[string]any
	}{
		{"tiny-qwen35-f32.gguf", map[string]any{"state_slots_used": 0.0, "state_slots_total": 2.0,
			"state_checkpoints": 0.0, "state_checkpoint_bytes": 0.0, "state_checkpoints_max": 32.0}},
		{"stories260K.gguf", map[string]any{}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			s := start(t, tc.model, httpfront.Config{}, 2)
			status, doc := s.call(t, "GET", "/health", "")
			if status != 200 {
				t.Fatalf("status %d: %v", status, doc)
			}
			got := map[string]any{}
			for _, k := range []string{"state_slots_used", "state_slots_total", "state_checkpoints", "state_checkpoint_bytes", "state_checkpoints_max"} {
				if v, ok := doc[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("state slots on /health (-want +got):\n%s", diff)
			}
		})
	}
}

// SSE clients that stop reading do not hold the server's memory: once more
// than MaxStreamLag tokens of a stream wait unread, the choice is aborted,
// its KV freed and nothing is left in flight, while the clients are still
// connected; the live heap returns to where it was; and a client that
// reads again gets the text sent before, then a slow_reader error event.
func TestStreamsThatStopReadingAreBounded(t *testing.T) {
	const clients, lag = 8, 64
	// Small socket buffers on both ends, so that a stream outgrows them
	// long before its 3000 tokens.
	s := startListening(t, instance.Options{Model: modelPath(t, "tiny-qwen3-f32.gguf"), Threads: threads(t), MaxRunning: clients},
		httpfront.Config{MaxStreamLag: lag}, func(ln net.Listener) net.Listener { return smallSendBuffers{ln.(*net.TCPListener)} })
	before := liveHeap()
	body := `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":3000,"ignore_eos":true,"stream":true}`
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns[i] = c
	}
	h := s.waitIdle(t)
	if grew := liveHeap() - before; grew > 8<<20 {
		t.Errorf("with %d clients not reading and nothing running, the live heap is %d MB above its start", clients, grew>>20)
	}
	if h.StreamsAborted != 0 {
		t.Errorf("streams_aborted %d before any client left", h.StreamsAborted)
	}
	conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conns[0]), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := sseEvents(t, resp.Body)
	if len(events) < 2 {
		t.Fatalf("events %q", events)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(events[len(events)-1]), &last); err != nil {
		t.Fatalf("last event %q: %v", events[len(events)-1], err)
	}
	if e, _ := last["error"].(map[string]any); e == nil || e["code"] != "slow_reader" {
		t.Errorf("last event %v, want a slow_reader error", last)
	}
	if n := len(events) - 1; n < 1 || n > 3000-lag {
		t.Errorf("%d text events before the error, want those sent before the client stopped reading", n)
	}
}

// smallSendBuffers accepts connections with a 4 KiB socket send buffer.
type smallSendBuffers struct{ *net.TCPListener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	c.SetWriteBuffer(4 << 10)
	return c, nil
}
