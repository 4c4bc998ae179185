package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/graphs"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	one, most := 1.0, 16.0
	node.Register(node.Spec{
		Op:        "test.oracle",
		Placement: node.Host,
		In:        []node.Port{{Name: "history", Type: node.History}},
		Out:       []node.Port{{Name: "draft", Type: node.Draft}},
		Params:    []node.Param{{Name: "k", Kind: node.Int, Default: int64(4), Min: &one, Max: &most}},
		Summary:   "Draft plain decoding's tokens with one corrupted at a position that varies by step (tests only).",
		NewHost:   func(p node.Params) (node.HostNode, error) { return &oracle{k: p.Int("k")}, nil },
	})
}

func init() {
	one, most := 1.0, 16.0
	node.Register(node.Spec{
		Op:        "test.wrong",
		Placement: node.Host,
		In:        []node.Port{{Name: "history", Type: node.History}},
		Out:       []node.Port{{Name: "draft", Type: node.Draft}},
		Params:    []node.Param{{Name: "k", Kind: node.Int, Default: int64(3), Min: &one, Max: &most}},
		Summary:   "Draft plain decoding's next tokens, each one off by one bit: every draft is rejected (tests only).",
		NewHost:   func(p node.Params) (node.HostNode, error) { return wrong(p.Int("k")), nil },
	})
}

// wrong drafts the oracle's tokens with every one corrupted.
type wrong int

func (w wrong) DraftTokens() int { return int(w) }

func (w wrong) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	res, err := (&oracle{k: int(w)}).RunHost(hc, in)
	if err != nil {
		return nil, err
	}
	d := res["draft"].(exec.Drafts)
	for i := range d {
		d[i] = slices.Clone(d[i])
		for j := range d[i] {
			d[i][j] = oracleRefToken(hc, in, i, j) ^ 1
		}
	}
	return res, nil
}

// oracleRefToken is the reference token at draft position j of row i.
func oracleRefToken(hc *node.HostContext, in map[string]any, i, j int) int32 {
	h := in["history"].([][]int32)[i]
	oracleMu.Lock()
	defer oracleMu.Unlock()
	for _, ref := range oracleRefs {
		if len(ref) > len(h)+j && slices.Equal(ref[:len(h)], h) {
			return ref[len(h)+j]
		}
	}
	return 0
}

// With min_acceptance, a sequence whose drafts keep failing stops
// drafting: against a proposer that is always wrong it verifies drafts in
// a few probe rounds only, decodes the rest without drafts (fallback
// steps), and its tokens stay plain decoding's; without it, every step
// verifies k drafts.
func TestAdaptiveSpeculationBacksOff(t *testing.T) {
	m := modelPath(t, "tiny-qwen3-f32.gguf")
	plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2})
	prompts := goldenPrompts(t, plain)
	const n = 48
	want, _ := generateAll(t, plain, prompts, n, 8)
	setOracleRefs(prompts, want)
	dir := t.TempDir()
	rounds := map[float64]int{}
	for _, minAccept := range []float64{0, 0.3} {
		src := fmt.Sprintf(`graph: wrong
nodes:
  - {id: draft, op: test.wrong, with: {k: 3}, in: {history: $in.history}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: draft.draft}}
  - {id: verify, op: speculative.verify, with: {min_acceptance: %g}, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`, minAccept)
		g := filepath.Join(dir, fmt.Sprintf("wrong%g.yaml", minAccept))
		if err := os.WriteFile(g, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		in := open(t, instance.Options{Model: m, Graph: g, MaxRunning: 8, Threads: 2})
		got, stats := generateAll(t, in, prompts, n, 8)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("min_acceptance %g: ids differ from plain (-plain +wrong):\n%s", minAccept, diff)
		}
		var sum engine.SpecStats
		for _, st := range stats {
			sum = sum.Add(st.Speculative)
		}
		if sum.Accepted != 0 {
			t.Fatalf("min_acceptance %g: %d drafts accepted from an always-wrong proposer", minAccept, sum.Accepted)
		}
		rounds[minAccept] = sum.Rounds
		t.Logf("min_acceptance %g: %d rounds, %d drafted, %d fallback steps", minAccept, sum.Rounds, sum.Drafted, sum.Fallback)
		if minAccept > 0 && (sum.Fallback == 0 || sum.Rounds*4 > sum.Rounds+sum.Fallback) {
			t.Errorf("min_acceptance %g: %d rounds and %d fallback steps: want most steps without drafts", minAccept, sum.Rounds, sum.Fallback)
		}
	}
	if rounds[0] == 0 || rounds[0.3] >= rounds[0]/4 {
		t.Errorf("rounds that verified drafts: %d always, %d adaptive", rounds[0], rounds[0.3])
	}
	// One request at a time: the first to run probes 1, 2, 4, ... steps apart;
	// each later one starts from where the rounds before it left off, so it
	// pays at most one failing probe.
	in := open(t, instance.Options{Model: m, Graph: filepath.Join(dir, "wrong0.3.yaml"), MaxRunning: 8, Threads: 2})
	got, stats := generateAll(t, in, prompts, n, 1)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("one at a time: ids differ from plain (-plain +wrong):\n%s", diff)
	}
	var perRequest []int
	for _, st := range stats {
		perRequest = append(perRequest, st.Speculative.Rounds)
	}
	slices.Sort(perRequest) // the requests ran one at a time, in no set order
	if n := len(perRequest); perRequest[n-1] < 3 || perRequest[n-2] > 1 {
		t.Errorf("rounds per request, one at a time: %v: want a few for the first, at most one for each later request", perRequest)
	}
}

