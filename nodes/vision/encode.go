// Package vision holds the vision.encode node: a Qwen3-VL / Qwen3.5
// vision tower (qwen3vl_merger mmproj) recorded as device ops and run, on a
// backend of its own loaded with the mmproj file, over each image of a
// request; its output rows replace the image placeholder rows of
// model.forward's input embeddings.
package vision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "vision.encode",
		Placement: node.Device,
		In: []node.Port{
			{Name: "images", Type: node.Images, Doc: "the step's image token rows ($in.images)"},
		},
		Out: []node.Port{
			{Name: "embeddings", Type: node.ImageEmbeddings,
				Doc: "the tower's rows at the image rows [T, E] (E = clip.vision.projection_dim, the text model's width), for model.forward's images input"},
		},
		Summary: "Encode each image of a request with the vision tower (--mmproj); its rows replace the image placeholder rows' embeddings.",
		Doc: "The tower (patch embedding with the resized learned position table, pre-LayerNorm ViT blocks with 2-D rotary " +
			"attention over the image's patches, `v.post_ln`, the 2x2 merge and the `mm.0` -> GELU -> `mm.2` merger) runs once per image, " +
			"before the request's prefill, on a backend of the target's kind loaded with the mmproj file; a backend without one of its ops " +
			"refuses the graph at load, naming the op. Each step binds the rows of the images it covers. " +
			"The graph needs a tower (`--mmproj`, `graph check --mmproj`) whose projection width equals the model's embedding width.",
		NewDevice: func(node.Params) (node.DeviceNode, error) { return &Encode{}, nil },
	})
}

// The tower's inputs, bound per image (exec.Batch.Floats and Ints).
const (
	// BindPatches is the patch convolution's input [patches, 3*patch*patch]
	// (vision.Layout.PatchRows, fp16-rounded pixels).
	BindPatches = "vision.patches"
	// BindPosEmbd is the learned position table resized to the image's
	// patch grid [patches, width] (vision.Layout.PositionEmbeddings).
	BindPosEmbd = "vision.pos_embd"
	// BindPosY and BindPosX are each patch's row and column [patches], the
	// 2-D rotary positions.
	BindPosY = "vision.pos_y"
	BindPosX = "vision.pos_x"
)

// Names of the patch kernels as the tower's matmuls read them: the mmproj's
// v.patch_embd.weight (and .weight.1, the second temporal half of Qwen's
// Conv3D) as [width, 3*patch*patch] in fp16, the dtype ggml_conv_2d's
// im2col gives the convolution.
const (
	kernel0 = "v.patch_embd.weight.im2col"
	kernel1 = "v.patch_embd.weight.1.im2col"
)

// Encode is the vision.encode node. As a step of a plan it records the
// image rows' embeddings as an input of the step (node.BindImageEmbeddings,
// bound from the rows EncodeImage gave each image); RecordTower records
// the tower itself over one image's patches, which EncodeImage runs on the
// node's own backend (exec.TowerBinder).
type Encode struct {
	// Config is the tower's hyper-parameters (BindTower).
	Config *vision.Config
	// twoKernels: the file has v.patch_embd.weight.1.
	twoKernels bool
	view       *weights.File // the mmproj with the im2col kernels
	table      []float32     // v.position_embd.weight [grid², Width]

	mu      sync.Mutex // one image at a time on backend
	backend exec.Backend
	// prepared are the tower's prepared graphs by patch grid [pw, ph],
	// least recently used first, their estimated bytes (graphBytes)
	// within preparedBudget: an image of a size seen before reuses its
	// buffers instead of allocating them again.
	prepared      []preparedTower
	preparedBytes int64
	// preparedBudget bounds preparedBytes; 0 is DefaultPreparedBudget.
	preparedBudget int64
}

// preparedTower is the tower prepared for one patch grid.
type preparedTower struct {
	grid  [2]int
	x     exec.Executable
	bytes int64 // graphBytes of its graph
}

// DefaultPreparedBudget is the bytes of prepared tower graphs an Encode
// keeps by default (graphBytes estimates): 256 MiB, a few large images'
// graphs or many small ones. A graph larger than the budget runs and is
// closed at once.
const DefaultPreparedBudget = 256 << 20

// graphBytes estimates the memory a prepared g holds: every value it
// computes (weights excluded) as float32, and each attention's scores
// [heads, rows, rows]. Backends reuse buffers, so it is an upper bound.
func graphBytes(g *tensor.Graph) int64 {
	var n int64
	for _, op := range g.Ops {
		if op.Kind == tensor.OpWeight {
			continue
		}
		n += int64(op.Out.Rows()) * int64(op.Out.Cols())
		if op.Kind == tensor.OpAttention {
			n += int64(op.Attn.Heads) * int64(op.Out.Rows()) * int64(op.Out.Rows())
		}
	}
	return 4 * n
}

