package cpu_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/ninfer/ninfer-go/nodes/speculative"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

func init() {
	one, most := 1.0, 16.0
	node.Register(node.Spec{
		Op:        "bench.reject",
		Placement: node.Host,
		In:        []node.Port{{Name: "history", Type: node.History}},
		Out:       []node.Port{{Name: "draft", Type: node.Draft}},
		Params:    []node.Param{{Name: "k", Kind: node.Int, Default: int64(3), Min: &one, Max: &most}},
		Summary:   "Draft k tokens that the target rejects: each the token after the last one, mod 2 (benchmarks only).",
		NewHost:   func(p node.Params) (node.HostNode, error) { return rejecter(p.Int("k")), nil },
	})
}

// rejecter drafts min(k, lookahead) tokens per sequence that a random
// model's argmax almost never is: every draft is the id 1 or 2, the
// other one than the history's last token's parity.
type rejecter int

func (k rejecter) DraftTokens() int { return int(k) }

func (k rejecter) RunHost(hc *node.HostContext, in map[string]any) (map[string]any, error) {
	history := in["history"].([][]int32)
	out := make(exec.Drafts, len(hc.Rows))
	for i, row := range hc.Rows {
		last := history[i][len(history[i])-1]
		for range min(int(k), row.Lookahead) {
			out[i] = append(out[i], 1+(last+1)%2)
		}
	}
	return map[string]any{"draft": out}, nil
}

const rejectGraph = `graph: reject
params:
  k: {type: int, default: 3, min: 1, max: 16}
  min_acceptance: {type: float, default: 0, min: 0, max: 1}
nodes:
  - {id: draft, op: bench.reject, with: {k: $params.k}, in: {history: $in.history}}
  - {id: fwd, op: model.forward, in: {tokens: $in.tokens, positions: $in.positions, draft: draft.draft}}
  - {id: verify, op: speculative.verify, with: {min_acceptance: $params.min_acceptance}, in: {draft: draft.draft, logits: fwd.logits}}
out: {tokens: verify.tokens}
`

// BenchmarkSpeculateForNothing reports what speculation costs when every
// draft is rejected, for one sequence: k=0 is plain decoding, k>=1 a
// proposer whose k drafts the target rejects, so each step is a verify
// step of 1+k rows that yields one token. ms/step is the mean decode step
// (the step's rows over the weights once), tok/s the end-to-end decode
// rate of a 48-token generation, accepted the drafts the target took
// (almost always 0). The ratio of a k's tok/s to k=0's is the overhead of
// speculating for nothing; k=3/adaptive is k=3 with verify's
// min_acceptance 0.3, which stops drafting for a sequence whose drafts
// keep failing.
func BenchmarkSpeculateForNothing(b *testing.B) {
	dir := b.TempDir()
	graph := filepath.Join(dir, "reject.yaml")
	if err := os.WriteFile(graph, []byte(rejectGraph), 0o644); err != nil {
		b.Fatal(err)
	}
	for _, m := range benchModels(b) {
		for k := range 9 {
			b.Run(fmt.Sprintf("%s/k=%d", filepath.Base(m), k), func(b *testing.B) {
				o := instance.Options{Model: m, MaxRunning: 1, NoPrefixCache: true}
				if k > 0 {
					o.Graph, o.Set = graph, node.Params{"k": int64(k)}
				}
				benchReject(b, o)
			})
		}
		b.Run(filepath.Base(m)+"/k=3/adaptive", func(b *testing.B) {
			benchReject(b, instance.Options{Model: m, MaxRunning: 1, NoPrefixCache: true, Graph: graph,
				Set: node.Params{"k": int64(3), "min_acceptance": 0.3}})
		})
	}
}

func benchReject(b *testing.B, o instance.Options) {
	log := &stepLog{}
	o.Observer = log
	in, err := instance.Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	const n = 48
	var decode time.Duration
	var tokens, accepted, steps int
	var stepTime time.Duration
	b.ResetTimer()
	for it := range b.N {
		log.mu.Lock()
		log.steps = nil
		log.mu.Unlock()
		prompt := make([]int32, 16)
		for i := range prompt {
			prompt[i] = int32(3 + (i*13+it*7)%200)
		}
		res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n}, nil)
		if err != nil {
			b.Fatal(err)
		}
		decode += res.Stats.Decode
		tokens += len(res.IDs) - 1
		accepted += res.Stats.Speculative.Accepted
		log.mu.Lock()
		for _, s := range log.steps {
			if s.DecodeRows == 1 && s.PrefillTokens == 0 {
				stepTime += s.End.Sub(s.Start)
				steps++
			}
		}
		log.mu.Unlock()
	}
	b.StopTimer()
	if steps > 0 {
		b.ReportMetric(float64(stepTime.Microseconds())/1e3/float64(steps), "ms/step")
	}
	b.ReportMetric(float64(tokens)/decode.Seconds(), "tok/s")
	b.ReportMetric(float64(accepted)/float64(b.N), "accepted")
}
