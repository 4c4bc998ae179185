package node

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func f(v float64) *float64 { return &v }

func newNoHost(Params) (HostNode, error)     { return nil, nil }
func newNoDevice(Params) (DeviceNode, error) { return nil, nil }

type chunk struct{ size int }

func (c chunk) Fold(p *PlanPolicy) error { p.PrefillChunk = c.size; return nil }

// testSpecs is a small but varied set of specs used by the registry and docs tests.
func testSpecs() []Spec {
	return []Spec{
		{
			Op: "sample.token", Placement: Host,
			In:  []Port{{Name: "logits", Type: Logits, Doc: "scores of the last position"}, {Name: "history", Type: Tokens, Optional: true, Doc: "tokens so far, for penalties"}},
			Out: []Port{{Name: "tokens", Type: Tokens, Doc: "the chosen token"}},
			Params: []Param{
				{Name: "temperature", Kind: Float, Default: 0.0, Min: f(0), Max: f(2), Doc: "0 is greedy"},
				{Name: "top_k", Kind: Int, Default: 0, Min: f(0), Doc: "0 | off"},
				{Name: "method", Kind: Enum, Default: "auto", Enum: []string{"auto", "greedy", "stochastic"}},
				{Name: "seed", Kind: Int, Doc: "required seed"},
			},
			Summary: "Pick the next token from logits.",
			Doc:     "Greedy at temperature 0.",
			NewHost: newNoHost,
		},
		{
			Op: "model.forward", Placement: Device,
			In:        []Port{{Name: "tokens", Type: Tokens}, {Name: "positions", Type: Positions}},
			Out:       []Port{{Name: "logits", Type: Logits}},
			Params:    []Param{{Name: "model", Kind: String, Default: "target"}, {Name: "last_only", Kind: Bool, Default: true}},
			Summary:   "Run the model.",
			NewDevice: newNoDevice,
		},
		{
			Op: "prefill.chunk", Placement: Policy,
			Params:    []Param{{Name: "size", Kind: Int, Default: int64(512), Min: f(1), Max: f(65536)}},
			Summary:   "Prefill chunk size.",
			NewPolicy: func(p Params) (PolicyNode, error) { return chunk{p.Int("size")}, nil },
		},
	}
}

func testRegistry() *Registry {
	r := NewRegistry()
	for _, s := range testSpecs() {
		r.Register(s)
	}
	return r
}

