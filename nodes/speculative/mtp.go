package speculative

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "speculative.mtp",
		Placement: node.Host,
		In: []node.Port{historyPort,
			{Name: "hidden", Type: node.Hidden,
				Doc: "the target's hidden states (after its final norm) of the tokens the previous steps accepted: a value carried from model.forward's hidden with hidden_rows: all ($prev.NAME)"},
			priorPort},
		Out: []node.Port{draftOut},
		Params: []node.Param{
			{Name: "k", Kind: node.Int, Default: int64(3), Min: bound(1), Max: bound(16), Doc: "most tokens drafted per sequence and step"},
		},
		Summary: "Draft tokens with the target's own MTP (NextN) head, which reads the target's hidden states.",
		Doc: "The head is the MTP block stored after the trunk's layers in a qwen35 or qwen35moe GGUF " +
			"(`blk.N.nextn.*` beside a full-attention decoder block), run on a device of its own with a paged KV " +
			"cache of its own (one attention layer). Its entry at position p reads token p and the target's hidden " +
			"state at p-1: `eh_proj([enorm(embed(x_p)) ; hnorm(h_{p-1})])` -> the block -> `shared_head_norm` -> " +
			"the target's output head. Each step it first enters the positions the target accepted since its last " +
			"step (the carried hidden rows), the last of which drafts the first token, then drafts greedily, each " +
			"pass feeding the previous draft with the head's own normalised hidden state, up to min(k, lookahead) " +
			"tokens per sequence, batched across sequences. This is llama.cpp's `--spec-type draft-mtp` with " +
			"p_min 0: the same weights give the same drafts.",
		New: func(p node.Params) (any, error) { return &MTP{K: p.Int("k")}, nil },
	})
}

// MTP is the speculative.mtp node: the target's MTP head proposes up to K
// tokens per sequence. The engine binds it (BindModel, then Attach) before
// RunHost; RunHost and ReleaseSeq run on the engine's goroutine.
type MTP struct {
	K int

	heads
	cfg   *model.Config
	block int // the MTP block's index (blk.N)
	embd  string
	head  string
	norm  string
}

// DraftTokens implements exec.Proposer.
func (m *MTP) DraftTokens() int { return m.K }

// ModelAlias implements exec.ModelBinder: the head is part of the target.
func (m *MTP) ModelAlias() string { return exec.Target }

// BindModel implements exec.ModelBinder: f must hold an MTP block
// (nextn_predict_layers >= 1) of a hybrid qwen35 model.
func (m *MTP) BindModel(f, _ *weights.File) (layers, kvDim int, err error) {
	c, err := model.ReadConfig(f)
	if err != nil {
		return 0, 0, err
	}
	if c.Hybrid == nil || c.Hybrid.NextN < 1 {
		return 0, 0, fmt.Errorf("speculative.mtp: model %s has no MTP block (a hybrid qwen35 file with nextn_predict_layers >= 1)", f.Path)
	}
	m.cfg, m.block = c, c.Layers
	name := func(s string) string { return fmt.Sprintf("blk.%d.%s", m.block, s) }
	has := func(n string) bool { _, err := f.Tensor(n); return err == nil }
	for _, t := range []string{"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "attn_norm.weight",
		"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "post_attention_norm.weight"} {
		if !has(name(t)) {
			return 0, 0, fmt.Errorf("speculative.mtp: model %s: MTP block tensor %s missing", f.Path, name(t))
		}
	}
	m.embd, m.head, m.norm = "token_embd.weight", c.OutputName, "output_norm.weight"
	if has(name("nextn.embed_tokens.weight")) {
		m.embd = name("nextn.embed_tokens.weight")
	}
	if has(name("nextn.shared_head_head.weight")) {
		m.head = name("nextn.shared_head_head.weight")
	}
	if has(name("nextn.shared_head_norm.weight")) {
		m.norm = name("nextn.shared_head_norm.weight")
	}
	return 1, c.KVDim(), nil
}

