package httpfront_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
)

// /tokenize and /detokenize answer in llama-server's shapes and round-trip
// text; they need the API key as /v1/ calls do.
func TestTokenizeAndDetokenize(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{APIKey: "k"}, 1)
	tk := s.inst.Tokenizer
	auth := []string{"Authorization", "Bearer k"}
	text := "Hello <|im_start|>wörld"
	status, doc := s.call(t, "POST", "/tokenize", `{"content":"Hello <|im_start|>wörld"}`, auth...)
	want := tk.Encode(text, false, true)
	var got []int32
	b, _ := json.Marshal(doc["tokens"])
	json.Unmarshal(b, &got)
	if status != 200 || !cmp.Equal(want, got) || doc["count"] != float64(len(want)) || doc["max_model_len"] != float64(s.inst.Engine.ContextLength()) {
		t.Fatalf("/tokenize: status %d %v, want tokens %v", status, doc, want)
	}
	_, doc = s.call(t, "POST", "/tokenize", `{"content":"<|im_start|>","parse_special":false,"add_special":true}`, auth...)
	b, _ = json.Marshal(doc["tokens"])
	json.Unmarshal(b, &got)
	if want := tk.Encode("<|im_start|>", true, false); !cmp.Equal(want, got) {
		t.Errorf("parse_special false: tokens %v, want %v", got, want)
	}
	_, doc = s.call(t, "POST", "/tokenize", `{"content":"ö","with_pieces":true}`, auth...)
	pieces := doc["tokens"].([]any)
	var joined []byte
	for _, p := range pieces {
		switch v := p.(map[string]any)["piece"].(type) {
		case string:
			joined = append(joined, v...)
		case []any: // bytes of a piece that is not valid UTF-8 alone
			for _, c := range v {
				joined = append(joined, byte(c.(float64)))
			}
		}
	}
	if string(joined) != "ö" {
		t.Errorf("with_pieces: pieces %v join to %q", pieces, joined)
	}
	ids, _ := json.Marshal(want)
	status, doc = s.call(t, "POST", "/detokenize", `{"tokens":`+string(ids)+`}`, auth...)
	if status != 200 || doc["content"] != text {
		t.Errorf("/detokenize: status %d %v, want %q", status, doc, text)
	}
	for _, tc := range []struct {
		name, path, body string
		header           []string
		status           int
		param            any
	}{
		{"no API key", "/tokenize", `{"content":"x"}`, nil, 401, nil},
		{"no content", "/tokenize", `{}`, auth, 400, "content"},
		{"content that is not a string", "/tokenize", `{"content":5}`, auth, 400, "content"},
		{"an id outside the vocabulary", "/detokenize", `{"tokens":[999999]}`, auth, 400, "tokens"},
		{"no tokens", "/detokenize", `{}`, auth, 400, "tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, "POST", tc.path, tc.body, tc.header...)
			if e := errorOf(doc); status != tc.status || e == nil || e["param"] != tc.param {
				t.Errorf("status %d %v, want %d naming %v", status, doc, tc.status, tc.param)
			}
		})
	}
}

// CORS: allowed origins get their origin back (with credentials), "*"
// gets "*" without credentials, others nothing; preflights are answered.
func TestCORS(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{AllowedOrigins: []string{"https://app.example"}}, 1)
	star := start(t, "stories260K.gguf", httpfront.Config{AllowedOrigins: []string{"*"}}, 1)
	none := start(t, "stories260K.gguf", httpfront.Config{}, 1)
	do := func(srv *server, method, origin string, preflight bool) *http.Response {
		req, _ := http.NewRequest(method, srv.url+"/v1/models", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if preflight {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name              string
		srv               *server
		method, origin    string
		preflight         bool
		status            int
		allowOrigin, cred string
		allowHeaders      string
	}{
		{"an allowed origin's preflight", s, "OPTIONS", "https://app.example", true, 204, "https://app.example", "true", "authorization, content-type"},
		{"an allowed origin's GET", s, "GET", "https://app.example", false, 200, "https://app.example", "true", ""},
		{"another origin's preflight", s, "OPTIONS", "https://evil.example", true, 403, "", "", ""},
		{"another origin's GET is served without CORS headers", s, "GET", "https://evil.example", false, 200, "", "", ""},
		{"any origin without credentials", star, "OPTIONS", "https://evil.example", true, 204, "*", "", "authorization, content-type"},
		{"no allowed origins: no CORS", none, "GET", "https://app.example", false, 200, "", "", ""},
		{"no allowed origins: OPTIONS is not a method of the path", none, "OPTIONS", "https://app.example", true, 405, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := do(tc.srv, tc.method, tc.origin, tc.preflight)
			h := resp.Header
			if resp.StatusCode != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allowOrigin ||
				h.Get("Access-Control-Allow-Credentials") != tc.cred || h.Get("Access-Control-Allow-Headers") != tc.allowHeaders {
				t.Errorf("status %d, headers %v", resp.StatusCode, h)
			}
			if tc.preflight && tc.status == 204 && !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
				t.Errorf("Allow-Methods %q", h.Get("Access-Control-Allow-Methods"))
			}
		})
	}
}
