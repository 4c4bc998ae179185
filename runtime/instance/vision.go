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
	"github.com/ninfer/ninfer-go/runtime/plan"
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

// withTower wires the vision tower into g, a graph that encodes no images,
// as graphs/vision.yaml wires it into plain: a vision.encode node on
// $in.images before the first top-level model.forward of the target,
// whose embeddings feed the images input of every such forward (a
// speculative graph's verifying forward included; the forwards of loop
// bodies and of other models read none). The node is "vision", or
// "vision_2", "vision_3", ... when g has a node of that id. It returns the
// node's id and the forwards it feeds, or "" and nil when it left g as it
// was: a graph with a vision.encode node, a forward that wires images
// already, or no target forward. The added nodes and bindings take the
// position of the first forward.
func withTower(g *graphdef.Graph) (tower string, fwds []string) {
	var feeds []*graphdef.Node
	first := -1
	ids := map[string]bool{}
	for i, n := range g.Nodes {
		ids[n.ID] = true
		switch {
		case n.Op == "vision.encode":
			return "", nil
		case n.Op != "model.forward" || n.IsLoop():
			continue
		}
		if slices.ContainsFunc(n.In, func(b *graphdef.Binding) bool { return b.Name == "images" }) {
			return "", nil
		}
		if !runsTarget(n) {
			continue
		}
		if first < 0 {
			first = i
		}
		feeds = append(feeds, n)
	}
	if first < 0 {
		return "", nil
	}
	tower = "vision"
	for i := 2; ids[tower]; i++ {
		tower = fmt.Sprintf("vision_%d", i)
	}
	at := g.Nodes[first].Pos
	g.Nodes = slices.Insert(g.Nodes, first, &graphdef.Node{Pos: at, ID: tower, IDPos: at, Op: "vision.encode", OpPos: at, InPos: at,
		In: []*graphdef.Binding{{Name: "images", NamePos: at, Ref: graphdef.InputNode + "." + node.BindImages, RefPos: at}}})
	for _, n := range feeds {
		n.In = append(n.In, &graphdef.Binding{Name: "images", NamePos: n.Pos, Ref: tower + ".embeddings", RefPos: n.Pos})
		fwds = append(fwds, n.ID)
	}
	return tower, fwds
}

// oneSegment checks that the steps fwds of p run in one device segment, so
// that one vision.encode node before them can feed them all.
func oneSegment(p *plan.Plan, fwds []string) error {
	seg := func(id string) int {
		for si, s := range p.Segments {
			for _, i := range s.Steps {
				if p.Steps[i].ID == id {
					return si
				}
			}
		}
		return -1
	}
	for _, id := range fwds[1:] {
		if seg(id) != seg(fwds[0]) {
			return fmt.Errorf("a host step runs between its target forwards %s and %s", fwds[0], id)
		}
	}
	return nil
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
