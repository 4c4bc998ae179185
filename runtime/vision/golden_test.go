package vision

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const goldenDir = "../../../shared/golden"

// clipMean and clipStd are the tiny mmproj's clip.vision.image_mean/_std.
var (
	clipMean = [3]float32{0.48145466, 0.4578275, 0.40821073}
	clipStd  = [3]float32{0.26862954, 0.26130258, 0.27577711}
)

type goldenImage struct {
	Image      string           `json:"image"`
	NTokens    int              `json:"n_tokens"`
	NPos       int              `json:"n_pos"`
	GridTokens [2]int           `json:"grid_tokens"`
	PosStart   int              `json:"pos_start"`
	DecoderPos [][4]int32       `json:"decoder_pos_t_y_x_z"`
	Tower      map[string]Stats `json:"tower"`
	// The projector output: statistics, the first 8 values of the first
	// and of the last image token.
	EmbdStats     Stats     `json:"embd_stats"`
	First8        []float64 `json:"embd_first8"`
	LastRowFirst8 []float64 `json:"embd_last_row_first8"`
	Preprocessed  struct {
		Width        int       `json:"width"`
		Height       int       `json:"height"`
		Resized      bool      `json:"resized"`
		RGBSHA256    string    `json:"rgb_sha256"`
		ChannelSums  [3]int    `json:"rgb_channel_sums"`
		FirstPixels  [4][3]int `json:"rgb_first_row_first4"`
		RGBPNG       string    `json:"rgb_png"`
		Normalized   Stats     `json:"normalized"`
		PatchInputTy string    `json:"patch_input_type"`
	} `json:"preprocessed"`
}

// goldenImages returns every distinct image chunk of the vision golden.
func goldenImages(t *testing.T) []goldenImage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Skipf("vision golden not available: %v", err)
	}
	var g struct {
		Results []struct {
			Chunks []struct {
				Type string `json:"type"`
				goldenImage
			} `json:"chunks"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var out []goldenImage
	seen := map[string]bool{}
	for _, r := range g.Results {
		for _, c := range r.Chunks {
			if c.Type == "image" && !seen[c.Image] {
				seen[c.Image] = true
				out = append(out, c.goldenImage)
			}
		}
	}
	if len(out) < 4 {
		t.Fatalf("golden has %d distinct images, want at least 4", len(out))
	}
	return out
}

// preprocessView is what the golden states about a preprocessed image.
type preprocessView struct {
	Width, Height int
	Resized       bool
	SHA256        string
	ChannelSums   [3]int
	FirstPixels   [4][3]int
	NX, NY        int
	Tokens        int
	Positions     int
}

func viewOf(p *Preprocessed) preprocessView {
	v := preprocessView{Width: p.Image.Width, Height: p.Image.Height, Resized: p.Resized,
		NX: p.Grid.NX, NY: p.Grid.NY, Tokens: p.Grid.Tokens(), Positions: p.Grid.Positions()}
	sum := sha256.Sum256(p.Image.Pix)
	v.SHA256 = hex.EncodeToString(sum[:])
	for i, b := range p.Image.Pix {
		v.ChannelSums[i%3] += int(b)
	}
	for i := range 4 {
		px := p.Image.At(i, 0)
		v.FirstPixels[i] = [3]int{int(px[0]), int(px[1]), int(px[2])}
	}
	return v
}

func qwenOptions() Options {
	return Options{Budget: Qwen3VLBudget(16, 2), Mean: clipMean, Std: clipStd}
}

// TestPreprocessMatchesLlamaCpp checks size, grid, the resized RGB bytes and
// the normalised floats of every golden image against llama.cpp's dump.
func TestPreprocessMatchesLlamaCpp(t *testing.T) {
	for _, g := range goldenImages(t) {
		t.Run(g.Image, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, "images", g.Image))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Preprocess(data, qwenOptions())
			if err != nil {
				t.Fatal(err)
			}
			gp := g.Preprocessed
			want := preprocessView{Width: gp.Width, Height: gp.Height, Resized: gp.Resized,
				SHA256: gp.RGBSHA256, ChannelSums: gp.ChannelSums, FirstPixels: gp.FirstPixels,
				NX: g.GridTokens[0], NY: g.GridTokens[1], Tokens: g.NTokens, Positions: g.NPos}
			if diff := cmp.Diff(want, viewOf(p)); diff != "" {
				t.Errorf("preprocessed image (-llama.cpp +ours):\n%s", diff)
			}
			if gp.PatchInputTy != "f16" {
				t.Fatalf("golden patch_input_type %q, the test assumes f16", gp.PatchInputTy)
			}
			checkStats(t, gp.Normalized, p.Pixels)

			dumped, err := os.ReadFile(filepath.Join(goldenDir, gp.RGBPNG))
			if err != nil {
				t.Fatal(err)
			}
			ref, _, err := Decode(dumped, DecodeLimits{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(ref, p.Image); diff != "" {
				t.Errorf("resized image differs from llama.cpp's %s (-llama.cpp +ours):\n%s", gp.RGBPNG, diff)
			}
		})
	}
}

// normalizedTolerance bounds the relative difference of the normalised
// floats' statistics: both sides round the same float32 values to fp16, so
// only the summation order of the sums and the golden's %.9g printing of
// min/max differ.
const normalizedTolerance = 1e-8

func checkStats(t *testing.T, want Stats, xs []float32) {
	t.Helper()
	near := cmp.Comparer(func(a, b float64) bool {
		return math.Abs(a-b) <= normalizedTolerance*max(1, math.Abs(a), math.Abs(b))
	})
	if diff := cmp.Diff(want, StatsOf(xs), near); diff != "" {
		t.Errorf("normalised pixels (-llama.cpp +ours):\n%s", diff)
	}
}
