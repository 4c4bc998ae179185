package vision

import (
	"fmt"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// ProjectorQwen3VL is clip.projector_type of Qwen3-VL and Qwen3.5 towers.
const ProjectorQwen3VL = "qwen3vl_merger"

// Config holds a vision tower's hyper-parameters, read from an mmproj GGUF
// (general.architecture "clip").
type Config struct {
	Path      string // the mmproj file
	Projector string // clip.projector_type; only ProjectorQwen3VL is supported

	ImageSize    int // clip.vision.image_size: pixels per side of the learned position grid
	PatchSize    int // clip.vision.patch_size
	SpatialMerge int // clip.vision.spatial_merge_size: merged patches per side of a token
	Width        int // clip.vision.embedding_length: the ViT's hidden width
	FFNWidth     int // clip.vision.feed_forward_length
	Layers       int // clip.vision.block_count
	Heads        int // clip.vision.attention.head_count
	// Eps is clip.vision.attention.layer_norm_epsilon, used by every LayerNorm.
	Eps float32
	// OutputWidth is clip.vision.projection_dim: the merger's output width,
	// which must equal the text model's embedding width.
	OutputWidth int
	Mean, Std   [3]float32 // clip.vision.image_mean / image_std
}

// PositionGrid returns the side of the learned position table in patches:
// v.position_embd.weight holds PositionGrid()² rows.
func (c *Config) PositionGrid() int { return c.ImageSize / c.PatchSize }

// HeadDim returns the width of one attention head.
func (c *Config) HeadDim() int { return c.Width / c.Heads }

// MergedWidth returns the width of one merged token before the projector:
// SpatialMerge² patches of Width concatenated.
func (c *Config) MergedWidth() int { return c.Width * c.SpatialMerge * c.SpatialMerge }

// Options returns the preprocessing a Qwen3-VL tower expects: the 8 to 4096
// token budget at PatchSize x SpatialMerge, and the file's mean and std.
func (c *Config) Options(lim DecodeLimits) Options {
	return Options{Budget: Qwen3VLBudget(c.PatchSize, c.SpatialMerge), Mean: c.Mean, Std: c.Std, Limits: lim}
}

// ReadConfig reads and checks the hyper-parameters of an mmproj file and
// that every tensor the tower needs is present with its shape. Errors name
// the file and the key or tensor at fault.
func ReadConfig(f *weights.File) (*Config, error) {
	c := &Config{Path: f.Path}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("mmproj %s: %s", f.Path, fmt.Sprintf(format, args...))
	}
	if arch := f.Arch(); arch != "clip" {
		return nil, fail("general.architecture is %q, want \"clip\" (is this the text model?)", arch)
	}
	if ok, err := f.Bool("clip.has_vision_encoder"); err != nil || !ok {
		return nil, fail("clip.has_vision_encoder is not true: the file holds no vision tower")
	}
	var err error
	if c.Projector, err = f.String("clip.projector_type"); err != nil {
		return nil, err
	}
	if c.Projector != ProjectorQwen3VL {
		return nil, fail("key %q: projector %q is not supported (want %q)", "clip.projector_type", c.Projector, ProjectorQwen3VL)
	}
	ints := []struct {
		key string
		dst *int
	}{
		{"clip.vision.image_size", &c.ImageSize},
		{"clip.vision.patch_size", &c.PatchSize},
		{"clip.vision.spatial_merge_size", &c.SpatialMerge},
		{"clip.vision.embedding_length", &c.Width},
		{"clip.vision.feed_forward_length", &c.FFNWidth},
		{"clip.vision.block_count", &c.Layers},
		{"clip.vision.attention.head_count", &c.Heads},
		{"clip.vision.projection_dim", &c.OutputWidth},
	}
	const maxDim = 1 << 20 // far above any real tower, small enough that products cannot overflow
	for _, k := range ints {
		v, err := f.Uint(k.key)
		if err != nil {
			return nil, err
		}
		if v == 0 || v > maxDim {
			return nil, fail("key %q: %d is out of range 1..%d", k.key, v, maxDim)
		}
		*k.dst = int(v)
	}
	eps, err := f.Float("clip.vision.attention.layer_norm_epsilon")
	if err != nil {
		return nil, err
	}
	if !(eps > 0 && eps < 1) {
		return nil, fail("key %q: %g is not in (0, 1)", "clip.vision.attention.layer_norm_epsilon", eps)
	}
	c.Eps = float32(eps)
	for _, k := range []struct {
		key string
		dst *[3]float32
	}{{"clip.vision.image_mean", &c.Mean}, {"clip.vision.image_std", &c.Std}} {
		v, err := f.Float32s(k.key)
		if err != nil {
			return nil, err
		}
		if len(v) != 3 {
			return nil, fail("key %q: %d values, want 3 (R, G, B)", k.key, len(v))
		}
		copy(k.dst[:], v)
	}
	for i, s := range c.Std {
		if !(s > 0) {
			return nil, fail("key %q: std[%d] = %g is not positive", "clip.vision.image_std", i, s)
		}
	}
	if ds, ok := f.Lookup("clip.vision.is_deepstack_layers"); ok {
		flags, isBools := ds.Any().([]bool)
		if !isBools {
			return nil, fail("key %q: %s, want array[bool]", "clip.vision.is_deepstack_layers", ds.TypeName())
		}
		if slices.Contains(flags, true) {
			return nil, fail("key %q: deepstack layers are not supported (the Qwen3.5 text model takes none)", "clip.vision.is_deepstack_layers")
		}
	}
	switch {
	case c.Width%c.Heads != 0:
		return nil, fail("clip.vision.embedding_length %d is not a multiple of clip.vision.attention.head_count %d", c.Width, c.Heads)
	case c.HeadDim()%4 != 0:
		return nil, fail("head width %d is not a multiple of 4, as the 2-D rotary embedding needs", c.HeadDim())
	case c.PatchSize*c.SpatialMerge > maxFactor:
		return nil, fail("clip.vision.patch_size %d x clip.vision.spatial_merge_size %d is above %d pixels", c.PatchSize, c.SpatialMerge, maxFactor)
	case c.ImageSize%c.PatchSize != 0:
		return nil, fail("clip.vision.image_size %d is not a multiple of clip.vision.patch_size %d", c.ImageSize, c.PatchSize)
	}
	if err := c.checkTensors(f); err != nil {
		return nil, err
	}
	return c, nil
}

