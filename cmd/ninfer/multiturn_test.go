package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/suites/corpus"
)

// The multi-turn workload against fresh servers with the prefix cache on
// and off: every turn's prompt extends the last, the cache-on server
// reports the history as cached from turn 2 on, the cache-off one never.
func TestMultiTurnAgainstFreshServers(t *testing.T) {
	r, out, stdout := runMultiTurnCLI(t, "--conversations", "2")
	if len(r.Runs) != 2 {
		t.Fatalf("%d runs", len(r.Runs))
	}
	on, off := r.Runs[0], r.Runs[1]
	for _, run := range r.Runs {
		if run.Failures != 0 || len(run.Turns) != 3 {
			t.Fatalf("%s: %d failures, %d turns", run.Label, run.Failures, len(run.Turns))
		}
		for i := 1; i < len(run.Turns); i++ {
			if run.Turns[i].PromptTokens <= run.Turns[i-1].PromptTokens {
				t.Errorf("%s: turn %d prompt %g tokens, not longer than turn %d's %g", run.Label, i+1, run.Turns[i].PromptTokens, i, run.Turns[i-1].PromptTokens)
			}
		}
	}
	if on.Turns[0].CachedTokens != 0 || on.Turns[1].CachedTokens < 16 || on.Turns[2].CachedTokens < on.Turns[1].PromptTokens-32 {
		t.Errorf("cache on: turns %+v", on.Turns)
	}
	if off.HitRate != 0 {
		t.Errorf("cache off: hit rate %g", off.HitRate)
	}
	for _, f := range []string{"multiturn.md", corpus.PlotMultiTurn} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "| ninfer, prefix cache off | 3 |") {
		t.Errorf("Markdown:\n%s", stdout)
	}
}

// --side-by-side runs the cache-on and cache-off servers at once and sends
// each turn to both: the same conversations reach both (equal prompt
// tokens at turn 1), each server keeps its own history, the cache-on one
// hits from turn 2 on, and each server writes its own log.
func TestMultiTurnSideBySide(t *testing.T) {
	r, out, stdout := runMultiTurnCLI(t, "--side-by-side", "--conversations", "1")
	if len(r.Runs) != 2 || r.Runs[0].Failures+r.Runs[1].Failures != 0 || len(r.Runs[0].Results) != 3 || len(r.Runs[1].Results) != 3 {
		t.Fatalf("runs %+v", r.Runs)
	}
	on, off := r.Runs[0], r.Runs[1]
	if on.Turns[0].PromptTokens != off.Turns[0].PromptTokens || on.Turns[1].CachedTokens < 16 || off.HitRate != 0 {
		t.Errorf("on %+v\noff %+v", on.Turns, off.Turns)
	}
	for _, f := range []string{"serve-1.log", "serve-2.log"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "Side by side") {
		t.Errorf("Markdown:\n%s", stdout)
	}
}

// runMultiTurnCLI runs ninfer multiturn on tiny-qwen3-f32 with the cache
// on and off, 3 short turns, and the extra args; it returns the report,
// the output folder and stdout.
func runMultiTurnCLI(t *testing.T, args ...string) (corpus.MultiTurnReport, string, string) {
	t.Helper()
	model := sharedPath(t, "models", "tiny-qwen3-f32.gguf")
	t.Setenv("NINFER_TEST_AS_CLI", "1")
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	code, stdout, stderr := runCLI(append([]string{"multiturn", "--model", model, "--compare-no-cache", "--turns", "3",
		"--system-words", "60", "--user-words", "20", "--reply-tokens", "6", "--out", out, "--server-bin", bin, "--server-arg=--threads=1"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(out, "multiturn.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r corpus.MultiTurnReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r, out, stdout
}
