package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/graphs"
	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/executor"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// onModel is what `graph check` and `graph plan` bind a graph to: the
// model file (--model) and its vision tower (--mmproj, "" for none).
// checkpointDType is `graph plan`'s --checkpoint-dtype (serve's): how a
// hybrid model's checkpoints are stored.
type onModel struct{ model, mmproj, checkpointDType string }

// loadPlan compiles the graph at path as the engine would for m: with a
// vision tower (m.mmproj), a graph that encodes no images gets the tower
// wired in (instance.LoadPlanWithImages).
func (m onModel) loadPlan(path string, set node.Params) (*plan.Plan, error) {
	if m.mmproj != "" {
		return instance.LoadPlanWithImages(path, graphRegistry, set)
	}
	return loadPlan(path, set)
}

// checkOnModel reports what plan p (compiled from the graph at path) cannot
// do on the model file m.model, as the engine would refuse it
// (executor.BindTarget, executor.BindTower): on a model with recurrent
// state (a hybrid model), a loop that drafts with the target's own layers
// would advance that state, a node that runs a head of the target (an MTP
// block) needs the file to have one, and a node that encodes images needs
// a tower (m.mmproj) that fits the model; each error about a step is
// positioned at its node in the graph file, as the compiler's are.
func checkOnModel(path string, p *plan.Plan, m onModel) error {
	_, err := bindTarget(p, m, path)
	return err
}

// bindTarget binds p's target steps to the model file m.model and its
// vision tower to m.mmproj (executor.BindTarget, executor.BindTower) and
// returns the cache shape they need.
func bindTarget(p *plan.Plan, m onModel, path string) (executor.Shape, error) {
	f, err := weights.Open(m.model)
	if err != nil {
		return executor.Shape{}, err
	}
	defer f.Close()
	var tower *weights.File
	if m.mmproj != "" {
		if tower, err = vision.OpenFile(m.mmproj); err != nil {
			return executor.Shape{}, err
		}
		defer tower.Close()
	}
	shape, err := executor.BindTarget(p, f)
	if _, terr := executor.BindTower(p, tower, f); terr != nil {
		err = errors.Join(err, terr)
	}
	if err == nil {
		return shape, nil
	}
	var errs []error
	for _, err := range unjoin(err) {
		var se *executor.StepError
		if errors.As(err, &se) {
			err = fmt.Errorf("%s: node %s (%s) %w", nodePos(path, se.Step), se.Step, se.Op, se.Err)
		} else {
			err = fmt.Errorf("%s: %w", path, err)
		}
		errs = append(errs, err)
	}
	return shape, errors.Join(errs...)
}

// unjoin is the errors errors.Join joined into err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// cacheGroups describes the caches p keeps on the model at modelPath: the
// paged KV group of the layers that attend and, for a hybrid model, the
// recurrent state group (per-sequence slots) and its checkpoints stored as
// on.checkpointDType, with their sizes.
func cacheGroups(p *plan.Plan, on onModel) (string, error) {
	if _, err := bindTarget(p, on, p.File); err != nil {
		return "", err
	}
	f, err := page.LookupFormat(p.Policy.KVDType)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cache groups on %s:\n", filepath.Base(on.model))
	for _, st := range executor.TargetSteps(p) {
		if m, ok := st.Node.(*model.MTP); ok {
			layers, kvDim := m.KVShape()
			fmt.Fprintf(&b, "  kv (paged, step %s: the MTP block's attention): KV layer %d, after the trunk's, on each sequence's block table, kv dim %d, %s, %d bytes per token\n",
				st.ID, layers-1, kvDim, f.Name, page.BytesPerToken(f, 1, kvDim))
			continue
		}
		fw, ok := st.Node.(*model.Forward)
		if !ok || !slices.Contains(p.Steps, st) { // a body's forward uses the trunk's layers
			continue
		}
		c := fw.Config
		var attn, rec []int
		for l := range c.Layers {
			if c.Recurrent(l) {
				rec = append(rec, l)
			} else {
				attn = append(attn, l)
			}
		}
		fmt.Fprintf(&b, "  kv (paged, step %s): layers %v, kv dim %d, %s, %d tokens per block, %d bytes per token\n",
			st.ID, attn, c.KVDim(), f.Name, p.Policy.KVBlockTokens, page.BytesPerToken(f, len(attn), c.KVDim()))
		if state := fw.StateShape(); state.Layers() > 0 {
			state, err := engine.StateStorage(state, p.Policy.StateDType, on.checkpointDType, speculates(p))
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  state (a slot per running sequence, +k+1 snapshot slots when speculating): layers %v, %s, %d bytes per slot (conv window %v + delta rule %v values per layer)\n",
				rec, state.DType, state.BytesPerSlot(), state.Conv, state.Delta)
			fmt.Fprint(&b, checkpointPolicy(state, p.Policy.KVBlockTokens))
		}
	}
	return b.String(), nil
}

