package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// BenchmarkPrefillElementOps times the non-GEMM, non-attention ops of one
// layer of a 512-token prefill step of the 0.6B shape (16 query heads and 8
// KV heads of 128, width 1024, FFN 3072) on 2 threads, as a step runs
// them: rms_norm of the rows (group 1024) and of the Q and K heads (group
// 128), rope of Q then K (one step's shared angles), swiglu, the residual
// add and the KV write of 512 consecutive positions into 16-token blocks.
// ns/op is one layer's worth of each; rope_angles is a step's first layer,
// which computes the angles' cosines and sines the others reuse;
// rms_norm_qk+rope is the head norms and rope run as one (fuseNormRoPE).
func BenchmarkPrefillElementOps(b *testing.B) {
	const T, d, qd, kvd, ffn, hd = 512, 1024, 2048, 1024, 3072, 128
	r := rand.New(rand.NewPCG(3, 4))
	be := New(exec.Options{Threads: 2})
	defer be.Close()
	if err := be.Reserve(exec.KVLayout{Layers: 1, KVDim: kvd, BlockTokens: 16, Blocks: T / 16}); err != nil {
		b.Fatal(err)
	}
	// Op ids: 0 x [T,d], 1 norm weight [d], 2 q [T,qd], 3 k [T,kvd], 4 v [T,kvd],
	// 5 positions [T], 6 gate [T,ffn], 7 up [T,ffn], 8 head norm weight [hd], 9 out.
	p := &program{b: be, f32: [][]float32{randActivations(r, T, d), randActivations(r, 1, d), randActivations(r, T, qd),
		randActivations(r, T, kvd), randActivations(r, T, kvd), nil, randActivations(r, T, ffn), randActivations(r, T, ffn),
		randActivations(r, 1, hd), make([]float32, T*ffn)}, i32: make([][]int32, 10),
		attnScr: make([]attnScratch, be.pool.n), trig: make([][]float32, be.pool.n)}
	batch := &exec.Batch{Tables: [][]int32{make([]int32, T/16)}}
	for i := range T {
		batch.Positions = append(batch.Positions, int32(i))
		batch.RowSeq = append(batch.RowSeq, 0)
		batch.Tokens = append(batch.Tokens, 0)
	}
	for i := range batch.Tables[0] {
		batch.Tables[0][i] = int32(i)
	}
	p.i32[5] = batch.Positions
	ten := func(id, rows, cols int) tensor.Tensor {
		return tensor.Tensor{ID: id, Shape: [2]int{rows, cols}, DType: tensor.F32}
	}
	out := ten(9, T, d)
	norm := tensor.Op{Kind: tensor.OpRMSNorm, Args: []tensor.Tensor{ten(0, T, d), ten(1, 1, d)}, Group: d, Eps: 1e-6, Out: out}
	qNorm := tensor.Op{Kind: tensor.OpRMSNorm, Args: []tensor.Tensor{ten(2, T, qd), ten(8, 1, hd)}, Group: hd, Eps: 1e-6, Out: ten(9, T, qd)}
	kNorm := tensor.Op{Kind: tensor.OpRMSNorm, Args: []tensor.Tensor{ten(3, T, kvd), ten(8, 1, hd)}, Group: hd, Eps: 1e-6, Out: ten(9, T, kvd)}
	ra := tensor.RoPEArgs{HeadDim: hd, Dims: hd, Base: 1e6, Mode: tensor.RoPENeox}
	pos := tensor.Tensor{ID: 5, Shape: [2]int{T, 1}, DType: tensor.I32}
	qRope := tensor.Op{Kind: tensor.OpRoPE, Args: []tensor.Tensor{ten(2, T, qd), pos}, RoPE: ra, Out: ten(9, T, qd)}
	kRope := tensor.Op{Kind: tensor.OpRoPE, Args: []tensor.Tensor{ten(3, T, kvd), pos}, RoPE: ra, Out: ten(9, T, kvd)}
	swiglu := tensor.Op{Kind: tensor.OpSwiGLU, Args: []tensor.Tensor{ten(6, T, ffn), ten(7, T, ffn)}, Out: ten(9, T, ffn)}
	add := tensor.Op{Kind: tensor.OpAdd, Args: []tensor.Tensor{ten(0, T, d), ten(9, T, d)}, Out: ten(4, T, d)}
	attn := tensor.Op{Kind: tensor.OpAttention, Args: []tensor.Tensor{ten(2, T, qd), ten(3, T, kvd), ten(4, T, kvd)},
		Attn: tensor.AttentionArgs{Heads: qd / hd, KVHeads: kvd / hd, HeadDim: hd}, Out: ten(9, T, qd)}
	o := p.f32[9]
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"rms_norm", func() { p.elementwise(o[:T*d], norm); p.elementwise(o[:T*d], norm) }},
		{"rms_norm_qk", func() { p.elementwise(o[:T*qd], qNorm); p.elementwise(o[:T*kvd], kNorm) }},
		{"rope_angles", func() { p.ropeTab.valid = false; p.rope(o[:T*qd], qRope, nil); p.rope(o[:T*kvd], kRope, nil) }},
		{"rope", func() { p.rope(o[:T*qd], qRope, nil); p.rope(o[:T*kvd], kRope, nil) }},
		{"rms_norm_qk+rope", func() { p.rope(o[:T*qd], qRope, &qNorm); p.rope(o[:T*kvd], kRope, &kNorm) }},
		{"swiglu", func() { p.elementwise(o, swiglu) }},
		{"add", func() { p.elementwise(p.f32[4], add); p.elementwise(p.f32[4], add) }},
		{"kv_write", func() { p.writeKV(attn, batch) }},
	} {
		c.run() // the KV pages faulted in, scratch grown
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
		})
	}
}
