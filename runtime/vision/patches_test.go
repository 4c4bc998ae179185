package vision

import (
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
