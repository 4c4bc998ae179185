package compile

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/graphs"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/graphdef/graphdeftest"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

var update = flag.Bool("update", false, "rewrite the .plan golden files in testdata")

func bound(v float64) *float64 { return &v }

type chunkPolicy struct{ size int }

func (c chunkPolicy) Fold(p *node.PlanPolicy) error { p.PrefillChunk = c.size; return nil }

type kvPolicy struct {
	dtype  string
	blocks int
}

func (k kvPolicy) Fold(p *node.PlanPolicy) error {
	if k.dtype == "q8_0" && k.blocks%32 != 0 {
		return fmt.Errorf("q8_0 pages need block_tokens divisible by 32, got %d", k.blocks)
	}
	p.KVDType, p.KVBlockTokens = k.dtype, k.blocks
	return nil
}

// instance records the params a node was built with.
type instance struct{ params node.Params }

// The test instances build and run nothing: the compiler only builds them.
func (instance) Record(*tensor.Builder, map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	return nil, errors.New("a test instance records nothing")
}

func (instance) RunHost(*node.HostContext, map[string]any) (map[string]any, error) {
	return nil, errors.New("a test instance runs nothing")
}

func buildDevice(p node.Params) (node.DeviceNode, error) { return instance{p}, nil }
func buildHost(p node.Params) (node.HostNode, error)     { return instance{p}, nil }

// blockInstance is the test block drafter (exec.BlockDrafter).
type blockInstance struct{ instance }

func (blockInstance) MaskToken() int32 { return 0 }
func (blockInstance) MaxBlock() int    { return 15 }

