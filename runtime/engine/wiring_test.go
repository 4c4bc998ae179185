package engine_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/compile"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

var wirings = flag.Int("wirings", 40, "accepted random wirings TestCheckedWiringsRun runs (more finds more)")

// wiringOps are the registered ops the wiring test wires, all of which run
// on stories260K; wiringSkipped are the others, each with the reason.
var (
	wiringOps     = []string{"model.forward", "sample.token", "sample.argmax", "sample.draft", "speculative.ngram", "speculative.verify", "kv.cache", "prefill.chunk"}
	wiringSkipped = map[string]string{
		"model.mtp":          "runs a hybrid model's MTP head (a loop body on tiny-qwen35)",
		"speculative.eagle3": "runs an EAGLE-3 draft model in a loop body",
		"speculative.dflash": "runs a DFlash draft model in a block loop",
		"vision.encode":      "runs a vision tower (an mmproj) for a vision-language model (tiny-qwen35-vl)",
	}
)

// wiringSource is a value a graph node can read: a step input or a node's
// output.
type wiringSource struct {
	ref string
	typ node.PortType
}

// pickSource returns a random source's reference: usually one of type typ,
// sometimes any.
func pickSource(r *rand.Rand, sources []wiringSource, typ node.PortType) string {
	var typed []wiringSource
	for _, s := range sources {
		if s.typ == typ {
			typed = append(typed, s)
		}
	}
	if len(typed) > 0 && r.IntN(4) > 0 {
		return typed[r.IntN(len(typed))].ref
	}
	return sources[r.IntN(len(sources))].ref
}

// wireNodes writes the nodes ids (of specs) with random inputs from sources.
func wireNodes(r *rand.Rand, b *strings.Builder, indent string, ids []string, specs []*node.Spec, sources []wiringSource) {
	for i, spec := range specs {
		fmt.Fprintf(b, "%s- {id: %s, op: %s", indent, ids[i], spec.Op)
		var in []string
		for _, p := range spec.In {
			if p.Optional && r.IntN(2) == 0 {
				continue
			}
			in = append(in, p.Name+": "+pickSource(r, sources, p.Type))
		}
		if len(in) > 0 {
			fmt.Fprintf(b, ", in: {%s}", strings.Join(in, ", "))
		}
		b.WriteString("}\n")
	}
}

// loopOps are the ops a random draft loop's body is made of.
var loopOps = []string{"model.forward", "sample.argmax", "sample.draft", "sample.token"}

// randomLoop writes loop node id: 1 to 3 body nodes of loopOps reading
// $loop.tokens, $loop.positions and each other, and its next.tokens and
// out (draft, and sometimes probs) from random body outputs. It returns
// the loop's outputs.
func randomLoop(r *rand.Rand, b *strings.Builder, id string) []wiringSource {
	n := 1 + r.IntN(3)
	ids, specs := make([]string, n), make([]*node.Spec, n)
	sources := []wiringSource{{"$loop.tokens", node.Tokens}, {"$loop.positions", node.Positions}}
	for i := range n {
		ids[i] = fmt.Sprintf("%s_%d", id, i)
		specs[i], _ = node.Default.Lookup(loopOps[r.IntN(len(loopOps))])
		for _, p := range specs[i].Out {
			sources = append(sources, wiringSource{ids[i] + "." + p.Name, p.Type})
		}
	}
	fmt.Fprintf(b, "  - id: %s\n    repeat: %d\n    nodes:\n", id, 1+r.IntN(3))
	wireNodes(r, b, "      ", ids, specs, sources)
	fmt.Fprintf(b, "    next: {tokens: %s}\n", pickSource(r, sources, node.Tokens))
	outs := []wiringSource{{id + ".draft", node.Draft}}
	fmt.Fprintf(b, "    out: {draft: %s", pickSource(r, sources, node.Tokens))
	if r.IntN(2) == 0 {
		fmt.Fprintf(b, ", probs: %s", pickSource(r, sources, node.DraftProbs))
		outs = append(outs, wiringSource{id + ".probs", node.DraftProbs})
	}
	b.WriteString("}\n")
	return outs
}

