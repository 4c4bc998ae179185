package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/sched"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// TestImageKeysFollowThePixels: the prompt rows of an image are keyed by
// its digest, so the prefix cache's block hashes of two prompts with the
// same image are equal and with another image differ from the image's
// first block on; text rows keep their ids.
func TestImageKeysFollowThePixels(t *testing.T) {
	e := &Engine{images: true, model: ModelInfo{Info: weights.Info{Embed: 2}}}
	prompt := []int32{5, 6, 7, 9, 9, 9, 9, 8}
	request := func(digest byte) Request {
		r := Request{Prompt: prompt, Images: []Image{{At: 3, NX: 2, NY: 2, Embeddings: make([]float32, 4*2), Digest: [32]byte{digest}}}}
		if err := e.keyImages(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, same, other := request(1), request(1), request(2)
	if diff := cmp.Diff(a.Prompt, same.Prompt); diff != "" {
		t.Errorf("the same image keys differently (-first +second):\n%s", diff)
	}
	for i, id := range a.Prompt {
		image := i >= 3 && i < 7
		if image != (id < 0) || (!image && id != prompt[i]) || (image && id == other.Prompt[i]) {
			t.Errorf("row %d: id %d (another image's %d), text id %d", i, id, other.Prompt[i], prompt[i])
		}
	}
	if prompt[3] != 9 {
		t.Error("keyImages changed the caller's prompt")
	}
	hash := func(p []int32) [2]kv.BlockHash {
		h0 := kv.Chain(nil, kv.BlockHash{}, p[:4])
		return [2]kv.BlockHash{h0, kv.Chain(nil, h0, p[4:8])}
	}
	if hash(a.Prompt) != hash(same.Prompt) || hash(a.Prompt)[0] == hash(other.Prompt)[0] || hash(a.Prompt)[1] == hash(other.Prompt)[1] {
		t.Error("block hashes do not follow the image")
	}
}

// TestRopePositionsAroundImages checks each token's M-RoPE position
// around two images (mtmd_image_tokens_get_decoder_pos): image tokens
// (P, P+row, P+col), text resuming at P + max(NX, NY).
func TestRopePositionsAroundImages(t *testing.T) {
	images := []Image{{At: 2, NX: 3, NY: 2}, {At: 9, NX: 1, NY: 2}}
	var got [][3]int32
	for pos := range 13 {
		tt, h, w, _, _ := ropePosition(images, pos)
		got = append(got, [3]int32{tt, h, w})
	}
	want := [][3]int32{
		{0, 0, 0}, {1, 1, 1}, // text
		{2, 2, 2}, {2, 2, 3}, {2, 2, 4}, {2, 3, 2}, {2, 3, 3}, {2, 3, 4}, // 3x2 image at 2: 3 positions
		{5, 5, 5},            // text resumes at 2 + 3
		{6, 6, 6}, {6, 7, 6}, // 1x2 image at 6: 2 positions
		{8, 8, 8}, {9, 9, 9}, // text
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("positions (-want +got):\n%s", diff)
	}
}

func TestKeyImagesRefusesBadImages(t *testing.T) {
	e := &Engine{images: true, model: ModelInfo{Info: weights.Info{Embed: 2}}}
	for name, im := range map[string]Image{
		"empty grid":       {At: 0, NX: 0, NY: 2},
		"past the prompt":  {At: 3, NX: 2, NY: 1, Embeddings: make([]float32, 4)},
		"short embeddings": {At: 0, NX: 2, NY: 1, Embeddings: make([]float32, 3)},
	} {
		r := Request{Prompt: []int32{1, 2, 3, 4}, Images: []Image{im}}
		if err := e.keyImages(&r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	r := Request{Prompt: []int32{1, 2}, Images: []Image{{NX: 1, NY: 1, Embeddings: make([]float32, 2)}}}
	if err := (&Engine{model: ModelInfo{Info: weights.Info{Embed: 2}}}).keyImages(&r); err != errNoImages {
		t.Errorf("a plan without images: %v, want errNoImages", err)
	}
}

// bindImages fills the engine's buffers for a feed, reusing them step
// after step without allocating: a step without image rows after one with
// them binds a zero mask and zero embeddings, not the last step's.
func TestBindImagesReusesItsBuffers(t *testing.T) {
	seq := &sched.Seq{}
	im := Image{At: 1, NX: 2, NY: 1, Embeddings: []float32{1, 2, 3, 4}}
	e := &Engine{images: true, model: ModelInfo{Info: weights.Info{Embed: 2}},
		reqs: map[*sched.Seq]*inflight{seq: {Request: Request{Images: []Image{im}}}}}
	s := &step{work: []sched.Work{{Seq: seq}}}
	withImage := &exec.Batch{Tokens: []int32{5, -9, -8, 6}, Positions: []int32{0, 1, 2, 3}, RowSeq: []int32{0, 0, 0, 0}}
	e.bindImages(s, withImage, &e.feedImages)
	want := map[string][]int32{node.BindImages: {0, 1, 1, 0}, node.BindMRoPE[0]: {0, 1, 1, 3}, node.BindMRoPE[1]: {0, 1, 1, 3}, node.BindMRoPE[2]: {0, 1, 2, 3}}
	if diff := cmp.Diff(want, withImage.Ints); diff != "" {
		t.Errorf("ints with the image (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float32{0, 0, 1, 2, 3, 4, 0, 0}, withImage.Floats[node.BindImageEmbeddings]); diff != "" {
		t.Errorf("embeddings with the image (-want +got):\n%s", diff)
	}
	text := &exec.Batch{Tokens: []int32{7, 8}, Positions: []int32{4, 5}, RowSeq: []int32{0, 0}}
	e.bindImages(s, text, &e.feedImages)
	if diff := cmp.Diff([]int32{0, 0}, text.Ints[node.BindImages]); diff != "" {
		t.Errorf("mask of a text step after an image step (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float32{0, 0, 0, 0}, text.Floats[node.BindImageEmbeddings]); diff != "" {
		t.Errorf("embeddings of a text step after an image step (-want +got):\n%s", diff)
	}
	if allocs := testing.AllocsPerRun(10, func() { e.bindImages(s, text, &e.feedImages) }); allocs != 0 {
		t.Errorf("bindImages allocated %v times per step on a batch of a size seen before", allocs)
	}
}
