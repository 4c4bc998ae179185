package main

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/suites/golden"
)

func TestKVMetrics(t *testing.T) {
	tests := []struct {
		name     string
		ref, got []float32
		kl       float64
	}{
		{"identical logits", []float32{1, 3, 2}, []float32{1, 3, 2}, 0},
		{"ties", []float32{2, 2, 1}, []float32{2, 2, 1}, 0},
		{"a constant shift changes nothing", []float32{1, 3, 2}, []float32{11, 13, 12}, 0},
		{"two tokens, one flipped", []float32{0, float32(math.Log(3))}, []float32{float32(math.Log(3)), 0},
			0.25*math.Log(0.25/0.75) + 0.75*math.Log(0.75/0.25)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := klDivergence(tt.ref, tt.got); math.Abs(got-tt.kl) > 1e-6 {
				t.Errorf("klDivergence = %g, want %g", got, tt.kl)
			}
		})
	}
}

func TestKVStats(t *testing.T) {
	var a, b kvStats
	a.add(0, 1, 1, []float32{0, 1}, []float32{0, 1})
	a.add(1, 1, 0, []float32{0, 1}, []float32{0.5, 0.25}) // diverges at 1
	b.add(0, 0, 0, []float32{1, 0}, []float32{1, 0})
	var all kvStats
	all.merge(a)
	all.merge(b)
	kl := klDivergence([]float32{0, 1}, []float32{0.5, 0.25})
	want := kvStats{Positions: 3, Agreement: 2.0 / 3, FirstDiv: 1, Diverged: 1, MaxAbs: 0.75, MeanAbs: 1.25 / 6,
		KLMean: kl / 3, KLMax: kl, agree: 2, cells: 6, sumAbs: 1.25, sumKL: kl}
	approx := cmp.Comparer(func(x, y float64) bool { return math.Abs(x-y) < 1e-12 })
	if diff := cmp.Diff(want, all, approx, cmp.AllowUnexported(kvStats{})); diff != "" {
		t.Errorf("merged stats (-want +got):\n%s", diff)
	}
}

