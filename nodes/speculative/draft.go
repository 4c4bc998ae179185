package speculative

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/nodes/sample"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.draft",
		Placement: node.Host,
		In:        []node.Port{historyPort, priorPort},
		Out: []node.Port{draftOut,
			{Name: "probs", Type: node.DraftProbs, Doc: "the distribution each draft was drawn from (with sample: true; greedy drafts are point masses): wire it to verify's draft_probs"}},
		Params: []node.Param{kParam,
			{Name: "model", Kind: node.String, Default: "draft",
				Doc: "alias of the draft model (`--model ALIAS=FILE`); `target` drafts with the target model itself"},
			{Name: "sample", Kind: node.Bool, Default: false,
				Doc: "draw the drafts of a sampling request from the draft model's distribution under the request's temperature, top_k, top_p and min_p (output probs) instead of its argmax; greedy requests always draft greedily"},
			{Name: "temperature", Kind: node.Float, Default: 0.0, Min: bound(0), Max: bound(100),
				Doc: "with sample: the drafts' temperature instead of the request's (0 = the request's)"},
		},
		Summary: "Draft tokens with a second, smaller model of the same vocabulary, run autoregressively with its own KV cache.",
		Doc: "The draft model (any llama or qwen3 GGUF whose vocabulary is the target's: same size and the same " +
			"token texts, checked at load) runs on a backend of its own with a paged KV cache of its own, as many " +
			"tokens as the target's in the same block size and format. Each step it catches up on the sequence's " +
			"tokens it has not seen (the whole history the first time, then the target's accepted tokens), then " +
			"drafts greedily, one pass per draft token, batched across sequences. Its cache is rolled back to the " +
			"longest prefix of its tokens that the history still holds (rejected drafts drop out), and its blocks " +
			"are freed when the request ends or is aborted.",
		New: func(p node.Params) (any, error) {
			d := &Draft{K: p.Int("k"), Alias: p.String("model"), Sample: p.Bool("sample"), Temperature: float32(p.Float("temperature"))}
			if err := checkAlias(d.Alias); err != nil {
				return nil, err
			}
			return d, nil
		},
	})
}

var aliasPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

// checkAlias reports, as an error, a model alias param that aliasPattern
// does not match.
func checkAlias(alias string) error {
	if !aliasPattern.MatchString(alias) {
		return fmt.Errorf("model alias %q: want %s", alias, aliasPattern)
	}
	return nil
}

// Draft is the speculative.draft node: a draft model with its own KV cache
// proposes up to K tokens per sequence. The engine binds it (BindModel,
// then Attach) before RunHost; RunHost and ReleaseSeq run on the engine's
// goroutine.
type Draft struct {
	K     int
	Alias string // the model alias (exec.Models key) the node runs
	// Sample draws a sampling request's drafts from the draft model's
	// distribution (reported as probs) instead of taking its argmax, at
	// Temperature when it is not 0.
	Sample      bool
	Temperature float32

	cfg  *model.Config
	dev  exec.ModelDevice
	name string
	seqs map[uint64]*draftSeq // by exec.SeqState.ID
	step uint64               // RunHost calls that drafted, for eviction order
}

// draftSeq is one sequence's state in the draft model's cache.
type draftSeq struct {
	kv     kv.Seq
	cached []int32 // the tokens whose K/V the cache holds, position order
	used   uint64  // the last step the sequence drafted in
}

// DraftTokens implements exec.Proposer.
func (d *Draft) DraftTokens() int { return d.K }

// ModelAlias implements exec.ModelBinder.
func (d *Draft) ModelAlias() string { return d.Alias }

// BindModel implements exec.ModelBinder: f must be a supported
// architecture with target's vocabulary (SameVocabulary).
func (d *Draft) BindModel(f, target *weights.File) (layers, kvDim int, err error) {
	c, err := model.ReadConfig(f)
	if err != nil {
		return 0, 0, err
	}
	if err := SameVocabulary(target, f); err != nil {
		return 0, 0, err
	}
	d.cfg, d.name = c, "speculative.draft/"+d.Alias
	d.seqs = map[uint64]*draftSeq{}
	return c.Layers, c.KVDim(), nil
}

// Attach implements exec.ModelBinder.
func (d *Draft) Attach(dev exec.ModelDevice) { d.dev = dev }

// ReleaseSeq implements exec.SeqReleaser: the sequence's draft KV blocks
// are freed.
func (d *Draft) ReleaseSeq(id uint64) {
	if s, ok := d.seqs[id]; ok {
		d.dev.KV().Release(&s.kv)
		delete(d.seqs, id)
	}
}

// SameVocabulary reports, as an error naming the first difference, whether
// draft cannot draft for target: their token embeddings (the logits'
// width) must have as many rows and their tokenizer.ggml.tokens lists must
// be the same texts in the same order.
func SameVocabulary(target, draft *weights.File) error {
	rows := func(f *weights.File) (int, error) {
		t, err := f.Tensor("token_embd.weight")
		if err != nil {
			return 0, err
		}
		return t.Rows(), nil
	}
	tn, err := rows(target)
	if err != nil {
		return err
	}
	dn, err := rows(draft)
	if err != nil {
		return err
	}
	mismatch := func(format string, a ...any) error {
		return fmt.Errorf("vocabulary mismatch: draft model %s and target model %s: %s", draft.Path, target.Path, fmt.Sprintf(format, a...))
	}
	if tn != dn {
		return mismatch("%d token embeddings in the draft, %d in the target", dn, tn)
	}
	tt, err := target.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("target model %s: %w", target.Path, err)
	}
	dt, err := draft.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return fmt.Errorf("draft model %s: %w", draft.Path, err)
	}
	if len(tt) != len(dt) {
		return mismatch("%d tokens in the draft's tokenizer, %d in the target's", len(dt), len(tt))
	}
	for i := range tt {
		if tt[i] != dt[i] {
			return mismatch("token %d is %q in the draft, %q in the target", i, dt[i], tt[i])
		}
	}
	return nil
}

