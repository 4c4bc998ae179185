package httpfront_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/vision"
)

// fakeTower stands in for a vision tower on a text model: it records the
// context and encode flag of each call and tokenizes the prompt as text.
type fakeTower struct {
	mu       sync.Mutex
	encodes  []bool
	deadline []bool
}

func (f *fakeTower) encoder(s *server) httpfront.ImageEncoder {
	return func(ctx context.Context, prompt string, images [][]byte, addSpecial bool, lim vision.DecodeLimits, encode bool) ([]int32, []engine.Image, []vision.Chunk, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		_, ok := ctx.Deadline()
		f.encodes, f.deadline = append(f.encodes, encode), append(f.deadline, ok)
		for i, data := range images {
			if _, _, err := vision.Decode(data, lim); err != nil {
				return nil, nil, nil, &vision.ImageError{Index: i, Err: err}
			}
		}
		return s.inst.Tokenizer.Encode(prompt, addSpecial, true), nil, nil, nil
	}
}

// withTower serves s's model with a fake vision tower.
func withTower(s *server) *fakeTower {
	f := &fakeTower{}
	s.srv.SetModel(&httpfront.Model{ID: s.id, Engine: s.inst.Engine, Tokenizer: s.inst.Tokenizer, Chat: s.inst.Chat, Created: time.Unix(1, 0), Plan: s.inst.Plan, Images: f.encoder(s)})
	return f
}

// grayPNG is a w x h grey PNG.
func grayPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageHost serves /a.png, counting requests, after holding each for hold.
func imageHost(t *testing.T, hold time.Duration) (*httptest.Server, *atomic.Int32) {
	var hits atomic.Int32
	img := grayPNG(t, 4, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-time.After(hold):
		case <-r.Context().Done():
		}
		w.Write(img)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func imageChat(model, url string) string {
	return `{"model":"` + model + `","max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
}

// TestImagesAfterAdmission: a request the full queue refuses fetches no
// image; an image fetch ends at the request's deadline (504), not at the
// fetch timeout; the tower runs under the request's deadline.
func TestImagesAfterAdmission(t *testing.T) {
	host, hits := imageHost(t, 0)
	media := httpfront.MediaOptions{AllowedDomains: []string{"127.0.0.1"}}
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{MaxQueue: 1, Media: media}, 1)
	tower := withTower(s)
	cancel := s.fillQueue(t)
	defer cancel()
	for _, path := range []string{"/v1/chat/completions", "/v1/messages"} {
		body := imageChat(s.id, host.URL+"/a.png")
		if path == "/v1/messages" {
			body = `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"` + host.URL + `/a.png"}}]}]}`
		}
		status, doc := s.call(t, "POST", path, body)
		if status != 429 || hits.Load() != 0 {
			t.Errorf("%s with the queue full: status %d %v, %d image fetches; want 429 and none", path, status, doc, hits.Load())
		}
	}
	cancel()
	s.waitIdle(t)

	status, doc := s.call(t, "POST", "/v1/chat/completions", imageChat(s.id, host.URL+"/a.png"))
	if status != 200 || hits.Load() != 1 {
		t.Errorf("admitted: status %d %v, %d image fetches; want 200 and 1", status, doc, hits.Load())
	}
	if diff := cmp.Diff([]bool{true}, tower.deadline); diff != "" {
		t.Errorf("the tower's context had a deadline (-want +got):\n%s", diff)
	}

	slow, _ := imageHost(t, time.Minute)
	s2 := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{Timeout: 300 * time.Millisecond, Media: media}, 1)
	withTower(s2)
	began := time.Now()
	status, doc = s2.call(t, "POST", "/v1/chat/completions", imageChat(s2.id, slow.URL+"/a.png"))
	if took := time.Since(began); status != 504 || errorOf(doc)["code"] != "deadline_exceeded" || took > 5*time.Second {
		t.Errorf("a slow image: status %d %v after %v, want 504 deadline_exceeded at the 300ms deadline", status, doc, took)
	}
}

// TestImagesOnlyCountedOrRendered: count_tokens sizes the images without
// running the tower; /apply-template renders the text without reading
// them.
func TestImagesOnlyCountedOrRendered(t *testing.T) {
	host, hits := imageHost(t, 0)
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{Media: httpfront.MediaOptions{AllowedDomains: []string{"127.0.0.1"}}}, 1)
	tower := withTower(s)
	status, doc := s.call(t, "POST", "/apply-template", imageChat(s.id, host.URL+"/a.png"))
	if status != 200 || !strings.Contains(doc["prompt"].(string), vision.MediaMarker) || hits.Load() != 0 {
		t.Errorf("/apply-template: status %d %v, %d image fetches; want 200, the marker, none", status, doc, hits.Load())
	}
	status, doc = s.call(t, "POST", "/v1/messages/count_tokens", `{"model":"`+s.id+`","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"`+host.URL+`/a.png"}}]}]}`)
	if status != 200 || doc["input_tokens"].(float64) <= 0 {
		t.Errorf("count_tokens: status %d %v", status, doc)
	}
	if diff := cmp.Diff([]bool{false}, tower.encodes); diff != "" {
		t.Errorf("encode flags (-want +got):\n%s", diff)
	}
	// An image a tool returned counts as the image it is.
	toolTurn := func(result string) string {
		return `{"model":"` + s.id + `","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"shot"}` + result + `]}]}]}`
	}
	_, text := s.call(t, "POST", "/v1/messages/count_tokens", toolTurn(""))
	status, withImage := s.call(t, "POST", "/v1/messages/count_tokens", toolTurn(`,{"type":"image","source":{"type":"url","url":"`+host.URL+`/a.png"}}`))
	if status != 200 || withImage["input_tokens"].(float64) <= text["input_tokens"].(float64) {
		t.Errorf("count_tokens of a tool result with an image: %d %v, without %v", status, withImage, text)
	}
}

