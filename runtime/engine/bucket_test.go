package engine_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// bucketed is the CPU backend behind the exec.Bucketer contract, as the
// CUDA backend implements it: steps are recorded at bucket shapes 1, 2, 4
// and 8 and run padded with pad rows (token 0 at position 0 of a sequence
// whose only block is one reserved past the engine's), and outputs report
// the unpadded rows.
type bucketed struct {
	*cpu.Backend
	padBlock int32
	prepared *[][2]int // shapes in Prepare order
}

var (
	bucketedShapes [][2]int
	paddedRuns     int // runs with fewer rows or logit rows than recorded
)

func init() {
	exec.Register("cpu-bucketed", func(o exec.Options) exec.Backend {
		return &bucketed{Backend: cpu.New(o), prepared: &bucketedShapes}
	})
}

func (b *bucketed) Bucket(rows, logitRows int) (int, int) {
	round := func(n int) int {
		for _, s := range []int{1, 2, 4, 8} {
			if n <= s {
				return s
			}
		}
		return n
	}
	if rows > b.MaxBucket() {
		return rows, logitRows
	}
	return round(rows), round(logitRows)
}

func (b *bucketed) MaxBucket() int { return 8 }

func (b *bucketed) Reserve(l exec.KVLayout) error {
	b.padBlock = int32(l.Blocks)
	l.Blocks++
	return b.Backend.Reserve(l)
}

func (b *bucketed) Prepare(g *tensor.Graph) (exec.Executable, error) {
	x, err := b.Backend.Prepare(g)
	if err != nil {
		return nil, err
	}
	var rows, logitRows int
	for _, op := range g.Ops {
		switch {
		case op.Kind == tensor.OpInput && op.Name == "tokens":
			rows = op.Out.Rows()
		case op.Kind == tensor.OpInput && op.Name == "logit_rows":
			logitRows = op.Out.Rows()
		}
	}
	*b.prepared = append(*b.prepared, [2]int{rows, logitRows})
	sampled := map[string]bool{}
	for name, t := range g.Outputs {
		sampled[name] = selectsLogitRows(g, t.ID)
	}
	return &paddedExec{Executable: x, b: b, rows: rows, logitRows: logitRows, sampled: sampled}, nil
}

// selectsLogitRows reports whether op id's rows are the step's logit rows:
// it or the ops its rows come from select rows by logit_rows.
func selectsLogitRows(g *tensor.Graph, id int) bool {
	op := g.Ops[id]
	switch op.Kind {
	case tensor.OpSelectRows:
		return true
	case tensor.OpInput, tensor.OpWeight:
		return false
	case tensor.OpGetRows:
		return selectsLogitRows(g, op.Args[1].ID)
	}
	return selectsLogitRows(g, op.Args[0].ID)
}

type paddedExec struct {
	exec.Executable
	b                       *bucketed
	rows, logitRows         int
	realRows, realLogitRows int
	sampled                 map[string]bool // outputs whose rows are logit rows
}

func (x *paddedExec) Run(ctx context.Context, b *exec.Batch) error {
	x.realRows, x.realLogitRows = len(b.Tokens), len(b.LogitRows)
	if x.realRows < x.rows || x.realLogitRows < x.logitRows {
		paddedRuns++
	}
	p := &exec.Batch{Tokens: slices.Clone(b.Tokens), Positions: slices.Clone(b.Positions), RowSeq: slices.Clone(b.RowSeq),
		Tables: append(slices.Clone(b.Tables), []int32{x.b.padBlock}), LogitRows: slices.Clone(b.LogitRows)}
	for len(p.Tokens) < x.rows {
		p.Tokens, p.Positions, p.RowSeq = append(p.Tokens, 0), append(p.Positions, 0), append(p.RowSeq, int32(len(b.Tables)))
	}
	for len(p.LogitRows) < x.logitRows {
		p.LogitRows = append(p.LogitRows, 0)
	}
	return x.Executable.Run(ctx, p)
}

func (x *paddedExec) Output(name string) ([]float32, int, int, error) {
	data, _, cols, err := x.Executable.Output(name)
	if err != nil {
		return nil, 0, 0, err
	}
	real := x.realRows
	if x.sampled[name] {
		real = x.realLogitRows
	}
	return data[:real*cols], real, cols, nil
}

// The engine records steps at the backend's buckets, warms every decode
// bucket up at start-up (largest first), runs batches unpadded and reads
// the unpadded rows: generations equal the plain CPU backend's, alone and
// batched, greedy and sampled, plain and speculative. A draft loop's body
// is warmed up after the plan's segments, at the buckets of 1 to
// MaxRunning drafting sequences.
func TestBucketedBackend(t *testing.T) {
	m := modelPath(t, "stories260K.gguf")
	for _, graph := range []string{"plain", "ngram", "self"} {
		bucketedShapes, paddedRuns = nil, 0
		plain := open(t, instance.Options{Model: m, Graph: graph, MaxRunning: 3, Threads: 2})
		padded := open(t, instance.Options{Model: m, Graph: graph, MaxRunning: 3, Threads: 2, Backend: "cpu-bucketed"})
		want := [][2]int{{4, 4}, {2, 2}, {1, 1}}
		switch graph {
		case "ngram": // 3 sequences verifying up to k drafts each
			want = [][2]int{{8, 8}, {4, 4}, {2, 2}, {1, 1}}
		case "self": // then the loop's pass over 1 to 3 sequences
			want = [][2]int{{8, 8}, {4, 4}, {2, 2}, {1, 1}, {4, 4}, {2, 2}, {1, 1}}
		}
		if diff := cmp.Diff(want, bucketedShapes[:min(len(bucketedShapes), len(want))]); diff != "" {
			t.Errorf("%s: warm-up shapes (-want +got):\n%s", graph, diff)
		}
		prompts := []string{"Once upon a time", "Lily and Tom went to the park. Lily and Tom went to the", "The cat"}
		reqs := make([]engine.Request, len(prompts))
		for i, p := range prompts {
			reqs[i] = engine.Request{Prompt: plain.Tokenizer.Encode(p, true, true), MaxTokens: 24 + 5*i}
			if i == 2 {
				reqs[i].Sampling = request.Sampling{Temperature: 0.9, TopK: 20, Seed: 7}
			}
		}
		alone := make([][]int32, len(reqs))
		for i, r := range reqs {
			alone[i] = generate(t, plain, r)
			if got := generate(t, padded, r); !slices.Equal(got, alone[i]) {
				t.Errorf("%s: request %d alone: bucketed %v, cpu %v", graph, i, got, alone[i])
			}
		}
		together := make([][]int32, len(reqs))
		var wg sync.WaitGroup
		for i := range reqs {
			wg.Go(func() {
				res, err := padded.Generate(context.Background(), reqs[i], nil)
				if err != nil {
					t.Error(err)
					return
				}
				together[i] = res.IDs
			})
		}
		wg.Wait()
		if paddedRuns == 0 {
			t.Errorf("%s: no step ran padded", graph)
		}
		if diff := cmp.Diff(alone, together); diff != "" {
			t.Errorf("%s: bucketed batched generations differ from cpu solo ones (-cpu +bucketed):\n%s", graph, diff)
		}
	}
}
