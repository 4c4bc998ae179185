package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/vision"
)

// MediaOptions bound a request's images and say where they may come from.
type MediaOptions struct {
	// MaxImages is the most images one request may carry. Default 8.
	MaxImages int
	// MaxImageBytes bounds each image file (a data URL's decoded payload,
	// a local file). Default 10 MiB.
	MaxImageBytes int
	// MaxImagePixels bounds each image's width x height, checked on its
	// header before any pixel is decoded. Default vision.DefaultMaxPixels.
	MaxImagePixels int
	// LocalPath, when set, lets images be file:// URLs of files inside
	// that folder (vLLM's --allowed-local-media-path); others are refused.
	LocalPath string
	// AllowedDomains are the hosts whose http(s) image URLs the server
	// fetches (vLLM's --allowed-media-domains), redirects included; other
	// remote URLs are refused. None by default.
	AllowedDomains []string
}

// fetchTimeout bounds fetching one remote image.
const fetchTimeout = 10 * time.Second

// Media defaults.
const (
	DefaultMaxImages     = 8
	DefaultMaxImageBytes = 10 << 20
)

func (o MediaOptions) withDefaults() MediaOptions {
	if o.MaxImages <= 0 {
		o.MaxImages = DefaultMaxImages
	}
	if o.MaxImageBytes <= 0 {
		o.MaxImageBytes = DefaultMaxImageBytes
	}
	if o.MaxImagePixels <= 0 {
		o.MaxImagePixels = vision.DefaultMaxPixels
	}
	return o
}

// ImageEncoder tokenizes a rendered prompt holding one vision.MediaMarker
// per image and encodes the images (file bytes, within the pixel limit)
// with the model's vision tower: the prompt ids and the engine's images.
// An error of one image is a *vision.ImageError.
// addSpecial says whether the prompt's first piece gets the special tokens
// (BOS), as tok.Tokenizer.Encode's.
type ImageEncoder func(ctx context.Context, prompt string, images [][]byte, addSpecial bool, lim vision.DecodeLimits) ([]int32, []engine.Image, error)

// requestImages collects the images of a request's messages in order,
// with the field each came from.
type requestImages struct {
	opts   MediaOptions
	data   [][]byte
	params []string
	marker string // the first field whose text holds vision.MediaMarker
}

// add reads the image of an image_url part's url at param.
func (ri *requestImages) add(url, param string) *Error {
	if len(ri.data) == ri.opts.MaxImages {
		return badParam(param, "Too many images: a request may carry at most %d.", ri.opts.MaxImages)
	}
	data, e := ri.read(url, param)
	if e != nil {
		return e
	}
	ri.data, ri.params = append(ri.data, data), append(ri.params, param)
	return nil
}

// read returns the bytes of a data URL, or of a file:// URL inside
// MediaOptions.LocalPath.
func (ri *requestImages) read(url, param string) ([]byte, *Error) {
	if strings.HasPrefix(url, "file://") {
		u, err := neturl.Parse(url)
		if err != nil || (u.Host != "" && u.Host != "localhost") {
			return nil, badParam(param, "Invalid '%s': a file URL is file:///absolute/path (percent-encoded).", param)
		}
		return ri.readLocal(u.Path, param)
	}
	data, err := vision.ParseImageURL(url, ri.opts.MaxImageBytes)
	switch {
	case errors.Is(err, vision.ErrRemoteURL):
		return ri.fetch(url, param)
	case err != nil:
		return nil, badParam(param, "Invalid '%s': %v.", param, err)
	}
	return data, nil
}

// allowed reports whether host is one of AllowedDomains.
func (o MediaOptions) allowed(host string) bool {
	for _, d := range o.AllowedDomains {
		if strings.EqualFold(d, host) {
			return true
		}
	}
	return false
}

// fetch downloads a remote image from an allowed host, within the byte
// limit and fetchTimeout; a redirect to another host is refused.
func (ri *requestImages) fetch(raw, param string) ([]byte, *Error) {
	u, err := neturl.Parse(raw)
	if err != nil || !ri.opts.allowed(u.Hostname()) {
		return nil, badParam(param, "Invalid '%s': remote image URLs are fetched only from the server's --allowed-media-domains; send the image as a data URL (data:image/png;base64,...).", param)
	}
	client := &http.Client{Timeout: fetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || !ri.opts.allowed(req.URL.Hostname()) {
			return errors.New("redirected outside the allowed media domains")
		}
		return nil
	}}
	resp, err := client.Get(u.String())
	if err != nil {
		return nil, badParam(param, "Invalid '%s': fetching the image failed: %v.", param, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, badParam(param, "Invalid '%s': fetching the image answered %s.", param, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(ri.opts.MaxImageBytes)+1))
	switch {
	case err != nil:
		return nil, badParam(param, "Invalid '%s': fetching the image failed: %v.", param, err)
	case len(data) > ri.opts.MaxImageBytes:
		return nil, badParam(param, "Invalid '%s': %v: more than %d bytes.", param, vision.ErrImageBytes, ri.opts.MaxImageBytes)
	}
	return data, nil
}