func TestParseKVFormats(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"int8-g64", []string{"int8-g64"}, false},
		{"f16, bf16,f16", []string{"f16", "bf16"}, false},
		{"all", []string{"f16", "bf16", "int8-g64", "fp8-e4m3-row256"}, false},
		{"int4", nil, true},
		{"f16,", nil, true},
	}
	for _, tt := range tests {
		got, err := parseKVFormats(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parseKVFormats(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseKVFormats(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// kvThreshold is what one format must achieve on one bundled model over
// ../shared/golden/prompts.json (64 greedy tokens each). The bounds sit
// slightly outside the values measured when they were set (in comments:
// top1 agreement, max|dl|, mean|dl|, KL mean).
type kvThreshold struct {
	model, format                     string
	minAgree, maxAbs, meanAbs, klMean float64
}

var kvThresholds = []kvThreshold{
	// measured 0.9980 0.0295 0.00231 1.09e-06
	{"stories260K.gguf", "f16", 0.994, 0.033, 0.0026, 1.4e-6},
	// measured 0.9922 0.218 0.0189 7.15e-05
	{"stories260K.gguf", "bf16", 0.988, 0.24, 0.021, 9e-5},
	// measured 0.9551 1.78 0.114 0.00317
	{"stories260K.gguf", "int8-g64", 0.95, 1.96, 0.126, 0.004},
	// measured 0.9199 4.56 0.283 0.0144
	{"stories260K.gguf", "fp8-e4m3-row256", 0.915, 5.0, 0.312, 0.018},
	// measured 1.0000 0.0346 0.000749 5.38e-07
	{"tiny-qwen3-f32.gguf", "f16", 1, 0.038, 0.00083, 6.8e-7},
	// measured 0.9980 0.307 0.00645 6.22e-05
	{"tiny-qwen3-f32.gguf", "bf16", 0.994, 0.34, 0.0071, 7.8e-5},
	// measured 0.9941 1.12 0.0222 0.000587
	{"tiny-qwen3-f32.gguf", "int8-g64", 0.99, 1.24, 0.0245, 0.00074},
	// measured 0.9746 3.83 0.0885 0.0101
	{"tiny-qwen3-f32.gguf", "fp8-e4m3-row256", 0.97, 4.2, 0.098, 0.0127},
}

// TestKVEvalThresholds runs `ninfer kv-eval --json` on a llama-family and a
// qwen3-family model and holds every format to its measured accuracy.
func TestKVEvalThresholds(t *testing.T) {
	prompts := sharedPath(t, "golden", "prompts.json")
	for _, model := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			code, stdout, stderr := runCLI("kv-eval", "--model", sharedPath(t, "models", model), "--kv", "all",
				"--prompts", prompts, "--speed-rounds", "0", "--threads", "2", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep kvEvalReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("stdout is not a kv-eval report: %v\n%s", err, stdout)
			}
			if rep.Prompts != 8 || rep.Tokens != 64 || len(rep.Formats) != 4 {
				t.Fatalf("report covers %d prompts x %d tokens, %d formats; want 8 x 64, 4", rep.Prompts, rep.Tokens, len(rep.Formats))
			}
			per := rep.F32.BytesPerToken
			for _, f := range rep.Formats {
				if f.BytesPerToken > per || f.BytesPerToken*2 > rep.F32.BytesPerToken {
					t.Errorf("%s: %d bytes per token, above the previous format's %d or half of f32's %d", f.Format, f.BytesPerToken, per, rep.F32.BytesPerToken)
				}
				per = f.BytesPerToken
				i := slices.IndexFunc(kvThresholds, func(k kvThreshold) bool { return k.model == model && k.format == f.Format })
				if i < 0 {
					t.Errorf("%s: no threshold", f.Format)
					continue
				}
				k, s := kvThresholds[i], f.Stats
				t.Logf("%s: top1 %.4f first-div %d max|dl| %.3g mean|dl| %.3g KL mean %.3g", f.Format, s.Agreement, s.FirstDiv, s.MaxAbs, s.MeanAbs, s.KLMean)
				if s.Positions != 8*64 || s.Agreement < k.minAgree || s.MaxAbs > k.maxAbs || s.MeanAbs > k.meanAbs || s.KLMean > k.klMean {
					t.Errorf("%s: %d positions, top1 %.4f (min %g), max|dl| %.4g (max %g), mean|dl| %.4g (max %g), KL mean %.4g (max %g)",
						f.Format, s.Positions, s.Agreement, k.minAgree, s.MaxAbs, k.maxAbs, s.MeanAbs, k.meanAbs, s.KLMean, k.klMean)
				}
			}
		})
	}
}

// TestHalfKVGoldens runs llama.cpp's goldens (computed with an f32 KV
// cache) with f16 and bf16 KV pages. f16 reproduces every case. bf16 keeps
// 8 significand bits, so logits move by up to ~0.3 (kv-eval's max|dl|),
// more than the f32 top1-top2 margin at four positions: those cases may
// diverge there, and no others may.
func TestHalfKVGoldens(t *testing.T) {
	bf16Known := []string{"stories260K.json:repeated", "tiny-qwen3-f32.json:short_once",
		"tiny-qwen3-f16.json:short_once", "tiny-llama-f32.json:short_once"}
	for _, graph := range []string{"kv-f16", "kv-bf16"} {
		for _, name := range []string{"stories260K.json", "tiny-qwen3-f32.json", "tiny-qwen3-f16.json", "tiny-llama-f32.json"} {
			t.Run(graph+" "+name, func(t *testing.T) {
				f, err := golden.Load(sharedPath(t, "golden", name))
				if err != nil {
					t.Fatal(err)
				}
				in, err := instance.Open(instance.Options{Model: sharedPath(t, "models", f.Model), Graph: graph, Threads: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer in.Close()
				ms, err := golden.Verify(context.Background(), in, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range ms {
					if graph == "kv-bf16" && slices.Contains(bf16Known, name+":"+m.Case) {
						t.Logf("known bf16 divergence: %s", m)
						continue
					}
					t.Errorf("%s", m)
				}
			})
		}
	}
}

// TestKVMemoryFlag sizes the cache by bytes: stories260K in int8-g64 takes
// 360 bytes per token, so 16*360-1 bytes hold no 16-token block and 24*360
// hold one block, too few for a 4-token prompt and 20 more tokens.
func TestKVMemoryFlag(t *testing.T) {
	model := sharedPath(t, "models", "stories260K.gguf")
	tests := []struct {
		name, memory string
		wantCode     int
		wantStderr   string
	}{
		{"less than a block", "5759", 1, "kv memory 5759 bytes holds no block of 16 tokens (360 bytes per token in int8-g64)"},
		{"one block is too short", "8640", 1, "request needs 2 kv blocks, cache has 1"},
		{"two blocks fit", "11520", 0, ""},
		{"with --kv-capacity", "11520 --kv-capacity 32", 1, "not given with --kv-capacity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--model", model, "--graph", "kv-int8-g64", "--prompt-ids", "1,403,407,408",
				"--max-tokens", "20", "--ignore-eos", "--json", "--kv-memory"}, strings.Fields(tt.memory)...)
			code, _, stderr := runCLI(args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.wantStderr)
			}
		})
	}
}

// kv-eval runs on a hybrid model: its runners reserve a recurrent state
// slot beside the KV pages of the attending layers.
func TestKVEvalOnAHybridModel(t *testing.T) {
	code, stdout, stderr := runCLI("kv-eval", "--model", sharedPath(t, "models", "tiny-qwen35-f32.gguf"), "--kv", "f16,state-bf16,checkpoint-bf16",
		"--prompts", sharedPath(t, "golden", "prompts.json"), "--n", "8", "--speed-rounds", "0", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Layers  int `json:"layers"`
		Formats []struct {
			Format string `json:"format"`
			Stats  struct {
				Agreement float64 `json:"top1_agreement"`
				MaxAbs    float64 `json:"max_abs_logit_error"`
			} `json:"stats"`
		} `json:"formats"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	bf16 := func(i int, name string) bool {
		f := rep.Formats[i]
		return f.Format == name && f.Stats.Agreement >= 0.9 && f.Stats.MaxAbs > 0
	}
	if rep.Layers != 2 || len(rep.Formats) != 3 || rep.Formats[0].Format != "f16" || rep.Formats[0].Stats.Agreement < 0.9 ||
		!bf16(1, "state-bf16") || !bf16(2, "checkpoint-bf16") {
		t.Errorf("kv layers %d (want tiny-qwen35's 2 attending layers), formats %+v:\n%s", rep.Layers, rep.Formats, stdout)
	}
	// A model without recurrent state has no state to store as bf16.
	code, _, stderr = runCLI("kv-eval", "--model", sharedPath(t, "models", "tiny-qwen3-f32.gguf"), "--kv", "state-bf16",
		"--prompts", sharedPath(t, "golden", "prompts.json"), "--n", "4", "--speed-rounds", "0")
	if code == 0 || !strings.Contains(stderr, "keeps no recurrent state") {
		t.Errorf("state-bf16 on a transformer: exit %d, %s", code, stderr)
	}
}
