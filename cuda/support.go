package cuda

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// What the CUDA backend runs, as plain data: every op of runtime/tensor's
// closed op set and every weight dtype has an entry, either kernels (an
// empty reason) or the reason the backend refuses a graph that uses it.
// Prepare calls checkGraph before anything touches the device, so a plan
// with an op or dtype the kernels lack fails at load (the engine prepares
// every segment when it warms up), naming the op and the dtype, instead of
// computing garbage. support_test.go enumerates runtime/tensor's ops and
// dtypes from its source, so an op or dtype added there without an entry
// here fails the default `go test ./...`. The emulator's parity tests run
// every dtype with kernels (TestEmuGetRows, TestEmuMatMul over
// matmulDTypes, which the test above ties to this table) and
// TestEmuZZCoversEveryKernel checks that every kernel of the module ran.

// opSupport is, for each op kind by name (tensor.OpKind.String), "" when
// the backend has kernels for it and otherwise why it refuses the op.
// Names, not constants, so that an op another change is adding can be
// refused before that change lands.
var opSupport = map[string]string{
	"input":       "",
	"weight":      "",
	"get_rows":    "",
	"rms_norm":    "",
	"matmul":      "",
	"rope":        "",
	"attention":   "",
	"add":         "",
	"swiglu":      "",
	"select_rows": "",
	"add_row":     "",
	// Hybrid models (Qwen3.5's Gated DeltaNet and gated attention).
	"columns":    "",
	"unary":      "",
	"mul":        "",
	"mul_row":    "",
	"l2_norm":    "",
	"concat":     "",
	"short_conv": "",
	"delta_rule": "",
	"moe":        "",
	// A vision tower (nodes/vision) and a text model's image rows:
	// refused until they have kernels.
	"norm":           noVisionKernels,
	"gelu":           noVisionKernels,
	"rope_2d":        noVisionKernels,
	"self_attention": noVisionKernels,
	"reshape":        noVisionKernels,
	"mix_rows":       noVisionKernels,
	"mrope":          noVisionKernels,
}

// noVisionKernels is why the vision tower's ops are refused.
const noVisionKernels = "an image-input op with no CUDA kernels yet: run image requests on the cpu backend"

// notAWeight is why a dtype has no matmul or get_rows kernels.
const notAWeight = "not a weight dtype of a matmul (an integer or activation format)"

// weightDTypes is, for each dtype, "" when matmul (gemv_<dtype>_<NT>,
// gemm_<dtype>) and get_rows have kernels for weights of that dtype, and
// otherwise why a matmul or get_rows on such a weight is refused. It must
// agree with matmulDTypes (launch.go), which lists the kernels.
var weightDTypes = map[tensor.DType]string{
	tensor.F32:    "",
	tensor.F16:    "",
	tensor.BF16:   "",
	tensor.Q8_0:   "",
	tensor.Q4_0:   "",
	tensor.I32:    notAWeight,
	tensor.Q4_1:   "",
	tensor.Q5_0:   "",
	tensor.Q5_1:   "",
	tensor.Q2_K:   "",
	tensor.Q3_K:   "",
	tensor.Q4_K:   "",
	tensor.Q5_K:   "",
	tensor.Q6_K:   "",
	tensor.IQ4_NL: "",
	tensor.IQ4_XS: "",
	tensor.Q8_1:   notAWeight,
	tensor.Q8_K:   notAWeight,
}

// stateDTypes is, for each way a hybrid model's recurrent state slots are
// stored (exec.StateLayout.DType, the kv.cache node's state parameter;
// "" is f32), "" when the kernels keep it and otherwise why Reserve
// refuses it. A bf16 state is widened into an f32 staging area for each
// stateful op and rounded back (state_widen, state_narrow).
var stateDTypes = map[string]string{
	"":     "",
	"f32":  "",
	"bf16": "",
}

