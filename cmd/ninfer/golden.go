package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strconv"

	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/suites/golden"
)

const goldenUsage = `usage:
  ninfer golden record --model FILE [--graph G] --prompts PROMPTS.json [--n 64] --output OUT.json
  ninfer golden verify [--models DIR | --model FILE] [--graph G] [--teacher-forced] GOLDEN.json...
  ninfer golden drafts --graph G [--model FILE] [--model draft=FILE] SPEC.json...

verify judges a file by the rule of its model's weights: quantized
weights teacher-forced (each case fed its golden generated tokens, the
model's argmax at every position compared with the golden's next token;
it passes when at least 99% of a file's positions agree and every
position whose golden margin is >= 0.5 does), F32/F16/BF16 free-running
(generated ids up to the first near-tie). --teacher-forced applies the
teacher-forced rule to every file.

drafts checks llama-server's speculative goldens (spec-*.json): each prompt
decoded greedily under the speculative graph G, one request at a time with
k set to the golden's --spec-draft-n-max, gives plain decoding's tokens and
exactly the drafted and accepted counts llama-server reported. The target
model defaults to the golden's, beside the golden's ../models.
`

func runGolden(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, goldenUsage)
		return 2
	}
	switch args[0] {
	case "record":
		return goldenRecord(args[1:], stdout, stderr)
	case "verify":
		return goldenVerify(args[1:], stdout, stderr)
	case "drafts":
		return goldenDrafts(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "ninfer golden: unknown subcommand %q\n%s", args[0], goldenUsage)
	return 2
}

func goldenRecord(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("golden record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	prompts := fs.String("prompts", "", "prompts JSON: [{\"id\":..,\"text\":..}] (required)")
	n := fs.Int("n", 64, "greedy tokens per prompt")
	output := fs.String("output", "", "golden JSON to write (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer golden record: %v\n", err); return 1 }
	if *prompts == "" || *output == "" {
		return fail(errors.New("--prompts and --output are required"))
	}
	if *n < 1 {
		return fail(fmt.Errorf("--n %d must be >= 1", *n))
	}
	ps, err := golden.LoadPrompts(*prompts)
	if err != nil {
		return fail(err)
	}
	opts, err := mf.options()
	if err != nil {
		return fail(err)
	}
	in, err := instance.Open(opts)
	if err != nil {
		return fail(err)
	}
	defer in.Close()
	f := &golden.File{Model: filepath.Base(mf.model), NVocab: in.Engine.Vocab(), Graph: mf.graph,
		Settings: map[string]any{"n_predict": *n, "sampling": "argmax of raw logits, EOS ignored", "add_special": true, "parse_special": true}}
	for _, p := range ps {
		c, err := golden.Generate(context.Background(), in, p.Text, *n, 5)
		if err != nil {
			return fail(fmt.Errorf("prompt %s: %w", p.ID, err))
		}
		c.ID = p.ID
		f.Results = append(f.Results, *c)
	}
	if err := f.Save(*output); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "recorded %d cases to %s\n", len(f.Results), *output)
	return 0
}

func goldenVerify(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("golden verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	models := fs.String("models", "", "directory the golden files' model names resolve in (default: beside each golden file, then ../models)")
	forced := fs.Bool("teacher-forced", false, "compare teacher-forced argmax per position for every file (the default for quantized models only)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer golden verify: %v\n", err); return 1 }
	if fs.NArg() == 0 {
		return fail(errors.New("no golden files given"))
	}
	failed, total := 0, 0             // free-running cases
	forcedFailed, forcedTotal := 0, 0 // teacher-forced files
	for _, path := range fs.Args() {
		f, err := golden.Load(path)
		if err != nil {
			return fail(err)
		}
		model := mf.model
		if model == "" {
			dir := *models
			if dir == "" {
				dir = filepath.Join(filepath.Dir(path), "..", "models")
			}
			model = f.ModelPath(dir)
		}
		m := mf
		m.model = model
		opts, err := m.options()
		if err != nil {
			return fail(err)
		}
		in, err := instance.Open(opts)
		if err != nil {
			return fail(err)
		}
		if *forced || golden.TeacherForced(in.File) {
			r, err := golden.VerifyTeacherForced(context.Background(), in, f)
			in.Close()
			if err != nil {
				return fail(fmt.Errorf("%s: %w", path, err))
			}
			for _, x := range r.Mismatches {
				fmt.Fprintf(stdout, "%s: %s\n", path, x)
			}
			verdict := "ok"
			if !r.Ok() {
				verdict = "FAIL"
				forcedFailed++
			}
			fmt.Fprintf(stdout, "%s: %d/%d positions agree (%.2f%%), %d high-margin mismatches: %s\n", path, r.Agree, r.Positions,
				100*float64(r.Agree)/float64(max(r.Positions, 1)), len(r.Mismatches), verdict)
			forcedTotal++
			continue
		}
		mism, err := golden.Verify(context.Background(), in, f)
		in.Close()
		if err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
		for _, x := range mism {
			fmt.Fprintf(stdout, "%s: %s\n", path, x)
		}
		failed += len(mism)
		total += len(f.Results)
	}
	if total > 0 {
		fmt.Fprintf(stdout, "%d/%d cases match\n", total-failed, total)
	}
	if forcedTotal > 0 {
		fmt.Fprintf(stdout, "%d/%d files agree teacher-forced\n", forcedTotal-forcedFailed, forcedTotal)
	}
	if failed+forcedFailed > 0 {
		return 1
	}
	return 0
}

func goldenDrafts(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("golden drafts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer golden drafts: %v\n", err); return 1 }
	if fs.NArg() == 0 {
		return fail(errors.New("no speculative golden files given"))
	}
	failed, total := 0, 0
	for _, path := range fs.Args() {
		f, err := golden.LoadSpec(path)
		if err != nil {
			return fail(err)
		}
		m := mf
		if m.model == "" {
			m.model = filepath.Join(filepath.Dir(path), "..", "models", filepath.Base(f.Model))
		}
		m.set.params = maps.Clone(mf.set.params)
		if _, given := m.set.params["k"]; !given && f.DraftMax() > 0 {
			if err := m.set.Set("k=" + strconv.Itoa(f.DraftMax())); err != nil {
				return fail(err)
			}
		}
		opts, err := m.options()
		if err != nil {
			return fail(err)
		}
		in, err := instance.Open(opts)
		if err != nil {
			return fail(err)
		}
		mism, err := golden.VerifySpec(context.Background(), in, f)
		in.Close()
		if err != nil {
			return fail(fmt.Errorf("%s: %w", path, err))
		}
		for _, x := range mism {
			fmt.Fprintf(stdout, "%s: %s\n", path, x)
		}
		failed += len(mism)
		total += len(f.Results)
	}
	fmt.Fprintf(stdout, "%d/%d cases draft as llama-server\n", total-failed, total)
	if failed > 0 {
		return 1
	}
	return 0
}