// Record implements node.DeviceNode for the step: in["images"] is the
// step's image row mask [T]; the output "embeddings" [T, OutputWidth] is
// the step input node.BindImageEmbeddings, the tower's rows at the image
// rows.
func (e *Encode) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	if e.Config == nil {
		return nil, errors.New("vision.encode: no vision tower bound (--mmproj)")
	}
	mask := in["images"]
	return map[string]tensor.Tensor{"embeddings": b.InputF32(node.BindImageEmbeddings, mask.Rows(), e.Config.OutputWidth)}, b.Err()
}

// RecordTower records the tower over one image's patches: the patch
// embedding (both fp16 kernels, bias, resized position table), Layers
// pre-LayerNorm ViT blocks (fused qkv, 2-D rotary, attention over all
// patches, GELU FFN), v.post_ln, Merge² consecutive patches concatenated,
// and the merger mm.0 -> GELU -> mm.2. in holds BindPatches [n, 3p²],
// BindPosEmbd [n, Width], BindPosY and BindPosX [n], n a multiple of
// Merge²; the output "embeddings" [n/Merge², OutputWidth] are the rows
// that replace an image's placeholder tokens in the text model. With
// stages it also outputs "inp_pos_emb" and "layer_out-N" [n, Width], the
// tower after the patch embedding and after block N (what the golden's
// tower statistics describe).
func (e *Encode) RecordTower(b *tensor.Builder, in map[string]tensor.Tensor, stages bool) (map[string]tensor.Tensor, error) {
	c := e.Config
	if c == nil {
		return nil, errors.New("vision.encode: no vision tower bound (--mmproj)")
	}
	patches, pos, ys, xs := in[BindPatches], in[BindPosEmbd], in[BindPosY], in[BindPosX]
	if group := c.SpatialMerge * c.SpatialMerge; patches.Rows()%group != 0 {
		return nil, fmt.Errorf("vision.encode: %d patches are not a multiple of %d", patches.Rows(), group)
	}
	out := map[string]tensor.Tensor{}
	x := b.MatMul(patches, b.Weight(kernel0)) // [n, W]
	if e.twoKernels {
		x = b.Add(x, b.MatMul(patches, b.Weight(kernel1)))
	}
	x = b.Add(b.AddRow(x, b.Weight("v.patch_embd.bias")), pos)
	stage := func(name string, t tensor.Tensor) {
		if stages {
			out[name] = t
		}
	}
	stage("inp_pos_emb", x)
	layerNorm := func(x tensor.Tensor, prefix string) tensor.Tensor {
		return b.AddRow(b.MulRow(b.Norm(x, c.Eps), b.Weight(prefix+".weight")), b.Weight(prefix+".bias"))
	}
	linear := func(x tensor.Tensor, prefix string) tensor.Tensor {
		return b.AddRow(b.MatMul(x, b.Weight(prefix+".weight")), b.Weight(prefix+".bias"))
	}
	hd, w := c.HeadDim(), c.Width
	rope := tensor.RoPEArgs{HeadDim: hd, Dims: hd, Base: 10000}
	attn := tensor.AttentionArgs{Heads: c.Heads, KVHeads: c.Heads, HeadDim: hd, Scale: 1 / float32(math.Sqrt(float64(hd)))}
	for l := range c.Layers {
		blk := fmt.Sprintf("v.blk.%d.", l)
		qkv := linear(layerNorm(x, blk+"ln1"), blk+"attn_qkv") // [n, 3W]: q | k | v
		q := b.RoPE2D(b.Columns(qkv, 3*w, 0, w), ys, xs, rope)
		k := b.RoPE2D(b.Columns(qkv, 3*w, w, w), ys, xs, rope)
		v := b.Columns(qkv, 3*w, 2*w, w)
		x = b.Add(x, linear(b.SelfAttention(q, k, v, attn), blk+"attn_out"))
		up := b.GELU(linear(layerNorm(x, blk+"ln2"), blk+"ffn_up")) // [n, FFNWidth]
		x = b.Add(x, linear(up, blk+"ffn_down"))
		stage(fmt.Sprintf("layer_out-%d", l), x)
	}
	merged := b.Reshape(layerNorm(x, "v.post_ln"), c.MergedWidth()) // [n/Merge², Merge²·W]
	out["embeddings"] = linear(b.GELU(linear(merged, "mm.0")), "mm.2")
	return out, b.Err()
}

