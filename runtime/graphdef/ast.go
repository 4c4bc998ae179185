package graphdef

import "strings"

// Graph is a parsed graph file. Every element carries the position it was read
// from: in this type and the ones below, a field FooPos is the position of
// Foo's value, except for the sections (params, nodes, out, tests) and a
// node's with and in, where it is the position of the key. A position is zero
// when the element was absent from the file.
type Graph struct {
	// File is the file name given to Parse, used in every position.
	File string
	// Pos is where the top-level mapping starts.
	Pos Pos
	// Name is the graph's name (the "graph:" key).
	Name    string
	NamePos Pos
	// Doc is an optional one-paragraph description.
	Doc    string
	DocPos Pos
	// Params are the graph's declared parameters, in file order.
	Params    []*ParamDecl
	ParamsPos Pos
	// Nodes are the graph's nodes, in file order.
	Nodes    []*Node
	NodesPos Pos
	// Out binds the graph's outputs to node outputs, in file order.
	Out    []*Binding
	OutPos Pos
	// Carry names values kept per sequence from one step to the next, in
	// file order: carry NAME: NODE.PORT is read in the next step as
	// $prev.NAME.
	Carry    []*Binding
	CarryPos Pos
	// Tests are the graph's inline test cases, in file order.
	Tests    []*Test
	TestsPos Pos
}

// ParamDecl declares a graph parameter that nodes use as "$params.NAME" and
// that callers may override. graphdef reads its fields; the compiler decides
// whether the type, bounds and default make sense.
type ParamDecl struct {
	// Name is the key under "params:"; Pos is its position.
	Name string
	Pos  Pos
	// Type names the kind: int, float, string, bool or enum.
	Type    string
	TypePos Pos
	// Default is the value used without an override: int64, float64,
	// string or bool, as written.
	Default    any
	DefaultPos Pos
	// Min and Max are optional inclusive bounds for numeric types.
	Min, Max       *float64
	MinPos, MaxPos Pos
	// Values are the allowed values of an enum.
	Values    []string
	ValuesPos Pos
	// Doc is an optional one-line description.
	Doc    string
	DocPos Pos
}

// Node is one entry of "nodes:".
type Node struct {
	// Pos is where the node's mapping starts.
	Pos Pos
	// ID names the node within the graph; references use it.
	ID    string
	IDPos Pos
	// Op is the registered node type, such as "model.forward".
	Op    string
	OpPos Pos
	// With sets the node's params, in file order.
	With    []*Arg
	WithPos Pos
	// In wires the node's input ports, in file order.
	In    []*Binding
	InPos Pos
	// A loop node has no op: it runs the sub-graph Body (its "nodes:")
	// up to Repeat times per step, each pass over one row per drafting
	// sequence ($loop.tokens, $loop.positions), and outputs what Out
	// collects from each pass. Next names, for each loop input, the body
	// output that feeds the following pass. A block loop (block: N
	// instead of repeat: N, Block set, Repeat its count) drafts its N
	// tokens in one pass over each drafting sequence's last token and N
	// mask tokens, and has no next. RepeatPos (the key of repeat: or
	// block:), BodyPos, NextPos and OutPos are the positions of their keys.
	Repeat    *Arg
	RepeatPos Pos
	Block     bool
	Body      []*Node
	BodyPos   Pos
	Next      []*Binding
	NextPos   Pos
	Out       []*Binding
	OutPos    Pos
}

// IsLoop reports whether n is a loop node (repeat:, block: or nodes: given).
func (n *Node) IsLoop() bool {
	return n.RepeatPos.IsValid() || n.BodyPos.IsValid() || n.Repeat != nil || n.Body != nil
}

// LoopNode is the node part of a reference, inside a loop's body, to the
// loop's per-pass inputs ("$loop.tokens", "$loop.positions").
const LoopNode = "$loop"

// Arg sets one node param: Name under "with:" to Value.
type Arg struct {
	Name    string
	NamePos Pos
	// Value is an int64, float64, string or bool as written, or a string of
	// the form "$params.NAME" that refers to a graph param (see ParamRef).
	// It is nil only when the YAML value was unusable, which Parse reports.
	Value    any
	ValuePos Pos
}

// ParamsPrefix starts a with: value that refers to a graph param.
const ParamsPrefix = "$params."

// InputNode is the node part of a reference to a graph input ("$in.tokens").
const InputNode = "$in"

// PrevNode is the node part of a reference to a value carried from the
// sequence's previous step ("$prev.h", declared under carry:).
const PrevNode = "$prev"

// ParamRef returns the graph param that the value refers to, if it is a
// "$params.NAME" reference.
func (a *Arg) ParamRef() (name string, ok bool) {
	s, isString := a.Value.(string)
	if !isString || !strings.HasPrefix(s, ParamsPrefix) {
		return "", false
	}
	return s[len(ParamsPrefix):], true
}

// Binding connects a name (a node's input port under "in:", or a graph output
// under "out:") to a reference "NODE.PORT" or "$in.NAME".
type Binding struct {
	Name    string
	NamePos Pos
	Ref     string
	RefPos  Pos
}

// Target splits the reference into its node ("$in" for graph inputs) and port.
// ok is false when the reference has no dot.
func (b *Binding) Target() (node, port string, ok bool) {
	i := strings.LastIndexByte(b.Ref, '.')
	if i < 0 {
		return "", "", false
	}
	return b.Ref[:i], b.Ref[i+1:], true
}

// Test is one inline test case under "tests:": generate from Prompt and, when
// SameAs names another graph, expect exactly that graph's tokens.
type Test struct {
	// Pos is where the test's mapping starts.
	Pos     Pos
	Name    string
	NamePos Pos
	// Prompt is the text to complete (required, may be empty).
	Prompt    string
	PromptPos Pos
	// Temperature is the sampling temperature; 0 (the default) is greedy.
	Temperature    float64
	TemperaturePos Pos
	// MaxTokens is the number of tokens to generate, at least 1.
	MaxTokens    int
	MaxTokensPos Pos
	// SameAs optionally names a graph whose output this test must equal.
	SameAs    string
	SameAsPos Pos
}