// oracleRefs are the plain greedy sequences (prompt and output) the oracle
// drafts from.
var (
	oracleMu   sync.Mutex
	oracleRefs [][]int32
)

// oracle proposes the next tokens of the reference sequence the history is
// a prefix of, with the token at position len(history)*7 % (lookahead+2)
// replaced by a wrong one (no token is replaced when that is past the
// draft), so that every acceptance length from 0 to k occurs.
type oracle struct{ k int }

func (o *oracle) DraftTokens() int { return o.k }

func (o *oracle) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	history := in["history"].([][]int32)
	out := make(exec.Drafts, len(hc.Rows))
	oracleMu.Lock()
	defer oracleMu.Unlock()
	for i, row := range hc.Rows {
		la := min(o.k, row.Lookahead)
		if la == 0 {
			continue
		}
		h := history[i]
		for _, ref := range oracleRefs {
			if len(ref) > len(h) && slices.Equal(ref[:len(h)], h) {
				out[i] = slices.Clone(ref[len(h):min(len(ref), len(h)+la)])
				break
			}
		}
		if c := len(h) * 7 % (la + 2); c < len(out[i]) {
			out[i][c] ^= 1
		}
	}
	return map[string]any{"draft": out}, nil
}

const specGraph = `graph: %s
params:
  chunk: {type: int, default: 512, min: 1, max: 65536}
  k: {type: int, default: 4, min: 1, max: 16}
nodes:
  - {id: chunking, op: prefill.chunk, with: {size: $params.chunk}}
  - {id: draft, op: %s, with: {k: $params.k%s}, in: {history: $in.history}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: draft.draft}}
  - {id: verify, op: speculative.verify, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`

// specGraphs writes the speculative graphs under test into a temporary
// directory: prompt lookup (matching single tokens, so it drafts often),
// early-exit self-drafting, a draft model (alias draft) and the oracle
// with forced rejections.
func specGraphs(t *testing.T) map[string]string {
	dir := t.TempDir()
	out := map[string]string{}
	for name, op := range map[string]string{
		"ngram":  "speculative.ngram, with: {k: $params.k, min_match: 1}",
		"oracle": "test.oracle",
	} {
		src := fmt.Sprintf(specGraph, name, op, "")
		if name == "ngram" {
			src = fmt.Sprintf(specGraph, name, "speculative.ngram", ", min_match: 1")
		}
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		out[name] = p
	}
	for _, name := range []string{"self", "draft"} { // the shipped draft loops
		_, src, err := graphs.Source(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(out[name], src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// setOracleRefs gives the oracle proposer the reference continuation of
// each prompt: the prompt followed by its plain greedy ids.
func setOracleRefs(prompts, want [][]int32) {
	oracleMu.Lock()
	defer oracleMu.Unlock()
	oracleRefs = nil
	for i, p := range prompts {
		oracleRefs = append(oracleRefs, append(slices.Clone(p), want[i]...))
	}
}

// goldenPrompts tokenizes ../shared/golden/prompts.json with in's tokenizer.
func goldenPrompts(t *testing.T, in *instance.Instance) [][]int32 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(filepath.Dir(modelPath(t, "stories260K.gguf")), "..", "golden", "prompts.json"))
	if err != nil {
		t.Skip(err)
	}
	var ps []struct{ Text string }
	if err := json.Unmarshal(data, &ps); err != nil {
		t.Fatal(err)
	}
	var out [][]int32
	for _, p := range ps {
		if ids := in.Tokenizer.Encode(p.Text, true, true); len(ids) > 0 {
			out = append(out, ids)
		}
	}
	return out
}

// generateAll runs every prompt greedily for n tokens (EOS ignored),
// conc at a time, and returns the ids and stats of each.
func generateAll(t *testing.T, in *instance.Instance, prompts [][]int32, n, conc int) ([][]int32, []engine.Stats) {
	t.Helper()
	ids := make([][]int32, len(prompts))
	stats := make([]engine.Stats, len(prompts))
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := in.Generate(context.Background(), engine.Request{Prompt: p, MaxTokens: n}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], stats[i] = res.IDs, res.Stats
		}()
	}
	wg.Wait()
	return ids, stats
}

