package cuda

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/ninfer/ninfer-go/nodes/kvquant" // registers kv.cache
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// tensorConsts returns the names of the constants of type typ declared in
// runtime/tensor's source (implicitly typed iota repeats included), so that
// a constant added there is seen even before it gets a name or a traits
// entry.
func tensorConsts(t *testing.T, typ string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "runtime", "tensor", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("runtime/tensor sources: %v (%d files)", err, len(files))
	}
	fset := token.NewFileSet()
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			cur := "" // the type an implicit repeat inherits
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				switch {
				case vs.Type != nil:
					cur = ""
					if id, ok := vs.Type.(*ast.Ident); ok {
						cur = id.Name
					}
				case len(vs.Values) > 0:
					cur = ""
					if c, ok := vs.Values[0].(*ast.CallExpr); ok && len(vs.Values) == 1 {
						if id, ok := c.Fun.(*ast.Ident); ok {
							cur = id.Name // X = OpKind(3)
						}
					}
				}
				if cur != typ {
					continue
				}
				for _, n := range vs.Names {
					if n.Name != "_" {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}

// allOpKinds is runtime/tensor's op set: every OpKind with a name.
func allOpKinds() []tensor.OpKind {
	var ks []tensor.OpKind
	for k := 1; k < 256; k++ {
		if tensor.OpKind(k).String() != fmt.Sprintf("op(%d)", k) {
			ks = append(ks, tensor.OpKind(k))
		}
	}
	return ks
}

func TestSupportCoversEveryOpAndDType(t *testing.T) {
	ops := allOpKinds()
	if src := tensorConsts(t, "OpKind"); len(src) != len(ops) {
		t.Fatalf("runtime/tensor declares %d OpKind constants (%v) but %d have names (%v)", len(src), src, len(ops), ops)
	}
	for _, k := range ops {
		if _, ok := opSupport[k.String()]; !ok {
			t.Errorf("op %v has no entry in cuda/support.go opSupport: give it CUDA kernels with an emulator parity case, or a refusal", k)
		}
	}
	for name := range opSupport {
		if !slices.ContainsFunc(ops, func(k tensor.OpKind) bool { return k.String() == name }) {
			t.Errorf("cuda/support.go opSupport names %q, which is not an op of runtime/tensor", name)
		}
	}
	dts := tensor.DTypes()
	if src := tensorConsts(t, "DType"); len(src) != len(dts) {
		t.Fatalf("runtime/tensor declares %d DType constants (%v) but %d are valid (%v)", len(src), src, len(dts), dts)
	}
	for _, dt := range dts {
		if _, ok := weightDTypes[dt]; !ok {
			t.Errorf("dtype %v has no entry in cuda/support.go weightDTypes: give it matmul and get_rows kernels, or a refusal", dt)
		}
	}
	// The dtypes with kernels are exactly those the launches (and so the
	// module, TestKernelNamesMatchPTX) have.
	var withKernels []tensor.DType
	for _, dt := range dts {
		if weightDTypes[dt] == "" {
			withKernels = append(withKernels, dt)
		}
		if got := matmulDTypeOK(dt); got != (weightDTypes[dt] == "") {
			t.Errorf("dtype %v: matmulDTypeOK %v, but weightDTypes says %q", dt, got, weightDTypes[dt])
		}
	}
	if !slices.Equal(withKernels, matmulDTypes[:]) {
		t.Errorf("weight dtypes with kernels in support.go %v, matmul kernels in launch.go %v", withKernels, matmulDTypes)
	}
}

// opGraph records a small graph that uses op k, reading weight "w" of dtype
// dt where the op reads a weight (get_rows, matmul, rms_norm; the others
// use f32 weights). ok is false for an op the test does not know how to
// record: add a case when adding an op.
func opGraph(t *testing.T, k tensor.OpKind, dt tensor.DType) (g *tensor.Graph, weighted, ok bool) {
	t.Helper()
	const rows, cols = 4, 256
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		switch name {
		case "w":
			if k == tensor.OpRMSNorm {
				return dt, 1, cols, true
			}
			return dt, 16, cols, true
		case "emb":
			return tensor.F32, 16, cols, true
		case "bias":
			return tensor.F32, 1, cols, true
		case "taps":
			return tensor.F32, cols, 4, true
		case "heads":
			return tensor.F32, 4, cols, true
		case "experts":
			return dt, 4 * 8, cols, true
		case "experts_down":
			return dt, 4 * cols, 8, true
		}
		return 0, 0, 0, false
	})
	tok := b.Input("tokens", rows)
	pos := b.Input("positions", rows)
	sel := b.Input("logit_rows", 1)
	x := b.GetRows(b.Weight("emb"), tok)
	var y tensor.Tensor
	switch k {
	case tensor.OpInput, tensor.OpWeight:
		y = x
	case tensor.OpGetRows:
		y, weighted = b.GetRows(b.Weight("w"), tok), true
	case tensor.OpRMSNorm:
		y, weighted = b.RMSNorm(x, b.Weight("w"), cols, 1e-5), true
	case tensor.OpMatMul:
		y, weighted = b.MatMul(x, b.Weight("w")), true
	case tensor.OpRoPE:
		y = b.RoPE(x, pos, tensor.RoPEArgs{HeadDim: 64, Dims: 64, Base: 10000, Mode: tensor.RoPENeox})
	case tensor.OpAttention:
		y = b.Attention(x, x, x, tensor.AttentionArgs{Heads: 4, KVHeads: 4, HeadDim: 64, Scale: 0.125})
	case tensor.OpAdd:
		y = b.Add(x, x)
	case tensor.OpSwiGLU:
		y = b.SwiGLU(x, x)
	case tensor.OpSelectRows:
		y = b.SelectRows(x, sel)
	case tensor.OpAddRow:
		y = b.AddRow(x, b.Weight("bias"))
	case tensor.OpColumns:
		y = b.Columns(x, 64, 0, 32)
	case tensor.OpUnary:
		y = b.Unary(x, tensor.Sigmoid)
	case tensor.OpMul:
		y = b.Mul(x, x)
	case tensor.OpMulRow:
		y = b.MulRow(x, b.Weight("bias"))
	case tensor.OpL2Norm:
		y = b.L2Norm(x, 64, 1e-6)
	case tensor.OpShortConv:
		y = b.ShortConv(x, b.Weight("taps"), tensor.StateArgs{Kernel: 4})
	case tensor.OpDeltaRule:
		gate := b.MatMul(x, b.Weight("heads")) // [rows, 4]: supported, so the refusal names delta_rule
		y = b.DeltaRule(x, x, x, gate, gate, tensor.StateArgs{KeyHeads: 4, KeyDim: 64, ValueHeads: 4, ValueDim: 64, Scale: 0.125})
	case tensor.OpConcat:
		y = b.Concat(x, x)
	case tensor.OpMoE:
		router := b.MatMul(x, b.Weight("heads")) // [rows, 4 experts]
		y = b.MoE(x, router, b.Weight("experts"), b.Weight("experts"), b.Weight("experts_down"), tensor.MoEArgs{Experts: 4, TopK: 2, FFN: 8})
		weighted = true
	case tensor.OpNorm:
		y = b.Norm(x, 1e-6)
	case tensor.OpGELU:
		y = b.GELU(x)
	case tensor.OpRoPE2D:
		y = b.RoPE2D(x, pos, pos, tensor.RoPEArgs{HeadDim: 64, Dims: 64, Base: 10000})
	case tensor.OpSelfAttention:
		y = b.SelfAttention(x, x, x, tensor.AttentionArgs{Heads: 4, KVHeads: 4, HeadDim: 64, Scale: 0.125})
	case tensor.OpReshape:
		y = b.Reshape(x, 2*cols)
	case tensor.OpMixRows:
		y = b.MixRows(x, x, pos)
	case tensor.OpMRoPE:
		y = b.MRoPE(x, pos, pos, pos, tensor.RoPEArgs{HeadDim: 64, Dims: 64, Base: 10000, Mode: tensor.RoPENeox, Sections: [4]int{11, 11, 10, 0}})
	default:
		return nil, false, false
	}
	b.Output("y", y)
	g, err := b.Finish()
	if err != nil {
		t.Fatalf("record %v with a %v weight: %v", k, dt, err)
	}
	if !slices.ContainsFunc(g.Ops, func(op tensor.Op) bool { return op.Kind == k }) {
		t.Fatalf("the graph recorded for %v does not use it", k)
	}
	return g, weighted, true
}

