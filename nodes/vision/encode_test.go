package vision

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

const (
	goldenDir = "../../../shared/golden"
	modelsDir = "../../../shared/models"
)

// towerTolerance bounds the relative difference (against max(1, |value|))
// of the tower's statistics and embedding values from llama.cpp's. Most
// differ by under 1e-6 (float32 summation order), but where a pre-GELU
// value sits at an fp16 rounding boundary the other summation order picks
// the neighbouring fp16 and that GELU output moves by one fp16 step (2^-11
// relative): measured up to 2.6e-4 on a layer's sum and 6.7e-4 on one
// value of sq64's embeddings. Turning the patches' 2-D rotary by (x, y)
// instead of (y, x) moves them by 3e-3 to 1.8.
const towerTolerance = 2e-3

// embedTolerance bounds the relative difference of the statistics of the
// patch + position embedding (inp_pos_emb). Measured: at most 1.9e-6
// (float32 summation order); leaving the patch kernel in float32 instead of
// fp16 moves the sums by 2.8e-5 and fails.
const embedTolerance = 5e-6

// goldenTower is what vision-tiny-qwen35.json states about one image's
// tower and projector output.
type goldenTower struct {
	Image         string                  `json:"image"`
	Tower         map[string]vision.Stats `json:"tower"`
	EmbdStats     vision.Stats            `json:"embd_stats"`
	First8        []float64               `json:"embd_first8"`
	LastRowFirst8 []float64               `json:"embd_last_row_first8"`
	// Values is the full projector output where the golden has it
	// (image_embeddings), else nil.
	Values []float64
}

