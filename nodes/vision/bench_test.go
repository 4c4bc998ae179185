package vision

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

var benchTower = flag.String("bench-tower", "", "BenchmarkEncode448: write the generated tower (mmproj GGUF) and the 448x448 PNG it encodes to this path and this path + .png, to run llama-mtmd-cli on the same files")

// benchShape is the generated tower of BenchmarkEncode448: Qwen3.5-0.8B's
// vision width (768 wide, 12 blocks of 12 heads, FFN 3072, 48x48
// learned positions), with a 64-wide projection so that llama-mtmd-cli can
// pair it with tiny-qwen35-vl-f32.gguf.
var benchShape = map[string]uint32{
	"clip.vision.image_size": 768, "clip.vision.embedding_length": 768, "clip.vision.feed_forward_length": 3072,
	"clip.vision.block_count": 12, "clip.vision.attention.head_count": 12, "clip.vision.projection_dim": 64,
}

// writeBenchTower writes the tiny mmproj's metadata with benchShape's
// sizes and seeded random weights (matrices f16, vectors f32) to path.
func writeBenchTower(tb testing.TB, path string) {
	tb.Helper()
	tiny, err := weights.Open(filepath.Join(modelsDir, "tiny-qwen35-mmproj-f32.gguf"))
	if err != nil {
		tb.Skipf("mmproj not available: %v", err)
	}
	defer tiny.Close()
	var kvs []weights.KV
	for _, kv := range tiny.KV {
		if v, ok := benchShape[kv.Key]; ok {
			kv.Value = weights.U32(v)
		}
		if kv.Key == "clip.vision.is_deepstack_layers" {
			kv.Value = weights.Arr(make([]bool, benchShape["clip.vision.block_count"]))
		}
		kvs = append(kvs, kv)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type spec struct {
		name  string
		shape []int
	}
	var specs []spec // the tiny tower's tensors, block 0's repeated for every block
	for _, t := range tiny.Tensors {
		rest, inBlock := strings.CutPrefix(t.Name, "v.blk.")
		switch {
		case !inBlock:
			specs = append(specs, spec{t.Name, t.Shape})
		case strings.HasPrefix(rest, "0."):
			for l := range int(benchShape["clip.vision.block_count"]) {
				specs = append(specs, spec{fmt.Sprintf("v.blk.%d.%s", l, rest[2:]), t.Shape})
			}
		}
	}
	var tensors []*weights.Tensor
	for _, t := range specs {
		shape := benchTensorShape(t.name, t.shape)
		n := 1
		for _, d := range shape {
			n *= d
		}
		out := &weights.Tensor{Name: t.name, Shape: shape, DType: tensor.F32}
		vals := make([]float32, n)
		for i := range vals {
			vals[i] = float32(rng.NormFloat64() * 0.02)
		}
		if len(shape) == 1 && filepath.Ext(t.name) == ".weight" {
			for i := range vals {
				vals[i] = 1 // LayerNorm scales
			}
		}
		if len(shape) > 1 && t.name != "v.position_embd.weight" {
			out.DType, out.Data = tensor.F16, make([]byte, 2*n)
			for i, v := range vals {
				h := tensor.F32ToF16(v)
				out.Data[2*i], out.Data[2*i+1] = byte(h), byte(h>>8)
			}
		} else {
			out.Data = make([]byte, 4*n)
			for i, v := range vals {
				b := math.Float32bits(v)
				out.Data[4*i], out.Data[4*i+1], out.Data[4*i+2], out.Data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
			}
		}
		tensors = append(tensors, out)
	}
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := weights.Write(f, tiny.Version, kvs, tensors); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// benchTensorShape is the ggml shape of the tiny tower's tensor name in
// benchShape's sizes.
func benchTensorShape(name string, tiny []int) []int {
	w, ffn, out := int(benchShape["clip.vision.embedding_length"]), int(benchShape["clip.vision.feed_forward_length"]), int(benchShape["clip.vision.projection_dim"])
	grid := int(benchShape["clip.vision.image_size"]) / 16
	m := 4 * w
	switch {
	case name == "v.patch_embd.weight" || name == "v.patch_embd.weight.1":
		return []int{16, 16, 3, w}
	case name == "v.position_embd.weight":
		return []int{w, grid * grid}
	case name == "mm.0.weight":
		return []int{m, m}
	case name == "mm.0.bias":
		return []int{m}
	case name == "mm.2.weight":
		return []int{m, out}
	case name == "mm.2.bias":
		return []int{out}
	}
	switch filepath.Ext(name[:len(name)-len(filepath.Ext(name))]) + filepath.Ext(name) {
	case ".attn_qkv.weight":
		return []int{w, 3 * w}
	case ".attn_qkv.bias":
		return []int{3 * w}
	case ".attn_out.weight":
		return []int{w, w}
	case ".ffn_up.weight":
		return []int{w, ffn}
	case ".ffn_up.bias":
		return []int{ffn}
	case ".ffn_down.weight":
		return []int{ffn, w}
	}
	if len(tiny) == 1 {
		return []int{w} // LayerNorm weights and biases, the other biases
	}
	panic("bench tower: no shape for " + name)
}

// BenchmarkEncode448 encodes a 448x448 image (196 tokens of 784 patches)
// with a generated tower at Qwen3.5-0.8B's vision width on the CPU
// backend; tokens/s is the tower's output tokens per second.
func BenchmarkEncode448(b *testing.B) {
	path := *benchTower
	if path == "" {
		path = filepath.Join(b.TempDir(), "tower.gguf")
	}
	writeBenchTower(b, path)
	img := image.NewRGBA(image.Rect(0, 0, 448, 448))
	for y := range 448 {
		for x := range 448 {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		b.Fatal(err)
	}
	if *benchTower != "" {
		if err := os.WriteFile(path+".png", pngData.Bytes(), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	f, cfg, err := vision.OpenMMProj(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	e := attachedTower(b, f, 0)
	defer e.Close()
	p, err := vision.Preprocess(pngData.Bytes(), cfg.Options(vision.DecodeLimits{}))
	if err != nil {
		b.Fatal(err)
	}
	if p.Grid.Tokens() != 196 {
		b.Fatalf("%d tokens, want 196 (14x14)", p.Grid.Tokens())
	}
	b.ResetTimer()
	for range b.N {
		if _, err := e.EncodeImage(context.Background(), p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*p.Grid.Tokens())/b.Elapsed().Seconds(), "tokens/s")
}
