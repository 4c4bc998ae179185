package instance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	_ "github.com/ninfer/ninfer-go/nodes/vision" // the vision.encode node of the graph vision
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
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

// towerNode is the id of the vision.encode node withTower adds.
const towerNode = "vision"

// withTower wires the vision tower into g, a graph that encodes no images,
// as graphs/vision.yaml wires it into plain: a node "vision" (vision.encode
// on $in.images) before the first top-level model.forward of the target,
// whose embeddings feed the images input of every such forward (a
// speculative graph's verifying forward included; the forwards of loop
// bodies and of other models read none). It reports whether it changed g:
// not for a graph with a vision.encode node, a forward that wires images
// already, no target forward, or a node already called "vision". The
// added nodes and bindings take the position of the first forward.
func withTower(g *graphdef.Graph) bool {
	var fwds []*graphdef.Node
	first := -1
	for i, n := range g.Nodes {
		switch {
		case n.ID == towerNode || n.Op == "vision.encode":
			return false
		case n.Op != "model.forward" || n.IsLoop():
			continue
		}
		if slices.ContainsFunc(n.In, func(b *graphdef.Binding) bool { return b.Name == "images" }) {
			return false
		}
		if !runsTarget(n) {
			continue
		}
		if first < 0 {
			first = i
		}
		fwds = append(fwds, n)
	}
	if first < 0 {
		return false
	}
	at := g.Nodes[first].Pos
	tower := &graphdef.Node{Pos: at, ID: towerNode, IDPos: at, Op: "vision.encode", OpPos: at, InPos: at,
		In: []*graphdef.Binding{{Name: "images", NamePos: at, Ref: graphdef.InputNode + "." + node.BindImages, RefPos: at}}}
	g.Nodes = slices.Insert(g.Nodes, first, tower)
	for _, n := range fwds {
		n.In = append(n.In, &graphdef.Binding{Name: "images", NamePos: n.Pos, Ref: towerNode + ".embeddings", RefPos: n.Pos})
	}
	return true
}

// runsTarget reports whether forward n runs the target: no model param, or
// model: target.
func runsTarget(n *graphdef.Node) bool {
	for _, a := range n.With {
		if a.Name == "model" {
			return a.Value == node.Target
		}
	}
	return true
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