// readGolden returns every distinct image of the vision golden.
func readGolden(t *testing.T) []goldenTower {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Skipf("vision golden not available: %v", err)
	}
	var g struct {
		Results []struct {
			Chunks []struct {
				Type string `json:"type"`
				goldenTower
			} `json:"chunks"`
		} `json:"results"`
		Embeddings map[string]struct {
			Values []float64 `json:"values"`
		} `json:"image_embeddings"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var out []goldenTower
	seen := map[string]bool{}
	for _, r := range g.Results {
		for _, c := range r.Chunks {
			if c.Type == "image" && !seen[c.Image] {
				seen[c.Image] = true
				c.Values = g.Embeddings[c.Image].Values
				out = append(out, c.goldenTower)
			}
		}
	}
	if len(out) < 4 || len(g.Embeddings) == 0 {
		t.Fatalf("golden has %d distinct images and %d full embeddings, want at least 4 and 1", len(out), len(g.Embeddings))
	}
	return out
}

func newTestEncoder(t *testing.T) *Encode {
	t.Helper()
	f, _, err := vision.OpenMMProj(filepath.Join(modelsDir, "tiny-qwen35-mmproj-f32.gguf"))
	if err != nil {
		t.Skipf("mmproj not available: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	e := attachedTower(t, f, 2)
	t.Cleanup(func() { e.Close() })
	return e
}

// attachedTower is the vision.encode node bound to the mmproj f and
// attached to a CPU backend of threads threads, as the executor binds it.
func attachedTower(tb testing.TB, f *weights.File, threads int) *Encode {
	tb.Helper()
	e := &Encode{}
	if err := e.BindTower(f, nil); err != nil {
		tb.Fatal(err)
	}
	be, err := exec.New("cpu", exec.Options{Threads: threads})
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.AttachTower(be); err != nil {
		be.Close()
		tb.Fatal(err)
	}
	return e
}

// within compares floats within tol relative to max(1, |a|, |b|).
func within(tol float64) cmp.Option {
	return cmp.Comparer(func(a, b float64) bool {
		return math.Abs(a-b) <= tol*max(1, math.Abs(a), math.Abs(b))
	})
}

func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// TestEncodeMatchesLlamaCpp runs vision.encode on every golden image and
// compares the tower's statistics after the patch embedding and each
// block, the projector output's statistics, the first values of its first
// and last rows, and sq64's full embedding matrix.
func TestEncodeMatchesLlamaCpp(t *testing.T) {
	e := newTestEncoder(t)
	cfg := e.Config
	near := within(towerTolerance)
	full := 0
	for _, g := range readGolden(t) {
		t.Run(g.Image, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, "images", g.Image))
			if err != nil {
				t.Fatal(err)
			}
			p, err := vision.Preprocess(data, cfg.Options(vision.DecodeLimits{}))
			if err != nil {
				t.Fatal(err)
			}
			outs, err := e.run(context.Background(), p, true)
			if err != nil {
				t.Fatal(err)
			}
			emb := outs["embeddings"]
			if want := p.Grid.Tokens() * cfg.OutputWidth; len(emb) != want {
				t.Fatalf("%d embedding values, want %d tokens x %d", len(emb), p.Grid.Tokens(), cfg.OutputWidth)
			}
			got := map[string]vision.Stats{"embd": vision.StatsOf(emb)}
			want := map[string]vision.Stats{"embd": g.EmbdStats}
			for k, v := range g.Tower {
				want[k] = v
				got[k] = vision.StatsOf(outs[k])
			}
			if diff := cmp.Diff(want, got, near); diff != "" {
				t.Errorf("tower statistics (-llama.cpp +ours):\n%s", diff)
			}
			if diff := cmp.Diff(want["inp_pos_emb"], got["inp_pos_emb"], within(embedTolerance)); diff != "" {
				t.Errorf("patch + position embedding (-llama.cpp +ours):\n%s", diff)
			}
			ow := cfg.OutputWidth
			first, last := f64s(emb[:8]), f64s(emb[len(emb)-ow:][:8])
			if diff := cmp.Diff([2][]float64{g.First8, g.LastRowFirst8}, [2][]float64{first, last}, near); diff != "" {
				t.Errorf("first 8 values of the first and last image token (-llama.cpp +ours):\n%s", diff)
			}
			if g.Values != nil {
				full++
				if diff := cmp.Diff(g.Values, f64s(emb), near); diff != "" {
					t.Errorf("image embeddings (-llama.cpp +ours):\n%s", diff)
				}
			}
		})
	}
	if full == 0 {
		t.Error("no image had its full embeddings compared")
	}
}

// The prepared towers are kept least recently used first within their
// byte budget: an image of a size seen before reuses its prepared tower
// (the same executable) and moves it last; a new size closes the least
// recently used until it fits; a tower evicted and prepared again gives
// exactly the rows it gave first.
func TestEncodeAgainReusesThePreparedTower(t *testing.T) {
	e := newTestEncoder(t)
	type size struct{ W, H int }
	a, b, c, d, f := size{128, 128}, size{128, 96}, size{96, 128}, size{64, 32}, size{32, 64}
	pre := map[size]*vision.Preprocessed{}
	grid := map[[2]int]size{}
	cost := map[size]int64{}
	for _, s := range []size{a, b, c, d, f} {
		var buf bytes.Buffer
		img := image.NewRGBA(image.Rect(0, 0, s.W, s.H))
		for i := range img.Pix {
			img.Pix[i] = uint8(i * 7 % 251)
		}
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		p, err := vision.Preprocess(buf.Bytes(), e.Config.Options(vision.DecodeLimits{}))
		if err != nil {
			t.Fatal(err)
		}
		l := vision.LayoutOf(p, e.Config.PatchSize, e.Config.SpatialMerge)
		g, err := e.towerGraph(l.PW, l.PH, false)
		if err != nil {
			t.Fatal(err)
		}
		pre[s], grid[[2]int{l.PW, l.PH}], cost[s] = p, s, graphBytes(g)
	}
	if len(grid) != 5 || cost[d] > min(cost[b], cost[c]) || cost[f] > min(cost[b], cost[c]) {
		t.Fatalf("the sizes need 5 grids and d, f the cheapest: grids %v, bytes %v", grid, cost)
	}
	e.preparedBudget = cost[a] + cost[b] + cost[c]
	first := map[size][]float32{}
	kept := func() []size {
		var out []size
		for _, p := range e.prepared {
			out = append(out, grid[p.grid])
		}
		return out
	}
	encode := func(s size) exec.Executable {
		t.Helper()
		rows, err := e.EncodeImage(context.Background(), pre[s])
		if err != nil {
			t.Fatal(err)
		}
		if first[s] == nil {
			first[s] = rows
		} else if diff := cmp.Diff(first[s], rows); diff != "" {
			t.Errorf("%v encoded again (-first +again):\n%s", s, diff)
		}
		return e.prepared[len(e.prepared)-1].x
	}
	for _, step := range []struct {
		encode size
		want   []size // kept, least recently used first
	}{
		{a, []size{a}},
		{b, []size{a, b}},
		{c, []size{a, b, c}},
		{a, []size{b, c, a}}, // reused, now the most recent
		{d, []size{c, a, d}}, // b, the least recently used, makes room
		{f, []size{a, d, f}},
		{b, []size{d, f, b}}, // evicted before: prepared again
	} {
		before := slices.Clone(e.prepared)
		x := encode(step.encode)
		if diff := cmp.Diff(step.want, kept()); diff != "" {
			t.Fatalf("after %v: kept (-want +got):\n%s", step.encode, diff)
		}
		for _, p := range before {
			if grid[p.grid] == step.encode && p.x != x {
				t.Errorf("%v: prepared again though it was kept", step.encode)
			}
		}
		if e.preparedBytes > e.preparedBudget {
			t.Errorf("after %v: %d bytes kept, over the budget %d", step.encode, e.preparedBytes, e.preparedBudget)
		}
	}
}
