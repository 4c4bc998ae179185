package instance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	tower "github.com/ninfer/ninfer-go/nodes/vision"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Vision is a loaded vision tower (Options.MMProj): the mmproj file, its
// hyper-parameters and the Encoder that runs it on a CPU backend of its
// own. It encodes one image at a time.
type Vision struct {
	File    *weights.File
	Config  *vision.Config
	mu      sync.Mutex
	encoder *tower.Encoder
}

// openVision loads the mmproj at path for the text model text.
func openVision(path string, text *weights.File, threads int) (*Vision, error) {
	f, cfg, err := vision.OpenMMProj(path)
	if err != nil {
		return nil, err
	}
	if err := cfg.CheckTextModel(text); err != nil {
		f.Close()
		return nil, err
	}
	enc, err := tower.NewEncoder(f, cfg, "cpu", threads)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Vision{File: f, Config: cfg, encoder: enc}, nil
}

// Close releases the encoder and the mmproj file.
func (v *Vision) Close() error {
	return errors.Join(v.encoder.Close(), v.File.Close())
}

// checkVisionPlan refuses a graph that reads images ($in.images) on a
// model that cannot place image tokens (no M-RoPE sections), and a tower
// given for a graph that reads none.
func checkVisionPlan(o Options, readsImages bool, text *weights.File) error {
	key := text.Arch() + ".rope.dimension_sections"
	switch {
	case readsImages && !text.Has(key):
		return fmt.Errorf("graph %s reads images ($in.images), but model %s is not a vision-language model (no %s)", graphName(o.Graph), text.Path, key)
	case !readsImages && o.MMProj != "":
		return fmt.Errorf("mmproj %s: graph %s does not read images (model.forward input images: $in.images; the graph vision does)", o.MMProj, graphName(o.Graph))
	}
	return nil
}

func graphName(g string) string {
	if g == "" {
		return "plain"
	}
	return g
}

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
	if encode {
		v.mu.Lock()
		defer v.mu.Unlock()
	}
	for _, c := range chunks {
		if c.Image < 0 {
			out.IDs = append(out.IDs, c.Tokens...)
			continue
		}
		if encode {
			emb, err := v.encoder.Encode(ctx, pre[c.Image])
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
