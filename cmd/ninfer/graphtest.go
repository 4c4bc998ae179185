package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/request"
)

// graphTestSeed seeds the sampler of tests with a temperature above 0.
const graphTestSeed = 1

// runGraphTest runs the inline `tests:` of graph files on a model:
// each test generates from its prompt (EOS ignored) with the graph, and a
// test with `same_as: G` must produce exactly the tokens of graph G (a file
// G.yaml beside the graph, or the embedded graph G). same_as needs
// temperature 0: other graphs may sample differently at higher temperatures.
//
// --model FILE (or target=FILE) is the target model; --model ALIAS=FILE
// gives a further model a graph runs (draft=FILE for graphs/draft.yaml).
// An alias a graph runs but the command line does not give is the target
// model itself (a draft model identical to the target). --mmproj FILE is
// the vision tower: a graph that encodes no images gets it wired in, as
// serving does (instance.LoadPlanWithImages).
func runGraphTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("graph test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	fs.Var(modelFlag{&mf}, "model", "GGUF model to run the tests on (required): FILE or target=FILE; ALIAS=FILE a further model a graph runs (default: the target)")
	threads := fs.Int("threads", 0, "backend threads (0 = all cores)")
	backend := fs.String("backend", "cpu", "compute backend: cpu, or cuda in binaries built with -tags cuda (same_as graphs run on it too)")
	mmproj := fs.String("mmproj", "", "vision tower (mmproj GGUF or Hugging Face folder): a graph that encodes no images gets it wired in before its target forwards")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if mf.model == "" || fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: ninfer graph test --model FILE [--model ALIAS=FILE]... [--mmproj FILE] [--backend cpu|cuda] GRAPH...")
		return 2
	}
	r := graphTester{model: mf.model, models: mf.models, mmproj: *mmproj, threads: *threads, backend: *backend,
		open: map[string]*instance.Instance{}, using: map[string]string{}}
	defer r.close()
	status := 0
	for _, file := range fs.Args() {
		p, err := loadPlan(file, nil)
		if err != nil {
			fmt.Fprintln(stderr, err)
			status = 1
			continue
		}
		if len(p.Tests) == 0 {
			fmt.Fprintf(stdout, "%s: no tests\n", file)
			continue
		}
		for _, t := range p.Tests {
			msg, err := r.run(file, t)
			if err != nil {
				fmt.Fprintf(stdout, "%s: FAIL %q: %v\n", t.Pos, t.Name, err)
				status = 1
				continue
			}
			fmt.Fprintf(stdout, "%s: ok %q: %s\n", file, t.Name, msg)
		}
	}
	return status
}

type graphTester struct {
	model   string
	models  map[string]string // by alias; the target stands in for the others
	mmproj  string            // the vision tower of the graphs that encode images
	threads int
	backend string
	open    map[string]*instance.Instance // by graph path or name
	using   map[string]string             // by graph: " (ALIAS=FILE ...)" of the models it runs besides the target
}

func (r *graphTester) close() {
	for _, in := range r.open {
		in.Close()
	}
}

func (r *graphTester) instance(graph string) (*instance.Instance, error) {
	if in, ok := r.open[graph]; ok {
		return in, nil
	}
	p, err := onModel{mmproj: r.mmproj}.loadPlan(graph, nil)
	if err != nil {
		return nil, err
	}
	models := map[string]string{}
	for _, st := range p.Steps {
		if alias := plan.StepModel(st); alias != node.Target {
			if models[alias] = r.models[alias]; models[alias] == "" {
				models[alias] = r.model
			}
		}
	}
	in, err := instance.Open(instance.Options{Model: r.model, Models: models, MMProj: r.mmproj, Graph: graph, Backend: r.backend, Threads: r.threads, MaxRunning: 1})
	if err != nil {
		return nil, err
	}
	r.open[graph] = in
	var using []string
	for _, alias := range slices.Sorted(maps.Keys(models)) {
		using = append(using, alias+"="+filepath.Base(models[alias]))
	}
	if len(using) > 0 {
		r.using[graph] = " (" + strings.Join(using, " ") + ")"
	}
	return in, nil
}

func (r *graphTester) generate(graph string, t *graphdef.Test) ([]int32, error) {
	in, err := r.instance(graph)
	if err != nil {
		return nil, err
	}
	prompt := in.Tokenizer.Encode(t.Prompt, true, true)
	if len(prompt) == 0 {
		return nil, errors.New("the prompt encodes to no tokens")
	}
	res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: t.MaxTokens,
		Sampling: request.Sampling{Temperature: float32(t.Temperature), Seed: graphTestSeed}}, nil)
	if err != nil {
		return nil, err
	}
	return res.IDs, nil
}

func (r *graphTester) run(file string, t *graphdef.Test) (string, error) {
	if t.SameAs != "" && t.Temperature != 0 {
		return "", fmt.Errorf("same_as needs temperature 0, have %g", t.Temperature)
	}
	got, err := r.generate(file, t)
	if err != nil {
		return "", err
	}
	if t.SameAs == "" {
		return fmt.Sprintf("%d tokens%s", len(got), r.using[file]), nil
	}
	other := t.SameAs
	if sib := filepath.Join(filepath.Dir(file), t.SameAs+".yaml"); fileExists(sib) {
		other = sib
	}
	want, err := r.generate(other, t)
	if err != nil {
		return "", fmt.Errorf("same_as %s: %w", other, err)
	}
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			return "", fmt.Errorf("ids differ from %s at %d: got %v want %v", other, i, got[i:min(i+4, len(got))], want[i:min(i+4, len(want))])
		}
	}
	return fmt.Sprintf("%d tokens%s, same as %s", len(got), r.using[file], other), nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