// stateDType reports why a recurrent state stored as dt cannot be kept ("" if
// it can).
func stateDType(dt string) string {
	why, ok := stateDTypes[dt]
	if !ok {
		return "a state dtype the CUDA backend does not know"
	}
	return why
}

// stateLayout reports why Reserve refuses recurrent state laid out as l
// ("" if it keeps it): an unknown dtype, or checkpoints stored apart from
// the running state (exec.StateLayout.CheckpointDType), which the kernels
// do not widen and round.
func stateLayout(l exec.StateLayout) string {
	if l.Layers() == 0 {
		return ""
	}
	if why := stateDType(l.DType); why != "" {
		return fmt.Sprintf("recurrent state dtype %q: %s", l.DType, why)
	}
	if l.PoolDType() != l.DType {
		return fmt.Sprintf("state checkpoints stored as %s beside %s running state (--checkpoint-dtype %s) run on the cpu backend only", l.PoolDType(), l.DType, l.PoolDType())
	}
	return ""
}

// stateValueBytes is the bytes of one stored state value of dt.
func stateValueBytes(dt string) int64 {
	if dt == "bf16" {
		return 2
	}
	return 4
}

// weightKernelDType reports why a weight of dt cannot be read by the
// matmul and get_rows kernels ("" if it can).
func weightKernelDType(dt tensor.DType) string {
	why, ok := weightDTypes[dt]
	if !ok {
		return "a dtype the CUDA backend does not know"
	}
	return why
}

// normScaleDType reports why an rms_norm scale of dt cannot be used: the
// backend converts the scale to f32 on the host when it prepares the graph
// (weights.Tensor.Float32s), so every dtype that holds floats works.
func normScaleDType(dt tensor.DType) string {
	if !dt.Valid() {
		return "a dtype the CUDA backend does not know"
	}
	if dt == tensor.I32 {
		return notAWeight
	}
	return ""
}

// checkGraph refuses a graph the CUDA kernels cannot run: an op without
// kernels, or a weight whose dtype the op's kernels do not read. The error
// names the op (and the weight and its dtype).
func checkGraph(g *tensor.Graph) error {
	for i, op := range g.Ops {
		why, ok := opSupport[op.Kind.String()]
		if !ok {
			why = "an op the CUDA backend does not know"
		}
		if why != "" {
			return fmt.Errorf("cuda: op %d (%v): %s", i, op.Kind, why)
		}
		arg := func(j int) (tensor.Tensor, tensor.Op, bool) {
			if j >= len(op.Args) || op.Args[j].ID < 0 || op.Args[j].ID >= len(g.Ops) {
				return tensor.Tensor{}, tensor.Op{}, false
			}
			return op.Args[j], g.Ops[op.Args[j].ID], true
		}
		var w tensor.Tensor
		var wop tensor.Op
		var check func(tensor.DType) string
		switch op.Kind {
		case tensor.OpGetRows:
			w, wop, ok = arg(0)
			check = weightKernelDType
		case tensor.OpMatMul:
			w, wop, ok = arg(1)
			check = weightKernelDType
		case tensor.OpRMSNorm:
			w, wop, ok = arg(1)
			check = normScaleDType
		case tensor.OpMoE:
			for j := 2; j <= 4; j++ { // gate, up, down experts
				w, wop, ok = arg(j)
				if !ok {
					return fmt.Errorf("cuda: op %d (%v): missing argument", i, op.Kind)
				}
				if why := weightKernelDType(w.DType); why != "" { // moe_matmul or moe_mm_<dtype>
					return fmt.Errorf("cuda: op %d (%v) of weight %q, dtype %v: %s", i, op.Kind, wop.Name, w.DType, why)
				}
			}
			continue
		default:
			continue
		}
		if !ok {
			return fmt.Errorf("cuda: op %d (%v): missing argument", i, op.Kind)
		}
		if why := check(w.DType); why != "" {
			return fmt.Errorf("cuda: op %d (%v) of weight %q, dtype %v: %s", i, op.Kind, wop.Name, w.DType, why)
		}
	}
	return nil
}