// randomWiring writes a graph of 1 to 5 nodes of wiringOps (policy nodes at
// most once each), and sometimes a draft loop, whose inputs and out.tokens
// read random sources: usually one of the wanted type, sometimes any, so
// that most wirings are wrong in one way or another.
func randomWiring(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString("graph: wiring\nnodes:\n")
	sources := []wiringSource{{"$in.tokens", node.Tokens}, {"$in.positions", node.Positions}, {"$in.history", node.History}}
	// A graph with a loop starts with a forward and a verify, as drafts
	// need, so that some of them compile.
	var first []string
	if r.IntN(3) == 0 {
		sources = append(sources, randomLoop(r, &b, "loop")...)
		first = []string{"model.forward", "speculative.verify"}
	}
	n := len(first) + 1 + r.IntN(5-len(first))
	ids, specs := make([]string, n), make([]*node.Spec, n)
	used := map[string]bool{}
	for i := range n {
		op := wiringOps[r.IntN(len(wiringOps))]
		if i < len(first) {
			op = first[i]
		}
		spec, _ := node.Default.Lookup(op)
		if spec.Placement == node.Policy && used[op] {
			op, spec = "model.forward", nil
			spec, _ = node.Default.Lookup(op)
		}
		used[op] = true
		ids[i], specs[i] = fmt.Sprintf("n%d", i), spec
	}
	for i, spec := range specs {
		for _, p := range spec.Out {
			sources = append(sources, wiringSource{ids[i] + "." + p.Name, p.Type})
		}
	}
	wireNodes(r, &b, "  ", ids, specs, sources)
	fmt.Fprintf(&b, "out: {tokens: %s}\n", pickSource(r, sources, node.Tokens))
	return b.String()
}

// TestCheckedWiringsRun holds graph check to its promise: every random
// wiring of the registered nodes that compiles (what `ninfer graph check`
// says ok to) runs on a model, greedy and sampled, without a run-time
// error. It draws seeded wirings until -wirings of them compile.
func TestCheckedWiringsRun(t *testing.T) {
	for _, s := range node.Default.Specs() {
		// test.* ops are this package's test nodes.
		if !slices.Contains(wiringOps, s.Op) && wiringSkipped[s.Op] == "" && !strings.HasPrefix(s.Op, "test.") {
			t.Errorf("op %s is neither wired by this test nor skipped with a reason", s.Op)
		}
	}
	model := modelPath(t, "stories260K.gguf")
	r := rand.New(rand.NewPCG(36, 1))
	dir := t.TempDir()
	seen := map[string]bool{}
	drawn := 0
	for ; len(seen) < *wirings && drawn < 2000**wirings; drawn++ {
		src := randomWiring(r)
		if seen[src] {
			continue
		}
		if _, err := compile.Source("wiring.yaml", []byte(src), node.Default, nil); err != nil {
			continue
		}
		seen[src] = true
		path := filepath.Join(dir, fmt.Sprintf("wiring%d.yaml", len(seen)))
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		runWiring(t, model, path, src)
	}
	if len(seen) < *wirings {
		t.Errorf("only %d of %d random wirings compiled", len(seen), drawn)
	}
	t.Logf("%d of %d random wirings compiled, and ran", len(seen), drawn)
	if testing.Verbose() {
		for src := range seen {
			t.Log(src)
		}
	}
}

// runWiring opens graph path (source src) on model and generates a few
// tokens greedily and sampled, failing on any error.
func runWiring(t *testing.T, model, path, src string) {
	t.Helper()
	in, err := instance.Open(instance.Options{Model: model, Graph: path, MaxRunning: 2, Threads: 1})
	if err != nil {
		t.Errorf("graph check says ok, but the engine refuses it: %v\n%s", err, src)
		return
	}
	defer in.Close()
	prompt := in.Tokenizer.Encode("Once upon a time there was", true, true)
	for _, s := range []request.Sampling{{}, {Temperature: 0.8, Seed: 7}} {
		res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: 6, Sampling: s}, nil)
		if err != nil {
			t.Errorf("graph check says ok, but a step fails (temperature %g): %v\n%s", s.Temperature, err, src)
			return
		}
		if len(res.IDs) == 0 {
			t.Errorf("graph check says ok, but it generated nothing (temperature %g)\n%s", s.Temperature, src)
		}
	}
}