func TestRegisterPanics(t *testing.T) {
	base := func(edit func(s *Spec)) Spec {
		s := Spec{Op: "a.b", Placement: Host, Summary: "s", NewHost: newNoHost,
			In: []Port{{Name: "x", Type: Tokens}}, Out: []Port{{Name: "y", Type: Tokens}},
			Params: []Param{{Name: "p", Kind: Int, Default: int64(1)}}}
		edit(&s)
		return s
	}
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"an op without a family is rejected", base(func(s *Spec) { s.Op = "forward" }), "invalid op name"},
		{"an upper-case op is rejected", base(func(s *Spec) { s.Op = "Model.forward" }), "invalid op name"},
		{"a trailing underscore is rejected", base(func(s *Spec) { s.Op = "model.forward_" }), "invalid op name"},
		{"a zero placement is rejected", base(func(s *Spec) { s.Placement = 0 }), "invalid placement"},
		{"a nil constructor is rejected", base(func(s *Spec) { s.NewHost = nil }), "NewHost is nil"},
		{"another placement's constructor is rejected", base(func(s *Spec) { s.NewDevice = newNoDevice }), "a host spec sets NewDevice"},
		{"an empty summary is rejected", base(func(s *Spec) { s.Summary = " " }), "empty summary"},
		{"duplicate inputs are rejected", base(func(s *Spec) { s.In = append(s.In, Port{Name: "x", Type: Logits}) }), `duplicate input port "x"`},
		{"duplicate outputs are rejected", base(func(s *Spec) { s.Out = append(s.Out, Port{Name: "y", Type: Logits}) }), `duplicate output port "y"`},
		{"a port without a type is rejected", base(func(s *Spec) { s.In[0].Type = "" }), "empty type"},
		{"a bad port name is rejected", base(func(s *Spec) { s.Out[0].Name = "Y" }), "invalid output port name"},
		{"duplicate params are rejected", base(func(s *Spec) { s.Params = append(s.Params, Param{Name: "p", Kind: Bool}) }), `duplicate param "p"`},
		{"a bad param name is rejected", base(func(s *Spec) { s.Params[0].Name = "2p" }), "invalid param name"},
		{"a string default of an int is rejected", base(func(s *Spec) { s.Params[0].Default = "1" }), `want int, got string "1"`},
		{"a float default of an int is rejected", base(func(s *Spec) { s.Params[0].Default = 1.5 }), "want int, got float 1.5"},
		{"a default out of range is rejected", base(func(s *Spec) { s.Params[0].Min = f(2) }), "1 is out of range >= 2"},
		{"min above max is rejected", base(func(s *Spec) { s.Params[0].Min, s.Params[0].Max = f(3), f(2) }), "min 3 is greater than max 2"},
		{"bounds on a string are rejected", base(func(s *Spec) { s.Params[0] = Param{Name: "p", Kind: String, Max: f(1)} }), "min and max apply only"},
		{"an enum without values is rejected", base(func(s *Spec) { s.Params[0] = Param{Name: "p", Kind: Enum} }), "at least one value"},
		{"duplicate enum values are rejected", base(func(s *Spec) { s.Params[0] = Param{Name: "p", Kind: Enum, Enum: []string{"a", "a"}} }), `duplicate enum value "a"`},
		{"values on a non-enum are rejected", base(func(s *Spec) { s.Params[0].Enum = []string{"a"} }), "apply only to kind enum"},
		{"an enum default outside the values is rejected", base(func(s *Spec) {
			s.Params[0] = Param{Name: "p", Kind: Enum, Enum: []string{"greedy"}, Default: "gredy"}
		}), `"gredy" is not one of greedy (did you mean "greedy"?)`},
		{"an unknown kind is rejected", base(func(s *Spec) { s.Params[0].Kind = 9 }), "invalid kind kind(9)"},
		{"a policy node with ports is rejected", base(func(s *Spec) { s.Placement = Policy }), "a policy node has no ports"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := func() (msg string) {
				defer func() {
					if r := recover(); r != nil {
						msg, _ = r.(string)
					}
				}()
				NewRegistry().Register(tt.spec)
				return ""
			}()
			if !strings.Contains(got, tt.want) {
				t.Errorf("panic = %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

func TestRegisterDuplicatePanics(t *testing.T) {
	r := testRegistry()
	defer func() {
		if got, _ := recover().(string); !strings.Contains(got, "already registered") {
			t.Errorf("panic = %q, want an already-registered panic", got)
		}
	}()
	r.Register(testSpecs()[0])
}

func TestRegistryCopiesAndNormalizes(t *testing.T) {
	specs := testSpecs()
	r := NewRegistry()
	r.Register(specs[0])
	specs[0].In[0].Name = "changed"
	s, ok := r.Lookup("sample.token")
	if !ok {
		t.Fatal("sample.token is not registered")
	}
	if s.In[0].Name != "logits" {
		t.Errorf("registry shares the caller's port slice: got %q", s.In[0].Name)
	}
	if got := s.Param("top_k").Default; got != int64(0) {
		t.Errorf("int default = %#v, want int64(0)", got)
	}
	if s.Param("nope") != nil || s.Input("logits") == nil || s.Output("tokens") == nil || s.Output("logits") != nil {
		t.Error("Param/Input/Output lookups are wrong")
	}
	if _, ok := r.Lookup("model.forward"); ok {
		t.Error("Lookup found an op that was never registered")
	}
}

func TestSpecsSorted(t *testing.T) {
	var got []string
	for _, s := range testRegistry().Specs() {
		got = append(got, s.Op)
	}
	want := []string{"model.forward", "prefill.chunk", "sample.token"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Specs() order (-want +got):\n%s", diff)
	}
}

func TestSuggest(t *testing.T) {
	r := testRegistry()
	tests := []struct{ op, want string }{
		{"model.foward", "model.forward"},
		{"sample.tokens", "sample.token"},
		{"forward", "model.forward"},
		{"modle.forward", "model.forward"},
		{"llm.forward", "model.forward"},
		{"kv.cache", ""},
		{"model.forward", ""},
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.Suggest(tt.op); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.op, got, tt.want)
		}
	}
}

func TestConvert(t *testing.T) {
	intP := Param{Name: "n", Kind: Int, Min: f(1), Max: f(10)}
	floatP := Param{Name: "x", Kind: Float, Min: f(0)}
	enumP := Param{Name: "m", Kind: Enum, Enum: []string{"greedy", "auto"}}
	strP := Param{Name: "s", Kind: String}
	boolP := Param{Name: "b", Kind: Bool}
	tests := []struct {
		name    string
		p       Param
		in      any
		want    any
		wantErr string
	}{
		{"an int64 stays an int64", intP, int64(3), int64(3), ""},
		{"an int becomes an int64", intP, 3, int64(3), ""},
		{"an int below min is out of range", intP, int64(0), nil, "0 is out of range [1, 10]"},
		{"an int above max is out of range", intP, int64(11), nil, "11 is out of range [1, 10]"},
		{"a float is not an int", intP, 2.0, nil, "want int, got float 2.0"},
		{"a string is not an int", intP, "2", nil, `want int, got string "2"`},
		{"an int widens to float", floatP, int64(2), 2.0, ""},
		{"a negative float is out of range", floatP, -0.5, nil, "-0.5 is out of range >= 0"},
		{"NaN is rejected", floatP, nanValue(), nil, "want a finite float, got NaN"},
		{"a bool is not a float", floatP, true, nil, "want float, got bool true"},
		{"an enum value is accepted", enumP, "auto", "auto", ""},
		{"a misspelt enum value gets a hint", enumP, "gready", nil, `"gready" is not one of greedy, auto (did you mean "greedy"?)`},
		{"an int is not an enum", enumP, int64(1), nil, "want enum, got int 1"},
		{"a string is a string", strP, "x", "x", ""},
		{"null is not a string", strP, nil, nil, "want string, got null null"},
		{"a bool is a bool", boolP, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Convert(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Convert(%#v) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Convert(%#v): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Convert(%#v) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		p       Param
		in      string
		want    any
		wantErr string
	}{
		{"an int is read in decimal", Param{Kind: Int}, "256", int64(256), ""},
		{"an int is range-checked", Param{Kind: Int, Min: f(1)}, "0", nil, "0 is out of range >= 1"},
		{"text is not an int", Param{Kind: Int}, "lots", nil, `want int, got "lots"`},
		{"a float is read", Param{Kind: Float}, "0.7", 0.7, ""},
		{"an integer is a float", Param{Kind: Float}, "1", 1.0, ""},
		{"true is a bool", Param{Kind: Bool}, "true", true, ""},
		{"yes is not a bool", Param{Kind: Bool}, "yes", nil, `want bool (true or false), got "yes"`},
		{"an enum is checked", Param{Kind: Enum, Enum: []string{"a"}}, "b", nil, `"b" is not one of a`},
		{"a string is taken as is", Param{Kind: String}, " x ", " x ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParamsAccessors(t *testing.T) {
	p := Params{"n": int64(4), "x": 0.5, "s": "f16", "b": true}
	if p.Int("n") != 4 || p.Float("x") != 0.5 || p.String("s") != "f16" || !p.Bool("b") {
		t.Errorf("accessors returned wrong values for %v", p)
	}
	for name, call := range map[string]func(){
		"a missing param panics":    func() { p.Int("missing") },
		"the wrong accessor panics": func() { p.Float("n") },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			call()
		})
	}
}

func TestFormatValue(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{int64(-3), "-3"}, {7, "7"}, {1.0, "1.0"}, {0.25, "0.25"}, {1e21, "1e+21"},
		{"a\"b", `"a\"b"`}, {false, "false"}, {nil, "null"},
	}
	for _, tt := range tests {
		if got := FormatValue(tt.in); got != tt.want {
			t.Errorf("FormatValue(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPlacementAndKindNames(t *testing.T) {
	got := []string{Device.String(), Host.String(), Policy.String(), Placement(0).String(),
		Int.String(), Float.String(), String.String(), Bool.String(), Enum.String(), ParamKind(0).String()}
	want := []string{"device", "host", "policy", "placement(0)", "int", "float", "string", "bool", "enum", "kind(0)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

func TestDefaultPolicyAndFold(t *testing.T) {
	p := DefaultPolicy()
	if diff := cmp.Diff(PlanPolicy{PrefillChunk: 512, KVDType: "f32", KVBlockTokens: 16, StateDType: "f32"}, p); diff != "" {
		t.Errorf("DefaultPolicy (-want +got):\n%s", diff)
	}
	s, _ := testRegistry().Lookup("prefill.chunk")
	inst, err := s.NewPolicy(Params{"size": int64(128)})
	if err != nil {
		t.Fatal(err)
	}
	if err := inst.Fold(&p); err != nil || p.PrefillChunk != 128 {
		t.Errorf("Fold: err %v, policy %+v", err, p)
	}
}

func TestDocs(t *testing.T) {
	got := Docs(testRegistry())
	golden := filepath.Join("testdata", "docs.md")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./runtime/node -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Docs (-want +got):\n%s", diff)
	}
	if empty := Docs(NewRegistry()); !strings.Contains(empty, "No nodes are registered.") {
		t.Errorf("Docs of an empty registry = %q", empty)
	}
}

func TestDefaultRegister(t *testing.T) {
	before := len(Default.Specs())
	Register(Spec{Op: "test_only.default_register", Placement: Host, Summary: "x", NewHost: newNoHost})
	if len(Default.Specs()) != before+1 {
		t.Error("Register did not add to Default")
	}
}
