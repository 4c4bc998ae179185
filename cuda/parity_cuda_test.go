//go:build cuda

package cuda

// Parity of the CUDA backend with the CPU backend, through the exec
// contract both implement: every kernel on random weights of every dtype
// and every KV format, the KV page bytes against page.Codec, graphs replayed
// against eager launches, and greedy generations of the bundled models.
// These tests need a GPU: `just gpu-check` builds them for one.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	"github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
	"github.com/ninfer/ninfer-go/suites/golden"
)

// pair is a CPU and a CUDA backend with f loaded and the same KV layout.
type pair struct {
	cpu, gpu exec.Backend
}

func newPair(t *testing.T, f *weights.File, l exec.KVLayout, eager bool) pair {
	t.Helper()
	p := pair{cpu: cpu.New(exec.Options{Threads: 2}), gpu: New(exec.Options{Eager: eager})}
	t.Cleanup(func() { p.cpu.Close(); p.gpu.Close() })
	for _, be := range []exec.Backend{p.cpu, p.gpu} {
		if err := be.Load(f); err != nil {
			t.Fatalf("%s: load: %v", be.Name(), err)
		}
		if err := be.Reserve(l); err != nil {
			t.Fatalf("%s: reserve: %v", be.Name(), err)
		}
	}
	return p
}

// run prepares g's recorder on both backends (the CUDA one at its bucket
// shape) and runs each batch in turn, returning every named output of
// every batch.
func (p pair) run(t *testing.T, f *weights.File, rec func(b *tensor.Builder, rows, logitRows int), batches ...*exec.Batch) (cpuOut, gpuOut []map[string][]float32) {
	t.Helper()
	for _, be := range []exec.Backend{p.cpu, p.gpu} {
		for _, batch := range batches {
			rows, logitRows := exec.BucketShape(be, len(batch.Tokens), len(batch.LogitRows))
			b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
				w, err := f.Tensor(name)
				if err != nil {
					return 0, 0, 0, false
				}
				return w.DType, w.Rows(), w.RowLen(), true
			})
			rec(b, rows, logitRows)
			g, err := b.Finish()
			if err != nil {
				t.Fatal(err)
			}
			g.Origin = fmt.Sprintf("parity rows %d logits %d", rows, logitRows)
			x, err := be.Prepare(g)
			if err != nil {
				t.Fatalf("%s: prepare: %v", be.Name(), err)
			}
			if err := x.Run(context.Background(), batch); err != nil {
				t.Fatalf("%s: run: %v", be.Name(), err)
			}
			outs := map[string][]float32{}
			for name := range g.Outputs {
				// The device ids first: they must not need the logits copy.
				var ids []int32
				if ax, ok := x.(exec.ArgmaxOutputter); ok && ax.HasArgmax(name) {
					if ids, err = ax.OutputArgmax(name); err != nil {
						t.Fatal(err)
					}
				}
				data, rows, cols, err := x.Output(name)
				if err != nil {
					t.Fatal(err)
				}
				if want := len(batch.Tokens); rows != want && rows != len(batch.LogitRows) {
					t.Fatalf("%s: output %s has %d rows for a batch of %d", be.Name(), name, rows, want)
				}
				outs[name] = slices.Clone(data[:rows*cols])
				if ids != nil {
					if len(ids) != rows {
						t.Fatalf("%s: %d ids for %d rows of %s", be.Name(), len(ids), rows, name)
					}
					for r := range rows {
						if want := sample.Argmax(data[r*cols : (r+1)*cols]); ids[r] != want {
							t.Errorf("%s: output %s row %d: device argmax %d, of the copied logits %d", be.Name(), name, r, ids[r], want)
						}
					}
				}
			}
			x.Close()
			if be == p.cpu {
				cpuOut = append(cpuOut, outs)
			} else {
				gpuOut = append(gpuOut, outs)
			}
		}
	}
	return cpuOut, gpuOut
}

