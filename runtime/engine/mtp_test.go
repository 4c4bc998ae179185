package engine_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

const mtpGraph = "../../graphs/mtp.yaml"

// specGolden is one of ../shared/golden/spec-*.json: llama-server's greedy
// output and draft counts per prompt.
type specGolden struct {
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

// The MTP head drafts what llama.cpp's does: on every prompt of the
// speculative goldens (llama-server --spec-type draft-mtp
// --spec-draft-n-max 3, greedy, 64 tokens) the tokens are plain
// decoding's and the drafted and accepted counts are the server's exactly.
func TestMTPDraftsEqualLlamaCpp(t *testing.T) {
	for model, golden := range map[string]string{
		"tiny-qwen35-f32.gguf":    "spec-tiny-qwen35-mtp.json",
		"tiny-qwen35moe-f32.gguf": "spec-tiny-qwen35moe-mtp.json",
	} {
		t.Run(model, func(t *testing.T) {
			g := readSpecGolden(t, golden)
			in := open(t, instance.Options{Model: modelPath(t, model), Graph: mtpGraph, MaxRunning: 1, Threads: 2,
				Set: node.Params{"k": int64(3)}})
			for _, r := range g.Results {
				ids, stats := generateAll(t, in, [][]int32{in.Tokenizer.Encode(r.Prompt, true, true)}, len(r.TokensPlain), 1)
				if diff := cmp.Diff(r.TokensPlain, ids[0]); diff != "" {
					t.Errorf("%s: ids differ from llama.cpp's (-llama.cpp +mtp):\n%s", r.ID, diff)
				}
				s := stats[0].Speculative
				if s.Drafted != r.DraftN || s.Accepted != r.Accepted {
					t.Errorf("%s: drafted %d, accepted %d; llama-server drafted %d, accepted %d", r.ID, s.Drafted, s.Accepted, r.DraftN, r.Accepted)
				}
			}
		})
	}
}

// Greedy decoding under the MTP graph gives plain decoding's tokens on
// both hybrid models for k = 1..8, prefill chunks 1, 7 and 512, one or
// eight sequences at a time, int8 KV, and after preemption (sequences lose
// their KV, state and carried hidden rows and are recomputed); the
// target's cache and the head's are empty afterwards.
func TestMTPIsLossless(t *testing.T) {
	const n = 24
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2})
			prompts := goldenPrompts(t, plain)
			want, _ := generateAll(t, plain, prompts, n, 8)
			check := func(name string, in *instance.Instance, got [][]int32, stats []engine.Stats) {
				t.Helper()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("%s: ids differ from plain (-plain +mtp):\n%s", name, diff)
				}
				var sum engine.SpecStats
				for _, st := range stats {
					sum = sum.Add(st.Speculative)
				}
				if sum.Rounds == 0 || sum.Accepted == 0 || sum.Accepted == sum.Drafted {
					t.Errorf("%s: implausible counts %+v", name, sum)
				}
				if s := in.Engine.Snapshot(); s.KVBlocksUsed != 0 || s.StateSlotsUsed != 0 {
					t.Errorf("%s: after every request %+v", name, s)
				}
				if u := in.Engine.ModelKVBlocks()["target"]; u.Used != 0 || u.Total == 0 {
					t.Errorf("%s: the head's cache after every request: %+v", name, u)
				}
			}
			for k := 1; k <= 8; k++ {
				chunk := []int{1, 7, 512}[k%3]
				in := open(t, instance.Options{Model: m, Graph: mtpGraph, MaxRunning: 8, Threads: 2,
					Set: node.Params{"k": int64(k), "chunk": int64(chunk)}})
				for _, conc := range []int{1, 8} {
					got, stats := generateAll(t, in, prompts, n, conc)
					check(fmt.Sprintf("k=%d chunk %d concurrency %d", k, chunk, conc), in, got, stats)
				}
				in.Close()
			}
			// int8 KV pages, for the target and the head: the ids of plain decoding over the same pages.
			src, err := os.ReadFile(mtpGraph)
			if err != nil {
				t.Fatal(err)
			}
			int8Graph := filepath.Join(t.TempDir(), "mtp-int8.yaml")
			src = []byte(strings.Replace(string(src), "  - {id: draft,", "  - {id: cache, op: kv.cache, with: {dtype: int8-g64}}\n  - {id: draft,", 1))
			if err := os.WriteFile(int8Graph, src, 0o644); err != nil {
				t.Fatal(err)
			}
			ref := open(t, instance.Options{Model: m, Graph: "../../graphs/kv-int8-g64.yaml", MaxRunning: 8, Threads: 2})
			wantInt8, _ := generateAll(t, ref, prompts, n, 8)
			q := open(t, instance.Options{Model: m, Graph: int8Graph, MaxRunning: 8, Threads: 2, Set: node.Params{"k": int64(3)}})
			got, stats := generateAll(t, q, prompts, n, 8)
			if diff := cmp.Diff(wantInt8, got); diff != "" {
				t.Fatalf("int8 kv: ids differ from plain's (-plain +mtp):\n%s", diff)
			}
			in := open(t, instance.Options{Model: m, Graph: mtpGraph, MaxRunning: 8, Threads: 2, KVTokens: 352,
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
		})
	}
}
