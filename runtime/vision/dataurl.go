package vision

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Errors of ParseImageURL; callers answer 400 naming the field.
var (
	ErrBadDataURL = errors.New("malformed image data URL")
	// ErrRemoteURL is an http(s) URL: fetching is the caller's decision
	// (an allow-list), never this package's.
	ErrRemoteURL = errors.New("remote image URLs are not fetched")
	// ErrImageBytes is a payload above the byte limit.
	ErrImageBytes = errors.New("image exceeds the byte limit")
)

// imageMediaTypes are the media types Decode reads.
var imageMediaTypes = map[string]bool{
	"image/png": true, "image/jpeg": true, "image/jpg": true, "image/gif": true, "image/webp": true,
}

// ParseImageURL returns the bytes of a "data:image/TYPE;base64,PAYLOAD" URL
// (padding optional). The decoded size is checked against maxBytes (0: no
// limit) from the payload's length before anything is decoded. An http or
// https URL wraps ErrRemoteURL; another media type wraps
// ErrUnsupportedFormat; anything else malformed wraps ErrBadDataURL.
func ParseImageURL(url string, maxBytes int) ([]byte, error) {
	scheme, rest, ok := strings.Cut(url, ":")
	if !ok {
		return nil, fmt.Errorf("%w: no scheme", ErrBadDataURL)
	}
	switch strings.ToLower(scheme) {
	case "data":
	case "http", "https":
		return nil, ErrRemoteURL
	default:
		return nil, fmt.Errorf("%w: scheme %q (want data:)", ErrBadDataURL, truncate(scheme, 16))
	}
	header, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: no comma before the payload", ErrBadDataURL)
	}
	params := strings.Split(header, ";")
	mediaType := strings.ToLower(strings.TrimSpace(params[0]))
	if !strings.EqualFold(params[len(params)-1], "base64") || len(params) < 2 {
		return nil, fmt.Errorf("%w: only ;base64 payloads are accepted", ErrBadDataURL)
	}
	if !imageMediaTypes[mediaType] {
		return nil, fmt.Errorf("%w: media type %q", ErrUnsupportedFormat, truncate(mediaType, 32))
	}
	payload = strings.TrimRight(payload, "=")
	if n := base64.RawStdEncoding.DecodedLen(len(payload)); maxBytes > 0 && n > maxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrImageBytes, n, maxBytes)
	}
	data, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("%w: base64: %v", ErrBadDataURL, err)
	}
	return data, nil
}

// truncate shortens s for an error message, so a hostile input is not
// echoed in full.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