// readLocal reads the file at path if it lies inside LocalPath (after
// resolving links) and within the byte limit.
func (ri *requestImages) readLocal(path, param string) ([]byte, *Error) {
	if ri.opts.LocalPath == "" {
		return nil, badParam(param, "Invalid '%s': local files are not served (the server has no --allowed-local-media-path).", param)
	}
	root, err := filepath.EvalSymlinks(ri.opts.LocalPath)
	if err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: fmt.Sprintf("The allowed local media path cannot be read: %v", err)}
	}
	abs, err := filepath.EvalSymlinks(filepath.Clean(path))
	if err != nil || !filepath.IsAbs(path) {
		return nil, badParam(param, "Invalid '%s': no such file in the allowed local media path.", param)
	}
	if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, badParam(param, "Invalid '%s': the file is outside the allowed local media path.", param)
	}
	// Stat before opening: opening a FIFO or a device could block.
	st, err := os.Stat(abs)
	switch {
	case err != nil:
		return nil, badParam(param, "Invalid '%s': no such file in the allowed local media path.", param)
	case !st.Mode().IsRegular():
		return nil, badParam(param, "Invalid '%s': not a regular file.", param)
	case st.Size() > int64(ri.opts.MaxImageBytes):
		return nil, badParam(param, "Invalid '%s': %v: %d bytes, limit %d.", param, vision.ErrImageBytes, st.Size(), ri.opts.MaxImageBytes)
	}
	f, err := os.Open(abs)
	if err != nil {
		return nil, badParam(param, "Invalid '%s': no such file in the allowed local media path.", param)
	}
	defer f.Close()
	if opened, err := f.Stat(); err != nil || !os.SameFile(st, opened) {
		return nil, badParam(param, "Invalid '%s': the file changed while it was opened.", param)
	}
	data := make([]byte, st.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: fmt.Sprintf("Reading '%s' failed: %v", param, err)}
	}
	return data, nil
}

// VisionTiming is when a request's images were decoded and encoded by
// the vision tower (the vision span, timings.vision_ms); zero without
// images.
type VisionTiming struct {
	Images     int
	Start, End time.Time
}

// ChatImages are the images of a chat request's messages, in order.
type ChatImages struct {
	Data   [][]byte // each image's file bytes
	Fields []string // the field each came from ("messages[0].content[1].image_url.url")
	// MaxPixels bounds each image's width x height (MediaOptions).
	MaxPixels int
}

// encodeImages turns a rendered chat prompt with images into its ids,
// setting p.Images: a 400 naming the image's field for a bad image, or
// the messages when the model reads no images.
func encodeImages(ctx context.Context, m *Model, text string, ci *ChatImages, p *Params) ([]int32, *Error) {
	if m.Images == nil {
		return nil, badParam(ci.Fields[0], "Invalid '%s': this model takes no images (the server has no --mmproj vision tower).", ci.Fields[0])
	}
	start := time.Now()
	ids, imgs, err := m.Images(ctx, text, ci.Data, m.Tokenizer.ChatAddsSpecial(text), vision.DecodeLimits{MaxPixels: ci.MaxPixels})
	p.Vision = VisionTiming{Images: len(ci.Data), Start: start, End: time.Now()}
	var ie *vision.ImageError
	switch {
	case errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(ci.Fields):
		return nil, badParam(ci.Fields[ie.Index], "Invalid '%s': %v.", ci.Fields[ie.Index], ie.Err)
	case err != nil:
		return nil, badParam("messages", "The images could not be placed in the prompt: %v", err)
	}
	p.Images = imgs
	return ids, nil
}

// imagePartURL returns an OpenAI image_url part's url.
func imagePartURL(raw []byte, param string) (string, *Error) {
	var part struct {
		ImageURL *struct {
			URL *string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(raw, &part); err != nil || part.ImageURL == nil || part.ImageURL.URL == nil {
		return "", badParam(param, "Invalid content part '%s': an image_url part needs {\"image_url\": {\"url\": \"data:image/...;base64,...\"}}.", param)
	}
	return *part.ImageURL.URL, nil
}

// noteMarker remembers the first field whose text holds the media marker:
// in a request with images it would stand for an image the request does
// not carry (markerError).
func (ri *requestImages) noteMarker(text, param string) {
	if ri.marker == "" && strings.Contains(text, vision.MediaMarker) {
		ri.marker = param
	}
}

// markerError refuses a request with images whose text holds the media
// marker; nil otherwise (without images the marker is plain text).
func (ri *requestImages) markerError() *Error {
	if ri.marker == "" || len(ri.data) == 0 {
		return nil
	}
	return badParam(ri.marker, "Invalid '%s': the text holds %q, which stands for an image in a request with images.", ri.marker, vision.MediaMarker)
}
