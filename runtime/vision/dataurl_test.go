package vision

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseImageURL(t *testing.T) {
	png := smallPNG(t)
	b64 := base64.StdEncoding.EncodeToString(png)
	tests := []struct {
		name    string
		url     string
		max     int
		want    []byte
		wantErr error
	}{
		{"a PNG data URL", "data:image/png;base64," + b64, 0, png, nil},
		{"padding is optional", "data:image/png;base64," + strings.TrimRight(b64, "="), 0, png, nil},
		{"the media type is case-insensitive", "data:Image/PNG;BASE64," + b64, 0, png, nil},
		{"the payload exactly at the limit", "data:image/png;base64," + b64, len(png), png, nil},
		{"one byte over the limit", "data:image/png;base64," + b64, len(png) - 1, nil, ErrImageBytes},
		{"an https URL", "https://example.com/cat.png", 0, nil, ErrRemoteURL},
		{"an http URL", "HTTP://example.com/cat.png", 0, nil, ErrRemoteURL},
		{"a file URL", "file:///etc/passwd", 0, nil, ErrBadDataURL},
		{"no scheme", "cat.png", 0, nil, ErrBadDataURL},
		{"no comma", "data:image/png;base64", 0, nil, ErrBadDataURL},
		{"not base64", "data:image/png," + b64, 0, nil, ErrBadDataURL},
		{"bad base64", "data:image/png;base64,!!!!", 0, nil, ErrBadDataURL},
		{"a text media type", "data:text/plain;base64," + b64, 0, nil, ErrUnsupportedFormat},
		{"BMP", "data:image/bmp;base64," + b64, 0, nil, ErrUnsupportedFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseImageURL(tt.url, tt.max)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("ParseImageURL error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("bytes (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseImageURLChecksTheLimitBeforeDecoding checks that a payload far
// over the limit is refused without allocating its decoded size.
func TestParseImageURLChecksTheLimitBeforeDecoding(t *testing.T) {
	url := "data:image/png;base64," + strings.Repeat("A", 8<<20)
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := ParseImageURL(url, 1<<20); !errors.Is(err, ErrImageBytes) {
			t.Fatalf("error = %v, want ErrImageBytes", err)
		}
	})
	if allocs > 10 {
		t.Errorf("refusing an 8 MiB payload made %v allocations", allocs)
	}
}

// FuzzParseImageURL checks that any URL gives bytes or an error wrapping
// one of the package's errors, and never more bytes than the limit.
func FuzzParseImageURL(f *testing.F) {
	f.Add("data:image/png;base64," + base64.StdEncoding.EncodeToString(smallPNG(f)))
	f.Add("data:image/gif;base64,R0lGODlhAQABAAAAACw=")
	f.Add("https://example.com/a.png")
	f.Add("data:,")
	f.Fuzz(func(t *testing.T, url string) {
		const limit = 1 << 10
		data, err := ParseImageURL(url, limit)
		if err != nil {
			if !errors.Is(err, ErrBadDataURL) && !errors.Is(err, ErrRemoteURL) &&
				!errors.Is(err, ErrImageBytes) && !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if len(data) > limit {
			t.Fatalf("%d bytes over the %d limit", len(data), limit)
		}
	})
}