// speculates reports whether p drafts (a step proposes tokens), so that a
// hybrid model's state keeps snapshot slots.
func speculates(p *plan.Plan) bool {
	return slices.ContainsFunc(p.Steps, func(st *plan.Step) bool { _, ok := st.Node.(exec.Proposer); return ok })
}

// checkpointPolicy describes the prefix cache of a hybrid model with state
// layout state (its storage set: engine.StateStorage), with KV blocks of
// block tokens, under the default --checkpoint-memory and --checkpoint-every.
func checkpointPolicy(state exec.StateLayout, block int) string {
	var b strings.Builder
	one := state.CheckpointBytes()
	copyOf := "a state slot's copy"
	if state.PoolDType() != state.DType {
		copyOf = fmt.Sprintf("a state slot's copy in %s, the %s state rounded where one is taken", state.PoolDType(), state.DType)
	}
	fmt.Fprintf(&b, "  checkpoints (the prefix cache: %s, %d bytes each, keyed by the hash of the KV block it ends): pool of --checkpoint-memory (default %s: %d, at most %d per running sequence)\n",
		copyOf, one, bytesText(engine.DefaultCheckpointMemory), engine.DefaultCheckpointMemory/one, engine.DefaultCheckpointsPerSeq)
	fmt.Fprintf(&b, "    taken at the block boundary at or before each chat message's end, the prompt's last block boundary, every --checkpoint-every blocks of a prompt (default %d: %d tokens) counted from the last message end before them, and a sequence's last generated block boundary\n",
		engine.DefaultCheckpointEvery, engine.DefaultCheckpointEvery*block)
	b.WriteString("    a prompt resumes at its longest prefix of cached KV blocks that ends at a checkpoint; full pool: a checkpoint whose KV blocks are gone goes first, else the least recently used; KV blocks past a finished sequence's last checkpoint are evicted before other cached blocks\n")
	return b.String()
}

// nodePos is the file:line:col of node id in the graph at path (a file or
// an embedded graph's name), or path when it cannot be found.
func nodePos(path, id string) string {
	file, src := path, []byte(nil)
	if data, err := os.ReadFile(path); err == nil {
		src = data
	} else if f, s, err := graphs.Source(path); err == nil {
		file, src = f, s
	}
	g, err := graphdef.Parse(file, src)
	if err != nil {
		return path
	}
	for _, n := range g.Nodes {
		if n.ID == id {
			return n.Pos.String()
		}
		for _, bn := range n.Body {
			if bn.ID == id {
				return bn.Pos.String()
			}
		}
	}
	return path
}

// graphRegistry is the registry `ninfer graph` compiles against: the one the
// nodes/* packages register into. Tests swap in their own.
var graphRegistry = node.Default

const graphUsage = `usage: ninfer graph <command> [arguments]

commands:
  check [--model M [--mmproj P]] FILE...
                             report every problem in each graph; "FILE: ok" when none (with --model,
                             also what the graph cannot do on model M, e.g. roll back a hybrid model's state,
                             or encode images without a vision tower P)
  plan [--model M [--mmproj P] [--checkpoint-dtype f32|bf16]] FILE [--set k=v]...
                             print the compiled plan (with --model, also its cache groups on model M;
                             --checkpoint-dtype as serve's: how a hybrid model's checkpoints are stored)
  dot FILE [--set k=v]...    print the compiled plan as a Graphviz digraph
  docs                       print the node reference (Markdown)
  test --model M [--backend B] FILE...
                             run each graph's inline tests on model M (same_as: identical greedy ids)

FILE is a graph file, or the name of a graph embedded in ninfer (%s).
--set overrides a graph param (repeatable).
`

