package cuda

import (
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

func TestGraphKey(t *testing.T) {
	base := func() *tensor.Graph {
		g := recordBlock(t, 8, 8, tensor.Q8_0)
		g.Origin = "plan 0123456789ab seg0 rows 8 logits 8"
		return g
	}
	k := graphKey(base())
	if graphKey(base()) != k {
		t.Fatal("equal graphs have different keys")
	}
	edits := map[string]func(g *tensor.Graph){
		"origin (plan hash)": func(g *tensor.Graph) { g.Origin = "plan ba9876543210 seg0 rows 8 logits 8" },
		"rows":               func(g *tensor.Graph) { g.Ops[0].Out.Shape[0] = 16 },
		"weight name":        func(g *tensor.Graph) { g.Ops[3].Name = "other" },
		"eps":                func(g *tensor.Graph) { g.Ops[6].Eps = 1e-5 },
		"rope base":          func(g *tensor.Graph) { g.Ops[9].RoPE.Base = 500000 },
		"attention layer":    func(g *tensor.Graph) { g.Ops[15].Attn.Layer = 1 },
		"arg":                func(g *tensor.Graph) { g.Ops[15].Args[2].ID = 1 },
		"dtype":              func(g *tensor.Graph) { g.Ops[3].Out.DType = tensor.F16 },
		"output name":        func(g *tensor.Graph) { g.Outputs["more"] = g.Outputs["logits"] },
	}
	for name, edit := range edits {
		g := base()
		edit(g)
		if graphKey(g) == k {
			t.Errorf("changing the %s keeps the key", name)
		}
	}
}
