package vision

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// This file runs the whole qwen3vl_merger tower on the host, written out
// plainly from the facts in the golden README, as an oracle for the future
// vision.encode node: it checks that PatchRows, PositionEmbeddings and
// MergeOrder are the inputs the tower needs, and measures how close an
// independent float32 implementation gets to llama.cpp.

// hostTower holds the tiny tower's weights as float32 rows.
type hostTower struct {
	cfg *Config
	get func(name string) []float32
}

// linear returns x W^T + b for x [n, in] and W [out, in].
func linear(x []float32, n, in int, w, b []float32) []float32 {
	out := len(b)
	y := make([]float32, n*out)
	for r := range n {
		xr := x[r*in : (r+1)*in]
		for o := range out {
			var s float32
			for j, v := range xr {
				s += w[o*in+j] * v
			}
			y[r*out+o] = s + b[o]
		}
	}
	return y
}

// layerNorm normalises each row of x [n, width] as ggml_norm does (sums
// in float64) and applies weight and bias.
func layerNorm(x []float32, width int, w, b []float32, eps float32) []float32 {
	y := make([]float32, len(x))
	for r := 0; r < len(x); r += width {
		row := x[r : r+width]
		var sum float64
		for _, v := range row {
			sum += float64(v)
		}
		mean := float32(sum / float64(width))
		var sq float64
		for _, v := range row {
			d := v - mean
			sq += float64(d * d)
		}
		scale := 1 / float32(math.Sqrt(float64(float32(sq/float64(width))+eps)))
		for i, v := range row {
			y[r+i] = (v-mean)*scale*w[i] + b[i]
		}
	}
	return y
}

// gelu is ggml's tanh GELU through its fp16 table.
func gelu(x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	}
	h := tensor.F16ToF32(tensor.F32ToF16(x))
	const sqrt2OverPi, coefA = 0.79788456080286535587989211986876, 0.044715
	inner := float32(sqrt2OverPi) * h * (1 + float32(coefA)*h*h)
	g := 0.5 * h * (1 + float32(math.Tanh(float64(inner))))
	return tensor.F16ToF32(tensor.F32ToF16(g))
}

// rope2D rotates each head of x [n, width] in place: pairs (i, i+half) of a
// head; the first half/2 pairs by the patch row, the rest by the column,
// angle = position x 10000^(-k/(half/2)) with k counted from the section's
// start.
func rope2D(x []float32, n, width, headDim int, pos [][2]int) {
	half := headDim / 2
	section := half / 2
	for r := range n {
		for h := 0; h < width; h += headDim {
			v := x[r*width+h:][:headDim]
			for i := range half {
				p, k := pos[r][0], i
				if i >= section {
					p, k = pos[r][1], i-section
				}
				theta := float32(p) * float32(math.Pow(10000, -float64(k)/float64(section)))
				c, s := float32(math.Cos(float64(theta))), float32(math.Sin(float64(theta)))
				a, b := v[i], v[i+half]
				v[i], v[i+half] = a*c-b*s, a*s+b*c
			}
		}
	}
}

// attention is softmax(q k^T / sqrt(headDim)) v per head over all n rows.
func attention(q, k, v []float32, n, width, headDim int) []float32 {
	out := make([]float32, n*width)
	scale := 1 / float32(math.Sqrt(float64(headDim)))
	scores := make([]float32, n)
	for h := 0; h < width; h += headDim {
		for i := range n {
			qi := q[i*width+h:][:headDim]
			maxScore := float32(math.Inf(-1))
			for j := range n {
				var s float32
				for d, kv := range k[j*width+h:][:headDim] {
					s += qi[d] * kv
				}
				scores[j] = s * scale
				maxScore = max(maxScore, scores[j])
			}
			var sum float64
			for j := range n {
				scores[j] = float32(math.Exp(float64(scores[j] - maxScore)))
				sum += float64(scores[j])
			}
			o := out[i*width+h:][:headDim]
			for j := range n {
				p := scores[j] / float32(sum)
				for d, vv := range v[j*width+h:][:headDim] {
					o[d] += p * vv
				}
			}
		}
	}
	return out
}

