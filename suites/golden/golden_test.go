package golden_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/suites/golden"
)

// sharedDir finds ../shared beside the module root.
func sharedDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..", "shared")
	if _, err := os.Stat(filepath.Join(dir, "golden")); err != nil {
		t.Skipf("shared dir not found at %s", dir)
	}
	return dir
}

// The llama.cpp goldens every build must reproduce, besides the kq-*
// files (goldenPaths adds them). llama-2-tiny-random's generations are not
// meaningful (flat logits): only its prompt ids count.
var goldenFiles = []struct {
	file       string
	promptOnly bool
}{
	{"stories260K.json", false},
	{"tiny-qwen3-f32.json", false},
	{"tiny-qwen3-f16.json", false},
	{"tiny-qwen3-q8_0.json", false},
	{"tiny-llama-f32.json", false},
	{"llama-2-tiny-random.json", true},
	{"tiny-qwen35-f32.json", false}, // hybrid: Gated DeltaNet + gated attention
	{"tiny-qwen35-f16.json", false},
	{"tiny-qwen35moe-f32.json", false}, // hybrid with mixture-of-experts FFNs and a shared expert
	{"tiny-qwen3moe-f32.json", false},
}

// goldenPaths returns goldenFiles and every kq-*.json of ../shared/golden
// (K-quants, IQ4 and legacy quants, and their F32 sources), with whether
// only the prompt ids count.
func goldenPaths(t *testing.T, shared string) map[string]bool {
	paths := map[string]bool{}
	for _, gf := range goldenFiles {
		paths[filepath.Join(shared, "golden", gf.file)] = gf.promptOnly
	}
	kq, err := filepath.Glob(filepath.Join(shared, "golden", "kq-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range kq {
		paths[p] = false
	}
	return paths
}

// Every golden passes the rule of its weights (golden.TeacherForced):
// files with quantized weights teacher-forced (golden.VerifyTeacherForced:
// >= 99% of positions and every position of margin >= 0.5 agree), F32,
// F16 and BF16 files free-running up to the first near-tie.
func TestLlamaCppGoldens(t *testing.T) {
	shared := sharedDir(t)
	paths := goldenPaths(t, shared)
	for _, path := range slices.Sorted(maps.Keys(paths)) {
		promptOnly := paths[path]
		t.Run(filepath.Base(path), func(t *testing.T) {
			f, err := golden.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			model := f.ModelPath(filepath.Join(shared, "models"))
			if _, err := os.Stat(model); err != nil {
				t.Skipf("model %s not stored (the kq F32 sources are made by make_kq_gguf.py)", f.Model)
			}
			in, err := instance.Open(instance.Options{Model: model, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if !promptOnly && golden.TeacherForced(in.File) {
				checkTeacherForced(t, in, f)
				return
			}
			for _, want := range f.Results {
				t.Run(want.ID, func(t *testing.T) {
					n := len(want.GeneratedTokens)
					if promptOnly {
						n = 1
					}
					got, err := golden.Generate(context.Background(), in, want.Prompt, n, 5)
					if err != nil {
						t.Fatal(err)
					}
					if promptOnly {
						want := want
						want.GeneratedTokens, want.Margins = nil, nil
						got.GeneratedTokens = nil
						if d := golden.Compare(&want, got); d != "" {
							t.Error(d)
						}
						return
					}
					if d := golden.Compare(&want, got); d != "" {
						t.Error(d)
					}
					checkTopLogits(t, &want, got)
				})
			}
		})
	}
}

// checkTeacherForced checks f on in by the teacher-forced rule.
func checkTeacherForced(t *testing.T, in *instance.Instance, f *golden.File) {
	t.Helper()
	r, err := golden.VerifyTeacherForced(context.Background(), in, f)
	if err != nil {
		t.Fatal(err)
	}
	share := float64(r.Agree) / float64(r.Positions)
	t.Logf("teacher-forced: %d/%d positions agree (%.2f%%), %d high-margin mismatches", r.Agree, r.Positions, 100*share, len(r.Mismatches))
	for _, m := range r.Allowed {
		t.Log(m)
	}
	for _, m := range r.Mismatches {
		t.Error(m)
	}
	if !r.Ok() {
		t.Errorf("agreement %.2f%% with %d high-margin mismatches: below the bar of %.1f%%", 100*share, len(r.Mismatches), 100*r.Agreement)
	}
}

// checkTopLogits compares the logits of the first positions where both runs
// agree on the tokens so far; f32 models must be within 2e-3 of llama.cpp.
func checkTopLogits(t *testing.T, want, got *golden.Case) {
	t.Helper()
	var worst float64
	for pos := range min(len(want.TopLogits), len(got.TopLogits)) {
		if pos > 0 && want.GeneratedTokens[pos-1] != got.GeneratedTokens[pos-1] {
			break
		}
		gotByID := map[float64]float64{}
		for _, p := range got.TopLogits[pos] {
			gotByID[p[0]] = p[1]
		}
		if v, ok := gotByID[want.TopLogits[pos][0][0]]; ok {
			worst = max(worst, abs(v-want.TopLogits[pos][0][1]))
		}
	}
	t.Logf("max |top1 logit - llama.cpp| = %.2g", worst)
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestChunkAndThreadInvariance checks that the generated tokens do not
// depend on the prefill chunk size or the number of threads.
func TestChunkAndThreadInvariance(t *testing.T) {
	shared := sharedDir(t)
	f, err := golden.Load(filepath.Join(shared, "golden", "stories260K.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c golden.Case
	for _, r := range f.Results {
		if r.ID == "long_story" {
			c = r
		}
	}
	var ref []int32
	for _, cfg := range []struct{ chunk, threads int }{{512, 2}, {7, 1}, {64, 3}, {1, 2}} {
		in, err := instance.Open(instance.Options{Model: filepath.Join(shared, "models", f.Model), Threads: cfg.threads,
			Set: node.Params{"chunk": int64(cfg.chunk)}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := golden.Generate(context.Background(), in, c.Prompt, 24, 0)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ref == nil {
			ref = got.GeneratedTokens
			continue
		}
		if d := firstDiff(ref, got.GeneratedTokens); d >= 0 {
			t.Errorf("chunk %d threads %d: tokens differ at %d", cfg.chunk, cfg.threads, d)
		}
	}
}

func firstDiff(a, b []int32) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// TestBigModelGolden checks the qwen3-0.6B-shape F32 golden when
// NINFER_GOLDEN_BIG names the generated model (see `just golden-big`).
func TestBigModelGolden(t *testing.T) {
	path := os.Getenv("NINFER_GOLDEN_BIG")
	if path == "" {
		t.Skip("NINFER_GOLDEN_BIG not set")
	}
	f, err := golden.Load(filepath.Join(sharedDir(t), "golden", "qwen3-0.6b-shape-f32.json"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := instance.Open(instance.Options{Model: path, KVTokens: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for _, want := range f.Results {
		got, err := golden.Generate(context.Background(), in, want.Prompt, len(want.GeneratedTokens), 5)
		if err != nil {
			t.Fatal(err)
		}
		if d := golden.Compare(&want, got); d != "" {
			t.Errorf("%s: %s", want.ID, d)
		}
		checkTopLogits(t, &want, got)
		t.Logf("%s: prefill %v, decode %d tokens in %v", want.ID, got.Timing.Prefill, len(got.GeneratedTokens), got.Timing.Decode)
	}
}