// runGraph runs `ninfer graph ARGS...` and returns the exit status: 0 on
// success, 1 when a graph has problems or cannot be read, 2 on a usage error.
func runGraph(args []string, stdout, stderr io.Writer) int {
	usage := fmt.Sprintf(graphUsage, strings.Join(graphs.Names(), ", "))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	if cmd == "test" {
		return runGraphTest(rest, stdout, stderr)
	}
	var checkModel onModel
	if cmd == "check" || cmd == "plan" {
		for _, flag := range []struct {
			name string
			dst  *string
		}{{"--model", &checkModel.model}, {"--mmproj", &checkModel.mmproj}, {"--checkpoint-dtype", &checkModel.checkpointDType}} {
			for i := 0; i < len(rest); i++ {
				if rest[i] == flag.name && i+1 < len(rest) {
					*flag.dst = rest[i+1]
					rest = append(slices.Clone(rest[:i]), rest[i+2:]...)
					break
				}
			}
		}
		if checkModel.mmproj != "" && checkModel.model == "" {
			fmt.Fprintf(stderr, "ninfer graph %s: --mmproj needs --model\n%s", cmd, usage)
			return 2
		}
		if checkModel.checkpointDType != "" && (cmd != "plan" || checkModel.model == "") {
			fmt.Fprintf(stderr, "ninfer graph %s: --checkpoint-dtype is graph plan's, with --model\n%s", cmd, usage)
			return 2
		}
	}
	files, set, err := graphArgs(rest)
	if err != nil {
		fmt.Fprintf(stderr, "ninfer graph %s: %v\n%s", cmd, err, usage)
		return 2
	}
	switch cmd {
	case "check":
		if len(files) == 0 || len(set) > 0 {
			fmt.Fprintf(stderr, "ninfer graph check: want one or more FILEs and no --set\n%s", usage)
			return 2
		}
		status := 0
		for _, f := range files {
			p, err := checkModel.loadPlan(f, nil)
			if err == nil && checkModel.model != "" {
				err = checkOnModel(f, p, checkModel)
			}
			if err != nil {
				fmt.Fprintln(stderr, err)
				status = 1
				continue
			}
			fmt.Fprintf(stdout, "%s: ok\n", f)
		}
		return status
	case "plan", "dot":
		if len(files) != 1 {
			fmt.Fprintf(stderr, "ninfer graph %s: want exactly one FILE\n%s", cmd, usage)
			return 2
		}
		p, err := checkModel.loadPlan(files[0], set)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if cmd == "plan" {
			fmt.Fprint(stdout, p.String())
			if checkModel.model != "" {
				groups, err := cacheGroups(p, checkModel)
				if err != nil {
					fmt.Fprintln(stderr, err)
					return 1
				}
				fmt.Fprint(stdout, groups)
			}
		} else {
			fmt.Fprint(stdout, dot(p))
		}
		return 0
	case "docs":
		if len(files)+len(set) > 0 {
			fmt.Fprintf(stderr, "ninfer graph docs: takes no arguments\n%s", usage)
			return 2
		}
		fmt.Fprint(stdout, node.Docs(graphRegistry))
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	msg := fmt.Sprintf("ninfer graph: unknown command %q", cmd)
	if c := hint.Closest(cmd, []string{"check", "plan", "dot", "docs"}); c != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", c)
	}
	fmt.Fprintf(stderr, "%s\n%s", msg, usage)
	return 2
}

// graphArgs splits arguments into files and --set overrides, which may come
// in any order: "--set k=v", "--set=k=v", "-set k=v". Override values stay
// text; the compiler parses them by the param's declared type.
func graphArgs(args []string) (files []string, set node.Params, err error) {
	set = node.Params{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "--set" || a == "-set":
			if i+1 == len(args) {
				return nil, nil, fmt.Errorf("%s needs NAME=VALUE", a)
			}
			i++
			kv = args[i]
		case strings.HasPrefix(a, "--set=") || strings.HasPrefix(a, "-set="):
			_, kv, _ = strings.Cut(a, "=")
		case a == "--":
			files = append(files, args[i+1:]...)
			return files, set, nil
		case strings.HasPrefix(a, "-") && a != "-":
			return nil, nil, fmt.Errorf("unknown flag %s", a)
		default:
			files = append(files, a)
			continue
		}
		name, val, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("--set wants NAME=VALUE, got %q", kv)
		}
		if _, dup := set[name]; dup {
			return nil, nil, fmt.Errorf("--set %s given twice", name)
		}
		set[name] = val
	}
	return files, set, nil
}

// loadPlan compiles the graph file at path or, when no such file exists, the
// embedded graph of that name.
func loadPlan(path string, set node.Params) (*plan.Plan, error) {
	return instance.LoadPlan(path, graphRegistry, set)
}

