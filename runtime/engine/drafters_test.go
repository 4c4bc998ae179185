package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
)

const (
	mtpGraph    = "../../graphs/mtp.yaml"
	eagle3Graph = "../../graphs/eagle3.yaml"
	dflashGraph = "../../graphs/dflash.yaml"
)

// specGolden is one of ../shared/golden/spec-*.json: llama-server's greedy
// output and draft counts per prompt.
type specGolden struct {
	Banned  []int32 `json:"banned_token_ids"`
	Results []struct {
		ID          string  `json:"id"`
		Prompt      string  `json:"prompt"`
		TokensPlain []int32 `json:"tokens_plain"`
		DraftN      int     `json:"draft_n"`
		Accepted    int     `json:"draft_n_accepted"`
	} `json:"results"`
}

func readSpecGolden(t *testing.T, name string) specGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(modelPath(t, "stories260K.gguf")), "..", "golden", name))
	if err != nil {
		t.Skip(err)
	}
	var g specGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// The model-native drafters draft what llama.cpp's do: on every prompt of
// the speculative goldens (llama-server --spec-type draft-mtp,
// draft-eagle3 or draft-dflash, --spec-draft-n-max 3, greedy, 64 tokens, the golden's
// banned ids given a -inf bias) the tokens are plain decoding's and the
// drafted and accepted counts are the server's exactly.
//
// Each drafter also runs ahead (aheadGraph): drafting for the next step at
// the end of this one gives the same drafts. Every prompt runs twice with
// the prefix cache on: under mtp on the hybrid models the second run of
// each prompt longer than a block resumes from a checkpoint (the MTP head
// from the hidden state it keeps) and drafts the same.
func TestDraftersEqualLlamaCpp(t *testing.T) {
	for _, tc := range []struct{ name, model, drafter, graph, golden string }{
		{"mtp", "tiny-qwen35-f32.gguf", "", mtpGraph, "spec-tiny-qwen35-mtp.json"},
		{"mtp moe", "tiny-qwen35moe-f32.gguf", "", mtpGraph, "spec-tiny-qwen35moe-mtp.json"},
		{"eagle3", "tiny-qwen3-f32.gguf", "tiny-qwen3-eagle3-f32.gguf", eagle3Graph, "spec-tiny-qwen3-eagle3.json"},
		{"dflash", "tiny-qwen3-f32.gguf", "tiny-qwen3-dflash-f32.gguf", dflashGraph, "spec-tiny-qwen3-dflash.json"},
	} {
		for _, ahead := range []bool{false, true} {
			name, graph := tc.name, tc.graph
			if ahead {
				name, graph = name+" ahead", aheadGraph(t, graph)
			}
			t.Run(name, func(t *testing.T) { drafterEqualsLlamaCpp(t, tc.model, tc.drafter, graph, tc.golden, name) })
		}
	}
}

