package httpfront

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/vision"
)

// pngBytes is a w x h grey PNG.
func pngBytes(t *testing.T, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// chatWithParts is a chat request whose one user message has parts.
func chatWithParts(parts ...string) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`)
}

func imagePart(url string) string {
	return fmt.Sprintf(`{"type":"image_url","image_url":{"url":%q}}`, url)
}

// decodeAndLoad is DecodeChat with the request's images read, as the
// chat handler reads them once the request is admitted.
func decodeAndLoad(body []byte, o DecodeOptions) (*ChatRequest, *Error) {
	r, e := DecodeChat(body, o)
	if e == nil && r.Images != nil {
		e = r.Images.load(context.Background())
	}
	return r, e
}

func TestChatImagePartsJoinAsLlamaServer(t *testing.T) {
	data := pngBytes(t, 4, 4)
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
	r, e := DecodeChat(chatWithParts(`{"type":"text","text":"Compare"}`, `{"type":"text","text":"these."}`, imagePart(url), imagePart(url)), DecodeOptions{})
	if e != nil {
		t.Fatal(e)
	}
	if diff := cmp.Diff("Compare\nthese.<__media__><__media__>", r.Messages[0].Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]byte{data, data}, r.Images.Data); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"messages[0].content[2].image_url.url", "messages[0].content[3].image_url.url"}, r.Images.Fields); diff != "" {
		t.Errorf("image fields (-want +got):\n%s", diff)
	}
}

// TestChatImagesRefusedNamingTheField: every bad image is a 400 naming
// its field, never a panic.
func TestChatImagesRefusedNamingTheField(t *testing.T) {
	dir := t.TempDir()
	inside := filepath.Join(dir, "in.png")
	if err := os.WriteFile(inside, pngBytes(t, 4, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "out.png")
	if err := os.WriteFile(outside, pngBytes(t, 4, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.png")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.png"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a b.png"), pngBytes(t, 4, 4), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngBytes(t, 4, 4))
	big := "data:image/png;base64," + strings.Repeat("A", 4000)
	field := "messages[0].content[0].image_url.url"
	for _, tc := range []struct {
		name, body, param, message string
		media                      MediaOptions
	}{
		{"remote url", string(chatWithParts(imagePart("https://example.com/a.png"))), field, "--allowed-media-domains", MediaOptions{}},
		{"bad data url", string(chatWithParts(imagePart("data:image/png;base64"))), field, "malformed image data URL", MediaOptions{}},
		{"other media type", string(chatWithParts(imagePart("data:image/bmp;base64,AAAA"))), field, "unsupported image format", MediaOptions{}},
		{"over the byte limit", string(chatWithParts(imagePart(big))), field, "byte limit", MediaOptions{MaxImageBytes: 1000}},
		{"too many images", string(chatWithParts(imagePart(ok), imagePart(ok))), "messages[0].content[1].image_url.url", "at most 1", MediaOptions{MaxImages: 1}},
		{"local file without a folder", string(chatWithParts(imagePart("file://" + inside))), field, "--allowed-local-media-path", MediaOptions{}},
		{"local file outside the folder", string(chatWithParts(imagePart("file://" + outside))), field, "outside the allowed local media path", MediaOptions{LocalPath: dir}},
		{"escape by dots", string(chatWithParts(imagePart("file://" + dir + "/../" + filepath.Base(filepath.Dir(outside)) + "/out.png"))), field, "outside", MediaOptions{LocalPath: dir}},
		{"link inside the folder to a file outside", string(chatWithParts(imagePart("file://" + dir + "/link.png"))), field, "outside the allowed local media path", MediaOptions{LocalPath: dir}},
		{"fifo", string(chatWithParts(imagePart("file://" + dir + "/fifo.png"))), field, "not a regular file", MediaOptions{LocalPath: dir}},
		{"folder", string(chatWithParts(imagePart("file://" + dir))), field, "not a regular file", MediaOptions{LocalPath: dir}},
		{"local file over the byte limit", string(chatWithParts(imagePart("file://" + inside))), field, "byte limit", MediaOptions{LocalPath: dir, MaxImageBytes: 10}},
		{"file url with a host", string(chatWithParts(imagePart("file://example.com" + inside))), field, "file:///absolute/path", MediaOptions{LocalPath: dir}},
		{"missing local file", string(chatWithParts(imagePart("file://" + dir + "/none.png"))), field, "no such file", MediaOptions{LocalPath: dir}},
		{"image part without url", string(chatWithParts(`{"type":"image_url","image_url":{}}`)), "messages[0].content[0]", "needs", MediaOptions{}},
		{"marker in text beside an image", string(chatWithParts(`{"type":"text","text":"a <__media__> b"}`, imagePart(ok))), "messages[0].content[0]", "stands for an image", MediaOptions{}},
		{"marker in another message", `{"model":"m","messages":[{"role":"system","content":"<__media__>"},{"role":"user","content":[` + imagePart(ok) + `]}]}`, "messages[0].content", "stands for an image", MediaOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, e := decodeAndLoad([]byte(tc.body), DecodeOptions{Media: tc.media})
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != 400 || e.Param != tc.param || !strings.Contains(e.Message, tc.message) {
				t.Errorf("got %d %v %q, want 400 %s containing %q", e.Status, e.Param, e.Message, tc.param, tc.message)
			}
		})
	}
	r, e := decodeAndLoad(chatWithParts(imagePart("file://"+inside)), DecodeOptions{Media: MediaOptions{LocalPath: dir}})
	if e != nil || r.Images == nil || len(r.Images.Data) != 1 {
		t.Errorf("a file inside the folder: %v", e)
	}
	r, e = decodeAndLoad(chatWithParts(imagePart("file://"+dir+"/a%20b.png")), DecodeOptions{Media: MediaOptions{LocalPath: dir}})
	if e != nil || r.Images == nil || len(r.Images.Data) != 1 {
		t.Errorf("a percent-encoded file name: %v", e)
	}
	if _, e := DecodeChat(chatWithParts(`{"type":"text","text":"<__media__> is plain text here"}`), DecodeOptions{}); e != nil {
		t.Errorf("the marker in a request without images: %v", e)
	}
}

// TestEncodeImagesNamesTheImage: a decode error of the encoder is a 400
// naming the image's field, a model without a tower refuses images; a
// failure of the tower or the model is a 500, the request's context
// ending is its abort error; a token count runs no tower.
func TestEncodeImagesNamesTheImage(t *testing.T) {
	ri := &ChatImages{Data: [][]byte{{1}, {2}}, URLs: []string{"data:a", "data:b"}, Fields: []string{"a", "b"}}
	m := &Model{Tokenizer: &tok.Tokenizer{}}
	if _, e := encodeImages(context.Background(), m, "", nil, ri, &Params{}, false); e == nil || e.Param != "a" || !strings.Contains(e.Message, "--mmproj") {
		t.Errorf("no tower: %v", e)
	}
	var encodeErr error
	var encoded []bool
	m.Images = func(_ context.Context, _ string, _ [][]byte, _ bool, _ vision.DecodeLimits, encode bool) ([]int32, []engine.Image, []vision.Chunk, error) {
		encoded = append(encoded, encode)
		return []int32{1}, nil, nil, encodeErr
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		err    error
		status int
		param  any
		text   string
	}{
		{"image 1 too large", context.Background(), &vision.ImageError{Index: 1, Err: vision.ErrTooLarge}, 400, "b", "pixel limit"},
		{"markers not one per image", context.Background(), fmt.Errorf("%w: 1 for 2", vision.ErrMarkerCount), 400, "messages", "place each image once"},
		{"the tower fails", context.Background(), errors.New("cuda: out of memory"), 500, nil, "out of memory"},
		{"no image pad token", context.Background(), errors.New("model m has no <|image_pad|> token"), 500, nil, "image_pad"},
		{"the request ended", cancelled, context.Canceled, 499, nil, "cancelled"},
	} {
		encodeErr = tc.err
		_, e := encodeImages(tc.ctx, m, "", nil, ri, &Params{}, false)
		if e == nil || e.Status != tc.status || e.Param != tc.param || !strings.Contains(e.Message, tc.text) {
			t.Errorf("%s: %+v, want %d naming %v containing %q", tc.name, e, tc.status, tc.param, tc.text)
		}
	}
	encodeErr, encoded = nil, nil
	p := &Params{}
	if _, e := encodeImages(context.Background(), m, "", nil, ri, p, true); e != nil || p.Vision.Images != 0 {
		t.Errorf("count: %v, vision %+v", e, p.Vision)
	}
	if diff := cmp.Diff([]bool{false}, encoded); diff != "" {
		t.Errorf("encode flags of a count (-want +got):\n%s", diff)
	}
}

// TestRemoteImagesOnlyFromAllowedDomains: an http(s) image URL is fetched
// from an allowed host (within the byte limit, redirects only to allowed
// hosts) and refused otherwise, naming the field.
func TestRemoteImagesOnlyFromAllowedDomains(t *testing.T) {
	img := pngBytes(t, 4, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a.png":
			w.Write(img)
		case "/big.png":
			w.Write(make([]byte, 5000))
		case "/away":
			http.Redirect(w, r, strings.Replace("http://"+r.Host+"/a.png", "127.0.0.1", "localhost", 1), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	allowed := MediaOptions{AllowedDomains: []string{"127.0.0.1"}, MaxImageBytes: 4000}
	r, e := decodeAndLoad(chatWithParts(imagePart(srv.URL+"/a.png")), DecodeOptions{Media: allowed})
	if e != nil {
		t.Fatal(e)
	}
	if diff := cmp.Diff([][]byte{img}, r.Images.Data); diff != "" {
		t.Errorf("fetched image (-want +got):\n%s", diff)
	}
	field := "messages[0].content[0].image_url.url"
	for _, tc := range []struct {
		name, url, message string
		media              MediaOptions
	}{
		{"no allow-list", srv.URL + "/a.png", "--allowed-media-domains", MediaOptions{}},
		{"another host", "https://example.com/a.png", "--allowed-media-domains", allowed},
		{"a redirect to another host", srv.URL + "/away", "redirected outside", allowed},
		{"not found", srv.URL + "/none.png", "404", allowed},
		{"over the byte limit", srv.URL + "/big.png", "byte limit", allowed},
	} {
		_, e := decodeAndLoad(chatWithParts(imagePart(tc.url)), DecodeOptions{Media: tc.media})
		if e == nil || e.Status != 400 || e.Param != field || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%s: %v, want 400 %s containing %q", tc.name, e, field, tc.message)
		}
	}
}

// TestAnthropicImageBlocksNamedBySource: a bad image block of /v1/messages
// is a 400 naming the block's source.
func TestAnthropicImageBlocksNamedBySource(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]}]}`, "messages[0].content[0].source"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yes"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"image","source":{"type":"url","url":"https://example.com/y.png"}}]}]}`, "messages[2].content[2].source"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file"}}]}]}`, "messages[0].content[0].source.type"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"},{"type":"text","text":"and"},{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]}]}`, "messages[2].content[2].source"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"shot:"},{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"AAAA"}}]}]}]}`, "messages[2].content[0].content[1].source"},
		{`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{}}]}]}]}`, "messages[2].content[0].content[0].type"},
	} {
		_, e := DecodeMessages([]byte(tc.body), DecodeOptions{}, false)
		if e == nil || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: %v, want 400 naming %s", tc.body, e, tc.param)
		}
	}
	r, e := DecodeMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+
		base64.StdEncoding.EncodeToString(pngBytes(t, 2, 2))+`"}},{"type":"text","text":"b"}]}]}`), DecodeOptions{}, false)
	if e != nil {
		t.Fatal(e)
	}
	if diff := cmp.Diff("a<__media__>b", r.Chat.Messages[0].Content); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	// A tool's result may be an image: it reaches the tool message.
	r, e = DecodeMessages([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},`+
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"shot:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+
		base64.StdEncoding.EncodeToString(pngBytes(t, 2, 2))+`"}}]}]}]}`), DecodeOptions{}, false)
	if e != nil {
		t.Fatal(e)
	}
	tool := r.Chat.Messages[2]
	if diff := cmp.Diff([]string{"tool", "shot:<__media__>"}, []string{tool.Role, tool.Content}); diff != "" || r.Chat.Images == nil || len(r.Chat.Images.Fields) != 1 {
		t.Errorf("tool message (-want +got):\n%s\nimages %+v", diff, r.Chat.Images)
	} else if f := r.Chat.Images.Fields[0]; f != "messages[2].content[0].content[1].source" {
		t.Errorf("the image's field is %q", f)
	}
}
