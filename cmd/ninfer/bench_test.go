package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/suites/bench"
)

// benchJSON runs `ninfer bench --output json` and returns the validated report.
func benchJSON(t *testing.T, args ...string) bench.Report {
	t.Helper()
	code, stdout, stderr := runCLI(append([]string{"bench", "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if err := bench.Validate([]byte(stdout)); err != nil {
		t.Fatalf("report does not validate against suites/bench/schema.json:\n%v", err)
	}
	var r bench.Report
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBenchReportOnBothModelFamilies(t *testing.T) {
	for _, m := range []struct{ file, arch, kv string }{
		{"stories260K.gguf", "llama", "f32"},
		{"tiny-qwen3-f32.gguf", "qwen3", "int8-g64"},
	} {
		t.Run(m.arch, func(t *testing.T) {
			model := sharedPath(t, "models", m.file)
			r := benchJSON(t, "--model", model, "-p", "24", "-n", "6", "-pg", "16,4", "-r", "2", "--warmup", "1",
				"--kv-dtype", m.kv, "--prefill-chunk", "8", "--peak-bandwidth", "10")
			var labels []string
			for _, tc := range r.Tests {
				labels = append(labels, tc.Label)
			}
			if diff := cmp.Diff([]string{"pp24", "tg6", "pp16+tg4"}, labels); diff != "" {
				t.Errorf("test labels (-want +got):\n%s", diff)
			}
			if r.Load.Architecture != m.arch || r.Memory.KVCache != m.kv || r.Config.PrefillChunk != 8 || r.Config.Warmup != 1 {
				t.Errorf("load %s, kv %s, chunk %d, warmup %d", r.Load.Architecture, r.Memory.KVCache, r.Config.PrefillChunk, r.Config.Warmup)
			}
			subs := map[[2]int32]bool{}
			for _, tc := range r.Tests {
				if len(tc.Reps) != 2 {
					t.Errorf("%s: %d reps, want 2 (warm-up discarded)", tc.Label, len(tc.Reps))
				}
				for _, rep := range tc.Reps {
					if rep.GeneratedOutputTokens != tc.NGen+1 || rep.DecodeOutputTokens != tc.NGen || rep.FinishReason != "length" {
						t.Errorf("%s: generated %d, decode %d, finish %s", tc.Label, rep.GeneratedOutputTokens, rep.DecodeOutputTokens, rep.FinishReason)
					}
					key := [2]int32{int32(rep.PromptTokens), rep.SubstitutedToken}
					if subs[key] {
						t.Errorf("%s: two repetitions sent the same prompt (token %d)", tc.Label, rep.SubstitutedToken)
					}
					subs[key] = true
					if rep.Speculative.Enabled || rep.Speculative.Rounds != 0 {
						t.Errorf("%s: speculative block %+v without speculation", tc.Label, rep.Speculative)
					}
				}
				hasDecode := tc.Kind != bench.KindPP
				if (tc.DecodeOutputTokSMean != nil) != hasDecode || (tc.DecodeBandwidthFractionOfPeak != nil) != hasDecode {
					t.Errorf("%s: decode rate %v, bandwidth fraction %v", tc.Label, tc.DecodeOutputTokSMean, tc.DecodeBandwidthFractionOfPeak)
				}
				if (tc.PrefillTokSMean != nil) != (tc.Kind != bench.KindTG) {
					t.Errorf("%s: prefill rate %v", tc.Label, tc.PrefillTokSMean)
				}
			}
			if r.Memory.KVPayloadBytes != int64(r.Memory.KVCapacity)*r.Memory.KVBytesPerToken || r.Memory.Sequence.PeakUsedBytes == 0 {
				t.Errorf("memory: payload %d for %d tokens of %d bytes, peak %d", r.Memory.KVPayloadBytes, r.Memory.KVCapacity, r.Memory.KVBytesPerToken, r.Memory.Sequence.PeakUsedBytes)
			}
			if w := r.Memory.Workspace; w == nil || w.UsedBytes <= 0 || w.UsedBytes > w.PeakUsedBytes || w.PeakUsedBytes > w.CapacityBytes {
				t.Errorf("memory: workspace %+v, want 0 < used <= peak <= capacity", w)
			}
		})
	}
}

func TestBenchMarkdownAndTriad(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen3-q8_0.gguf")
	out := filepath.Join(t.TempDir(), "bench.md")
	code, _, stderr := runCLI("bench", "--model", model, "-p", "8", "-n", "4", "-r", "1", "--warmup", "0",
		"--triad-mib", "4", "--output", "md", "--output-file", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	md, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| test | prompt | gen | reps |", "| pp8 | 8 | 0 | 1 |", "| tg4 | 0 | 4 | 1 |", "-byte triad on"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestBenchBadInputs(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a test longer than the context", []string{"-p", "600", "-n", "0"}, "test pp600 needs 601 tokens (prompt 600 + 1 outputs), more than the context length 512"},
		{"an unknown output format", []string{"--output", "csv"}, `--output "csv": want json or md`},
		{"no repetitions", []string{"-r", "0"}, "-r 0 must be >= 1"},
		{"an unknown KV format", []string{"--kv-dtype", "int4"}, `kv: unknown format "int4"`},
		{"a malformed -pg", []string{"-pg", "16"}, "want PROMPT,GEN"},
		{"nothing to run", []string{"-p", "0", "-n", "0"}, "no tests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"bench", "--model", model, "--peak-bandwidth", "-1"}, tc.args...)...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
	}
}
