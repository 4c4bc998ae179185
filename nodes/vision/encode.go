// Package vision holds the vision.encode node: a Qwen3-VL / Qwen3.5
// vision tower (qwen3vl_merger mmproj) recorded as device ops, and the
// Encoder that runs it over one preprocessed image on a backend of its own
// loaded with the mmproj file.
package vision

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

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

// Encode records the tower over one image's patches: the patch embedding
// (both fp16 kernels, bias, resized position table), Layers pre-LayerNorm
// ViT blocks (fused qkv, 2-D rotary, attention over all patches, GELU
// FFN), v.post_ln, Merge² consecutive patches concatenated, and the
// merger mm.0 -> GELU -> mm.2. Its output "embeddings" [tokens,
// OutputWidth] are the rows that replace an image's placeholder tokens in
// the text model.
type Encode struct {
	Config *vision.Config
	// twoKernels: the file has v.patch_embd.weight.1.
	twoKernels bool
	// Stages also outputs "inp_pos_emb" and "layer_out-N" [patches,
	// Width], the tower after the patch embedding and after block N (what
	// the golden's tower statistics describe).
	Stages bool
}

// Record implements node.DeviceNode. in holds BindPatches [n, 3p²],
// BindPosEmbd [n, Width], BindPosY and BindPosX [n], n a multiple of
// Merge²; the output is "embeddings" [n/Merge², OutputWidth].
func (e *Encode) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	c := e.Config
	if c == nil {
		return nil, errors.New("vision.encode: no mmproj bound")
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
		if e.Stages {
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

// Encoder runs the tower over images on a backend of its own, loaded with
// the mmproj file. It is used by one goroutine at a time.
type Encoder struct {
	node    *Encode
	view    *weights.File // the mmproj with the im2col kernels
	backend exec.Backend
	table   []float32 // v.position_embd.weight [grid², Width]
}

// NewEncoder binds the tower of the mmproj f (read by vision.ReadConfig
// into cfg) to a new backend of the given name. f stays owned by the
// caller and open while the Encoder is used; Close releases the backend.
func NewEncoder(f *weights.File, cfg *vision.Config, backend string, threads int) (*Encoder, error) {
	node := &Encode{Config: cfg}
	k0, err := im2colKernel(f, "v.patch_embd.weight", kernel0, cfg)
	if err != nil {
		return nil, err
	}
	extra := []*weights.Tensor{k0}
	if _, err := f.Tensor("v.patch_embd.weight.1"); err == nil {
		k1, err := im2colKernel(f, "v.patch_embd.weight.1", kernel1, cfg)
		if err != nil {
			return nil, err
		}
		extra, node.twoKernels = append(extra, k1), true
	}
	view, err := f.With(extra...)
	if err != nil {
		return nil, err
	}
	pt, err := f.Tensor("v.position_embd.weight")
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	table, err := pt.Float32s()
	if err != nil {
		return nil, fmt.Errorf("mmproj %s: %w", f.Path, err)
	}
	be, err := exec.New(backend, exec.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	if err := be.Load(view); err != nil {
		be.Close()
		return nil, fmt.Errorf("vision.encode: load %s: %w", f.Path, err)
	}
	return &Encoder{node: node, view: view, backend: be, table: table}, nil
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

// Config returns the tower's hyper-parameters.
func (e *Encoder) Config() *vision.Config { return e.node.Config }

// Encode runs the tower over p: the image's embeddings [Grid.Tokens(),
// OutputWidth], row-major, one row per image token in the text model's
// order (row-major over the token grid).
func (e *Encoder) Encode(ctx context.Context, p *vision.Preprocessed) ([]float32, error) {
	out, err := e.run(ctx, p, false)
	if err != nil {
		return nil, err
	}
	return out["embeddings"], nil
}

// run records the tower for p's patch count, prepares it and runs it,
// returning every output (with stages, the tower after each stage too).
func (e *Encoder) run(ctx context.Context, p *vision.Preprocessed, stages bool) (map[string][]float32, error) {
	c := e.node.Config
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
	b := tensor.NewBuilder(e.view.WeightInfo())
	in := map[string]tensor.Tensor{
		BindPatches: b.InputF32(BindPatches, n, 3*c.PatchSize*c.PatchSize),
		BindPosEmbd: b.InputF32(BindPosEmbd, n, c.Width),
		BindPosY:    b.Input(BindPosY, n),
		BindPosX:    b.Input(BindPosX, n),
	}
	rec := *e.node
	rec.Stages = stages
	outs, err := rec.Record(b, in)
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
	g.Origin = fmt.Sprintf("vision.encode %dx%d patches", l.PW, l.PH)
	x, err := e.backend.Prepare(g)
	if err != nil {
		return nil, fmt.Errorf("vision.encode: %w", err)
	}
	defer x.Close()
	if err := x.Run(ctx, batch); err != nil {
		return nil, fmt.Errorf("vision.encode: %w", err)
	}
	res := make(map[string][]float32, len(outs))
	for name := range outs {
		data, _, _, err := x.Output(name)
		if err != nil {
			return nil, err
		}
		res[name] = append([]float32(nil), data...)
	}
	return res, nil
}

// Close releases the Encoder's backend (not the mmproj file).
func (e *Encoder) Close() error { return e.backend.Close() }
