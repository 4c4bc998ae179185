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
// (BOS), as tok.Tokenizer.Encode's. Without encode the images are only
// decoded and sized: the same ids, no engine images. The chunks are
// vision.SplitPrompt's for prompt (nil when the ids are cut otherwise:
// then the prompt has no message ends).
type ImageEncoder func(ctx context.Context, prompt string, images [][]byte, addSpecial bool, lim vision.DecodeLimits, encode bool) ([]int32, []engine.Image, []vision.Chunk, error)

// requestImages collects the images of a request's messages in order,
// with the field each came from. A data URL's bytes are decoded from the
// body at once; a file or remote image is only named here and read by
// ChatImages.load, once the request is admitted.
type requestImages struct {
	opts   MediaOptions
	data   [][]byte // nil for an image still to load
	urls   []string // each image's URL
	params []string
	marker string // the first field whose text holds vision.MediaMarker
}

// add takes the image of an image_url part's url at param.
func (ri *requestImages) add(url, param string) *Error {
	if len(ri.urls) == ri.opts.MaxImages {
		return badParam(param, "Too many images: a request may carry at most %d.", ri.opts.MaxImages)
	}
	var data []byte
	if !strings.HasPrefix(url, "file://") {
		var err error
		data, err = vision.ParseImageURL(url, ri.opts.MaxImageBytes)
		switch {
		case errors.Is(err, vision.ErrRemoteURL):
			if e := ri.opts.checkRemote(url, param); e != nil {
				return e
			}
		case err != nil:
			return badParam(param, "Invalid '%s': %v.", param, err)
		}
	}
	ri.data, ri.urls, ri.params = append(ri.data, data), append(ri.urls, url), append(ri.params, param)
	return nil
}

// images are the collected images; nil without any.
func (ri *requestImages) images() *ChatImages {
	if len(ri.urls) == 0 {
		return nil
	}
	return &ChatImages{Data: ri.data, URLs: ri.urls, Fields: ri.params, Media: ri.opts}
}

// load reads the images not read yet (files, remote URLs) within ctx.
func (ci *ChatImages) load(ctx context.Context) *Error {
	for i, url := range ci.URLs {
		if ci.Data[i] != nil {
			continue
		}
		var e *Error
		if strings.HasPrefix(url, "file://") {
			ci.Data[i], e = ci.Media.readLocal(url, ci.Fields[i])
		} else {
			ci.Data[i], e = ci.Media.fetch(ctx, url, ci.Fields[i])
		}
		if e != nil {
			return e
		}
	}
	return nil
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

// checkRemote refuses a remote image URL whose host is not allowed.
func (o MediaOptions) checkRemote(raw, param string) *Error {
	if u, err := neturl.Parse(raw); err != nil || !o.allowed(u.Hostname()) {
		return badParam(param, "Invalid '%s': remote image URLs are fetched only from the server's --allowed-media-domains; send the image as a data URL (data:image/png;base64,...).", param)
	}
	return nil
}

// fetch downloads a remote image from an allowed host, within the byte
// limit, fetchTimeout and ctx; a redirect to another host is refused.
func (o MediaOptions) fetch(ctx context.Context, raw, param string) ([]byte, *Error) {
	if e := o.checkRemote(raw, param); e != nil {
		return nil, e
	}
	client := &http.Client{Timeout: fetchTimeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 || !o.allowed(req.URL.Hostname()) {
			return errors.New("redirected outside the allowed media domains")
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, badParam(param, "Invalid '%s': %v.", param, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, abortError(ctx)
		}
		return nil, badParam(param, "Invalid '%s': fetching the image failed: %v.", param, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, badParam(param, "Invalid '%s': fetching the image answered %s.", param, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, int64(o.MaxImageBytes)+1))
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, abortError(ctx)
	case err != nil:
		return nil, badParam(param, "Invalid '%s': fetching the image failed: %v.", param, err)
	case len(data) > o.MaxImageBytes:
		return nil, badParam(param, "Invalid '%s': %v: more than %d bytes.", param, vision.ErrImageBytes, o.MaxImageBytes)
	}
	return data, nil
}

// readLocal reads the file of a file:// URL if it lies inside LocalPath
// (after resolving links), is a regular file and within the byte limit.
func (o MediaOptions) readLocal(url, param string) ([]byte, *Error) {
	u, err := neturl.Parse(url)
	if err != nil || (u.Host != "" && u.Host != "localhost") {
		return nil, badParam(param, "Invalid '%s': a file URL is file:///absolute/path (percent-encoded).", param)
	}
	path := u.Path
	if o.LocalPath == "" {
		return nil, badParam(param, "Invalid '%s': local files are not served (the server has no --allowed-local-media-path).", param)
	}
	root, err := filepath.EvalSymlinks(o.LocalPath)
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
	case st.Size() > int64(o.MaxImageBytes):
		return nil, badParam(param, "Invalid '%s': %v: %d bytes, limit %d.", param, vision.ErrImageBytes, st.Size(), o.MaxImageBytes)
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
	Data   [][]byte // each image's file bytes; nil until load reads a file or remote image
	URLs   []string // each image's URL
	Fields []string // the field each came from ("messages[0].content[1].image_url.url")
	// Media bounds the images and says where they may come from.
	Media MediaOptions
}

// encodeImages turns a rendered chat prompt with images into its ids: it
// reads the images not read yet (within ctx) and encodes them with the
// vision tower, setting p.Images, or, when countOnly, only sizes them
// (the same ids, no tower run). A bad image is a 400 naming its field, as
// are images the prompt does not place one to one and images sent to a
// model without a tower; ctx ending is abortError's; any other failure
// (the tower, the model) is a 500.
func encodeImages(ctx context.Context, m *Model, text string, ends []int, ci *ChatImages, p *Params, countOnly bool) ([]int32, *Error) {
	if m.Images == nil {
		return nil, badParam(ci.Fields[0], "Invalid '%s': this model takes no images (the server has no --mmproj vision tower).", ci.Fields[0])
	}
	start := time.Now()
	if e := ci.load(ctx); e != nil {
		return nil, e
	}
	ids, imgs, chunks, err := m.Images(ctx, text, ci.Data, m.Tokenizer.ChatAddsSpecial(text), vision.DecodeLimits{MaxPixels: ci.Media.MaxImagePixels}, !countOnly)
	if !countOnly {
		p.Vision = VisionTiming{Images: len(ci.Data), Start: start, End: time.Now()}
	}
	var ie *vision.ImageError
	switch {
	case errors.As(err, &ie) && ie.Index >= 0 && ie.Index < len(ci.Fields):
		return nil, badParam(ci.Fields[ie.Index], "Invalid '%s': %v.", ci.Fields[ie.Index], ie.Err)
	case errors.Is(err, vision.ErrMarkerCount):
		return nil, badParam("messages", "The model's chat template does not place each image once: %v", err)
	case err != nil && ctx.Err() != nil:
		return nil, abortError(ctx)
	case err != nil:
		return nil, &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: fmt.Sprintf("Encoding the images failed: %v", err)}
	}
	p.Images = imgs
	if ends != nil {
		p.MessageEnds = vision.PromptOffsets(text, chunks, ends, m.Tokenizer)
	}
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
	if ri.marker == "" || len(ri.urls) == 0 {
		return nil
	}
	return badParam(ri.marker, "Invalid '%s': the text holds %q, which stands for an image in a request with images.", ri.marker, vision.MediaMarker)
}
