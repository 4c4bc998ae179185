package node

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
)

// Spec declares a node type once: its op name, placement, typed ports and
// params, documentation and constructor. Everything else (validation, docs,
// plans) is derived from it.
type Spec struct {
	// Op is the node type's name, "family.name", matching
	// ^[a-z0-9]+(_[a-z0-9]+)*(\.[a-z0-9]+(_[a-z0-9]+)*)+$.
	Op string
	// Placement says where the node's work happens. Policy specs declare no
	// ports; NewPolicy builds their PolicyNode.
	Placement Placement
	// In and Out are the node's input and output ports; names are unique
	// within each list (an input and an output may share a name).
	In, Out []Port
	// Params are the node's parameters; names are unique.
	Params []Param
	// Summary is a one-line description.
	Summary string
	// Doc is an optional longer description in Markdown.
	Doc string
	// Info are the node type's static facts, which the compiler and the
	// engine read from the spec instead of asking an instance what it is.
	Info Info
	// NewDevice, NewHost and NewPolicy build a node instance from params
	// that the compiler has already validated and completed with defaults;
	// a spec sets the one of its Placement and no other. It is called once
	// per graph node per compile; an error is reported at the node in the
	// graph.
	NewDevice func(p Params) (DeviceNode, error)
	NewHost   func(p Params) (HostNode, error)
	NewPolicy func(p Params) (PolicyNode, error)
}

// constructors reports which of s's constructors are set, by placement.
func (s *Spec) constructors() map[Placement]bool {
	return map[Placement]bool{Device: s.NewDevice != nil, Host: s.NewHost != nil, Policy: s.NewPolicy != nil}
}

// Info are static facts of a node type that rules about where it may run
// depend on.
type Info struct {
	// BlockDrafter: the node drafts a block of mask tokens in one pass
	// (its instances implement exec.BlockDrafter); it runs only as the one
	// device node of a block loop's body.
	BlockDrafter bool
	// RecurrentState: the node runs the model's own layers and owns its
	// recurrent state on a hybrid model (its instances implement
	// exec.StateShaper), so drafting with it over the target advances the
	// target's state.
	RecurrentState bool
	// ModelAlias returns the alias of the model a node built with params p
	// runs (a draft model's, "draft"), or Target or "" for the target's.
	// It is nil for node types that run no model or only the target.
	ModelAlias func(p Params) string
}

// Param returns the spec's param called name, or nil.
func (s *Spec) Param(name string) *Param {
	for i := range s.Params {
		if s.Params[i].Name == name {
			return &s.Params[i]
		}
	}
	return nil
}

// Input returns the spec's input port called name, or nil.
func (s *Spec) Input(name string) *Port { return findPort(s.In, name) }

// Output returns the spec's output port called name, or nil.
func (s *Spec) Output(name string) *Port { return findPort(s.Out, name) }

func findPort(ports []Port, name string) *Port {
	for i := range ports {
		if ports[i].Name == name {
			return &ports[i]
		}
	}
	return nil
}

var opPattern = regexp.MustCompile(`^[a-z0-9]+(_[a-z0-9]+)*(\.[a-z0-9]+(_[a-z0-9]+)*)+$`)

// Registry maps op names to specs. It is safe for concurrent use; in practice
// specs are registered from init() and only looked up afterwards.
type Registry struct {
	mu    sync.RWMutex
	specs map[string]*Spec
}

// NewRegistry returns an empty registry, for tests that want an isolated set
// of specs.
func NewRegistry() *Registry { return &Registry{specs: map[string]*Spec{}} }

// Default is the registry the nodes/* packages register into from init() and
// that the ninfer binary compiles graphs against.
var Default = NewRegistry()

// Register adds a copy of s to the Default registry; see Registry.Register.
func Register(s Spec) { Default.Register(s) }