// record is the head's pass: tokens [T], positions [T] and the hidden
// states it pairs them with, "mtp_hidden" [T, E] -> "logits" [R, vocab]
// and the head's own normalised hidden state "hidden" [R, E] of the
// "logit_rows" rows.
func (m *MTP) record(b *tensor.Builder, tokens, positions tensor.Tensor) (map[string]tensor.Tensor, error) {
	c := m.cfg
	w := func(s string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s", m.block, s)) }
	h := b.InputF32("mtp_hidden", tokens.Rows(), c.Embed)
	e := b.GetRows(b.Weight(m.embd), tokens)
	x := b.Concat(b.RMSNorm(e, w("nextn.enorm.weight"), c.Embed, c.NormEps), b.RMSNorm(h, w("nextn.hnorm.weight"), c.Embed, c.NormEps))
	x = b.MatMul(x, w("nextn.eh_proj.weight")) // [T, E]
	x = model.RecordAttentionBlock(b, c, x, positions, m.block, 0)
	out := b.RMSNorm(b.SelectRows(x, b.Input("logit_rows", -1)), b.Weight(m.norm), c.Embed, c.NormEps) // [R, E]
	return map[string]tensor.Tensor{"logits": b.MatMul(out, b.Weight(m.head)), "hidden": out}, b.Err()
}

// RunHost implements exec.HostNode: history, hidden (and prior) -> draft.
// Every sequence first enters the positions its carried rows cover (the
// head's entry p reads h_{p-1}, zero before position 0), also when it does
// not draft this step, so that its cache keeps up with the target; a
// drafting sequence's last entry is its last token, whose logits give the
// first draft.
func (m *MTP) RunHost(hc *exec.HostContext, in map[string]any) (map[string]any, error) {
	history, prior, err := proposerInputs("speculative.mtp", hc, in)
	if err != nil {
		return nil, err
	}
	hidden, ok := in["hidden"].([]exec.Carried)
	if !ok || len(hidden) != len(hc.Rows) {
		return nil, fmt.Errorf("speculative.mtp: hidden input is %T for %d sequences", in["hidden"], len(hc.Rows))
	}
	if m.cfg == nil || m.dev == nil {
		return nil, errors.New("speculative.mtp: needs a bound model and its device")
	}
	out := make(exec.Drafts, len(hc.Rows))
	need := keepPrior(hc, prior, out)
	E := m.cfg.Embed
	var rows []chainRow
	b := &exec.Batch{Floats: map[string][]float32{}}
	var hs []float32
	for i, row := range hc.Rows {
		c, h := hidden[i], history[i]
		s := m.seq(row.ID)
		if c.Rows() > 0 && c.Width != E {
			return nil, fmt.Errorf("speculative.mtp: sequence %d: hidden rows of %d floats, the head takes %d", row.ID, c.Width, E)
		}
		start, end := s.next, s.next // the entries this pass computes: [start, end)
		if c.Rows() > 0 {
			start = c.Pos + 1 // entry p reads h_{p-1}: the rows enter from the position after the first
			if c.Pos == 0 {
				start, s.lost = 0, false
			}
			if start > s.next {
				s.lost = true // positions the head never saw
			}
			end = min(c.Pos+c.Rows(), len(h)-1) + 1
		}
		want := min(m.K, row.Lookahead)
		if !need[i] || end != len(h) { // the last token's entry drafts
			want = 0
		}
		if start >= end || s.lost {
			continue
		}
		if !m.grow(hc, s, end+max(0, want-1)) {
			continue
		}
		b.Tables = append(b.Tables, s.kv.Blocks)
		for p := start; p < end; p++ {
			b.Tokens = append(b.Tokens, h[p])
			b.Positions = append(b.Positions, int32(p))
			b.RowSeq = append(b.RowSeq, int32(len(b.Tables)-1))
			if p == 0 {
				hs = append(hs, make([]float32, E)...)
			} else {
				hs = append(hs, c.Row(p-1-c.Pos)...)
			}
		}
		b.LogitRows = append(b.LogitRows, int32(len(b.Tokens)-1))
		s.next = end
		rows = append(rows, chainRow{row: i, want: want, pos: end, seq: s})
	}
	b.Floats["mtp_hidden"] = hs
	err = chainDrafts(out, rows, b, func(b *exec.Batch, _ bool) (exec.Logits, exec.Logits, error) {
		res, err := m.dev.Pass(hc.Ctx, "speculative.mtp", m.record, b, "logits", "hidden")
		return res["logits"], res["hidden"], err
	}, func(next *exec.Batch, _ int32, own []float32) error {
		next.Floats["mtp_hidden"] = append(next.Floats["mtp_hidden"], own...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("speculative.mtp: %w", err)
	}
	return map[string]any{"draft": out}, nil
}