// TestCheckGraphRefusesWhatHasNoKernels records every op of runtime/tensor
// (with a weight of every dtype where the op reads one) and checks that
// checkGraph, which Prepare runs first, accepts exactly what support.go
// says has kernels and refuses the rest with an error naming the op and the
// dtype.
func TestCheckGraphRefusesWhatHasNoKernels(t *testing.T) {
	for _, k := range allOpKinds() {
		for _, dt := range tensor.DTypes() {
			g, weighted, ok := opGraph(t, k, dt)
			if !ok {
				t.Errorf("op %v: no test graph in opGraph (support_test.go): add one when adding the op", k)
				break
			}
			if !weighted && dt != tensor.F32 {
				continue // the op reads no weight: one graph is enough
			}
			want := opSupport[k.String()]
			if want == "" && weighted {
				want = weightKernelDType(dt)
				switch k {
				case tensor.OpRMSNorm:
					want = normScaleDType(dt)
				}
			}
			err := checkGraph(g)
			switch {
			case want == "" && err != nil:
				t.Errorf("%v with a %v weight has kernels, but checkGraph refuses it: %v", k, dt, err)
			case want != "" && err == nil:
				t.Errorf("%v with a %v weight has no kernels (%s), but checkGraph accepts it", k, dt, want)
			case err != nil:
				msg := err.Error()
				if !strings.Contains(msg, "("+k.String()+")") || !strings.Contains(msg, want) {
					t.Errorf("%v, %v: refusal %q does not name the op and the reason %q", k, dt, msg, want)
				}
				name := `"w"`
				if k == tensor.OpMoE {
					name = `"experts"`
				}
				if weighted && (!strings.Contains(msg, "dtype "+dt.String()) || !strings.Contains(msg, name)) {
					t.Errorf("%v, %v: refusal %q does not name the weight and its dtype", k, dt, msg)
				}
			}
		}
	}
}