func TestMatMulParity(t *testing.T) {
	const vocab, in, out = 40, 256, 96
	for _, dt := range matmulDTypes {
		r := rand.New(rand.NewPCG(1, uint64(dt)))
		f := memFile(t, randTensor(r, "x", tensor.F32, vocab, in), randTensor(r, "w", dt, out, in))
		p := newPair(t, f, exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 8}, false)
		for _, rows := range []int{1, 3, 8, 9, 40, 300} {
			batch := oneSeq(r, vocab, 0, rows, 8)
			batch.Positions = make([]int32, rows) // no attention here
			cpuOut, gpuOut := p.run(t, f, func(b *tensor.Builder, rows, logitRows int) {
				x := b.GetRows(b.Weight("x"), b.Input("tokens", rows))
				b.Input("positions", rows)
				b.Input("logit_rows", logitRows)
				b.Output("y", b.MatMul(x, b.Weight("w")))
				b.Output("x", x)
			}, batch)
			near(t, fmt.Sprintf("%v get_rows %d rows", dt, rows), cpuOut[0]["x"], gpuOut[0]["x"], 0)
			near(t, fmt.Sprintf("%v matmul %d rows", dt, rows), cpuOut[0]["y"], gpuOut[0]["y"], 2e-5)
		}
	}
}

func TestGetRowsParity(t *testing.T) {
	const vocab, cols = 50, 128
	for _, dt := range matmulDTypes {
		r := rand.New(rand.NewPCG(2, uint64(dt)))
		f := memFile(t, randTensor(r, "e", dt, vocab, cols))
		p := newPair(t, f, exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 8}, false)
		batch := oneSeq(r, vocab, 0, 7, 8)
		batch.Positions = make([]int32, 7)
		cpuOut, gpuOut := p.run(t, f, func(b *tensor.Builder, rows, logitRows int) {
			b.Input("positions", rows)
			b.Input("logit_rows", logitRows)
			b.Output("e", b.GetRows(b.Weight("e"), b.Input("tokens", rows)))
		}, batch)
		near(t, fmt.Sprintf("%v get_rows", dt), cpuOut[0]["e"], gpuOut[0]["e"], 0)
	}
}

func TestElementwiseParity(t *testing.T) {
	const vocab, d, headDim = 30, 128, 32
	r := rand.New(rand.NewPCG(3, 3))
	f := memFile(t, randTensor(r, "a", tensor.F32, vocab, d), randTensor(r, "b", tensor.F32, vocab, d),
		randTensor(r, "norm", tensor.F32, 1, d), randTensor(r, "hnorm", tensor.F16, 1, headDim))
	p := newPair(t, f, exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 8}, false)
	batch := oneSeq(r, vocab, 0, 11, 8)
	for i := range batch.Positions {
		batch.Positions[i] = int32(r.IntN(5000)) // large angles
	}
	batch.LogitRows = []int32{10, 3, 0}
	cpuOut, gpuOut := p.run(t, f, func(b *tensor.Builder, rows, logitRows int) {
		tok, pos := b.Input("tokens", rows), b.Input("positions", rows)
		x, y := b.GetRows(b.Weight("a"), tok), b.GetRows(b.Weight("b"), tok)
		n := b.RMSNorm(x, b.Weight("norm"), d, 1e-6)
		h := b.RMSNorm(y, b.Weight("hnorm"), headDim, 1e-5)
		neox := b.RoPE(n, pos, tensor.RoPEArgs{HeadDim: headDim, Dims: headDim, Base: 1e6, Mode: tensor.RoPENeox})
		norm := b.RoPE(h, pos, tensor.RoPEArgs{HeadDim: headDim, Dims: 16, Base: 10000, Mode: tensor.RoPENorm})
		sum := b.Add(neox, norm)
		sw := b.SwiGLU(sum, y)
		sel := b.SelectRows(sw, b.Input("logit_rows", logitRows))
		for name, v := range map[string]tensor.Tensor{"norm": n, "headnorm": h, "neox": neox, "ropenorm": norm, "add": sum, "swiglu": sw, "select": sel} {
			b.Output(name, v)
		}
	}, batch)
	for _, name := range []string{"norm", "headnorm", "neox", "ropenorm", "add", "swiglu", "select"} {
		near(t, name, cpuOut[0][name], gpuOut[0][name], 1e-5)
	}
}

// attentionRec records attention over q, k and v gathered from three tables.
func attentionRec(a tensor.AttentionArgs) func(b *tensor.Builder, rows, logitRows int) {
	return func(b *tensor.Builder, rows, logitRows int) {
		tok := b.Input("tokens", rows)
		b.Input("positions", rows)
		b.Input("logit_rows", logitRows)
		q, k, v := b.GetRows(b.Weight("q"), tok), b.GetRows(b.Weight("k"), tok), b.GetRows(b.Weight("v"), tok)
		b.Output("o", b.Attention(q, k, v, a))
		b.Output("k", k)
		b.Output("v", v)
	}
}

