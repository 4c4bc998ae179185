package vision

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMergeOrderKeepsEachTokensPatchesTogether(t *testing.T) {
	l := Layout{Patch: 16, Merge: 2, PW: 4, PH: 2}
	want := [][2]int{
		{0, 0}, {0, 1}, {1, 0}, {1, 1}, // token 0
		{0, 2}, {0, 3}, {1, 2}, {1, 3}, // token 1
	}
	if diff := cmp.Diff(want, l.MergeOrder()); diff != "" {
		t.Errorf("merge order (-want +got):\n%s", diff)
	}
}

func TestPositionEmbeddingsKeepTheCornersAndInterpolate(t *testing.T) {
	// A 2x2 table of width 1 holding 0, 1 / 2, 3 resized to 3x3 patches
	// (one merge block is 1x1 here so MergeOrder is row-major).
	l := Layout{Patch: 16, Merge: 1, PW: 3, PH: 3}
	got := l.PositionEmbeddings([]float32{0, 1, 2, 3}, 2, 1)
	want := []float32{0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resized table (-want +got):\n%s", diff)
	}
}

// TestDecoderPositionsMatchLlamaCpp checks the M-RoPE positions of every
// golden image token (mtmd_image_tokens_get_decoder_pos).
func TestDecoderPositionsMatchLlamaCpp(t *testing.T) {
	for _, g := range goldenImages(t) {
		t.Run(g.Image, func(t *testing.T) {
			grid := Grid{NX: g.GridTokens[0], NY: g.GridTokens[1]}
			if diff := cmp.Diff(g.DecoderPos, grid.DecoderPositions(g.PosStart)); diff != "" {
				t.Errorf("decoder positions (-llama.cpp +ours):\n%s", diff)
			}
		})
	}
}

// towerInputTolerance bounds the relative difference of the statistics of
// the patch + position embedding. Measured: at most 1.9e-6 (float32
// summation order); leaving the kernel in float32 instead of fp16 moves the
// sums by 2.8e-5 and fails.
const towerInputTolerance = 5e-6

// TestPatchAndPositionEmbeddingMatchLlamaCpp runs the tower's first stage
// on the host from PatchRows and PositionEmbeddings: both temporal halves
// of the patch kernel rounded to fp16 (ggml's F16 im2col), F32
// accumulation, bias, then the interpolated position table, and compares
// the statistics with llama.cpp's inp_pos_emb.
func TestPatchAndPositionEmbeddingMatchLlamaCpp(t *testing.T) {
	f := openModel(t, "tiny-qwen35-mmproj-f32.gguf")
	cfg, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	tensor := func(name string) []float32 {
		tn, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	k0, k1 := tensor("v.patch_embd.weight"), tensor("v.patch_embd.weight.1")
	RoundToHalf(k0)
	RoundToHalf(k1)
	bias, table := tensor("v.patch_embd.bias"), tensor("v.position_embd.weight")
	width, cols := cfg.Width, 3*cfg.PatchSize*cfg.PatchSize

	for _, g := range goldenImages(t) {
		t.Run(g.Image, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, "images", g.Image))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Preprocess(data, cfg.Options(DecodeLimits{}))
			if err != nil {
				t.Fatal(err)
			}
			l := LayoutOf(p, cfg.PatchSize, cfg.SpatialMerge)
			rows := l.PatchRows(p)
			pos := l.PositionEmbeddings(table, cfg.PositionGrid(), width)
			out := make([]float32, l.Patches()*width) // [patches, width]
			for i := range l.Patches() {
				row := rows[i*cols : (i+1)*cols]
				for o := range width {
					var a, b float32
					for j, x := range row {
						a += k0[o*cols+j] * x
						b += k1[o*cols+j] * x
					}
					out[i*width+o] = a + b + bias[o] + pos[i*width+o]
				}
			}
			want, ok := g.Tower["inp_pos_emb"]
			if !ok {
				t.Fatal("golden has no tower.inp_pos_emb")
			}
			got := statsOf(out)
			near := cmp.Comparer(func(a, b float64) bool {
				return math.Abs(a-b) <= towerInputTolerance*max(1, math.Abs(a), math.Abs(b))
			})
			if diff := cmp.Diff(want, got, near); diff != "" {
				t.Errorf("patch + position embedding (-llama.cpp +ours):\n%s", diff)
			}
		})
	}
}