// submitAll is generateAll with every request submitted at once, from one
// goroutine, before any result is read: the engine sees them all together
// however slowly goroutines are scheduled.
func submitAll(t *testing.T, in *instance.Instance, prompts [][]int32, n int) ([][]int32, []engine.Stats) {
	t.Helper()
	chans := make([]<-chan engine.Event, len(prompts))
	for i, p := range prompts {
		ch, err := in.Engine.Submit(context.Background(), engine.Request{Prompt: p, MaxTokens: n, Tag: i})
		if err != nil {
			t.Fatal(err)
		}
		chans[i] = ch
	}
	ids := make([][]int32, len(prompts))
	stats := make([]engine.Stats, len(prompts))
	for i, ch := range chans {
		for ev := range ch {
			if ev.Done {
				if ev.Err != nil {
					t.Errorf("request %d: %v", i, ev.Err)
				}
				stats[i] = ev.Stats
				continue
			}
			ids[i] = append(ids[i], ev.Token)
		}
	}
	return ids, stats
}

// draftModels are the draft models of the greedy tests, by target: a
// quantized copy of tiny-qwen3-f32, and stories260K itself (no other
// bundled model shares its vocabulary).
var draftModels = map[string]string{"stories260K.gguf": "stories260K.gguf", "tiny-qwen3-f32.gguf": "tiny-qwen3-q8_0.gguf"}

// Greedy decoding under every speculative graph gives plain decoding's
// tokens exactly, on every golden prompt and both model families, for
// k = 1..8, prefill chunks that split the prompts differently, one or
// eight requests at a time, and forced rejections at every draft position;
// the KV caches (the target's and the draft model's) are empty afterwards
// and the speculative counts add up.
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	graphs := specGraphs(t)
	const n = 24
	for _, model := range []string{"stories260K.gguf", "tiny-qwen3-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			models := map[string]string{"draft": modelPath(t, draftModels[model])}
			// Plain decoding without the prefix cache; each speculative
			// instance below runs the prompts twice, the second time
			// from cached prefixes.
			plain := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := goldenPrompts(t, plain)
			want, _ := generateAll(t, plain, prompts, n, 8)
			setOracleRefs(prompts, want)
			chunks := []int{1, 3, 7, 16, 512}
			ks := []int{1, 2, 3, 4, 5, 6, 7, 8}
			if raceDetector {
				ks = []int{2, 5, 8}
			}
			for _, g := range []string{"ngram", "self", "draft", "oracle"} {
				for _, k := range ks {
					chunk := chunks[k%len(chunks)]
					in := open(t, instance.Options{Model: m, Models: models, Graph: graphs[g], MaxRunning: 8, Threads: 2,
						Set: node.Params{"k": int64(k), "chunk": int64(chunk)}})
					for _, conc := range []int{1, 8} {
						got, stats := generateAll(t, in, prompts, n, conc)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("%s k=%d chunk=%d concurrency %d: ids differ from plain (-plain +%s):\n%s", g, k, chunk, conc, g, diff)
						}
						var sum engine.SpecStats
						for i, st := range stats {
							s := st.Speculative
							sum = sum.Add(s)
							if left := len(got[i]) - 1 - s.Rounds - s.Accepted - s.Fallback; left < 0 || left > 1 {
								t.Errorf("%s k=%d prompt %d: %d decode tokens but %+v", g, k, i, len(got[i])-1, s)
							}
						}
						if used, _ := in.Engine.KVBlocks(); used != 0 {
							t.Errorf("%s k=%d: %d kv blocks used after every request finished", g, k, used)
						}
						if g == "draft" {
							if u := in.Engine.ModelKVBlocks()["draft"]; u.Used != 0 || u.Total == 0 {
								t.Errorf("draft k=%d: draft model kv blocks %+v after every request finished", k, u)
							}
						}
						if sum.Rounds == 0 || sum.Accepted == sum.Drafted && g == "oracle" {
							t.Errorf("%s k=%d: implausible counts %+v", g, k, sum)
						}
						if len(sum.AcceptedPerPosition) != k {
							t.Errorf("%s k=%d: accepted per position %v", g, k, sum.AcceptedPerPosition)
						}
					}
					in.Close()
				}
			}
		})
	}
}

// Aborting speculative requests mid-generation frees their KV blocks.
func TestSpeculativeAbortFreesKV(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	in := open(t, instance.Options{Model: m, Graph: specGraphs(t)["ngram"], MaxRunning: 4, Threads: 1})
	ctx, cancel := context.WithCancel(context.Background())
	var chans []<-chan engine.Event
	for _, p := range [][]int32{{1, 403, 407, 403, 407}, {1, 403}, {1, 291, 280, 294, 291, 280}} {
		ch, err := in.Engine.Submit(ctx, engine.Request{Prompt: p, MaxTokens: 400})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	for _, ch := range chans {
		<-ch
	}
	cancel()
	for _, ch := range chans {
		for range ch {
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for used, _ := in.Engine.KVBlocks(); used != 0; used, _ = in.Engine.KVBlocks() {
		if time.Now().After(deadline) {
			t.Fatalf("%d kv blocks still used after abort", used)
		}
		time.Sleep(time.Millisecond)
	}
}