func TestAttentionParity(t *testing.T) {
	const vocab = 64
	for _, format := range page.FormatNames() {
		for _, c := range []struct{ heads, kvHeads, headDim, blockTokens int }{{4, 2, 64, 16}, {8, 8, 32, 4}, {16, 2, 128, 32}} {
			name := fmt.Sprintf("%s/h%d-kv%d-d%d-b%d", format, c.heads, c.kvHeads, c.headDim, c.blockTokens)
			t.Run(name, func(t *testing.T) {
				r := rand.New(rand.NewPCG(4, uint64(c.headDim)))
				kvDim := c.kvHeads * c.headDim
				f := memFile(t, randTensor(r, "q", tensor.F32, vocab, c.heads*c.headDim),
					randTensor(r, "k", tensor.F32, vocab, kvDim), randTensor(r, "v", tensor.F32, vocab, kvDim))
				l := exec.KVLayout{Layers: 1, KVDim: kvDim, BlockTokens: c.blockTokens, Blocks: 40, DType: format}
				p := newPair(t, f, l, false)
				a := tensor.AttentionArgs{Layer: 0, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.headDim, Scale: float32(1 / math.Sqrt(float64(c.headDim)))}
				// Two sequences: a 37-token and a 5-token prefill, then three
				// decode steps of both together, then a 3-token verify-like
				// step of the second.
				tables := [][]int32{{7, 3, 11, 19, 2, 30, 31, 32, 33, 34}, {5, 6, 8, 9, 10, 12}}
				var steps []*exec.Batch
				steps = append(steps, seqBatch(randIDs(r, vocab, 37), count(0, 37), make([]int32, 37), tables, []int32{36}))
				steps = append(steps, seqBatch(randIDs(r, vocab, 5), count(0, 5), fill(1, 5), tables, []int32{4}))
				for s := range 3 {
					steps = append(steps, seqBatch(randIDs(r, vocab, 2), []int32{int32(37 + s), int32(5 + s)}, []int32{0, 1}, tables, []int32{0, 1}))
				}
				steps = append(steps, seqBatch(randIDs(r, vocab, 3), count(8, 3), fill(1, 3), tables, []int32{0, 1, 2}))
				cpuOut, gpuOut := p.run(t, f, attentionRec(a), steps...)
				for i := range steps {
					near(t, fmt.Sprintf("step %d", i), cpuOut[i]["o"], gpuOut[i]["o"], 2e-5)
				}
				checkPages(t, p.gpu.(*Backend), l, steps, cpuOut)
			})
		}
	}
}

// checkPages compares the CUDA backend's KV pages with page.Codec's encoding
// of every K and V row the steps wrote.
func checkPages(t *testing.T, b *Backend, l exec.KVLayout, steps []*exec.Batch, outs []map[string][]float32) {
	t.Helper()
	c, err := page.NewCodec(l.DType, l.KVDim)
	if err != nil {
		t.Fatal(err)
	}
	rb := c.RowBytes()
	area := (l.Blocks + 1) * l.BlockTokens * rb
	leave, err := b.enter()
	if err != nil {
		t.Fatal(err)
	}
	defer leave()
	pages := map[string][]byte{"k": make([]byte, area), "v": make([]byte, area)}
	for name, dev := range map[string]cu.DevicePtr{"k": b.kc[0], "v": b.vc[0]} {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&pages[name][0]), dev, int64(area)); err != nil {
			t.Fatal(err)
		}
	}
	want := make([]byte, rb)
	for i, s := range steps {
		for row, pos := range s.Positions {
			blk := s.Tables[s.RowSeq[row]][int(pos)/l.BlockTokens]
			slot := int(blk)*l.BlockTokens + int(pos)%l.BlockTokens
			for _, name := range []string{"k", "v"} {
				c.Encode(want, outs[i][name][row*l.KVDim:(row+1)*l.KVDim])
				if got := pages[name][slot*rb : (slot+1)*rb]; !bytes.Equal(got, want) {
					t.Errorf("step %d row %d: %s page bytes differ from page.Codec (%s): first %x, want %x", i, row, name, l.DType, got[:min(16, rb)], want[:min(16, rb)])
					return
				}
			}
		}
	}
}