// TestImageErrorsNameTheAPIsField: an image the tower refuses (over the
// pixel limit) is a 400 naming the image's field in each API's names,
// after a system prompt, instructions and a tool result.
func TestImageErrorsNameTheAPIsField(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{Media: httpfront.MediaOptions{MaxImagePixels: 32}}, 1)
	withTower(s)
	small := base64.StdEncoding.EncodeToString(grayPNG(t, 4, 4))
	big := base64.StdEncoding.EncodeToString(grayPNG(t, 8, 8))
	block := func(data string) string {
		return `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + data + `"}}`
	}
	part := func(data string) string {
		return `{"type":"input_image","image_url":"data:image/png;base64,` + data + `"}`
	}
	for _, tc := range []struct{ name, path, body, param string }{
		{"messages after system", "/v1/messages", `{"model":"` + s.id + `","max_tokens":2,"system":"Be brief.","messages":[{"role":"user","content":[` + block(big) + `]}]}`,
			"messages[0].content[0].source"},
		{"messages, the second image", "/v1/messages", `{"model":"` + s.id + `","max_tokens":2,"system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"a"},` + block(small) + `]},{"role":"assistant","content":"b"},{"role":"user","content":[{"type":"text","text":"c"},` + block(big) + `]}]}`,
			"messages[2].content[1].source"},
		{"messages after a tool result", "/v1/messages", `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"and"},` + block(big) + `]}]}`,
			"messages[2].content[2].source"},
		{"messages, an image a tool returned", "/v1/messages", `{"model":"` + s.id + `","max_tokens":2,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"shot"},` + block(small) + `,` + block(big) + `]}]}]}`,
			"messages[2].content[0].content[2].source"},
		{"responses after instructions", "/v1/responses", `{"model":"` + s.id + `","max_output_tokens":2,"instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"a"},` + part(big) + `]}]}`,
			"input[0].content[1].image_url"},
	} {
		status, doc := s.call(t, "POST", tc.path, tc.body)
		e := errorOf(doc)
		param, _ := e["param"].(string)
		if tc.path == "/v1/messages" {
			// Anthropic errors name no param; the message quotes it.
			param = ""
			if msg, _ := e["message"].(string); strings.Contains(msg, "'"+tc.param+"'") {
				param = tc.param
			}
		}
		if status != 400 || param != tc.param || !strings.Contains(e["message"].(string), "pixel limit") {
			t.Errorf("%s: status %d %v, want 400 naming %s", tc.name, status, e, tc.param)
		}
	}
}

// TestImageFetchEndsWithItsClient: a client that leaves while its image
// is fetched ends the fetch.
func TestImageFetchEndsWithItsClient(t *testing.T) {
	fetchEnded := make(chan struct{})
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(fetchEnded)
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(host.Close)
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{Media: httpfront.MediaOptions{AllowedDomains: []string{"127.0.0.1"}}}, 1)
	withTower(s)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/chat/completions", strings.NewReader(imageChat(s.id, host.URL+"/a.png")))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d before the image was fetched", resp.StatusCode)
	}
	select {
	case <-fetchEnded:
	case <-time.After(5 * time.Second):
		t.Error("the image fetch outlived its client by 5s")
	}
}
