package httpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

func modelPath(t testing.TB, name string) string {
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("model not found: %s", p)
	}
	return p
}

// server is a live httpfront server on 127.0.0.1 for tests.
type server struct {
	url  string
	srv  *httpfront.Server
	inst *instance.Instance
	id   string
}

// start serves model on a free port; the server and engine stop at cleanup.
func start(t testing.TB, model string, cfg httpfront.Config, maxRunning int) *server {
	t.Helper()
	return startWith(t, instance.Options{Model: modelPath(t, model), Threads: threads(t), MaxRunning: maxRunning}, cfg)
}

// startWith serves the instance that opts describe (the model id is the
// file name without .gguf) with cfg on a free port; everything stops at
// cleanup.
func startWith(t testing.TB, opts instance.Options, cfg httpfront.Config) *server {
	t.Helper()
	return startListening(t, opts, cfg, nil)
}

// startListening is startWith with the listener wrapped by wrap (nil: as
// it is), so a test can shape the server's connections.
func startListening(t testing.TB, opts instance.Options, cfg httpfront.Config, wrap func(net.Listener) net.Listener) *server {
	t.Helper()
	srv := httpfront.New(cfg)
	opts.Observer = httpfront.StepObservers(opts.Observer, srv)
	inst, err := instance.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	id := strings.TrimSuffix(filepath.Base(opts.Model), ".gguf")
	s := &server{url: "http://" + ln.Addr().String(), srv: srv, inst: inst, id: id}
	go s.srv.Serve(ln)
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: inst.Engine, Tokenizer: inst.Tokenizer, Chat: inst.Chat, Created: time.Unix(1, 0), Plan: inst.Plan})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.srv.Shutdown(ctx)
		inst.Close()
	})
	return s
}

// call sends a request and returns the status and the decoded JSON body.
func (s *server) call(t testing.TB, method, path, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s %s: status %d, body is not JSON: %v\n%s", method, path, resp.StatusCode, err, b)
	}
	return resp.StatusCode, doc
}