// TestGraphReplayMatchesEager runs the same steps with captured graphs and
// with eager launches: the same kernels on the same inputs, so the outputs
// must be identical bit for bit, for every bucket a step pads to.
func TestGraphReplayMatchesEager(t *testing.T) {
	const vocab = 64
	r := rand.New(rand.NewPCG(5, 5))
	f := memFile(t, randTensor(r, "q", tensor.F32, vocab, 256), randTensor(r, "k", tensor.F32, vocab, 128), randTensor(r, "v", tensor.F32, vocab, 128))
	l := exec.KVLayout{Layers: 1, KVDim: 128, BlockTokens: 16, Blocks: 64, DType: "f16"}
	a := tensor.AttentionArgs{Layer: 0, Heads: 4, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	tables := make([][]int32, 9)
	for s := range tables {
		tables[s] = []int32{int32(2 * s), int32(2*s + 1)}
	}
	var steps []*exec.Batch
	for n := 1; n <= 9; n++ { // buckets 1, 2, 4, 8, 16 with padding
		steps = append(steps, seqBatch(randIDs(r, vocab, n), fill(int32(n), n), count(0, n), tables, count(0, n)))
	}
	outs := map[bool][]map[string][]float32{}
	for _, eager := range []bool{false, true} {
		p := newPair(t, f, l, eager)
		_, gpu := p.run(t, f, attentionRec(a), steps...)
		outs[eager] = gpu
	}
	for i := range steps {
		if !slices.Equal(outs[false][i]["o"], outs[true][i]["o"]) {
			t.Errorf("step of %d rows: replayed graph and eager launches differ", i+1)
		}
	}
}

// modelsDir is where the bundled models are: NINFER_CUDA_MODELS (on the
// GPU machine, bin/gpu/models) or ../../shared/models.
func modelsDir(t *testing.T) string {
	if d := os.Getenv("NINFER_CUDA_MODELS"); d != "" {
		return d
	}
	d := filepath.Join("..", "..", "shared", "models")
	if _, err := os.Stat(d); err != nil {
		t.Skipf("no bundled models (%v); set NINFER_CUDA_MODELS", err)
	}
	return d
}

// TestGreedyMatchesCPU generates greedily with both backends on each
// bundled model and every KV format of the f32 reference, and requires
// the same tokens up to the first position where the CPU's top-two logit
// margin is so small (< 0.02) that float rounding may flip it.
func TestGreedyMatchesCPU(t *testing.T) {
	dir := modelsDir(t)
	prompts := []string{"Once upon a time", "The capital of France is", "1, 2, 3, 4,", "<|im_start|>user\nHello<|im_end|>\n"}
	for _, model := range []string{"stories260K", "tiny-qwen3-f32", "tiny-qwen3-f16", "tiny-qwen3-q8_0", "tiny-llama-f32"} {
		path := filepath.Join(dir, model+".gguf")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: %v", model, err)
			continue
		}
		for _, graph := range []string{"plain", "kv-int8-g64"} {
			insts := map[string]*instance.Instance{}
			for _, be := range []string{"cpu", "cuda"} {
				in, err := instance.Open(instance.Options{Model: path, Graph: graph, Backend: be, Threads: 2, MaxRunning: 2})
				if err != nil {
					t.Fatalf("%s %s on %s: %v", model, graph, be, err)
				}
				defer in.Close()
				insts[be] = in
			}
			for _, prompt := range prompts {
				want, err := golden.Generate(context.Background(), insts["cpu"], prompt, 48, 2)
				if err != nil {
					t.Fatal(err)
				}
				got, err := golden.Generate(context.Background(), insts["cuda"], prompt, 48, 2)
				if err != nil {
					t.Fatal(err)
				}
				for i := range want.GeneratedTokens {
					if want.Margins[i] < 0.02 {
						t.Logf("%s %s %q: compared %d tokens (CPU margin %.3g at %d)", model, graph, prompt, i, want.Margins[i], i)
						break
					}
					if i >= len(got.GeneratedTokens) || got.GeneratedTokens[i] != want.GeneratedTokens[i] {
						t.Errorf("%s %s %q: token %d: cuda %v, cpu %v (cpu margin %.3g)", model, graph, prompt, i,
							got.GeneratedTokens[:min(i+1, len(got.GeneratedTokens))], want.GeneratedTokens[:i+1], want.Margins[i])
						break
					}
				}
			}
		}
	}
}

