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

// --image appends the image to every prompt: each repetition reports the
// time its tower took (vision_seconds), the prompt counts the image's
// tokens (9 rows and the vision start and end markers for sq64.png), and
// the memory block has the tower's workspace.
func TestBenchWithAnImage(t *testing.T) {
	model, mmproj := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf"), sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	image := sharedPath(t, "golden", "images", "sq64.png")
	r := benchJSON(t, "--model", model, "--mmproj", mmproj, "--image", image, "-p", "16", "-n", "4", "-r", "2", "--warmup", "0",
		"--peak-bandwidth", "-1", "--threads", "2")
	if w := r.Memory.VisionWorkspace; w == nil || w.PeakUsedBytes <= 0 {
		t.Errorf("vision_workspace %+v, want the tower's scratch", w)
	}
	for _, tc := range r.Tests {
		for _, rep := range tc.Reps {
			want := max(tc.NPrompt, 1) + 11 // a tg test's prompt is one token
			if rep.Timings.VisionSeconds <= 0 || rep.PromptTokens != want {
				t.Errorf("%s: vision_seconds %g, prompt tokens %d; want > 0 and %d", tc.Label, rep.Timings.VisionSeconds, rep.PromptTokens, want)
			}
		}
	}
}

// The image's tokens count in the checks a bench makes before it runs:
// the context length and the KV blocks of a batch, each error spelling
// out the image's share.
func TestBenchImageCountsInTheChecks(t *testing.T) {
	model, mmproj := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf"), sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	image := sharedPath(t, "golden", "images", "sq64.png")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the context", []string{"-p", "4090", "-n", "0"}, "test pp4090 needs 4102 tokens (prompt 4090 + image 11 + 1 outputs), more than the context length 4096"},
		{"a batch's KV blocks", []string{"-p", "24", "-n", "0", "--batch", "2", "--kv-capacity", "64"},
			"--batch 2: test pp24 needs 6 KV blocks of 16 tokens for its 2 sequences (prompt 24 + image 11 + 1 outputs each), the cache holds 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"bench", "--model", model, "--mmproj", mmproj, "--image", image, "-r", "1", "--warmup", "0", "--peak-bandwidth", "-1", "--threads", "2"}, tc.args...)
			code, _, stderr := runCLI(args...)
			if code == 0 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want an error containing %q", code, stderr, tc.want)
			}
		})
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
		{"a batch of none", []string{"--batch", "1,0"}, "--batch 0: want 1 to 256 concurrent sequences"},
		{"a batch beyond the limit", []string{"--batch", "1000000"}, "--batch 1000000: want 1 to 256"},
		{"a batch the KV cache cannot hold", []string{"-p", "64", "-n", "8", "--batch", "4", "--kv-capacity", "128"}, "--batch 4: test pp64 needs"},
		{"an image without a tower", []string{"--image", "x.png"}, "--image needs --mmproj"},
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

// --batch runs every test again as B concurrent requests: labels get
// "@bB", token counts are summed over the B, the prompts differ, and one
// step's weight reads are shared by the B sequences (the bytes per
// decoded token fall).
func TestBenchBatch(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	r := benchJSON(t, "--model", model, "-p", "16", "-n", "6", "--batch", "1,3", "-r", "2", "--warmup", "1", "--peak-bandwidth", "10")
	type row struct {
		Label           string
		Batch           int
		Generated, Sent []int
	}
	var got []row
	byLabel := map[string]bench.Test{}
	subs := map[int32]bool{}
	for _, tc := range r.Tests {
		rw := row{Label: tc.Label, Batch: tc.Batch}
		for _, rep := range tc.Reps {
			rw.Generated = append(rw.Generated, rep.GeneratedOutputTokens)
			rw.Sent = append(rw.Sent, rep.PromptTokens)
			if subs[rep.SubstitutedToken] {
				t.Errorf("%s: two repetitions began with the same substituted token %d", tc.Label, rep.SubstitutedToken)
			}
			subs[rep.SubstitutedToken] = true
			if rep.DecodeOutputTokens != tc.Batch*tc.NGen || rep.FinishReason != "length" {
				t.Errorf("%s: %d decode tokens, finish %s; want %d, length", tc.Label, rep.DecodeOutputTokens, rep.FinishReason, tc.Batch*tc.NGen)
			}
		}
		got = append(got, rw)
		byLabel[tc.Label] = tc
	}
	want := []row{
		{"pp16", 1, []int{1, 1}, []int{16, 16}},
		{"pp16@b3", 3, []int{3, 3}, []int{16, 16}},
		{"tg6", 1, []int{7, 7}, []int{1, 1}},
		{"tg6@b3", 3, []int{21, 21}, []int{1, 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tests (-want +got):\n%s", diff)
	}
	one, three := byLabel["tg6"], byLabel["tg6@b3"]
	if one.DecodeBytesPerToken == nil || three.DecodeBytesPerToken == nil || *three.DecodeBytesPerToken >= *one.DecodeBytesPerToken {
		t.Errorf("decode bytes per token at batch 1 %v, at batch 3 %v: want fewer at batch 3", one.DecodeBytesPerToken, three.DecodeBytesPerToken)
	}
	if r.Config.DecodePath != "cpu_op_list" || r.Config.UseCUDAGraph {
		t.Errorf("decode path %q, use_cuda_graph %v on the cpu backend", r.Config.DecodePath, r.Config.UseCUDAGraph)
	}
}

func TestDecodePathNamesTheCUDAGraphPath(t *testing.T) {
	for _, c := range []struct {
		spec  string
		eager bool
		want  string
	}{
		{"none", false, "cuda_graph"},
		{"none", true, "cuda_eager"},
		{"mtp", false, "mtp_cuda_graph"},
		{"dflash", true, "dflash_cuda_eager"},
	} {
		if got := decodePath("cuda", c.spec, c.eager); got != c.want {
			t.Errorf("decodePath(cuda, %s, eager %v) = %q, want %q", c.spec, c.eager, got, c.want)
		}
	}
}