// Register adds a copy of s to r. It panics, naming the op and the problem,
// when the op is already registered or its name is invalid, when the
// placement is unknown, the constructor of its placement is nil or
// another placement's is set, the summary is empty, a port or param
// name is invalid or duplicated, a port has no type, a Policy spec declares
// ports, or a param declaration is invalid (see Param.Validate; a default of
// the wrong kind or out of range is one). Registration mistakes are
// programmer errors, caught when the binary starts.
func (r *Registry) Register(s Spec) {
	if err := check(&s); err != nil {
		panic(fmt.Sprintf("node: register %q: %v", s.Op, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.specs[s.Op]; dup {
		panic(fmt.Sprintf("node: register %q: op already registered", s.Op))
	}
	r.specs[s.Op] = &s
}

// check validates s and gives it its own copies of the slices, with param
// defaults normalized.
func check(s *Spec) error {
	if !opPattern.MatchString(s.Op) {
		return fmt.Errorf("invalid op name: want family.name matching %s", opPattern)
	}
	if s.Placement < Device || s.Placement > Policy {
		return fmt.Errorf("invalid placement %s", s.Placement)
	}
	if strings.TrimSpace(s.Summary) == "" {
		return fmt.Errorf("empty summary")
	}
	if s.Placement == Policy && len(s.In)+len(s.Out) > 0 {
		return fmt.Errorf("a policy node has no ports: it is folded into the plan at compile time")
	}
	set := s.constructors()
	if !set[s.Placement] {
		return fmt.Errorf("New%s is nil: a %s spec's constructor", constructorName(s.Placement), s.Placement)
	}
	for _, pl := range []Placement{Device, Host, Policy} {
		if set[pl] && pl != s.Placement {
			return fmt.Errorf("a %s spec sets New%s: it is built by New%s only", s.Placement, constructorName(pl), constructorName(s.Placement))
		}
	}
	s.In, s.Out, s.Params = slices.Clone(s.In), slices.Clone(s.Out), slices.Clone(s.Params)
	for _, ports := range []struct {
		dir  string
		list []Port
	}{{"input", s.In}, {"output", s.Out}} {
		for i, p := range ports.list {
			if !namePattern.MatchString(p.Name) {
				return fmt.Errorf("invalid %s port name %q: want ^[a-z][a-z0-9_]*$", ports.dir, p.Name)
			}
			if p.Type == "" {
				return fmt.Errorf("%s port %s: empty type", ports.dir, p.Name)
			}
			if findPort(ports.list[:i], p.Name) != nil {
				return fmt.Errorf("duplicate %s port %q", ports.dir, p.Name)
			}
		}
	}
	for i := range s.Params {
		p := &s.Params[i]
		p.Enum = slices.Clone(p.Enum)
		if err := p.Validate(); err != nil {
			return err
		}
		for _, q := range s.Params[:i] {
			if q.Name == p.Name {
				return fmt.Errorf("duplicate param %q", p.Name)
			}
		}
	}
	return nil
}

// constructorName is the suffix of placement p's constructor field: New + it.
func constructorName(p Placement) string {
	return strings.ToUpper(p.String()[:1]) + p.String()[1:]
}

// Lookup returns the spec registered for op.
func (r *Registry) Lookup(op string) (*Spec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.specs[op]
	return s, ok
}

// Specs returns every registered spec, sorted by Op.
func (r *Registry) Specs() []*Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Spec, 0, len(r.specs))
	for _, s := range r.specs {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *Spec) int { return strings.Compare(a.Op, b.Op) })
	return out
}

// Suggest returns the registered op closest to op, for "did you mean"
// hints, or "" if none is close. An op whose name part (after the last dot)
// equals op, or the name part of op, is close ("forward" suggests
// "model.forward"); otherwise the edit distance decides.
func (r *Registry) Suggest(op string) string {
	specs := r.Specs()
	ops := make([]string, len(specs))
	for i, s := range specs {
		ops[i] = s.Op
	}
	if c := hint.Closest(op, ops); c != "" {
		return c
	}
	name := op[strings.LastIndex(op, ".")+1:]
	for _, o := range ops {
		if o != op && name != "" && o[strings.LastIndex(o, ".")+1:] == name {
			return o
		}
	}
	return ""
}

// ModelParam returns an Info.ModelAlias for node types whose param name
// names the model they run.
func ModelParam(name string) func(p Params) string {
	return func(p Params) string { return p.String(name) }
}
