package cpu

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// matmulGolden is ../shared/golden/matmul-quant.json: ggml's y = W @ x for
// one weight tensor of each quantized type, two float32 input columns.
type matmulGolden struct {
	Results []struct {
		Model  string      `json:"model"`
		Tensor string      `json:"tensor"`
		Type   string      `json:"type"`
		Ne     []int       `json:"ne"`
		X      [][]float64 `json:"x"`
		Y      [][]float64 `json:"y"`
	} `json:"results"`
}

func loadMatmulGolden(t *testing.T) *matmulGolden {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "golden", "matmul-quant.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Skipf("golden not found: %v", err)
	}
	var g matmulGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// TestMatMulQuantGolden reproduces every entry of matmul-quant.json within
// 1e-5 of max|y|, with the reference kernels and (where the CPU has them)
// the fast ones, one token at a time and both columns as one batch. It
// also checks that dequantizing the weights and multiplying in float64
// lands near y (ggml's README: within 0.5-2.5% of max|y|), which checks
// tensor.DequantizeRow independently of the integer kernels.
func TestMatMulQuantGolden(t *testing.T) {
	g := loadMatmulGolden(t)
	if len(g.Results) != 21 {
		t.Errorf("%d golden entries, want 21", len(g.Results))
	}
	files := map[string]*weights.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, c := range g.Results {
		t.Run(c.Type+"/"+c.Tensor, func(t *testing.T) {
			f := files[c.Model]
			if f == nil {
				var err error
				if f, err = weights.Open(sharedModel(t, c.Model)); err != nil {
					t.Fatal(err)
				}
				files[c.Model] = f
			}
			w, err := f.Tensor(c.Tensor)
			if err != nil {
				t.Fatal(err)
			}
			if w.DType.String() != c.Type || w.RowLen() != c.Ne[0] || w.Rows() != c.Ne[1] {
				t.Fatalf("tensor is %v %v, golden says %s %v", w.DType, w.Shape, c.Type, c.Ne)
			}
			K, N := c.Ne[0], c.Ne[1]
			both := make([]float32, 0, 2*K)
			for _, col := range c.X {
				for _, v := range col {
					both = append(both, float32(v))
				}
			}
			deq, err := w.Float32s()
			if err != nil {
				t.Fatal(err)
			}
			modes := []bool{false}
			if level != levelRef {
				modes = append(modes, true)
			}
			layouts := []*weights.Tensor{w} // the file's, and the group layout Backend.Load repacks into
			switch {
			case repackableQ8(w):
				layouts = append(layouts, repacked(t, w))
			case repackableQ4(w):
				layouts = append(layouts, repackedQ4(t, w))
			}
			var rel, relDeq float64
			defer func() {
				t.Logf("max |y - golden| / max|y| = %.2g over %d layouts; dequantized float64 product: %.2g", rel, len(layouts), relDeq)
			}()
			for j, want := range c.Y {
				var ymax float64
				for _, v := range want {
					ymax = max(ymax, math.Abs(v))
				}
				x := both[j*K : (j+1)*K]
				for _, simd := range modes {
					for _, batch := range []bool{false, true} {
						for _, w := range layouts {
							var got []float32
							if batch {
								got = runMatMul(w, both, 2, 2, simd)[j*N : (j+1)*N]
							} else {
								got = runMatMul(w, x, 1, 1, simd)
							}
							var worst float64
							at := 0
							for i := range want {
								if e := math.Abs(float64(got[i]) - want[i]); e > worst {
									worst, at = e, i
								}
							}
							rel = max(rel, worst/ymax)
							if worst > 1e-5*ymax {
								t.Errorf("column %d simd=%v batch=%v layout=%d: max |y - golden| = %.3g (%.3g of max|y|) at %d: %g vs %g; first values %v vs %v",
									j, simd, batch, w.Layout, worst, worst/ymax, at, got[at], want[at], got[:4], want[:4])
							}
						}
					}
				}
				var worst float64
				for i := range want {
					var s float64
					for k, v := range deq[i*K : (i+1)*K] {
						s += float64(v) * float64(x[k])
					}
					worst = max(worst, math.Abs(s-want[i]))
				}
				relDeq = max(relDeq, worst/ymax)
				if worst > 0.04*ymax {
					t.Errorf("column %d: dequantized float64 product is off by %.3g of max|y|, want < 4%%", j, worst/ymax)
				}
			}
		})
	}
	var types []string
	seen := map[string]bool{}
	for _, c := range g.Results {
		if !seen[c.Type] {
			seen[c.Type] = true
			types = append(types, c.Type)
		}
	}
	for _, s := range types {
		d, err := tensor.ParseDType(s)
		if err != nil {
			t.Errorf("golden type %q: %v", s, err)
			continue
		}
		if kernelOf(d).kind == kindNone {
			t.Errorf("golden type %v has no matmul kernel", d)
		}
	}
}
