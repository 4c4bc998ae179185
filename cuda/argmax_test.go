package cuda

import (
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// TestPlanArgmax: the outputs whose rows follow logit_rows (the logits) and
// only those get ids on the device, each in its own aligned slot past the
// activations.
func TestPlanArgmax(t *testing.T) {
	const rows, logitRows, embed, vocab = 8, 3, 64, 1000
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		switch name {
		case "emb":
			return tensor.F32, vocab, embed, true
		case "out":
			return tensor.Q8_0, vocab, embed, true
		}
		return 0, 0, 0, false
	})
	tok := b.Input("tokens", rows)
	b.Input("positions", rows)
	x := b.GetRows(b.Weight("emb"), tok)
	b.Output("hidden", x)
	sel := b.SelectRows(x, b.Input("logit_rows", logitRows))
	b.Output("b.logits", b.MatMul(sel, b.Weight("out")))
	b.Output("a.rows", sel)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planBuffers(g, 0)
	if err != nil {
		t.Fatal(err)
	}
	outs, size := planArgmax(g, p)
	if len(outs) != 2 || outs[0].Name != "a.rows" || outs[1].Name != "b.logits" {
		t.Fatalf("argmax outputs %+v, want a.rows and b.logits (name order), not hidden", outs)
	}
	if outs[1].T.Cols() != vocab || outs[1].T.Rows() != logitRows {
		t.Errorf("b.logits is %v", outs[1].T.Shape)
	}
	end := p.Size
	for _, o := range outs {
		if o.Off < end || o.Off%arenaAlign != 0 {
			t.Errorf("%s ids at %d: overlaps what ends at %d or is not %d-aligned", o.Name, o.Off, end, arenaAlign)
		}
		end = o.Off + 4*int64(o.T.Rows())
	}
	if size != end {
		t.Errorf("arena size %d, the last ids end at %d", size, end)
	}
	// A graph without logit rows reduces nothing and needs no more arena.
	delete(g.Outputs, "b.logits")
	delete(g.Outputs, "a.rows")
	if outs, size := planArgmax(g, p); len(outs) != 0 || size != p.Size {
		t.Errorf("without logits: %+v, size %d (plan %d)", outs, size, p.Size)
	}
}