// dot renders p as a Graphviz digraph: graph inputs and outputs as ellipses,
// device steps as blue boxes and host steps as yellow boxes grouped by
// segment, policy steps as notes listing their params; edges are labelled
// with the ports they connect.
func dot(p *plan.Plan) string {
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "digraph %s {\n", q(p.Name))
	b.WriteString("  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=11];\n  edge [fontname=\"Helvetica\", fontsize=9];\n")
	inputs := map[string]bool{}
	for _, s := range p.Steps {
		for _, r := range s.In {
			if r.Node == plan.InputNode {
				inputs[r.Port] = true
			}
		}
	}
	for _, r := range p.Out {
		if r.Node == plan.InputNode {
			inputs[r.Port] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		fmt.Fprintf(&b, "  %s [shape=ellipse, label=%s];\n", q("$in."+name), q("$in."+name))
	}
	for i, seg := range p.Segments {
		fmt.Fprintf(&b, "  subgraph %s {\n    label=%s; style=\"rounded,dashed\";\n", q(fmt.Sprintf("cluster_%d", i)), q(fmt.Sprintf("segment %d: %s", i, seg.Placement)))
		for _, idx := range seg.Steps {
			s := p.Steps[idx]
			color := "#cfe2ff"
			if s.Placement == node.Host {
				color = "#fff3cd"
			}
			fmt.Fprintf(&b, "    %s [shape=box, style=\"rounded,filled\", fillcolor=%s, label=%s];\n", q(s.ID), q(color), q(s.ID+"\n"+s.Op))
			if l, ok := s.Node.(*plan.Loop); ok {
				dotLoop(&b, s.ID, l)
			}
		}
		b.WriteString("  }\n")
	}
	for _, s := range p.Steps {
		if s.Placement != node.Policy {
			continue
		}
		label := s.ID + "\n" + s.Op
		for _, k := range slices.Sorted(maps.Keys(s.Params)) {
			label += "\n" + k + "=" + node.FormatValue(s.Params[k])
		}
		fmt.Fprintf(&b, "  %s [shape=note, label=%s];\n", q(s.ID), q(label))
	}
	for _, s := range p.Steps {
		for _, port := range slices.Sorted(maps.Keys(s.In)) {
			r := s.In[port]
			from, label := r.Node, port
			if r.Node == plan.InputNode {
				from = "$in." + r.Port
			} else if r.Port != port {
				label = r.Port + " → " + port
			}
			fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", q(from), q(s.ID), q(label))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Out)) {
		r := p.Out[name]
		from := r.Node
		if r.Node == plan.InputNode {
			from = "$in." + r.Port
		}
		fmt.Fprintf(&b, "  %s [shape=ellipse, label=%s];\n", q("out."+name), q("out."+name))
		fmt.Fprintf(&b, "  %s -> %s [label=%s];\n", q(from), q("out."+name), q(r.Port))
	}
	b.WriteString("}\n")
	return b.String()
}

// dotLoop draws loop id's body inside the current cluster: a nested
// cluster of its steps, $loop inputs as ellipses, the body's edges, the
// next: feedback dashed, and out: into the loop's own box.
func dotLoop(b *strings.Builder, id string, l *plan.Loop) {
	q := strconv.Quote
	label := fmt.Sprintf("loop %s: up to %d passes", id, l.Repeat)
	if l.Block {
		label = fmt.Sprintf("block loop %s: one pass of a token and %d masks", id, l.Repeat)
	}
	if l.Model != node.Target {
		label += " of model " + l.Model
	}
	fmt.Fprintf(b, "    subgraph %s {\n      label=%s; style=\"rounded,dotted\";\n", q("cluster_loop_"+id), q(label))
	used := map[string]bool{}
	for _, s := range l.Steps {
		for _, r := range s.In {
			used[r.Port] = used[r.Port] || r.Node == plan.LoopNode
		}
	}
	for name := range l.Next {
		used[name] = true
	}
	for _, in := range plan.LoopInputs {
		if used[in.Name] {
			fmt.Fprintf(b, "      %s [shape=ellipse, label=%s];\n", q(id+"/$loop."+in.Name), q("$loop."+in.Name))
		}
	}
	for _, s := range l.Steps {
		color := "#cfe2ff"
		if s.Placement == node.Host {
			color = "#fff3cd"
		}
		fmt.Fprintf(b, "      %s [shape=box, style=\"rounded,filled\", fillcolor=%s, label=%s];\n", q(s.ID), q(color), q(s.ID+"\n"+s.Op))
	}
	b.WriteString("    }\n")
	for _, s := range l.Steps {
		for _, port := range slices.Sorted(maps.Keys(s.In)) {
			r := s.In[port]
			from := r.Node
			if r.Node == plan.LoopNode {
				from = id + "/$loop." + r.Port
			}
			fmt.Fprintf(b, "    %s -> %s [label=%s];\n", q(from), q(s.ID), q(port))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.Next)) {
		fmt.Fprintf(b, "    %s -> %s [style=dashed, label=%s];\n", q(l.Next[name].Node), q(id+"/$loop."+name), q("next"))
	}
	for _, name := range slices.Sorted(maps.Keys(l.Out)) {
		fmt.Fprintf(b, "    %s -> %s [label=%s];\n", q(l.Out[name].Node), q(id), q(l.Out[name].Port+" → "+name))
	}
}
