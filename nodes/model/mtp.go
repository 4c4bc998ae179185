package model

import (
	"errors"
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	node.Register(node.Spec{
		Op:        "model.mtp",
		Placement: node.Device,
		In: []node.Port{
			{Name: "tokens", Type: node.Tokens, Doc: "token ids of the pass, one per row [T]"},
			{Name: "positions", Type: node.Positions, Doc: "position of each row in its sequence [T]"},
			{Name: "hidden", Type: node.Hidden, Doc: "the hidden state each row pairs with its token [T, E]: the target's (after its final norm) at the position before, or the head's own from the pass before ($loop.hidden)"},
		},
		Out: []node.Port{
			{Name: "logits", Type: node.Logits, Doc: "next-token logits of the rows that need a token [R, vocab]"},
			{Name: "hidden", Type: node.Hidden, Doc: "the head's own hidden state of those rows, after its final norm [R, E]: what the next pass pairs with the token it drafts"},
		},
		Summary: "Run the target's MTP (NextN) head: one decoder block over a token and the hidden state before it.",
		Doc: "The head is the MTP block stored after the trunk's layers in a qwen35 or qwen35moe GGUF " +
			"(`blk.N.nextn.*` beside a full-attention decoder block, N the trunk's layer count). A row at position p " +
			"reads token p and a hidden state h: `eh_proj([enorm(embed(x_p)) ; hnorm(h)])` -> the block -> " +
			"`shared_head_norm` -> the target's output head (the head's own embeddings and head when the file has them). " +
			"Its attention reads and writes a KV layer of its own in the target's cache, after the trunk's, on the " +
			"sequence's block table; it leaves the target's recurrent state alone. graphs/mtp.yaml runs it in a draft " +
			"loop: llama.cpp's `--spec-type draft-mtp`, whose drafts it reproduces.",
		NewDevice: func(node.Params) (node.DeviceNode, error) { return &MTP{}, nil },
	})
}

// MTP is the model.mtp node. Bind must be called before Record.
type MTP struct {
	cfg              *Config
	block            int // the MTP block's index (blk.N)
	embd, head, norm string
}

// Bind implements exec.Binder: f must hold an MTP block
// (nextn_predict_layers >= 1) of a hybrid qwen35 model.
func (m *MTP) Bind(f *weights.File) error {
	c, err := ReadConfig(f)
	if err != nil {
		return err
	}
	if c.Hybrid == nil || c.Hybrid.NextN < 1 {
		return fmt.Errorf("model.mtp: model %s has no MTP block (a hybrid qwen35 file with nextn_predict_layers >= 1)", f.Path)
	}
	m.cfg, m.block = c, c.Layers
	name := func(s string) string { return fmt.Sprintf("blk.%d.%s", m.block, s) }
	has := func(n string) bool { _, err := f.Tensor(n); return err == nil }
	for _, t := range []string{"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight", "attn_norm.weight",
		"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "post_attention_norm.weight"} {
		if !has(name(t)) {
			return fmt.Errorf("model.mtp: model %s: MTP block tensor %s missing", f.Path, name(t))
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
	return nil
}

// KVShape implements exec.KVShaper: the trunk's attention layers and the
// head's one after them.
func (m *MTP) KVShape() (layers, kvDim int) { return m.KVLayer() + 1, m.cfg.KVDim() }

// RowWidth implements exec.RowWidther: hidden rows are E floats.
func (m *MTP) RowWidth(port string) int {
	if port == "hidden" {
		return m.cfg.Embed
	}
	return 0
}

// KVLayer is the KV layer the head's attention owns (after Bind).
func (m *MTP) KVLayer() int { return m.cfg.AttentionLayers() }

// Record implements node.DeviceNode: tokens [T], positions [T], hidden
// [T, E] -> logits [R, vocab] and hidden [R, E] of the step's
// "logit_rows" rows.
func (m *MTP) Record(b *tensor.Builder, in map[string]tensor.Tensor) (map[string]tensor.Tensor, error) {
	if m.cfg == nil {
		return nil, errors.New("model.mtp: no model bound")
	}
	c := m.cfg
	w := func(s string) tensor.Tensor { return b.Weight(fmt.Sprintf("blk.%d.%s", m.block, s)) }
	e := b.GetRows(b.Weight(m.embd), in["tokens"])
	x := b.Concat(b.RMSNorm(e, w("nextn.enorm.weight"), c.Embed, c.NormEps), b.RMSNorm(in["hidden"], w("nextn.hnorm.weight"), c.Embed, c.NormEps))
	x = b.MatMul(x, w("nextn.eh_proj.weight")) // [T, E]
	x = RecordAttentionBlock(b, c, x, in["positions"], m.block, m.KVLayer())
	out := b.RMSNorm(b.SelectRows(x, b.Input(node.BindLogitRows, -1)), b.Weight(m.norm), c.Embed, c.NormEps) // [R, E]
	return map[string]tensor.Tensor{"logits": b.MatMul(out, b.Weight(m.head)), "hidden": out}, b.Err()
}

var _ node.DeviceNode = (*MTP)(nil)
