package model

import (
	"fmt"
	"math"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// recordHybridLayers records the first layers blocks of a Qwen3.5-style
// hybrid model over x [T, E]: each block is x += mixer(attn_norm(x)); x +=
// ffn(post_attention_norm(x)), the mixer a Gated DeltaNet (recurrent
// layers, state layer = recurrent layers before it) or gated full
// attention (KV layer = attending layers before it), whose q and k turn by
// turn (RoPE at the rows' positions, or M-RoPE).
func recordHybridLayers(b *tensor.Builder, c *Config, x tensor.Tensor, turn func(tensor.Tensor) tensor.Tensor, layers int, tap func(int, tensor.Tensor)) tensor.Tensor {
	kvLayer, stateLayer := 0, 0
	for l := range layers {
		tap(l, x)
		w := func(name string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s", l, name)) }
		h := b.RMSNorm(x, w("attn_norm.weight"), c.Embed, c.NormEps) // [T, E]
		var mixed tensor.Tensor
		if c.Recurrent(l) {
			mixed = recordDeltaNet(b, c, h, w, stateLayer)
			stateLayer++
		} else {
			mixed = recordGatedAttention(b, c, h, turn, w, kvLayer)
			kvLayer++
		}
		x = b.Add(x, mixed)
		h = b.RMSNorm(x, w("post_attention_norm.weight"), c.Embed, c.NormEps)
		x = b.Add(x, recordFFN(b, c, h, l)) // [T, E]
	}
	return x
}

// RecordAttentionBlock records block l of a hybrid model as a full gated
// attention block over x [T, E] writing KV layer kvLayer: x +=
// attention(attn_norm(x)); x += ffn(post_attention_norm(x)). [T, E]. The
// MTP block of a qwen35 file is such a block.
func RecordAttentionBlock(b *tensor.Builder, c *Config, x, positions tensor.Tensor, l, kvLayer int) tensor.Tensor {
	w := func(name string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s", l, name)) }
	h := b.RMSNorm(x, w("attn_norm.weight"), c.Embed, c.NormEps)
	rope := tensor.RoPEArgs{HeadDim: c.HeadDim, Dims: c.RopeDims, Base: c.RopeBase, Mode: c.RopeMode}
	turn := func(t tensor.Tensor) tensor.Tensor { return b.RoPE(t, positions, rope) }
	x = b.Add(x, recordGatedAttention(b, c, h, turn, w, kvLayer))
	h = b.RMSNorm(x, w("post_attention_norm.weight"), c.Embed, c.NormEps)
	return b.Add(x, recordFFN(b, c, h, l))
}

// recordDeltaNet is a Gated DeltaNet mixer over h [T, E]: [T, E].
func recordDeltaNet(b *tensor.Builder, c *Config, h tensor.Tensor, w func(string) tensor.Tensor, stateLayer int) tensor.Tensor {
	hy := c.Hybrid
	a := hy.stateArgs(stateLayer)
	kd, vd := hy.KeyHeads*hy.HeadDim, hy.ValueHeads*hy.HeadDim
	qkv := b.MatMul(h, w("attn_qkv.weight"))                                // [T, 2*kd+vd]
	qkv = b.Unary(b.ShortConv(qkv, w("ssm_conv1d.weight"), a), tensor.SiLU) // causal conv over the last ConvKernel inputs
	q := b.L2Norm(b.Columns(qkv, qkv.Cols(), 0, kd), hy.HeadDim, c.NormEps)
	k := b.L2Norm(b.Columns(qkv, qkv.Cols(), kd, kd), hy.HeadDim, c.NormEps)
	v := b.Columns(qkv, qkv.Cols(), 2*kd, vd)
	beta := b.Unary(b.MatMul(h, w("ssm_beta.weight")), tensor.Sigmoid) // [T, ValueHeads]
	// g = softplus(alpha h + dt_bias) * a, with a = -exp(A_log) as stored.
	g := b.MatMul(h, w("ssm_alpha.weight"))
	g = b.MulRow(b.Unary(b.AddRow(g, w("ssm_dt.bias")), tensor.Softplus), w("ssm_a"))
	o := b.DeltaRule(q, k, v, g, beta, a)                                   // [T, vd]
	z := b.Unary(b.MatMul(h, w("attn_gate.weight")), tensor.SiLU)           // [T, vd]
	o = b.Mul(b.RMSNorm(o, w("ssm_norm.weight"), hy.HeadDim, c.NormEps), z) // gated RMSNorm per head
	return b.MatMul(o, w("ssm_out.weight"))
}

// recordGatedAttention is full attention whose query projection carries
// a per-head output gate ([q | gate] per head), q and k turned by turn:
// [T, E].
func recordGatedAttention(b *tensor.Builder, c *Config, h tensor.Tensor, turn func(tensor.Tensor) tensor.Tensor, w func(string) tensor.Tensor, kvLayer int) tensor.Tensor {
	qg := b.MatMul(h, w("attn_q.weight")) // [T, H*2D]
	q := b.Columns(qg, 2*c.HeadDim, 0, c.HeadDim)
	gate := b.Columns(qg, 2*c.HeadDim, c.HeadDim, c.HeadDim)
	k := b.MatMul(h, w("attn_k.weight"))
	v := b.MatMul(h, w("attn_v.weight"))
	q = b.RMSNorm(q, w("attn_q_norm.weight"), c.HeadDim, c.NormEps)
	k = b.RMSNorm(k, w("attn_k_norm.weight"), c.HeadDim, c.NormEps)
	q, k = turn(q), turn(k)
	attn := b.Attention(q, k, v, tensor.AttentionArgs{Layer: kvLayer, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		Scale: float32(1 / math.Sqrt(float64(c.HeadDim)))})
	attn = b.Mul(attn, b.Unary(gate, tensor.Sigmoid))
	return b.MatMul(attn, w("attn_output.weight"))
}
