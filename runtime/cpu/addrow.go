package cpu

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// vectorArg returns the index of the argument of op that must be a small
// weight vector read as float32 (an rms_norm scale, an add_row bias, a
// mul_row factor, short_conv taps, rope frequency factors), or -1.
func vectorArg(op tensor.Op) int {
	switch op.Kind {
	case tensor.OpRMSNorm, tensor.OpAddRow, tensor.OpMulRow, tensor.OpShortConv:
		return 1
	case tensor.OpRoPE:
		if len(op.Args) > 2 {
			return 2
		}
	}
	return -1
}

// prepareVectors converts the weight vectors the ops read (vectorArg) to
// float32 once, so Run reads them from p.f32 like any activation.
func (p *program) prepareVectors() error {
	for _, op := range p.g.Ops {
		a := vectorArg(op)
		if a < 0 {
			continue
		}
		wt := op.Args[a]
		if p.w[wt.ID] == nil {
			return fmt.Errorf("cpu: %v: argument %d must be a weight", op.Kind, a)
		}
		if p.f32[wt.ID] == nil {
			v, err := p.w[wt.ID].Float32s()
			if err != nil {
				return fmt.Errorf("cpu: %v weight %q: %w", op.Kind, p.w[wt.ID].Name, err)
			}
			p.f32[wt.ID] = v
		}
	}
	return nil
}

// addRow computes out [T, d] = x [T, d] + row [d] for every row.
func (p *program) addRow(out []float32, op tensor.Op) {
	x, row, d := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], op.Out.Cols()
	for r := 0; r+d <= len(out); r += d {
		o, xr := out[r:r+d], x[r:r+d]
		for j := range o {
			o[j] = xr[j] + row[j]
		}
	}
}
