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
	"strings"

	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/suites/golden"
)

const goldenUsage = `usage:
  ninfer golden record --model FILE [--graph G] --prompts PROMPTS.json [--n 64] --output OUT.json
  ninfer golden verify [--models DIR | --model FILE] [--graph G] [--teacher-forced] GOLDEN.json...
  ninfer golden drafts --graph G [--models DIR | --model FILE] [--model draft=FILE] SPEC.json...

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
model defaults to the golden's, in --models or beside the golden's
../models.
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
	var forced *bool
	flags := func(fs *flag.FlagSet) {
		forced = fs.Bool("teacher-forced", false, "compare teacher-forced argmax per position for every file (the default for quantized models only)")
	}
	forcedFiles, forcedFailed := 0, 0 // of the cases checked, the teacher-forced files
	check := func(path string, open goldenOpener) (int, int, error) {
		f, err := golden.Load(path)
		if err != nil {
			return 0, 0, err
		}
		in, err := open(f.ModelPath, 0)
		if err != nil {
			return 0, 0, err
		}
		defer in.Close()
		if !*forced && !golden.TeacherForced(in.File) {
			mism, err := golden.Verify(context.Background(), in, f)
			if err != nil {
				return 0, 0, fmt.Errorf("%s: %w", path, err)
			}
			for _, x := range mism {
				fmt.Fprintf(stdout, "%s: %s\n", path, x)
			}
			return len(f.Results), len(mism), nil
		}
		r, err := golden.VerifyTeacherForced(context.Background(), in, f)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		for _, x := range append(r.Allowed, r.Mismatches...) {
			fmt.Fprintf(stdout, "%s: %s\n", path, x)
		}
		verdict, failed := "ok", 0
		if !r.Ok() {
			verdict, failed = "FAIL", 1
		}
		fmt.Fprintf(stdout, "%s: %d/%d positions agree (%.2f%%), %d high-margin mismatches: %s\n", path, r.Agree, r.Positions,
			100*float64(r.Agree)/float64(max(r.Positions, 1)), len(r.Mismatches), verdict)
		forcedFiles++
		forcedFailed += failed
		return 1, failed, nil // a file is one teacher-forced case
	}
	summary := func(ok, total int) string {
		var lines []string
		if cases := total - forcedFiles; cases > 0 {
			failed := total - ok - forcedFailed
			lines = append(lines, fmt.Sprintf("%d/%d cases match", cases-failed, cases))
		}
		if forcedFiles > 0 {
			lines = append(lines, fmt.Sprintf("%d/%d files agree teacher-forced", forcedFiles-forcedFailed, forcedFiles))
		}
		return strings.Join(lines, "\n")
	}
	return goldenCheck("verify", args, stdout, stderr, flags, check, summary)
}

func goldenDrafts(args []string, stdout, stderr io.Writer) int {
	check := func(path string, open goldenOpener) (int, int, error) {
		f, err := golden.LoadSpec(path)
		if err != nil {
			return 0, 0, err
		}
		model := func(dir string) string { return filepath.Join(dir, filepath.Base(f.Model)) }
		in, err := open(model, f.DraftMax())
		if err != nil {
			return 0, 0, err
		}
		defer in.Close()
		mism, err := golden.VerifySpec(context.Background(), in, f)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", path, err)
		}
		for _, x := range mism {
			fmt.Fprintf(stdout, "%s: %s\n", path, x)
		}
		return len(f.Results), len(mism), nil
	}
	summary := func(ok, total int) string { return fmt.Sprintf("%d/%d cases draft as llama-server", ok, total) }
	return goldenCheck("drafts", args, stdout, stderr, func(*flag.FlagSet) {}, check, summary)
}

// goldenOpener opens the instance that checks a golden file: its model is
// --model, else model(the models directory), the file's model there; the
// graph's k is set to k when k > 0 and --set did not give it.
type goldenOpener func(model func(dir string) string, k int) (*instance.Instance, error)

// goldenCheck is golden verify and drafts: its flags are the model flags,
// --models and those flags adds; check checks each golden file given with
// an opener whose models directory is --models (default: ../models beside
// the file), and returns the file's cases and failed cases, having printed
// what failed. goldenCheck then prints summary(passed, total) and exits 1
// when any case failed.
func goldenCheck(sub string, args []string, stdout, stderr io.Writer, flags func(*flag.FlagSet),
	check func(path string, open goldenOpener) (cases, failed int, err error), summary func(passed, total int) string) int {
	fs := flag.NewFlagSet("golden "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	mf.register(fs)
	models := fs.String("models", "", "directory the golden files' model names resolve in (default: ../models beside each golden file)")
	flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer golden %s: %v\n", sub, err); return 1 }
	if fs.NArg() == 0 {
		return fail(errors.New("no golden files given"))
	}
	failed, total := 0, 0
	for _, path := range fs.Args() {
		open := func(model func(dir string) string, k int) (*instance.Instance, error) {
			m := mf
			if m.model == "" {
				dir := *models
				if dir == "" {
					dir = filepath.Join(filepath.Dir(path), "..", "models")
				}
				m.model = model(dir)
			}
			m.set.params = maps.Clone(mf.set.params)
			if _, given := m.set.params["k"]; !given && k > 0 {
				if err := m.set.Set("k=" + strconv.Itoa(k)); err != nil {
					return nil, err
				}
			}
			opts, err := m.options()
			if err != nil {
				return nil, err
			}
			return instance.Open(opts)
		}
		cases, bad, err := check(path, open)
		if err != nil {
			return fail(err)
		}
		failed += bad
		total += cases
	}
	fmt.Fprintln(stdout, summary(total-failed, total))
	if failed > 0 {
		return 1
	}
	return 0
}