// BindTower implements exec.TowerBinder: it reads the tower's
// hyper-parameters from f (vision.ReadConfig), refuses a target that
// cannot place image tokens (no M-RoPE sections) or whose embeddings the
// tower's rows do not fit (target nil: neither is checked), and makes the
// fp16 patch kernels. f stays owned by the caller and open while the node
// is used.
func (e *Encode) BindTower(f, target *weights.File) error {
	cfg, err := vision.ReadConfig(f)
	if err != nil {
		return err
	}
	if target != nil {
		if key := target.Arch() + ".rope.dimension_sections"; !target.Has(key) {
			return fmt.Errorf("model %s is not a vision-language model: it has no M-RoPE sections (%s) to place image tokens by", target.Path, key)
		}
		if err := cfg.CheckTextModel(target); err != nil {
			return err
		}
	}
	k0, err := im2colKernel(f, "v.patch_embd.weight", kernel0, cfg)
	if err != nil {
		return err
	}
	extra, two := []*weights.Tensor{k0}, false
	if _, err := f.Tensor("v.patch_embd.weight.1"); err == nil {
		k1, err := im2colKernel(f, "v.patch_embd.weight.1", kernel1, cfg)
		if err != nil {
			return err
		}
		extra, two = append(extra, k1), true
	}
	view, err := f.With(extra...)
	if err != nil {
		return err
	}
	pt, err := f.Tensor("v.position_embd.weight")
	if err != nil {
		return fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	table, err := pt.Float32s()
	if err != nil {
		return fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	e.Config, e.twoKernels, e.view, e.table = cfg, two, view, table
	return nil
}

// AttachTower implements exec.TowerBinder: it loads the tower into be and
// prepares the tower over the smallest image (one merged token), so that a
// backend without one of the tower's ops refuses it now, naming the op.
func (e *Encode) AttachTower(be exec.Backend) error {
	if e.Config == nil {
		return errors.New("vision.encode: AttachTower before BindTower")
	}
	if err := be.Load(e.view); err != nil {
		return fmt.Errorf("vision.encode: load %s: %w", e.view.Path, err)
	}
	g, err := e.towerGraph(e.Config.SpatialMerge, e.Config.SpatialMerge, false)
	if err != nil {
		return err
	}
	x, err := be.Prepare(g)
	if err != nil {
		return fmt.Errorf("vision.encode: %s: %w", e.view.Path, err)
	}
	x.Close()
	e.backend = be
	return nil
}

// im2colKernel returns the patch kernel name of f as the tensor dst: shape
// [width, 3*patch*patch] (ggml order {3p², width}), columns ordered
// channel, kernel row, kernel column like vision.Layout.PatchRows, in fp16
// (an F16 kernel's bytes are shared, an F32 one is rounded).
func im2colKernel(f *weights.File, name, dst string, c *vision.Config) (*weights.Tensor, error) {
	t, err := f.Tensor(name)
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	shape := []int{3 * c.PatchSize * c.PatchSize, c.Width}
	if t.DType == tensor.F16 {
		return &weights.Tensor{Name: dst, Shape: shape, DType: tensor.F16, Data: t.Data}, nil
	}
	v, err := t.Float32s()
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	data := make([]byte, 2*len(v))
	for i, x := range v {
		h := tensor.F32ToF16(x)
		data[2*i], data[2*i+1] = byte(h), byte(h>>8)
	}
	return &weights.Tensor{Name: dst, Shape: shape, DType: tensor.F16, Data: data}, nil
}

// EncodeImage implements exec.TowerBinder: the tower over p, the image's
// embeddings [Grid.Tokens(), OutputWidth], row-major, one row per image
// token in the text model's order (row-major over the token grid).
func (e *Encode) EncodeImage(ctx context.Context, p *vision.Preprocessed) ([]float32, error) {
	out, err := e.run(ctx, p, false)
	if err != nil {
		return nil, err
	}
	return out["embeddings"], nil
}

// towerGraph records the tower over a pw x ph patch grid (with stages, the
// tower after each stage too).
func (e *Encode) towerGraph(pw, ph int, stages bool) (*tensor.Graph, error) {
	c := e.Config
	n := pw * ph
	b := tensor.NewBuilder(e.view.WeightInfo())
	in := map[string]tensor.Tensor{
		BindPatches: b.InputF32(BindPatches, n, 3*c.PatchSize*c.PatchSize),
		BindPosEmbd: b.InputF32(BindPosEmbd, n, c.Width),
		BindPosY:    b.Input(BindPosY, n),
		BindPosX:    b.Input(BindPosX, n),
	}
	outs, err := e.RecordTower(b, in, stages)
	if err != nil {
		return nil, err
	}
	for name, t := range outs {
		b.Output(name, t)
	}
	g, err := b.Finish()
	if err != nil {
		return nil, fmt.Errorf("vision.encode: %w", err)
	}
	g.Origin = fmt.Sprintf("vision.encode %dx%d patches", pw, ph)
	return g, nil
}

// run records the tower for p's patch grid, prepares it and runs it,
// returning every output (with stages, the tower after each stage too).
func (e *Encode) run(ctx context.Context, p *vision.Preprocessed, stages bool) (map[string][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.backend == nil {
		return nil, errors.New("vision.encode: no backend attached")
	}
	c := e.Config
	l := vision.LayoutOf(p, c.PatchSize, c.SpatialMerge)
	n := l.Patches()
	if n == 0 || l.PW%c.SpatialMerge != 0 || l.PH%c.SpatialMerge != 0 {
		return nil, fmt.Errorf("vision.encode: a %dx%d image is not whole %d-pixel tokens", p.Image.Width, p.Image.Height, c.PatchSize*c.SpatialMerge)
	}
	ys, xs := make([]int32, n), make([]int32, n)
	for i, yx := range l.MergeOrder() {
		ys[i], xs[i] = int32(yx[0]), int32(yx[1])
	}
	batch := &exec.Batch{
		Floats: map[string][]float32{
			BindPatches: l.PatchRows(p),
			BindPosEmbd: l.PositionEmbeddings(e.table, c.PositionGrid(), c.Width),
		},
		Ints: map[string][]int32{BindPosY: ys, BindPosX: xs},
	}
	x, outputs, owned, err := e.prepare(l.PW, l.PH, stages)
	if err != nil {
		return nil, err
	}
	if owned {
		defer x.Close()
	}
	if err := x.Run(ctx, batch); err != nil {
		return nil, fmt.Errorf("vision.encode: %w", err)
	}
	res := map[string][]float32{}
	for _, name := range outputs {
		data, _, _, err := x.Output(name)
		if err != nil {
			return nil, err
		}
		res[name] = append([]float32(nil), data...)
	}
	return res, nil
}

// Workspace implements exec.TowerBinder: the scratch memory of the tower's
// backend (its graphs' buffers), when it accounts it.
func (e *Encode) Workspace() (exec.Workspace, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.backend.(exec.WorkspaceReporter)
	if !ok {
		return exec.Workspace{}, false
	}
	return r.Workspace(), true
}

// prepare returns the tower prepared for a pw x ph patch grid, its
// outputs' names, and whether the caller closes it: with stages a graph
// of its own, else the one kept for the grid (the most recently used),
// prepared the first time; the least recently used are closed while the
// kept graphs' bytes exceed the budget, and a graph larger than the whole
// budget is not kept.
func (e *Encode) prepare(pw, ph int, stages bool) (x exec.Executable, outputs []string, owned bool, err error) {
	grid := [2]int{pw, ph}
	if !stages {
		if i := slices.IndexFunc(e.prepared, func(p preparedTower) bool { return p.grid == grid }); i >= 0 {
			p := e.prepared[i]
			e.prepared = append(slices.Delete(e.prepared, i, i+1), p)
			return p.x, []string{"embeddings"}, false, nil
		}
	}
	g, err := e.towerGraph(pw, ph, stages)
	if err != nil {
		return nil, nil, false, err
	}
	budget := cmp.Or(e.preparedBudget, DefaultPreparedBudget)
	bytes := graphBytes(g)
	if !stages {
		for len(e.prepared) > 0 && e.preparedBytes+bytes > budget {
			e.prepared[0].x.Close()
			e.preparedBytes -= e.prepared[0].bytes
			e.prepared = slices.Delete(e.prepared, 0, 1)
		}
	}
	x, err = e.backend.Prepare(g)
	if err != nil {
		return nil, nil, false, fmt.Errorf("vision.encode: %w", err)
	}
	outputs = slices.Sorted(maps.Keys(g.Outputs))
	if stages || bytes > budget {
		return x, outputs, true, nil
	}
	e.prepared = append(e.prepared, preparedTower{grid: grid, x: x, bytes: bytes})
	e.preparedBytes += bytes
	return x, outputs, false, nil
}

// Close implements exec.TowerBinder: it releases the backend AttachTower
// gave the node (not the mmproj file).
func (e *Encode) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.backend == nil {
		return nil
	}
	for _, p := range e.prepared {
		p.x.Close()
	}
	e.prepared, e.preparedBytes = nil, 0
	err := e.backend.Close()
	e.backend = nil
	return err
}