// maxFactor bounds a token's side in pixels (patch x merge; 32 for
// Qwen3-VL) so that the resize budget's pixel counts cannot overflow.
const maxFactor = 4096

// tensorSpec is one tensor the tower reads, with its shape in ggml order
// (Shape[0] innermost, so a [out, in] matrix is {in, out}).
type tensorSpec struct {
	name     string
	shape    []int
	optional bool
}

// tensorSpecs lists every tensor a qwen3vl_merger tower reads.
func (c *Config) tensorSpecs() []tensorSpec {
	w, p, m := c.Width, c.PatchSize, c.MergedWidth()
	g := c.PositionGrid()
	specs := []tensorSpec{
		{name: "v.patch_embd.weight", shape: []int{p, p, 3, w}},
		// The second temporal half of Qwen's Conv3D patch embedding.
		{name: "v.patch_embd.weight.1", shape: []int{p, p, 3, w}, optional: true},
		{name: "v.patch_embd.bias", shape: []int{w}},
		{name: "v.position_embd.weight", shape: []int{w, g * g}},
	}
	for l := range c.Layers {
		blk := func(s string) string { return fmt.Sprintf("v.blk.%d.%s", l, s) }
		specs = append(specs,
			tensorSpec{name: blk("ln1.weight"), shape: []int{w}},
			tensorSpec{name: blk("ln1.bias"), shape: []int{w}},
			tensorSpec{name: blk("attn_qkv.weight"), shape: []int{w, 3 * w}},
			tensorSpec{name: blk("attn_qkv.bias"), shape: []int{3 * w}},
			tensorSpec{name: blk("attn_out.weight"), shape: []int{w, w}},
			tensorSpec{name: blk("attn_out.bias"), shape: []int{w}},
			tensorSpec{name: blk("ln2.weight"), shape: []int{w}},
			tensorSpec{name: blk("ln2.bias"), shape: []int{w}},
			tensorSpec{name: blk("ffn_up.weight"), shape: []int{w, c.FFNWidth}},
			tensorSpec{name: blk("ffn_up.bias"), shape: []int{c.FFNWidth}},
			tensorSpec{name: blk("ffn_down.weight"), shape: []int{c.FFNWidth, w}},
			tensorSpec{name: blk("ffn_down.bias"), shape: []int{w}},
		)
	}
	return append(specs,
		tensorSpec{name: "v.post_ln.weight", shape: []int{w}},
		tensorSpec{name: "v.post_ln.bias", shape: []int{w}},
		tensorSpec{name: "mm.0.weight", shape: []int{m, m}},
		tensorSpec{name: "mm.0.bias", shape: []int{m}},
		tensorSpec{name: "mm.2.weight", shape: []int{m, c.OutputWidth}},
		tensorSpec{name: "mm.2.bias", shape: []int{c.OutputWidth}},
	)
}

// checkTensors reports the first tensor of tensorSpecs that is missing or
// has another shape.
func (c *Config) checkTensors(f *weights.File) error {
	for _, s := range c.tensorSpecs() {
		t, err := f.Tensor(s.name)
		if err != nil {
			if s.optional {
				continue
			}
			return fmt.Errorf("mmproj %s: tensor %q is missing", f.Path, s.name)
		}
		if !slices.Equal(t.Shape, s.shape) {
			return fmt.Errorf("mmproj %s: tensor %q has shape %v, want %v", f.Path, s.name, t.Shape, s.shape)
		}
	}
	return nil
}

// CheckTextModel reports whether the tower's output width equals the
// embedding width (<arch>.embedding_length) of the text model text.
func (c *Config) CheckTextModel(text *weights.File) error {
	key := text.Arch() + ".embedding_length"
	n, err := text.Uint(key)
	if err != nil {
		return fmt.Errorf("mmproj %s with model %s: %w", c.Path, text.Path, err)
	}
	if n != uint64(c.OutputWidth) {
		return fmt.Errorf("mmproj %s does not fit model %s: the projector outputs %d-wide embeddings (clip.vision.projection_dim), the model's %s is %d",
			c.Path, text.Path, c.OutputWidth, key, n)
	}
	return nil
}

// OpenFile maps the mmproj at path: a GGUF file (weights.Open), or a
// Hugging Face checkpoint folder whose vision tower is read as the
// converter's mmproj (weights.OpenHFVision). Errors start "mmproj: ".
func OpenFile(path string) (*weights.File, error) {
	open := weights.Open
	if weights.IsHFDir(path) {
		open = func(dir string) (*weights.File, error) { return weights.OpenHFVision(dir, weights.HFOptions{}) }
	}
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("mmproj: %w", err)
	}
	return f, nil
}

// OpenMMProj maps the mmproj at path (OpenFile) and reads its Config. The
// caller owns the returned file and closes it; on error nothing stays
// open. This is what a --mmproj flag calls.
func OpenMMProj(path string) (*weights.File, *Config, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := ReadConfig(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, c, nil
}
