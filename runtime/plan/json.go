package plan

import "github.com/ninfer/ninfer-go/runtime/node"

// Doc is the JSON form of a Plan (GET /v1/graph): what String prints, as
// data. Refs are "node.port" strings ("$in.tokens", "$prev.f",
// "$loop.hidden"); params are formatted with node.FormatValue.
type Doc struct {
	Name   string            `json:"name"`
	File   string            `json:"file"`
	Hash   string            `json:"hash"`
	Params map[string]string `json:"params"`
	Policy PolicyDoc         `json:"policy"`
	// Steps are in execution order; a loop step carries its body.
	Steps    []StepDoc         `json:"steps"`
	Segments []SegmentDoc      `json:"segments"`
	Out      map[string]string `json:"out"`
	// Carry maps each carried value NAME ($prev.NAME) to its source.
	Carry map[string]string `json:"carry"`
}

// PolicyDoc is the folded policy of a plan.
type PolicyDoc struct {
	PrefillChunk  int    `json:"prefill_chunk"`
	KVDType       string `json:"kv_dtype"`
	KVBlockTokens int    `json:"kv_block_tokens"`
	StateDType    string `json:"state_dtype,omitempty"`
}

// StepDoc is one step of a plan or of a loop body.
type StepDoc struct {
	ID        string            `json:"id"`
	Op        string            `json:"op"`
	Placement string            `json:"placement"` // "device", "host" or "policy"
	In        map[string]string `json:"in"`        // input port -> source ref
	Params    map[string]string `json:"params"`
	// Model is the alias of the model the step runs (StepModel); empty
	// for host and policy steps.
	Model string   `json:"model,omitempty"`
	Loop  *LoopDoc `json:"loop,omitempty"`
}

// LoopDoc is the body of a loop step (see Loop).
type LoopDoc struct {
	Repeat   int               `json:"repeat"`
	Block    bool              `json:"block"`
	Ahead    bool              `json:"ahead"`
	Model    string            `json:"model"`
	Steps    []StepDoc         `json:"steps"`
	Segments []SegmentDoc      `json:"segments"`
	Next     map[string]string `json:"next"` // loop input -> body output of the pass before
	Out      map[string]string `json:"out"`  // loop output -> body output
}

// SegmentDoc is a run of steps that share a placement, by step id.
type SegmentDoc struct {
	Placement string   `json:"placement"`
	Steps     []string `json:"steps"`
}

// Doc returns the JSON form of p.
func (p *Plan) Doc() Doc {
	d := Doc{Name: p.Name, File: p.File, Hash: p.Hash(), Params: formatParams(p.Params),
		Policy: PolicyDoc{PrefillChunk: p.Policy.PrefillChunk, KVDType: p.Policy.KVDType,
			KVBlockTokens: p.Policy.KVBlockTokens, StateDType: p.Policy.StateDType},
		Out: refStrings(p.Out), Carry: refStrings(p.Carry)}
	d.Steps, d.Segments = stepDocs(p.Steps, p.Segments)
	return d
}

func stepDocs(steps []*Step, segs []Segment) ([]StepDoc, []SegmentDoc) {
	out := make([]StepDoc, len(steps))
	for i, s := range steps {
		out[i] = StepDoc{ID: s.ID, Op: s.Op, Placement: s.Placement.String(), In: refStrings(s.In), Params: formatParams(s.Params)}
		if s.Placement == node.Device || s.Op == LoopOp {
			out[i].Model = StepModel(s)
		}
		if l, ok := s.Node.(*Loop); ok {
			ld := &LoopDoc{Repeat: l.Repeat, Block: l.Block, Ahead: l.Ahead, Model: l.Model, Next: refStrings(l.Next), Out: refStrings(l.Out)}
			ld.Steps, ld.Segments = stepDocs(l.Steps, l.Segments)
			out[i].Loop = ld
		}
	}
	sd := make([]SegmentDoc, len(segs))
	for i, seg := range segs {
		ids := make([]string, len(seg.Steps))
		for j, k := range seg.Steps {
			ids[j] = steps[k].ID
		}
		sd[i] = SegmentDoc{Placement: seg.Placement.String(), Steps: ids}
	}
	return out, sd
}

func refStrings(m map[string]Ref) map[string]string {
	out := make(map[string]string, len(m))
	for k, r := range m {
		out[k] = r.String()
	}
	return out
}

func formatParams(ps node.Params) map[string]string {
	out := make(map[string]string, len(ps))
	for k, v := range ps {
		out[k] = node.FormatValue(v)
	}
	return out
}
