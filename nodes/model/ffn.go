package model

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// recordFFN records layer l's FFN over h [T, E]: a dense SwiGLU, or a
// mixture of experts (tensor.Builder.MoE) plus, when the model has one, a
// shared expert scaled by sigmoid(ffn_gate_inp_shexp . h). [T, E].
func recordFFN(b *tensor.Builder, c *Config, h tensor.Tensor, l int) tensor.Tensor {
	w := func(name string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s.weight", l, name)) }
	m := c.MoE
	if m == nil {
		g := b.SwiGLU(b.MatMul(h, w("ffn_gate")), b.MatMul(h, w("ffn_up"))) // [T, FFN]
		return b.MatMul(g, w("ffn_down"))
	}
	router := b.MatMul(h, w("ffn_gate_inp")) // [T, Experts]
	out := b.MoE(h, router, w("ffn_gate_exps"), w("ffn_up_exps"), w("ffn_down_exps"),
		tensor.MoEArgs{Experts: m.Experts, TopK: m.Used, FFN: m.FFN, Normalize: true})
	if m.SharedFFN == 0 {
		return out
	}
	sh := b.SwiGLU(b.MatMul(h, w("ffn_gate_shexp")), b.MatMul(h, w("ffn_up_shexp"))) // [T, SharedFFN]
	sh = b.MatMul(sh, w("ffn_down_shexp"))                                           // [T, E]
	gate := b.Unary(b.MatMul(h, w("ffn_gate_inp_shexp")), tensor.Sigmoid)            // [T, 1]
	return b.Add(out, b.Mul(sh, gate))
}