func (s *server) health(t testing.TB) httpfront.Health {
	t.Helper()
	resp, err := http.Get(s.url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h httpfront.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitIdle waits until no KV block is in use and nothing is in flight.
func (s *server) waitIdle(t testing.TB) httpfront.Health {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := s.health(t)
		if h.KVBlocksUsed == 0 && h.RequestsInFlight == 0 && h.RequestsRunning == 0 && h.RequestsWaiting == 0 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not idle: %+v", h)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// errorOf returns the error object's fields of an OpenAI error body.
func errorOf(doc map[string]any) map[string]any {
	e, _ := doc["error"].(map[string]any)
	return e
}

func TestErrorsHaveOpenAIShapeAndStatus(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{APIKey: "sekret", MaxBodyBytes: 1 << 10}, 2)
	auth := []string{"Authorization", "Bearer sekret"}
	chat := `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":2`
	for _, tc := range []struct {
		name         string
		method, path string
		body         string
		header       []string
		status       int
		param        any
		code         any
	}{
		{"no api key", "GET", "/v1/models", "", nil, 401, nil, "invalid_api_key"},
		{"a wrong api key", "POST", "/v1/chat/completions", chat + "}", []string{"Authorization", "Bearer nope"}, 401, nil, "invalid_api_key"},
		{"an unknown model", "POST", "/v1/chat/completions", strings.Replace(chat, "stories260K", "gpt-9", 1) + "}", auth, 404, "model", "model_not_found"},
		{"an unknown model id", "GET", "/v1/models/gpt-9", "", auth, 404, "model", "model_not_found"},
		{"an unknown path", "GET", "/v1/engines", "", auth, 404, nil, "not_found"},
		{"a wrong method", "GET", "/v1/chat/completions", "", auth, 405, nil, "method_not_allowed"},
		{"a bad parameter", "POST", "/v1/chat/completions", chat + `,"temperature":9}`, auth, 400, "temperature", nil},
		{"a prompt that cannot fit the context", "POST", "/v1/completions", `{"model":"stories260K","prompt":"x","max_tokens":600}`, auth, 400, "max_tokens", nil},
		{"a token id outside the vocabulary", "POST", "/v1/completions", `{"model":"stories260K","prompt":[1,99999]}`, auth, 400, "prompt", nil},
		{"a body over the limit", "POST", "/v1/completions", `{"model":"stories260K","prompt":"` + strings.Repeat("x", 2000) + `"}`, auth, 413, nil, "request_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, tc.method, tc.path, tc.body, tc.header...)
			e := errorOf(doc)
			if status != tc.status || e == nil {
				t.Fatalf("status %d, body %v; want %d with an error object", status, doc, tc.status)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error object lacks %q: %v", k, e)
				}
			}
			if diff := cmp.Diff(tc.param, e["param"]); diff != "" {
				t.Errorf("param (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.code, e["code"]); diff != "" {
				t.Errorf("code (-want +got):\n%s", diff)
			}
		})
	}
	status, doc := s.call(t, "GET", "/v1/models", "", auth...)
	want := map[string]any{"object": "list", "data": []any{map[string]any{"id": "stories260K", "object": "model", "created": 1.0, "owned_by": "ninfer",
		"max_model_len": float64(s.inst.Engine.ContextLength()),
		"meta":          map[string]any{"n_ctx_train": float64(s.inst.Engine.ContextLength()), "n_vocab": float64(s.inst.Tokenizer.VocabSize())}}}}
	if diff := cmp.Diff(want, doc); status != 200 || diff != "" {
		t.Errorf("/v1/models: status %d (-want +got):\n%s", status, diff)
	}
}

func TestHealthBeforeAndAfterTheModel(t *testing.T) {
	srv := httpfront.New(httpfront.Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	s := &server{url: "http://" + ln.Addr().String(), srv: srv}
	status, doc := s.call(t, "GET", "/health", "")
	if status != 503 || doc["status"] != "loading" {
		t.Errorf("before the model: %d %v, want 503 loading", status, doc)
	}
	if status, doc := s.call(t, "GET", "/ready", ""); status != 503 || doc["status"] != "loading" {
		t.Errorf("/ready before the model: %d %v, want 503 loading", status, doc)
	}
	status, doc = s.call(t, "POST", "/v1/completions", `{"model":"m","prompt":"x"}`)
	if status != 503 || errorOf(doc)["code"] != "model_loading" {
		t.Errorf("a request before the model: %d %v, want 503 model_loading", status, doc)
	}
	inst, err := instance.Open(instance.Options{Model: modelPath(t, "stories260K.gguf"), Threads: 1, MaxRunning: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.Close()
	srv.SetModel(&httpfront.Model{ID: "m", Engine: inst.Engine, Tokenizer: inst.Tokenizer, Chat: inst.Chat})
	status, doc = s.call(t, "GET", "/health", "")
	want := map[string]any{"status": "ok", "model": "m", "requests_running": 0.0, "requests_waiting": 0.0, "kv_blocks_used": 0.0,
		"kv_blocks_total": 96.0, "kv_block_tokens": 16.0, "max_running": 3.0, "requests_in_flight": 0.0, "streams_aborted": 0.0, "requests_abandoned": 0.0, "kv_blocks_cached": 0.0}
	if diff := cmp.Diff(want, doc); status != 200 || diff != "" {
		t.Errorf("after the model: status %d (-want +got):\n%s", status, diff)
	}
	if status, doc := s.call(t, "GET", "/ready", ""); status != 200 || doc["status"] != "ready" {
		t.Errorf("/ready after the model: %d %v, want 200 ready", status, doc)
	}
}

// completion posts a non-streaming request that must succeed.
func (s *server) completion(t testing.TB, path, body string) map[string]any {
	t.Helper()
	status, doc := s.call(t, "POST", path, body)
	if status != 200 {
		t.Fatalf("%s: status %d: %v", body, status, doc)
	}
	return doc
}

func choices(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, c := range doc["choices"].([]any) {
		out = append(out, c.(map[string]any))
	}
	return out
}

func chatText(c map[string]any) string { return c["message"].(map[string]any)["content"].(string) }

func TestCompletions(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 4)
	prompt := s.inst.Tokenizer.Encode("Once upon a time", true, true)
	greedy := s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":24,"temperature":0}`)
	text := choices(greedy)[0]["text"].(string)
	gotUsage := greedy["usage"].(map[string]any)
	wantUsage := map[string]any{"prompt_tokens": float64(len(prompt)), "completion_tokens": 24.0, "total_tokens": float64(len(prompt) + 24),
		"prompt_tokens_details": map[string]any{"cached_tokens": 0.0}}
	if diff := cmp.Diff(wantUsage, gotUsage); diff != "" || choices(greedy)[0]["finish_reason"] != "length" {
		t.Errorf("usage (-want +got):\n%s\nfinish %v", diff, choices(greedy)[0]["finish_reason"])
	}
	if tm, ok := greedy["timings"].(map[string]any); !ok || tm["predicted_n"] != 24.0 || tm["prompt_n"] != float64(len(prompt)) {
		t.Errorf("timings %v", greedy["timings"])
	}

	t.Run("token ids give the same text", func(t *testing.T) {
		ids, _ := json.Marshal(prompt)
		doc := s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":`+string(ids)+`,"max_tokens":24,"temperature":0}`)
		if got := choices(doc)[0]["text"]; got != text {
			t.Errorf("text %q, want %q", got, text)
		}
	})
	t.Run("a stop sequence cuts the text before it and finishes with stop", func(t *testing.T) {
		stop := text[8:12]
		body := fmt.Sprintf(`{"model":"stories260K","prompt":"Once upon a time","max_tokens":24,"temperature":0,"stop":[%q]}`, stop)
		c := choices(s.completion(t, "/v1/completions", body))[0]
		want := text[:strings.Index(text, stop)]
		if c["text"] != want || c["finish_reason"] != "stop" {
			t.Errorf("text %q finish %v, want %q stop", c["text"], c["finish_reason"], want)
		}
	})
	t.Run("a seed makes sampling repeatable and n choices differ", func(t *testing.T) {
		body := `{"model":"stories260K","prompt":"Once upon a time","max_tokens":24,"temperature":1.5,"seed":11,"n":3}`
		a, b := choices(s.completion(t, "/v1/completions", body)), choices(s.completion(t, "/v1/completions", body))
		var ta, tb []string
		for i := range a {
			ta, tb = append(ta, a[i]["text"].(string)), append(tb, b[i]["text"].(string))
			if a[i]["index"] != float64(i) {
				t.Errorf("choice %d has index %v", i, a[i]["index"])
			}
		}
		if diff := cmp.Diff(ta, tb); diff != "" {
			t.Errorf("same seed, different choices (-first +second):\n%s", diff)
		}
		if ta[0] == ta[1] && ta[1] == ta[2] {
			t.Errorf("n=3 choices are all %q", ta[0])
		}
	})
	t.Run("several prompts give choices in prompt order", func(t *testing.T) {
		doc := s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":["Once upon a time","Lily"],"max_tokens":24,"temperature":0,"n":2}`)
		cs := choices(doc)
		if len(cs) != 4 || cs[0]["text"] != text || cs[1]["text"] != text || cs[2]["text"] == text {
			t.Errorf("choices %v", cs)
		}
		if u := doc["usage"].(map[string]any); u["completion_tokens"] != 96.0 {
			t.Errorf("usage %v, want 96 completion tokens", u)
		}
	})
	t.Run("legacy logprobs", func(t *testing.T) {
		doc := s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":4,"temperature":0,"logprobs":2}`)
		lp := choices(doc)[0]["logprobs"].(map[string]any)
		if len(lp["tokens"].([]any)) != 4 || len(lp["token_logprobs"].([]any)) != 4 || len(lp["top_logprobs"].([]any)) != 4 {
			t.Errorf("logprobs %v", lp)
		}
		if off := lp["text_offset"].([]any); off[0] != 0.0 {
			t.Errorf("text_offset %v", off)
		}
	})
	s.waitIdle(t)
}

func TestChatCompletions(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 4)
	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]`
	doc := s.completion(t, "/v1/chat/completions", `{"model":"tiny-qwen3-f32",`+msgs+`,"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":3}`)
	prompt := s.inst.Tokenizer.Encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", true, true)
	c := choices(doc)[0]
	if doc["object"] != "chat.completion" || c["message"].(map[string]any)["role"] != "assistant" {
		t.Errorf("document %v", doc)
	}
	if u := doc["usage"].(map[string]any); u["prompt_tokens"] != float64(len(prompt)) || u["completion_tokens"] != 6.0 {
		t.Errorf("usage %v, want %d prompt tokens (the ChatML template) and 6 completion tokens", u, len(prompt))
	}
	content := c["logprobs"].(map[string]any)["content"].([]any)
	if len(content) != 6 {
		t.Fatalf("%d logprob entries, want 6", len(content))
	}
	var joined strings.Builder
	for _, e := range content {
		e := e.(map[string]any)
		top := e["top_logprobs"].([]any)
		if len(top) != 3 || e["logprob"].(float64) > 0 || top[0].(map[string]any)["logprob"] != e["logprob"] {
			t.Errorf("greedy entry %v: want 3 alternatives led by the chosen token", e)
		}
		var b []byte
		for _, x := range e["bytes"].([]any) {
			b = append(b, byte(x.(float64)))
		}
		joined.Write(b)
	}
	if got := strings.ToValidUTF8(joined.String(), "\uFFFD"); got != chatText(c) {
		t.Errorf("logprob bytes spell %q, content is %q", got, chatText(c))
	}
	s.waitIdle(t)
}

// sseEvents reads an SSE body: the data payloads in order.
func sseEvents(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, data)
	}
	return out
}

func (s *server) stream(t testing.TB, path, body string) []map[string]any {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	events := sseEvents(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}
	var docs []map[string]any
	for _, e := range events[:len(events)-1] {
		var d map[string]any
		if err := json.Unmarshal([]byte(e), &d); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		docs = append(docs, d)
	}
	return docs
}

// startStream sends a streaming request and returns its body once the
// first line has come; the body closes at cleanup.
func (s *server) startStream(t testing.TB, path, body string) *bufio.Reader {
	t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return br
}

func TestStreaming(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 4)
	want := choices(s.completion(t, "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"Tell a story"}],"max_tokens":30,"temperature":0}`))[0]
	docs := s.stream(t, "/v1/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"Tell a story"}],"max_tokens":30,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`)
	first := docs[0]["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"role": "assistant", "content": ""}, first); diff != "" {
		t.Errorf("first delta (-want +got):\n%s", diff)
	}
	var text strings.Builder
	var finish any
	for _, d := range docs[:len(docs)-1] {
		if d["object"] != "chat.completion.chunk" || d["usage"] != nil {
			t.Errorf("chunk %v", d)
		}
		c := d["choices"].([]any)[0].(map[string]any)
		if s, ok := c["delta"].(map[string]any)["content"].(string); ok {
			text.WriteString(s)
		}
		finish = c["finish_reason"]
	}
	if text.String() != chatText(want) || finish != "length" {
		t.Errorf("streamed %q (finish %v), non-streamed %q", text.String(), finish, chatText(want))
	}
	last := docs[len(docs)-1]
	if u := last["usage"].(map[string]any); len(last["choices"].([]any)) != 0 || u["completion_tokens"] != 30.0 || last["timings"] == nil {
		t.Errorf("usage chunk %v", last)
	}

	t.Run("completions stream n=2 with timings on the last chunk", func(t *testing.T) {
		docs := s.stream(t, "/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":5,"n":2,"seed":1,"stream":true}`)
		finishes := map[float64]any{}
		for _, d := range docs {
			c := d["choices"].([]any)[0].(map[string]any)
			if c["finish_reason"] != nil {
				finishes[c["index"].(float64)] = c["finish_reason"]
			}
		}
		if diff := cmp.Diff(map[float64]any{0: "length", 1: "length"}, finishes); diff != "" || docs[len(docs)-1]["timings"] == nil {
			t.Errorf("finishes (-want +got):\n%s\nlast chunk %v", diff, docs[len(docs)-1])
		}
	})
	s.waitIdle(t)
}

// A full queue answers 429; the queue counts choices.
func TestQueueLimit(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{MaxQueue: 1}, 1)
	cancel := s.fillQueue(t)
	defer cancel()
	status, doc := s.call(t, "POST", "/v1/completions", `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":2}`)
	if status != 429 || errorOf(doc)["code"] != "queue_full" {
		t.Errorf("status %d %v, want 429 queue_full", status, doc)
	}
	cancel()
	s.waitIdle(t)
}

// fillQueue holds the one running slot and the one queue slot of a
// tiny-qwen3-f32 server (one running, --max-queue 1) with a long stream of
// two choices, until cancel.
func (s *server) fillQueue(t *testing.T) (cancel func()) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions",
		strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":4000,"n":2,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	return func() { stop(); resp.Body.Close() }
}

// A request past the server deadline is aborted with 504 and frees its KV.
func TestDeadline(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{Timeout: 30 * time.Millisecond}, 1)
	// Keep the only slot busy so the next request waits past its deadline.
	go http.Post(s.url+"/v1/completions", "application/json", strings.NewReader(`{"model":"stories260K","prompt":"Once","max_tokens":450,"temperature":0}`))
	time.Sleep(5 * time.Millisecond)
	status, doc := s.call(t, "POST", "/v1/completions", `{"model":"stories260K","prompt":"Once","max_tokens":450}`)
	if status != 504 || errorOf(doc)["code"] != "deadline_exceeded" {
		t.Errorf("status %d %v, want 504 deadline_exceeded", status, doc)
	}
	s.waitIdle(t)
}