func (d *Draft) record(b *tensor.Builder, tokens, positions tensor.Tensor) (tensor.Tensor, error) {
	return model.RecordLayers(b, d.cfg, tokens, positions, d.cfg.Layers)
}

// RunHost implements exec.HostNode: history (and prior) -> draft. The
// first pass feeds each drafting sequence's tokens its cache lacks, each
// later pass the previous draft token, until every sequence has
// min(K, lookahead) drafts.
func (d *Draft) RunHost(hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.draft", hc, in)
	if err != nil {
		return nil, err
	}
	out := make(exec.Drafts, len(hc.Rows))
	probs := make(exec.DraftProbs, len(hc.Rows))
	var active []int
	for i, need := range keepPrior(hc, prior, out) {
		if need {
			active = append(active, i)
		}
	}
	if len(active) == 0 {
		return map[string]any{"draft": out, "probs": probs}, nil
	}
	if d.cfg == nil || d.dev == nil {
		return nil, errors.New("speculative.draft: needs a bound model and its device")
	}
	d.step++
	kvb := d.dev.KV()
	for _, i := range active { // mark first, so that growing one never evicts another
		d.seq(hc.Rows[i].ID).used = d.step
	}
	type drafting struct {
		row  int
		seq  *draftSeq
		want int
	}
	var rows []drafting
	b := &exec.Batch{}
	for _, i := range active {
		h, s := history[i], d.seq(hc.Rows[i].ID)
		// Keep the longest prefix of the cached tokens the history still
		// holds, short of its last token, which every first pass feeds.
		p := 0
		for p < min(len(s.cached), len(h)-1) && s.cached[p] == h[p] {
			p++
		}
		kvb.Truncate(&s.kv, p)
		s.cached = s.cached[:p]
		want := min(d.K, hc.Rows[i].Lookahead)
		// The cache holds the history and every draft but the last.
		if !d.grow(s, len(h)+want-1) {
			continue
		}
		b.Tables = append(b.Tables, s.kv.Blocks)
		for pos := p; pos < len(h); pos++ {
			b.Tokens = append(b.Tokens, h[pos])
			b.Positions = append(b.Positions, int32(pos))
			b.RowSeq = append(b.RowSeq, int32(len(b.Tables)-1))
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		s.cached = append(s.cached, h[p:]...)
		rows = append(rows, drafting{i, s, want})
	}
	for len(rows) > 0 {
		logits, err := d.dev.Forward(hc.Ctx, d.name, d.record, b)
		if err != nil {
			return nil, fmt.Errorf("speculative.draft: %w", err)
		}
		next := &exec.Batch{}
		var still []drafting
		for j, r := range rows {
			t := sample.Argmax(logits.Row(j))
			if row := hc.Rows[r.row]; d.Sample && !row.Sampling.Greedy() && row.RNG != nil {
				sp := row.Sampling
				if d.Temperature > 0 {
					sp.Temperature = d.Temperature
				}
				ids, ps := sample.Dist(logits.Row(j), sp)
				t = draw(ids, ps, row.RNG.Float64())
				probs[r.row] = append(probs[r.row], exec.DraftDist{IDs: ids, Probs: ps})
			}
			out[r.row] = append(out[r.row], t)
			if len(out[r.row]) == r.want {
				continue
			}
			next.Tables = append(next.Tables, r.seq.kv.Blocks)
			next.Tokens = append(next.Tokens, t)
			next.Positions = append(next.Positions, int32(len(r.seq.cached)))
			next.RowSeq = append(next.RowSeq, int32(len(still)))
			next.LogitRows = append(next.LogitRows, int32(len(still)))
			r.seq.cached = append(r.seq.cached, t)
			still = append(still, r)
		}
		rows, b = still, next
	}
	return map[string]any{"draft": out, "probs": probs}, nil
}

// draw picks from ids/probs with r uniform in [0, 1).
func draw(ids []int32, probs []float64, r float64) int32 {
	var cum float64
	for i, id := range ids {
		if cum += probs[i]; r < cum {
			return id
		}
	}
	return ids[len(ids)-1]
}

// seq returns the state of sequence id, creating it empty.
func (d *Draft) seq(id uint64) *draftSeq {
	s, ok := d.seqs[id]
	if !ok {
		s = &draftSeq{}
		d.seqs[id] = s
	}
	return s
}

// grow reserves n tokens of cache for s, first evicting the sequences that
// did not draft this step, least recently drafting first, when the cache
// is full (a sequence the target preempted may still hold blocks). It
// reports whether s has the room.
func (d *Draft) grow(s *draftSeq, n int) bool {
	kvb := d.dev.KV()
	if kvb.Grow(&s.kv, n) == nil {
		return true
	}
	var idle []uint64
	for id, o := range d.seqs {
		if o.used != d.step {
			idle = append(idle, id)
		}
	}
	slices.SortFunc(idle, func(a, b uint64) int { return cmp.Compare(d.seqs[a].used, d.seqs[b].used) })
	for _, id := range idle {
		d.ReleaseSeq(id)
		if kvb.Grow(&s.kv, n) == nil {
			return true
		}
	}
	return false
}
