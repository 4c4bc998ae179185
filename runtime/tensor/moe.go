package tensor

// MoEArgs configures an OpMoE: Experts experts of FFN width FFN, TopK of
// them per row.
type MoEArgs struct {
	Experts, TopK, FFN int
	// Normalize rescales the TopK selected probabilities to sum to 1.
	Normalize bool
}

// MoE is a mixture-of-experts SwiGLU FFN over h [T, E]: each row's router
// logits (router [T, Experts]) go through a softmax, the TopK most
// probable experts are chosen (ties to the lower index) with their
// probabilities as weights (rescaled to sum 1 with a.Normalize), and the
// row's output is the weighted sum, in the chosen order, of
// down_e(silu(gate_e h) * up_e h) over them: [T, E]. Expert e's matrices
// are rows [e*FFN, (e+1)*FFN) of gate and up (weights [Experts*FFN, E])
// and rows [e*E, (e+1)*E) of down (a weight [Experts*E, FFN]), as GGUF
// stores ffn_{gate,up,down}_exps.
func (b *Builder) MoE(h, router, gate, up, down Tensor, a MoEArgs) Tensor {
	if b.bad(h, router, gate, up, down) {
		return Tensor{ID: -1}
	}
	e := h.Cols()
	switch {
	case a.Experts <= 0 || a.TopK <= 0 || a.TopK > a.Experts || a.FFN <= 0:
		return b.fail("moe: %d experts, top %d, ffn %d", a.Experts, a.TopK, a.FFN)
	case router.Rows() != h.Rows() || router.Cols() != a.Experts:
		return b.fail("moe: router %v for %d rows and %d experts", router.Shape, h.Rows(), a.Experts)
	case gate.Rows() != a.Experts*a.FFN || gate.Cols() != e || up.Shape != gate.Shape:
		return b.fail("moe: gate %v up %v, want [%d, %d]", gate.Shape, up.Shape, a.Experts*a.FFN, e)
	case down.Rows() != a.Experts*e || down.Cols() != a.FFN:
		return b.fail("moe: down %v, want [%d, %d]", down.Shape, a.Experts*e, a.FFN)
	}
	return b.push(Op{Kind: OpMoE, Args: []Tensor{h, router, gate, up, down}, MoE: a, Out: Tensor{Shape: h.Shape, DType: F32}})
}
