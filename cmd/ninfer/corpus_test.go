package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/suites/corpus"
)

// asNinfer lets the test binary stand in for bin/ninfer: run with
// NINFER_TEST_AS_CLI=1 it is the CLI, so `ninfer corpus` can start real
// `ninfer serve` children without a separate build.
func init() {
	if os.Getenv("NINFER_TEST_AS_CLI") == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
}

func TestCorpusAgainstFreshServers(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	t.Setenv("NINFER_TEST_AS_CLI", "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI("corpus", "--model", model, "--concurrency", "1,2", "--limit", "6", "--out", out, "--server-bin", bin)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r corpus.Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Points) != 2 || !r.FreshServer || len(r.SendOrder) != 6 {
		t.Fatalf("%d points, fresh %v, %d requests", len(r.Points), r.FreshServer, len(r.SendOrder))
	}
	for _, p := range r.Points {
		if p.Requests != 6 || p.Failures != 0 || p.CompletionTokens == 0 || p.MakespanSeconds <= 0 {
			t.Errorf("C=%d: %d requests, %d failed, %d tokens, makespan %v", p.Concurrency, p.Requests, p.Failures, p.CompletionTokens, p.MakespanSeconds)
		}
		for _, res := range p.Results {
			if res.Usage == nil || res.Usage.CompletionTokens != res.StreamedTokens {
				t.Errorf("C=%d %s:%d: usage %+v, streamed %d", p.Concurrency, res.Fixture, res.Seed, res.Usage, res.StreamedTokens)
			}
		}
	}
	if r.Checks.Labelled[corpus.LabelUsageMismatch] != 0 || r.Checks.Labelled[corpus.LabelFailed] != 0 {
		t.Errorf("checks: %+v", r.Checks.Labelled)
	}
	for _, f := range []string{"corpus.md", corpus.PlotDecode, corpus.PlotLatency, "serve-c1.log", "serve-c2.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "### Corpus makespan") || !strings.Contains(stdout, "### Serial phases (C=1)") {
		t.Errorf("Markdown:\n%s", stdout)
	}
}

func TestCorpusBadInputs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no model", []string{}, "--model is required"},
		{"a zero concurrency", []string{"--model", "m.gguf", "--concurrency", "0"}, "--concurrency 0 must be >= 1"},
		{"an unknown API", []string{"--model", "m.gguf", "--api", "grpc"}, `--api "grpc"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"corpus"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
	}
}
