package httpfront_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// get sends GET path (with the key when given) and returns the status, the
// headers and the body.
func (s *server) get(t testing.TB, method, path, key string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestWebUIServesItsFilesWithoutTheKey(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{APIKey: "sekret"}, 1)
	off := start(t, "stories260K.gguf", httpfront.Config{NoWebUI: true}, 1)
	tests := []struct {
		name        string
		srv         *server
		method      string
		path        string
		status      int
		contentType string // for 200s
	}{
		{"the page loads at / without the key", s, "GET", "/", 200, "text/html; charset=utf-8"},
		{"HEAD works too", s, "HEAD", "/", 200, "text/html; charset=utf-8"},
		{"its module script", s, "GET", "/webui/app.js", 200, "text/javascript; charset=utf-8"},
		{"its style sheet", s, "GET", "/webui/style.css", 200, "text/css; charset=utf-8"},
		{"its icon", s, "GET", "/webui/icon.svg", 200, "image/svg+xml"},
		{"an unknown file is 404", s, "GET", "/webui/nope.js", 404, ""},
		{"the folder itself is 404", s, "GET", "/webui/", 404, ""},
		{"no way out of the folder", s, "GET", "/webui/../webui.go", 404, ""},
		{"no POST", s, "POST", "/", 405, ""},
		{"the plan still needs the key", s, "GET", httpfront.GraphPath, 401, ""},
		{"the live figures still need the key", s, "GET", httpfront.LivePath, 401, ""},
		{"--no-webui: / is 404", off, "GET", "/", 404, ""},
		{"--no-webui: the scripts are 404", off, "GET", "/webui/app.js", 404, ""},
	}
	if h := s.health(t); !h.APIKeyRequired {
		t.Errorf("/health of a server with a key: api_key_required is false; the page would not ask for the key")
	}
	if h := off.health(t); h.APIKeyRequired {
		t.Errorf("/health of a server without a key: api_key_required is true")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := tc.srv.get(t, tc.method, tc.path, "")
			if status != tc.status {
				t.Fatalf("%s %s: status %d, want %d: %.200s", tc.method, tc.path, status, tc.status, body)
			}
			if status != 200 {
				if tc.method != "HEAD" && !json.Valid([]byte(body)) {
					t.Errorf("error body is not JSON: %.200s", body)
				}
				return
			}
			want := http.Header{"Content-Type": {tc.contentType}, "Content-Security-Policy": {httpfront.WebUICSP},
				"X-Content-Type-Options": {"nosniff"}, "Referrer-Policy": {"no-referrer"}, "Cache-Control": {"no-cache"}}
			got := http.Header{}
			for k := range want {
				got[k] = h.Values(k)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWebUICSP checks the policy and that the page keeps to it: every
// script and style is a file of its own (no inline code, no style
// attributes), and no file names another host.
func TestWebUICSP(t *testing.T) {
	for _, directive := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(httpfront.WebUICSP, directive) {
			t.Errorf("the CSP %q lacks %q", httpfront.WebUICSP, directive)
		}
	}
	if strings.Contains(httpfront.WebUICSP, "unsafe-") {
		t.Errorf("the CSP %q allows unsafe sources", httpfront.WebUICSP)
	}
	inlineScript := regexp.MustCompile(`<script[^>]*>`)
	styleAttr := regexp.MustCompile(`\sstyle\s*=`)
	url := regexp.MustCompile(`(?i)(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	root := "webui"
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		for _, tag := range inlineScript.FindAllString(text, -1) {
			if !strings.Contains(tag, " src=") {
				t.Errorf("%s: inline script %s (the CSP forbids it)", path, tag)
			}
		}
		if styleAttr.MatchString(text) || strings.Contains(text, "<style") {
			t.Errorf("%s: inline style (the CSP forbids it)", path)
		}
		for _, u := range url.FindAllString(text, -1) {
			if !strings.HasSuffix(u, "//www.w3.org") { // the SVG namespace, never fetched
				t.Errorf("%s: names another host: %s", path, u)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// graph GETs GraphPath (with key when given), which must answer 200.
func (s *server) graph(t *testing.T, key string) httpfront.Graph {
	t.Helper()
	status, _, body := s.get(t, "GET", httpfront.GraphPath, key)
	if status != 200 {
		t.Fatalf("GET %s: %d %s", httpfront.GraphPath, status, body)
	}
	var g httpfront.Graph
	if err := json.Unmarshal([]byte(body), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestGraphEndpoint(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{APIKey: "k"}, 2)
	got := s.graph(t, "k")
	snap := s.inst.Engine.Snapshot()
	want := httpfront.Graph{Model: "stories260K", Plan: s.inst.Plan.Doc(), CacheGroups: []httpfront.CacheGroup{
		{Name: "kv", Kind: "kv", Model: node.Target, Total: snap.KVBlocksTotal, BlockTokens: 16, UnitBytes: snap.KVBlockBytes, DType: "f32"},
	}}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("GET %s (-want +got):\n%s", httpfront.GraphPath, diff)
	}
	if got.Plan.Name != "plain" || len(got.Plan.Steps) == 0 || got.Plan.Out["tokens"] == "" {
		t.Errorf("the default plan looks empty: %+v", got.Plan)
	}
	if status, _, _ := s.get(t, "POST", httpfront.GraphPath, "k"); status != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: %d, want 405", httpfront.GraphPath, status)
	}
}

func TestLiveStatsAfterARequest(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	code, doc := s.call(t, "POST", "/v1/completions", `{"model":"stories260K","prompt":"Once upon a time","max_tokens":12,"temperature":0}`)
	if code != 200 {
		t.Fatalf("completion: %d %v", code, doc)
	}
	s.waitIdle(t)
	usage := doc["usage"].(map[string]any)
	status, _, body := s.get(t, "GET", httpfront.LivePath, "")
	if status != 200 {
		t.Fatalf("GET %s: %d %s", httpfront.LivePath, status, body)
	}
	var got httpfront.LiveStats
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Recent) != 1 {
		t.Fatalf("recent = %+v, want the one finished request", got.Recent)
	}
	r := got.Recent[0]
	if r.TotalMs <= 0 || r.DecodeMs <= 0 || r.TotalMs < r.QueueMs+r.PrefillMs+r.DecodeMs-1 {
		t.Errorf("phases %+v: want positive decode and total >= queue + prefill + decode", r)
	}
	snap := s.inst.Engine.Snapshot()
	want := httpfront.LiveStats{UnixMs: got.UnixMs, MaxRunning: 2, CacheGroups: []httpfront.CacheGroup{
		{Name: "kv", Kind: "kv", Model: node.Target, Total: snap.KVBlocksTotal, BlockTokens: 16, UnitBytes: snap.KVBlockBytes,
			DType: "f32", Cached: snap.KVBlocksCached},
	},
		PrefixCache: true, PrefixQueries: snap.PrefixQueries, PrefixHits: snap.PrefixHits,
		PromptTokens: int64(usage["prompt_tokens"].(float64)), GenerationTokens: int64(usage["completion_tokens"].(float64)),
		Speculative: httpfront.SpecCounts{AcceptedPerPosition: []int64{}},
		Recent: []httpfront.RequestPhases{{ReceivedUnixMs: r.ReceivedUnixMs, PromptTokens: int(usage["prompt_tokens"].(float64)),
			CompletionTokens: 12, QueueMs: r.QueueMs, PrefillMs: r.PrefillMs, DecodeMs: r.DecodeMs, TotalMs: r.TotalMs, FinishReason: "length"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET %s (-want +got):\n%s", httpfront.LivePath, diff)
	}
}

// A hybrid model's recurrent state slots are a cache group of their own,
// next to the paged KV of its attention layers.
func TestGraphEndpointShowsTheStateGroupOfAHybridModel(t *testing.T) {
	s := start(t, "tiny-qwen35-f32.gguf", httpfront.Config{}, 2)
	got := s.graph(t, "")
	snap := s.inst.Engine.Snapshot()
	want := []httpfront.CacheGroup{
		{Name: "kv", Kind: "kv", Model: node.Target, Total: snap.KVBlocksTotal, BlockTokens: 16, UnitBytes: snap.KVBlockBytes, DType: "f32"},
		{Name: "state", Kind: "state", Model: node.Target, Total: snap.StateSlotsTotal, UnitBytes: snap.StateSlotBytes, DType: "f32"},
	}
	if diff := cmp.Diff(want, got.CacheGroups); diff != "" || snap.StateSlotsTotal == 0 {
		t.Errorf("cache groups (-want +got):\n%s", diff)
	}
}