// newHostTower loads the tiny mmproj's config and weights.
func newHostTower(t *testing.T) *hostTower {
	f := openModel(t, "tiny-qwen35-mmproj-f32.gguf")
	cfg, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	return &hostTower{cfg: cfg, get: func(name string) []float32 {
		tn, err := f.Tensor(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tn.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}}
}

// embed returns the tower's input [patches, Width] for p: the patch
// convolution over PatchRows with both temporal halves of the kernel
// rounded to fp16 (ggml's F16 im2col), F32 accumulation, plus bias and
// PositionEmbeddings.
func (tw *hostTower) embed(p *Preprocessed) []float32 {
	c := tw.cfg
	l := LayoutOf(p, c.PatchSize, c.SpatialMerge)
	n, w, cols := l.Patches(), c.Width, 3*c.PatchSize*c.PatchSize
	k0, k1 := tw.get("v.patch_embd.weight"), tw.get("v.patch_embd.weight.1")
	RoundToHalf(k0)
	RoundToHalf(k1)
	rows := l.PatchRows(p)
	zero := make([]float32, w)
	a, b := linear(rows, n, cols, k0, zero), linear(rows, n, cols, k1, zero)
	bias, pos := tw.get("v.patch_embd.bias"), l.PositionEmbeddings(tw.get("v.position_embd.weight"), c.PositionGrid(), w)
	x := make([]float32, n*w)
	for i := range x {
		x[i] = a[i] + b[i] + bias[i%w] + pos[i]
	}
	return x
}

// run returns the projector output [tokens, OutputWidth] of p and the
// statistics of the tower after patch+position embedding and each layer.
func (tw *hostTower) run(p *Preprocessed) ([]float32, map[string]goldenStats) {
	c := tw.cfg
	l := LayoutOf(p, c.PatchSize, c.SpatialMerge)
	n, w := l.Patches(), c.Width
	x := tw.embed(p)
	stats := map[string]goldenStats{"inp_pos_emb": statsOf(x)}
	order := l.MergeOrder()
	for layer := range c.Layers {
		g := func(s string) []float32 { return tw.get("v.blk." + strconv.Itoa(layer) + "." + s) }
		h := layerNorm(x, w, g("ln1.weight"), g("ln1.bias"), c.Eps)
		qkv := linear(h, n, w, g("attn_qkv.weight"), g("attn_qkv.bias")) // [n, 3w]
		q, k, v := make([]float32, n*w), make([]float32, n*w), make([]float32, n*w)
		for r := range n {
			copy(q[r*w:], qkv[r*3*w:][:w])
			copy(k[r*w:], qkv[r*3*w+w:][:w])
			copy(v[r*w:], qkv[r*3*w+2*w:][:w])
		}
		rope2D(q, n, w, c.HeadDim(), order)
		rope2D(k, n, w, c.HeadDim(), order)
		att := linear(attention(q, k, v, n, w, c.HeadDim()), n, w, g("attn_out.weight"), g("attn_out.bias"))
		for i := range x {
			x[i] += att[i]
		}
		h = layerNorm(x, w, g("ln2.weight"), g("ln2.bias"), c.Eps)
		up := linear(h, n, w, g("ffn_up.weight"), g("ffn_up.bias"))
		for i := range up {
			up[i] = gelu(up[i])
		}
		down := linear(up, n, c.FFNWidth, g("ffn_down.weight"), g("ffn_down.bias"))
		for i := range x {
			x[i] += down[i]
		}
		stats["layer_out-"+strconv.Itoa(layer)] = statsOf(x)
	}
	x = layerNorm(x, w, tw.get("v.post_ln.weight"), tw.get("v.post_ln.bias"), c.Eps)
	tokens, m := n/(c.SpatialMerge*c.SpatialMerge), c.MergedWidth() // [tokens, m]: consecutive patches
	mid := linear(x, tokens, m, tw.get("mm.0.weight"), tw.get("mm.0.bias"))
	for i := range mid {
		mid[i] = gelu(mid[i])
	}
	return linear(mid, tokens, m, tw.get("mm.2.weight"), tw.get("mm.2.bias")), stats
}

// towerTolerance bounds the relative difference (against max(1, |value|))
// of the tower's statistics and embedding values. Measured: most differ by
// under 1e-6 (float32 summation order), but where a pre-GELU value sits at
// an fp16 rounding boundary the other summation order picks the neighbouring
// fp16 and that GELU output moves by one fp16 step (2^-11 relative): up to
// 2.6e-4 on a layer's sum and 6.7e-4 on one value of sq64's embeddings.
// Turning the patches' 2-D rotary by (x, y) instead of (y, x) moves them by
// 3e-3 to 1.8.
const towerTolerance = 2e-3

// TestHostTowerMatchesLlamaCpp runs the tower on every golden image and
// compares the statistics after each stage, the first values of the first
// and last image tokens, and sq64's full embedding matrix.
func TestHostTowerMatchesLlamaCpp(t *testing.T) {
	tw := newHostTower(t)
	cfg := tw.cfg
	full := goldenEmbeddings(t)
	near := cmp.Comparer(func(a, b float64) bool {
		return math.Abs(a-b) <= towerTolerance*max(1, math.Abs(a), math.Abs(b))
	})
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
			emb, stats := tw.run(p)
			stats["embd"] = statsOf(emb)
			want := map[string]goldenStats{"embd": g.EmbdStats}
			for k, v := range g.Tower {
				want[k] = v
			}
			if diff := cmp.Diff(want, stats, near); diff != "" {
				t.Errorf("tower statistics (-llama.cpp +ours):\n%s", diff)
			}
			ow := cfg.OutputWidth
			first, last := f64s(emb[:8]), f64s(emb[len(emb)-ow:][:8])
			if diff := cmp.Diff([2][]float64{g.First8, g.LastRowFirst8}, [2][]float64{first, last}, near); diff != "" {
				t.Errorf("first 8 values of the first and last image token (-llama.cpp +ours):\n%s", diff)
			}
			if values, ok := full[g.Image]; ok {
				if diff := cmp.Diff(values, f64s(emb), near); diff != "" {
					t.Errorf("image embeddings (-llama.cpp +ours):\n%s", diff)
				}
			}
		})
	}
}

func f64s(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}

// goldenEmbeddings returns the golden's full projector outputs by image
// ([n_tokens x n_embd] values, row-major).
func goldenEmbeddings(t *testing.T) map[string][]float64 {
	data, err := os.ReadFile(filepath.Join(goldenDir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Skipf("vision golden not available: %v", err)
	}
	var g struct {
		Embeddings map[string]struct {
			Values []float64 `json:"values"`
		} `json:"image_embeddings"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for k, v := range g.Embeddings {
		out[k] = v.Values
	}
	if len(out) == 0 {
		t.Fatal("golden has no image_embeddings")
	}
	return out
}