// drafterEqualsLlamaCpp runs graph (drafting with drafter, "" for the
// target's MTP head) on model over golden's prompts; name labels it.
func drafterEqualsLlamaCpp(t *testing.T, model, drafter, graph, golden, name string) {
	g := readSpecGolden(t, golden)
	o := instance.Options{Model: modelPath(t, model), Graph: graph, MaxRunning: 1, Threads: 2,
		Set: node.Params{"k": int64(3)}}
	if drafter != "" {
		o.Models = map[string]string{"draft": modelPath(t, drafter)}
	}
	in := open(t, o)
	var wantDrafts, drafts *draftLog // the MTP head's drafts with the cache off and on
	if drafter == "" {
		off := o
		off.NoPrefixCache = true
		offIn := open(t, off)
		wantDrafts, drafts = watchDrafts(offIn.Engine), watchDrafts(in.Engine)
		for _, r := range g.Results {
			if _, err := offIn.Generate(context.Background(), engine.Request{Prompt: offIn.Tokenizer.Encode(r.Prompt, true, true),
				MaxTokens: len(r.TokensPlain), Tag: r.ID}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var bias map[int32]float32
	if len(g.Banned) > 0 {
		bias = map[int32]float32{}
		for _, id := range g.Banned {
			bias[id] = float32(math.Inf(-1))
		}
	}
	cached := 0
	for pass := range 2 {
		for _, r := range g.Results {
			res, err := in.Generate(context.Background(), engine.Request{Prompt: in.Tokenizer.Encode(r.Prompt, true, true),
				MaxTokens: len(r.TokensPlain), Sampling: request.Sampling{LogitBias: bias}, Tag: r.ID}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(r.TokensPlain, res.IDs); diff != "" {
				t.Errorf("%s pass %d: ids differ from llama.cpp's (-llama.cpp +%s):\n%s", r.ID, pass, name, diff)
			}
			s := res.Stats.Speculative
			if s.Drafted != r.DraftN || s.Accepted != r.Accepted {
				t.Errorf("%s pass %d (%d prompt tokens cached): drafted %d, accepted %d; llama-server drafted %d, accepted %d",
					r.ID, pass, res.Stats.CachedTokens, s.Drafted, s.Accepted, r.DraftN, r.Accepted)
			}
			if pass == 1 {
				cached += res.Stats.CachedTokens
			}
			if drafts != nil {
				if diff := cmp.Diff(wantDrafts.get(r.ID), drafts.take(r.ID)); diff != "" {
					t.Errorf("%s pass %d (%d prompt tokens cached): drafts differ from the cache off's (-off +on):\n%s", r.ID, pass, res.Stats.CachedTokens, diff)
				}
			}
		}
	}
	if off := in.Engine.PrefixCacheOff(); drafter == "" && (off != "" || cached == 0) {
		t.Errorf("%s: the second run of the prompts hit %d tokens (prefix cache off: %q)", name, cached, off)
	}
}

// aheadGraph writes shipped drafter graph path in the form that drafts
// ahead (plan.Loop.Ahead): the loop enters this step's rows of the value
// the graph carried, its drafts are carried instead, and the forward and
// verify read them as $prev.draft.
func aheadGraph(t *testing.T, path string) string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`carry: \{(\w+): (fwd\.\w+)\}`).FindStringSubmatch(string(src))
	if m == nil {
		t.Fatalf("%s carries no forward output", path)
	}
	s := strings.Replace(string(src), "in: {hidden: $prev."+m[1]+"}", "in: {hidden: "+m[2]+"}", 1)
	s = strings.ReplaceAll(s, "draft: draft.draft", "draft: $prev.draft")
	s = strings.Replace(s, m[0], "carry: {draft: draft.draft}", 1)
	if strings.Count(s, "$prev.draft") != 2 || strings.Contains(s, "$prev."+m[1]) {
		t.Fatalf("%s: not the expected loop, forward and verify wiring:\n%s", path, s)
	}
	out := filepath.Join(t.TempDir(), "ahead-"+filepath.Base(path))
	if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// Greedy decoding under the model-native drafters' graphs gives plain
// decoding's tokens (MTP on both hybrid models, EAGLE-3 and DFlash on
// tiny-qwen3, each also drafting ahead) for k = 1..8, prefill chunks 1, 7 and 512, one or eight sequences at a time,
// int8 KV, and after preemption (sequences lose their KV, state and
// carried rows and are recomputed); the target's cache and the drafter's
// are empty afterwards.
func TestDraftersAreLossless(t *testing.T) {
	for _, tc := range []struct{ model, drafter, graph string }{
		{"tiny-qwen35-f32.gguf", "", mtpGraph},
		{"tiny-qwen35moe-f32.gguf", "", mtpGraph},
		{"tiny-qwen3-f32.gguf", "tiny-qwen3-eagle3-f32.gguf", eagle3Graph},
		{"tiny-qwen3-f32.gguf", "tiny-qwen3-dflash-f32.gguf", dflashGraph},
	} {
		t.Run(tc.model+" "+filepath.Base(tc.graph), func(t *testing.T) { drafterLossless(t, tc.model, tc.drafter, tc.graph) })
		t.Run(tc.model+" "+filepath.Base(tc.graph)+" ahead", func(t *testing.T) {
			if raceDetector && tc.model != "tiny-qwen35-f32.gguf" {
				t.Skip("with -race, one drafter drafts ahead (the engine path is the same for all)")
			}
			drafterLossless(t, tc.model, tc.drafter, aheadGraph(t, tc.graph))
		})
	}
}

func drafterLossless(t *testing.T, model, drafter, graph string) {
	const n = 24
	m := modelPath(t, model)
	alias := "target" // the MTP head is the target's: its KV layer is in the target's cache
	var models map[string]string
	if drafter != "" {
		alias, models = "draft", map[string]string{"draft": modelPath(t, drafter)}
	}
	plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2})
	prompts := goldenPrompts(t, plain)
	want, _ := generateAll(t, plain, prompts, n, 8)
	check := func(name string, in *instance.Instance, got [][]int32, stats []engine.Stats) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s: ids differ from plain (-plain +%s):\n%s", name, graph, diff)
		}
		var sum engine.SpecStats
		for _, st := range stats {
			sum = sum.Add(st.Speculative)
		}
		if sum.Rounds == 0 || sum.Accepted == sum.Drafted {
			t.Errorf("%s: implausible counts %+v", name, sum)
		}
		if s := in.Engine.Snapshot(); s.KVBlocksUsed != 0 || s.StateSlotsUsed != 0 {
			t.Errorf("%s: after every request %+v", name, s)
		}
		if u, own := in.Engine.ModelKVBlocks()[alias]; (drafter != "" || own) && (u.Used != 0 || u.Total == 0) {
			t.Errorf("%s: the drafter's cache after every request: %+v", name, u)
		}
	}
	for k := 1; k <= 8; k++ {
		chunk := []int{1, 7, 512}[k%3]
		in := open(t, instance.Options{Model: m, Models: models, Graph: graph, MaxRunning: 8, Threads: 2,
			Set: node.Params{"k": int64(k), "chunk": int64(chunk)}})
		for _, conc := range []int{1, 8} {
			got, stats := generateAll(t, in, prompts, n, conc)
			check(fmt.Sprintf("k=%d chunk %d concurrency %d", k, chunk, conc), in, got, stats)
		}
		in.Close()
	}
	// int8 KV pages, for the target and the drafter: the ids of plain decoding over the same pages.
	src, err := os.ReadFile(graph)
	if err != nil {
		t.Fatal(err)
	}
	int8Graph := filepath.Join(t.TempDir(), "int8.yaml")
	const chunking = "  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}\n"
	if !strings.Contains(string(src), chunking) {
		t.Fatalf("%s has no line %q to add kv.cache after", graph, chunking)
	}
	src = []byte(strings.Replace(string(src), chunking, chunking+"  - {id: cache, op: kv.cache, with: {dtype: int8-g64}}\n", 1))
	if err := os.WriteFile(int8Graph, src, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := open(t, instance.Options{Model: m, Graph: "../../graphs/kv-int8-g64.yaml", MaxRunning: 8, Threads: 2})
	wantInt8, _ := generateAll(t, ref, prompts, n, 8)
	q := open(t, instance.Options{Model: m, Models: models, Graph: int8Graph, MaxRunning: 8, Threads: 2, Set: node.Params{"k": int64(3)}})
	got, stats := generateAll(t, q, prompts, n, 8)
	if diff := cmp.Diff(wantInt8, got); diff != "" {
		t.Fatalf("int8 kv: ids differ from plain's (-plain +%s):\n%s", graph, diff)
	}
	in := open(t, instance.Options{Model: m, Models: models, Graph: graph, MaxRunning: 8, Threads: 2, KVTokens: 352,
		Set: node.Params{"k": int64(3)}})
	got, stats = submitAll(t, in, prompts, n)
	preempted := 0
	for _, st := range stats {
		preempted += st.Preempted
	}
	if preempted == 0 {
		t.Errorf("no sequence was preempted")
	}
	check("preemption", in, got, stats)
}