// TestDeviceArgmax runs logits of a 0.6B-shape vocabulary (151936) for a
// bucket of sampled rows and checks the ids the backend copies back
// (exec.ArgmaxOutputter, asked before the logits) against the greedy pick
// of the logits themselves (pair.run checks every output with ids).
func TestDeviceArgmax(t *testing.T) {
	const vocab, embed = 151936, 64
	r := rand.New(rand.NewPCG(12, 12))
	f := memFile(t, randTensor(r, "emb", tensor.F32, 64, embed), randTensor(r, "out", tensor.Q8_0, vocab, embed))
	p := newPair(t, f, exec.KVLayout{Layers: 1, KVDim: 32, BlockTokens: 16, Blocks: 8}, false)
	batch := oneSeq(r, 64, 0, 5, 8)
	batch.Positions = make([]int32, 5)
	batch.LogitRows = []int32{0, 2, 4}
	cpuOut, gpuOut := p.run(t, f, func(b *tensor.Builder, rows, logitRows int) {
		b.Input("positions", rows)
		x := b.GetRows(b.Weight("emb"), b.Input("tokens", rows))
		b.Output("logits", b.MatMul(b.SelectRows(x, b.Input("logit_rows", logitRows)), b.Weight("out")))
	}, batch)
	near(t, "logits", cpuOut[0]["logits"], gpuOut[0]["logits"], 2e-5)
}

// TestSpeculativeReplayMatchesEager runs the speculative graphs of the
// bundled models (the MTP head on the hybrid, EAGLE-3 and DFlash drafters
// with their ahead loops on tiny-qwen3) on the CUDA backend with captured
// graphs and with eager launches: every drafter pass and verify step is
// captured per bucket like the target step, so both must give the same
// tokens and the same draft counts (rounds, drafted, accepted per
// position), and the tokens must be the CPU backend's up to the first
// position where the CPU's top-two margin is under 0.02.
func TestSpeculativeReplayMatchesEager(t *testing.T) {
	dir := modelsDir(t)
	prompts := []string{"Once upon a time", "1, 2, 3, 4,"}
	for _, c := range []struct{ graph, model, draft string }{
		{"mtp", "tiny-qwen35-f32", ""},
		{"mtp", "tiny-qwen35moe-f32", ""},
		{"eagle3", "tiny-qwen3-f32", "tiny-qwen3-eagle3-f32"},
		{"dflash", "tiny-qwen3-f32", "tiny-qwen3-dflash-f32"},
	} {
		t.Run(c.graph+" "+c.model, func(t *testing.T) {
			opts := instance.Options{Model: filepath.Join(dir, c.model+".gguf"), Graph: c.graph, Threads: 2, MaxRunning: 2}
			if c.draft != "" {
				opts.Models = map[string]string{"draft": filepath.Join(dir, c.draft+".gguf")}
			}
			runs := map[string][]*golden.Case{}
			for _, mode := range []string{"cpu", "graph", "eager"} {
				o := opts
				o.Backend, o.Eager = "cuda", mode == "eager"
				if mode == "cpu" {
					o.Backend = "cpu"
				}
				in, err := instance.Open(o)
				if err != nil {
					t.Fatalf("%s: %v", mode, err)
				}
				defer in.Close()
				for _, p := range prompts {
					res, err := golden.Generate(context.Background(), in, p, 32, 2)
					if err != nil {
						t.Fatalf("%s %q: %v", mode, p, err)
					}
					runs[mode] = append(runs[mode], res)
				}
			}
			for i, p := range prompts {
				g, e, want := runs["graph"][i], runs["eager"][i], runs["cpu"][i]
				if !slices.Equal(g.GeneratedTokens, e.GeneratedTokens) {
					t.Errorf("%q: replayed %v, eager %v", p, g.GeneratedTokens, e.GeneratedTokens)
				}
				gs, es := g.Timing.Speculative, e.Timing.Speculative
				if gs.Rounds != es.Rounds || gs.Drafted != es.Drafted || gs.Accepted != es.Accepted || !slices.Equal(gs.AcceptedPerPosition, es.AcceptedPerPosition) {
					t.Errorf("%q: draft counts replayed %+v, eager %+v", p, gs, es)
				}
				if gs.Rounds == 0 {
					t.Errorf("%q: no speculative rounds: the drafter did not run", p)
				}
				for j := range want.GeneratedTokens {
					if want.Margins[j] < 0.02 {
						break
					}
					if j >= len(g.GeneratedTokens) || g.GeneratedTokens[j] != want.GeneratedTokens[j] {
						t.Errorf("%q: token %d: cuda %v, cpu %v", p, j, g.GeneratedTokens[:min(j+1, len(g.GeneratedTokens))], want.GeneratedTokens[:j+1])
						break
					}
				}
			}
		})
	}
}