// TestCheckGraphTakesRoPEFactors: a rope with frequency factors (a third
// argument, llama-3 rope scaling) runs on the rope kernel.
func TestCheckGraphTakesRoPEFactors(t *testing.T) {
	b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
		if name == "emb" {
			return tensor.F32, 16, 32, true
		}
		return tensor.F32, 1, 8, name == "rope_freqs"
	})
	x := b.GetRows(b.Weight("emb"), b.Input("tokens", 2))
	a := tensor.RoPEArgs{HeadDim: 16, Dims: 16, Base: 10000, Mode: tensor.RoPENorm}
	b.Output("y", b.RoPEFactors(x, b.Input("positions", 2), b.Weight("rope_freqs"), a))
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkGraph(g); err != nil {
		t.Fatalf("rope with factors: %v", err)
	}
}

// TestCheckGraphTakesNonCausalAttention: a block drafter's non-causal
// attention runs on the attention kernel (each row attends up to its
// sequence's reach in the step buffer).
func TestCheckGraphTakesNonCausalAttention(t *testing.T) {
	g, _, _ := opGraph(t, tensor.OpAttention, tensor.F32)
	for i, op := range g.Ops {
		if op.Kind == tensor.OpAttention {
			g.Ops[i].Attn.NonCausal = true
		}
	}
	if err := checkGraph(g); err != nil {
		t.Fatalf("non-causal attention: %v", err)
	}
}

// TestCheckGraphRefusesUnknownOp: an op kind outside the table is refused
// by name, not run.
func TestCheckGraphRefusesUnknownOp(t *testing.T) {
	g := &tensor.Graph{Ops: []tensor.Op{{Kind: tensor.OpKind(250), Out: tensor.Tensor{ID: 0, Shape: [2]int{1, 1}}}}}
	err := checkGraph(g)
	if err == nil || !strings.Contains(err.Error(), "op(250)") {
		t.Fatalf("checkGraph of an unknown op: %v", err)
	}
}

// Every recurrent state storage the kv.cache node offers has kernels (an
// entry in stateDTypes), and one it does not know is refused.
func TestSupportCoversEveryStateDType(t *testing.T) {
	spec, ok := node.Default.Lookup("kv.cache")
	if !ok {
		t.Fatal("kv.cache is not registered")
	}
	p := spec.Param("state")
	if p == nil || len(p.Enum) == 0 {
		t.Fatal("kv.cache has no state enum")
	}
	for _, dt := range append([]string{""}, p.Enum...) {
		if why := stateDType(dt); why != "" {
			t.Errorf("state dtype %q: refused (%s)", dt, why)
		}
	}
	if stateDType("f8") == "" {
		t.Error("an unknown state dtype is accepted")
	}
	two := exec.StateLayout{Slots: 3, Delta: []int{8}, Checkpoints: 1}
	bf16Pool := two
	bf16Pool.CheckpointDType = "bf16"
	if why := stateLayout(two); why != "" {
		t.Errorf("f32 state and checkpoints: refused (%s)", why)
	}
	if why := stateLayout(bf16Pool); !strings.Contains(why, "--checkpoint-dtype bf16") {
		t.Errorf("bf16 checkpoints beside f32 state: %q, want a refusal naming --checkpoint-dtype bf16", why)
	}
	if stateValueBytes("bf16") != 2 || stateValueBytes("f32") != 4 || stateValueBytes("") != 4 {
		t.Error("state value sizes: want bf16 2 bytes, f32 4")
	}
}