// testRegistry mirrors the shape of the real node specs without depending on
// the nodes/* packages.
func testRegistry() *node.Registry {
	r := node.NewRegistry()
	r.Register(node.Spec{
		Op: "prefill.chunk", Placement: node.Policy, Summary: "Prefill chunk size.",
		Params:    []node.Param{{Name: "size", Kind: node.Int, Default: int64(512), Min: bound(1), Max: bound(65536)}},
		NewPolicy: func(p node.Params) (node.PolicyNode, error) { return chunkPolicy{p.Int("size")}, nil },
	})
	r.Register(node.Spec{
		Op: "kv.cache", Placement: node.Policy, Summary: "KV cache page format.",
		Params: []node.Param{
			{Name: "dtype", Kind: node.Enum, Default: "f32", Enum: []string{"f32", "f16", "q8_0"}},
			{Name: "block_tokens", Kind: node.Int, Default: int64(16), Min: bound(1), Max: bound(256)},
		},
		NewPolicy: func(p node.Params) (node.PolicyNode, error) {
			return kvPolicy{p.String("dtype"), p.Int("block_tokens")}, nil
		},
	})
	r.Register(node.Spec{
		Op: "model.forward", Placement: node.Device, Summary: "Run the model.",
		In: []node.Port{{Name: "tokens", Type: node.Tokens}, {Name: "positions", Type: node.Positions},
			{Name: "draft", Type: node.Draft, Optional: true}, {Name: "images", Type: node.ImageEmbeddings, Optional: true}},
		Out: []node.Port{{Name: "logits", Type: node.Logits}, {Name: "hidden", Type: node.Hidden}},
		Params: []node.Param{
			{Name: "model", Kind: node.String, Default: "target"},
			{Name: "label", Kind: node.String, Default: ""},
			{Name: "layers", Kind: node.Int, Default: int64(0), Min: bound(0)},
			{Name: "hidden_rows", Kind: node.Enum, Default: "sampled", Enum: []string{"sampled", "all"}},
		},
		Info:      node.Info{ModelAlias: node.ModelParam("model")},
		NewDevice: buildDevice,
	})
	r.Register(node.Spec{
		Op: "vision.encode", Placement: node.Device, Summary: "Encode the prompt's images.",
		In:        []node.Port{{Name: "images", Type: node.Images}},
		Out:       []node.Port{{Name: "embeddings", Type: node.ImageEmbeddings}},
		NewDevice: buildDevice,
	})
	r.Register(node.Spec{
		Op: "model.mtp", Placement: node.Device, Summary: "Run a head over tokens and hidden states.",
		In:        []node.Port{{Name: "tokens", Type: node.Tokens}, {Name: "positions", Type: node.Positions}, {Name: "hidden", Type: node.Hidden}},
		Out:       []node.Port{{Name: "logits", Type: node.Logits}, {Name: "hidden", Type: node.Hidden}},
		NewDevice: buildDevice,
	})
	r.Register(node.Spec{
		Op: "speculative.mtp", Placement: node.Host, Summary: "Propose tokens from carried hidden states.",
		In:      []node.Port{{Name: "history", Type: node.History}, {Name: "hidden", Type: node.Hidden}},
		Out:     []node.Port{{Name: "draft", Type: node.Draft}},
		NewHost: buildHost,
	})
	r.Register(node.Spec{
		Op: "sample.token", Placement: node.Host, Summary: "Pick the next token.",
		In:  []node.Port{{Name: "logits", Type: node.Logits}, {Name: "history", Type: node.History, Optional: true}},
		Out: []node.Port{{Name: "tokens", Type: node.Tokens}},
		Params: []node.Param{
			{Name: "temperature", Kind: node.Float, Default: 0.0, Min: bound(0), Max: bound(2)},
			{Name: "top_k", Kind: node.Int, Default: int64(0), Min: bound(0)},
			{Name: "method", Kind: node.Enum, Default: "auto", Enum: []string{"auto", "greedy", "stochastic"}},
		},
		NewHost: buildHost,
	})
	r.Register(node.Spec{
		Op: "speculative.ngram", Placement: node.Host, Summary: "Propose tokens by prompt lookup.",
		In: []node.Port{{Name: "history", Type: node.History}, {Name: "tokens", Type: node.Tokens}},
		Out: []node.Port{{Name: "draft", Type: node.Draft}, {Name: "with_last", Type: node.History}, {Name: "positions", Type: node.Positions},
			{Name: "probs", Type: node.DraftProbs}},
		Params: []node.Param{
			{Name: "k", Kind: node.Int, Min: bound(1), Max: bound(16)},
			{Name: "min_match", Kind: node.Int, Default: int64(2), Min: bound(1), Max: bound(8)},
		},
		NewHost: buildHost,
	})
	r.Register(node.Spec{
		Op: "speculative.verify", Placement: node.Host, Summary: "Accept the longest matching draft prefix.",
		In: []node.Port{{Name: "draft", Type: node.Draft}, {Name: "logits", Type: node.Logits},
			{Name: "draft_probs", Type: node.DraftProbs, Optional: true}},
		Out: []node.Port{{Name: "accepted", Type: node.Tokens}, {Name: "rejected_at", Type: node.Positions}},
		Params: []node.Param{
			{Name: "method", Kind: node.Enum, Default: "auto", Enum: []string{"auto", "greedy", "rejection"}},
			{Name: "use_bonus", Kind: node.Bool, Default: true},
		},
		NewHost: buildHost,
	})
	r.Register(node.Spec{
		Op: "sample.argmax", Placement: node.Host, Summary: "Pick each row's argmax.",
		In:      []node.Port{{Name: "logits", Type: node.Logits}},
		Out:     []node.Port{{Name: "tokens", Type: node.Tokens}},
		NewHost: buildHost,
	})
	r.Register(node.Spec{
		Op: "speculative.block", Placement: node.Device, Summary: "Draft a block of mask tokens in one pass.",
		Info:      node.Info{BlockDrafter: true, ModelAlias: func(node.Params) string { return "draft" }}, // runs the model aliased draft
		In:        []node.Port{{Name: "tokens", Type: node.Tokens}, {Name: "positions", Type: node.Positions}, {Name: "hidden", Type: node.Hidden}},
		Out:       []node.Port{{Name: "logits", Type: node.Logits}},
		NewDevice: func(p node.Params) (node.DeviceNode, error) { return blockInstance{instance{p}}, nil },
	})
	r.Register(node.Spec{
		Op: "test.broken", Placement: node.Host, Summary: "Fails to build.",
		In:      []node.Port{{Name: "tokens", Type: node.Tokens}},
		Out:     []node.Port{{Name: "tokens", Type: node.Tokens}},
		NewHost: func(node.Params) (node.HostNode, error) { return nil, errors.New("broken on purpose") },
	})
	r.Register(node.Spec{
		Op: "test.not_policy", Placement: node.Policy, Summary: "Builds something that cannot fold.",
		NewPolicy: func(node.Params) (node.PolicyNode, error) { return nil, nil }, // builds nothing that folds
	})
	return r
}

