package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// rewrite writes a copy of the GGUF at path with its metadata and tensors
// passed through edit, and opens it.
func rewrite(t *testing.T, path string, edit func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor)) *weights.File {
	t.Helper()
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	kvs, ts := edit(slices.Clone(f.KV), slices.Clone(f.Tensors))
	var buf bytes.Buffer
	if err := weights.Write(&buf, f.Version, kvs, ts); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := weights.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// f32Tensor is a 1-D f32 tensor holding vals.
func f32Tensor(name string, vals ...float32) *weights.Tensor {
	data := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(v))
	}
	return &weights.Tensor{Name: name, Shape: []int{len(vals)}, DType: tensor.F32, Data: data}
}

// ramp returns n values 0.01, 0.02, ...
func ramp(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i+1) / 100
	}
	return v
}

// qwen2FromQwen3 edits tiny-qwen3 into a qwen2: no q/k norms, QKV biases.
func qwen2FromQwen3(skip string) func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
	return func(kvs []weights.KV, ts []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
		for i, kv := range kvs {
			if kv.Key == "general.architecture" {
				kvs[i].Value = weights.Str("qwen2")
			}
			if rest, ok := strings.CutPrefix(kv.Key, "qwen3."); ok {
				kvs[i].Key = "qwen2." + rest
			}
		}
		ts = slices.DeleteFunc(ts, func(t *weights.Tensor) bool {
			return strings.HasSuffix(t.Name, ".attn_q_norm.weight") || strings.HasSuffix(t.Name, ".attn_k_norm.weight")
		})
		for l := range 2 {
			for _, b := range []struct {
				name string
				n    int
			}{{"attn_q", 128}, {"attn_k", 64}, {"attn_v", 64}} {
				name := "blk." + string(rune('0'+l)) + "." + b.name + ".bias"
				if name != skip {
					ts = append(ts, f32Tensor(name, ramp(b.n)...))
				}
			}
		}
		return kvs, ts
	}
}

// record records the forward pass of c over 3 tokens.
func record(t *testing.T, f *weights.File, c *Config) *tensor.Graph {
	t.Helper()
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		w, err := f.Tensor(name)
		if err != nil {
			return 0, 0, 0, false
		}
		return w.DType, w.Rows(), w.RowLen(), true
	})
	b.Input("logit_rows", 1)
	if _, err := RecordLayers(b, c, b.Input("tokens", 3), b.Input("positions", 3), c.Layers); err != nil {
		t.Fatal(err)
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestQwen2AddsQKVBiasesBeforeRoPE(t *testing.T) {
	f := rewrite(t, sharedModel(t, "tiny-qwen3-f32.gguf"), qwen2FromQwen3(""))
	c, err := ReadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if !c.QKVBias || c.QKNorm || c.RopeMode != tensor.RoPENeox || c.RopeFreqs != "" {
		t.Fatalf("config %+v", c)
	}
	g := record(t, f, c)
	var biased []string
	for _, op := range g.Ops {
		if op.Kind != tensor.OpAddRow {
			continue
		}
		x, w := g.Ops[op.Args[0].ID], g.Ops[op.Args[1].ID]
		if x.Kind != tensor.OpMatMul {
			t.Errorf("bias %s is added to a %v, want a matmul", w.Name, x.Kind)
		}
		if next := g.Ops[op.Out.ID+1:]; !slices.ContainsFunc(next, func(o tensor.Op) bool {
			return slices.ContainsFunc(o.Args, func(a tensor.Tensor) bool { return a.ID == op.Out.ID })
		}) {
			t.Errorf("bias %s: result unused", w.Name)
		}
		biased = append(biased, g.Ops[x.Args[1].ID].Name+" + "+w.Name)
	}
	want := []string{
		"blk.0.attn_q.weight + blk.0.attn_q.bias", "blk.0.attn_k.weight + blk.0.attn_k.bias", "blk.0.attn_v.weight + blk.0.attn_v.bias",
		"blk.1.attn_q.weight + blk.1.attn_q.bias", "blk.1.attn_k.weight + blk.1.attn_k.bias", "blk.1.attn_v.weight + blk.1.attn_v.bias",
	}
	if !slices.Equal(biased, want) {
		t.Errorf("biases added:\n%s\nwant:\n%s", strings.Join(biased, "\n"), strings.Join(want, "\n"))
	}
	for _, op := range g.Ops {
		if op.Kind == tensor.OpRoPE && g.Ops[op.Args[0].ID].Kind != tensor.OpAddRow {
			t.Errorf("rope of %v, want of a biased projection", g.Ops[op.Args[0].ID].Kind)
		}
	}
}

func TestQwen2MissingBiasIsNamed(t *testing.T) {
	f := rewrite(t, sharedModel(t, "tiny-qwen3-f32.gguf"), qwen2FromQwen3("blk.1.attn_v.bias"))
	_, err := ReadConfig(f)
	if err == nil || !strings.Contains(err.Error(), `"blk.1.attn_v.bias"`) {
		t.Errorf("err = %v, want one naming blk.1.attn_v.bias", err)
	}
}

func TestLlamaRopeFreqs(t *testing.T) {
	path := sharedModel(t, "tiny-llama-f32.gguf") // head_dim 16: 8 factors
	add := func(extra ...*weights.Tensor) func([]weights.KV, []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
		return func(kvs []weights.KV, ts []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
			return kvs, append(ts, extra...)
		}
	}
	t.Run("factors are passed to every rope", func(t *testing.T) {
		f := rewrite(t, path, add(f32Tensor(RopeFreqsName, 1, 1, 1, 1, 2, 4, 8, 8)))
		c, err := ReadConfig(f)
		if err != nil {
			t.Fatal(err)
		}
		if c.RopeFreqs != RopeFreqsName {
			t.Fatalf("RopeFreqs = %q", c.RopeFreqs)
		}
		n := 0
		for _, op := range record(t, f, c).Ops {
			if op.Kind == tensor.OpRoPE {
				n++
				if len(op.Args) != 3 {
					t.Errorf("rope with %d args, want 3", len(op.Args))
				}
			}
		}
		if n != 4 {
			t.Errorf("%d rope ops, want 4", n)
		}
	})
	t.Run("a wrong count is an error", func(t *testing.T) {
		f := rewrite(t, path, add(f32Tensor(RopeFreqsName, 1, 2, 4, 8)))
		if _, err := ReadConfig(f); err == nil || !strings.Contains(err.Error(), RopeFreqsName) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("other rope scaling types are refused", func(t *testing.T) {
		f := rewrite(t, path, func(kvs []weights.KV, ts []*weights.Tensor) ([]weights.KV, []*weights.Tensor) {
			return append(kvs, weights.KV{Key: "llama.rope.scaling.type", Value: weights.Str("linear")}), ts
		})
		if _, err := ReadConfig(f); err == nil || !strings.Contains(err.Error(), `llama.rope.scaling.type "linear" not supported`) {
			t.Errorf("err = %v", err)
		}
	})
}
