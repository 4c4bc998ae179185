package instance

import (
	"context"
	"errors"
	"fmt"
	"time"

	_ "github.com/ninfer/ninfer-go/nodes/vision" // the vision.encode node of the graph vision
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Vision is a loaded vision tower (Options.MMProj): the mmproj file and
// its hyper-parameters. The plan's vision.encode node runs it
// (engine.Engine.EncodeImage).
type Vision struct {
	File   *weights.File
	Config *vision.Config
}

// Close releases the mmproj file.
func (v *Vision) Close() error { return v.File.Close() }

// ErrNoVision is returned for images sent to an instance without a tower.
var ErrNoVision = errors.New("this model has no vision tower loaded (--mmproj)")

// ImagePrompt is a prompt with images, ready for engine.Request: the
// prompt ids (image rows hold the vision pad token), the encoded images,
// and the chunks the prompt was cut into.
type ImagePrompt struct {
	IDs    []int32
	Images []engine.Image
	Chunks []vision.Chunk
	// Encode is the time spent decoding, preprocessing and encoding the
	// images.
	Encode time.Duration
}

// PromptWithImages tokenizes a rendered prompt holding one
// vision.MediaMarker per image as llama.cpp's mtmd tokenizer does
// (vision.SplitPrompt) and encodes the images (file bytes) with the tower.
// Without images it is the plain tokenization. lim bounds each decoded
// image's pixels. Without encode the images are only decoded and sized:
// the ids are the same (one image pad per image token), Images is nil.
func (in *Instance) PromptWithImages(ctx context.Context, prompt string, images [][]byte, addSpecial bool, lim vision.DecodeLimits, encode bool) (*ImagePrompt, error) {
	if len(images) == 0 {
		chunks, err := vision.SplitPrompt(prompt, nil, in.Tokenizer, addSpecial)
		if err != nil {
			return nil, err
		}
		out := &ImagePrompt{Chunks: chunks}
		for _, c := range chunks {
			out.IDs = append(out.IDs, c.Tokens...)
		}
		return out, nil
	}
	v := in.Vision
	if v == nil {
		return nil, ErrNoVision
	}
	start := time.Now()
	pre := make([]*vision.Preprocessed, len(images))
	digests := make([][32]byte, len(images))
	grids := make([]vision.Grid, len(images))
	for i, data := range images {
		src, _, err := vision.Decode(data, lim)
		if err != nil {
			return nil, &vision.ImageError{Index: i, Err: err}
		}
		p, err := vision.PreprocessRGB(src, v.Config.Options(lim))
		if err != nil {
			return nil, &vision.ImageError{Index: i, Err: err}
		}
		pre[i], digests[i], grids[i] = p, src.Digest(), p.Grid
	}
	chunks, err := vision.SplitPrompt(prompt, grids, in.Tokenizer, addSpecial)
	if err != nil {
		return nil, err
	}
	pad := in.Tokenizer.Encode(vision.ImagePad, false, true)
	if len(pad) != 1 {
		return nil, fmt.Errorf("model %s has no %s token", in.File.Path, vision.ImagePad)
	}
	out := &ImagePrompt{Chunks: chunks}
	for _, c := range chunks {
		if c.Image < 0 {
			out.IDs = append(out.IDs, c.Tokens...)
			continue
		}
		if encode {
			emb, err := in.Engine.EncodeImage(ctx, pre[c.Image])
			if err != nil {
				return nil, err
			}
			out.Images = append(out.Images, engine.Image{At: len(out.IDs), NX: c.Grid.NX, NY: c.Grid.NY, Embeddings: emb, Digest: digests[c.Image]})
		}
		for range c.Grid.Tokens() {
			out.IDs = append(out.IDs, pad[0])
		}
	}
	out.Encode = time.Since(start)
	return out, nil
}