// TestGolden compiles each testdata/*.yaml and compares plan.String() with
// the .plan file beside it; -update rewrites the .plan files.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	reg := testRegistry()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			p, err := File(file, reg, nil)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got := p.String()
			golden := strings.TrimSuffix(file, ".yaml") + ".plan"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./runtime/compile -update)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestErrors compiles each testdata/errors/*.yaml and checks the errors
// against its "# ERROR" annotations.
func TestErrors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "errors", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	reg := testRegistry()
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Source(file, src, reg, nil)
			if err == nil {
				t.Fatalf("compiled without errors:\n%s", p)
			}
			if p != nil {
				t.Error("a plan was returned with errors")
			}
			graphdeftest.Check(t, file, src, err)
		})
	}
}

func TestThreeMistakesGiveThreeErrors(t *testing.T) {
	file := filepath.Join("testdata", "errors", "three.yaml")
	_, err := File(file, testRegistry(), nil)
	var list graphdef.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	if len(list) != 3 {
		t.Errorf("got %d errors, want 3:\n%v", len(list), err)
	}
}

func TestEmbeddedPlainCompiles(t *testing.T) {
	file, src, err := graphs.Source("plain")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Source(file, src, testRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy.PrefillChunk != 512 || p.Out["tokens"] != (plan.Ref{Node: "pick", Port: "tokens"}) {
		t.Errorf("unexpected plan:\n%s", p)
	}
}

func TestOverrides(t *testing.T) {
	src := []byte(`graph: o
params:
  chunk: {type: int, default: 512, min: 1, max: 65536}
  temp: {type: float, default: 0}
  method: {type: enum, default: auto, values: [auto, greedy]}
  label: {type: string, default: target}
nodes:
  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}
  - {id: fwd, op: model.forward, with: {label: $params.label}, in: {tokens: $in.tokens, positions: $in.positions}}
  - {id: pick, op: sample.token, with: {temperature: $params.temp, method: $params.method}, in: {logits: fwd.logits}}
out: {tokens: pick.tokens}
`)
	tests := []struct {
		name       string
		overrides  node.Params
		wantParams node.Params
		wantPick   node.Params
		wantChunk  int
		wantErrs   []string
	}{
		{
			name:       "no overrides keep the defaults",
			wantParams: node.Params{"chunk": int64(512), "temp": 0.0, "method": "auto", "label": "target"},
			wantPick:   node.Params{"temperature": 0.0, "top_k": int64(0), "method": "auto"},
			wantChunk:  512,
		},
		{
			name:       "strings from the command line are parsed by type",
			overrides:  node.Params{"chunk": "256", "temp": "0.7", "method": "greedy", "label": "draft"},
			wantParams: node.Params{"chunk": int64(256), "temp": 0.7, "method": "greedy", "label": "draft"},
			wantPick:   node.Params{"temperature": 0.7, "top_k": int64(0), "method": "greedy"},
			wantChunk:  256,
		},
		{
			name:       "typed values are accepted and widened",
			overrides:  node.Params{"chunk": 64, "temp": int64(1), "label": int64(7)},
			wantParams: node.Params{"chunk": int64(64), "temp": 1.0, "method": "auto", "label": "7"},
			wantPick:   node.Params{"temperature": 1.0, "top_k": int64(0), "method": "auto"},
			wantChunk:  64,
		},
		{
			name:      "bad overrides are all reported",
			overrides: node.Params{"chunk": "0", "chunck": "1", "method": "fast", "temp": true},
			wantErrs: []string{
				`o.yaml:2:1: override chunck: the graph has no param "chunck" (did you mean chunk?)`,
				`o.yaml:3:3: override chunk=0: 0 is out of range [1, 65536]`,
				`o.yaml:4:3: override temp=true: want float, got bool true`,
				`o.yaml:5:3: override method=fast: "fast" is not one of auto, greedy`,
			},
		},
		{
			name:      "an override the node rejects is reported at the use",
			overrides: node.Params{"temp": "3"},
			wantErrs:  []string{`o.yaml:10:54: param temperature of sample.token: $params.temp: 3 is out of range [0, 2]`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Source("o.yaml", src, testRegistry(), tt.overrides)
			if tt.wantErrs != nil {
				var got []string
				var list graphdef.ErrorList
				if !errors.As(err, &list) {
					t.Fatalf("error %v is not an ErrorList", err)
				}
				for _, e := range list {
					got = append(got, e.Error())
				}
				if diff := cmp.Diff(tt.wantErrs, got); diff != "" {
					t.Errorf("errors (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantParams, p.Params); diff != "" {
				t.Errorf("plan params (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPick, p.Step("pick").Params); diff != "" {
				t.Errorf("pick params (-want +got):\n%s", diff)
			}
			if p.Policy.PrefillChunk != tt.wantChunk {
				t.Errorf("prefill chunk = %d, want %d", p.Policy.PrefillChunk, tt.wantChunk)
			}
		})
	}
}

func TestStepsCarryInstancesAndSpecs(t *testing.T) {
	p, err := File(filepath.Join("testdata", "plain.yaml"), testRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Steps {
		if s.Spec == nil || s.Spec.Op != s.Op {
			t.Errorf("step %s: spec %v", s.ID, s.Spec)
		}
		if s.Placement == node.Policy {
			if _, ok := s.Node.(node.PolicyNode); !ok {
				t.Errorf("policy step %s: instance %T", s.ID, s.Node)
			}
			continue
		}
		inst, ok := s.Node.(instance)
		if !ok {
			t.Fatalf("step %s: instance %T", s.ID, s.Node)
		}
		if diff := cmp.Diff(s.Params, inst.params); diff != "" {
			t.Errorf("step %s built with other params (-step +instance):\n%s", s.ID, diff)
		}
	}
}

func TestCompileChecksHandBuiltGraphs(t *testing.T) {
	g := &graphdef.Graph{
		File: "mem", Name: "m",
		Nodes: []*graphdef.Node{
			{ID: "fwd", Op: "model.forward", In: []*graphdef.Binding{{Name: "tokens", Ref: "$in.tokens"}, {Name: "positions", Ref: "$in.positions"}}},
			{ID: "fwd", Op: "sample.token", In: []*graphdef.Binding{{Name: "logits", Ref: "fwd.logits"}}},
		},
		Out: []*graphdef.Binding{{Name: "tokens", Ref: "fwd.logits"}},
	}
	_, err := Compile(g, testRegistry(), nil)
	want := "mem: duplicate node id \"fwd\"\nmem: type mismatch: fwd.logits is logits, but out.tokens wants tokens"
	if err == nil || err.Error() != want {
		t.Errorf("Compile error:\n%v\nwant:\n%s", err, want)
	}
	g.Nodes = g.Nodes[:1]
	g.Nodes = append(g.Nodes, &graphdef.Node{ID: "pick", Op: "sample.token", In: []*graphdef.Binding{{Name: "logits", Ref: "fwd.logits"}}})
	g.Out[0].Ref = "pick.tokens"
	p, err := Compile(g, testRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 2 || len(p.Segments) != 2 {
		t.Errorf("unexpected plan:\n%s", p)
	}
}

func TestFileErrors(t *testing.T) {
	if _, err := File(filepath.Join("testdata", "nope.yaml"), testRegistry(), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	_, err := Source("bad.yaml", []byte("graph: [\n"), testRegistry(), nil)
	var list graphdef.ErrorList
	if !errors.As(err, &list) || len(list) != 1 || !strings.HasPrefix(list[0].Msg, "yaml:") {
		t.Errorf("syntax error: %v", err)
	}
}