// Shutdown lets a running stream finish, refuses new requests, then returns.
func TestShutdownDrains(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 2)
	br := s.startStream(t, "/v1/completions", `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":1500,"temperature":0,"stream":true}`)
	if s.srv.InFlight() != 1 {
		t.Fatal("the stream finished before the shutdown began")
	}
	done := make(chan error, 1)
	go func() { done <- s.srv.Shutdown(context.Background()) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
		if err != nil {
			break // the listener is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server still accepts connections while draining")
		}
		time.Sleep(time.Millisecond)
	}
	if s.srv.InFlight() != 1 {
		t.Error("the stream finished before the listener closed")
	}
	rest, _ := io.ReadAll(br)
	events := sseEvents(t, bytes.NewReader(rest))
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Errorf("the stream in flight did not finish: %q", events)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return after the stream ended")
	}
}

// The acceptance check: 16 concurrent streaming clients complete
// with correct usage, 8 more disconnect mid-stream, and afterwards
// kv_blocks_used on /health returns to 0.
func TestConcurrentStreamsAndDisconnectsFreeKV(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 16)
	prompt := `"prompt":"Once upon a time"`
	nPrompt := len(s.inst.Tokenizer.Encode("Once upon a time", true, true))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 16 + 3*i
			docs := s.stream(t, "/v1/completions", fmt.Sprintf(`{"model":"stories260K",%s,"max_tokens":%d,"seed":%d,"stream":true,"stream_options":{"include_usage":true}}`, prompt, n, i))
			u := docs[len(docs)-1]["usage"].(map[string]any)
			finish := docs[len(docs)-2]["choices"].([]any)[0].(map[string]any)["finish_reason"]
			tokens := u["completion_tokens"].(float64)
			if u["prompt_tokens"] != float64(nPrompt) || u["total_tokens"] != float64(nPrompt)+tokens ||
				(finish == "length" && tokens != float64(n)) || tokens > float64(n) || tokens < 1 {
				t.Errorf("client %d: finish %v usage %v", i, finish, u)
			}
		}()
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
			if err != nil {
				t.Error(err)
				return
			}
			body := `{"model":"stories260K",` + prompt + `,"max_tokens":480,"temperature":0,"stream":true}`
			fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			br := bufio.NewReader(c)
			for data := 0; data < 3; { // read until the third chunk, then leave
				line, err := br.ReadString('\n')
				if err != nil {
					t.Error(err)
					break
				}
				if strings.HasPrefix(line, "data: ") {
					data++
				}
			}
			c.Close()
		}()
	}
	wg.Wait()
	h := s.waitIdle(t)
	if h.StreamsAborted != 8 {
		t.Errorf("%d streams aborted, want the 8 that disconnected", h.StreamsAborted)
	}
}

// threads is the engine threads of a test server: one for tests (they run
// beside other packages' tests), all cores for benchmarks.
func threads(t testing.TB) int {
	if _, ok := t.(*testing.B); ok {
		return 0
	}
	return 1
}
