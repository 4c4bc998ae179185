package exec

import (
	"fmt"
	"slices"
)

// Drafts are the speculative tokens proposed in one step, one slice per
// sampled sequence (HostContext.Rows order). A sequence's slice may be empty
// (nothing proposed) and never holds more than its SeqState.Lookahead tokens.
// It is the value of ports of type draft.
type Drafts [][]int32

// Total is the number of drafted tokens across sequences.
func (d Drafts) Total() int {
	n := 0
	for _, s := range d {
		n += len(s)
	}
	return n
}

// Spans returns, for each sequence, the first logit row of its verification
// and how many rows it has (1 + its drafts), in the order WithDrafts lays
// them out.
func (d Drafts) Spans() (first, n []int) {
	first, n = make([]int, len(d)), make([]int, len(d))
	at := 0
	for i, s := range d {
		first[i], n[i] = at, 1+len(s)
		at += n[i]
	}
	return first, n
}

// WithDrafts returns the feed that verifies d: b's rows with each sampled
// sequence's drafts inserted right after its logit row (its last known
// token), at the following positions, and logits asked for that row and
// every draft row. b must have one logit row per sequence of d, in order;
// b is not modified. With no drafts it returns b itself.
func (b *Batch) WithDrafts(d Drafts) (*Batch, error) {
	if len(d) != len(b.LogitRows) {
		return nil, fmt.Errorf("exec: %d draft lists for %d logit rows", len(d), len(b.LogitRows))
	}
	if d.Total() == 0 {
		return b, nil
	}
	extra := d.Total()
	out := &Batch{Tables: b.Tables, StateSlots: b.StateSlots, StateSnapshots: b.StateSnapshots, StateFrom: b.StateFrom, StateRound: b.StateRound,
		Tokens:    make([]int32, 0, len(b.Tokens)+extra),
		Positions: make([]int32, 0, len(b.Tokens)+extra),
		RowSeq:    make([]int32, 0, len(b.Tokens)+extra),
		LogitRows: make([]int32, 0, len(b.LogitRows)+extra)}
	next := 0 // next logit row of b
	for r := range b.Tokens {
		out.Tokens = append(out.Tokens, b.Tokens[r])
		out.Positions = append(out.Positions, b.Positions[r])
		out.RowSeq = append(out.RowSeq, b.RowSeq[r])
		if next >= len(b.LogitRows) || int(b.LogitRows[next]) != r {
			continue
		}
		out.LogitRows = append(out.LogitRows, int32(len(out.Tokens)-1))
		for j, t := range d[next] {
			out.Tokens = append(out.Tokens, t)
			out.Positions = append(out.Positions, b.Positions[r]+1+int32(j))
			out.RowSeq = append(out.RowSeq, b.RowSeq[r])
			out.LogitRows = append(out.LogitRows, int32(len(out.Tokens)-1))
		}
		next++
	}
	if next != len(b.LogitRows) {
		return nil, fmt.Errorf("exec: logit rows %v are not ascending rows of the batch", b.LogitRows)
	}
	return out, nil
}

// SeqTable returns the KV block table of the sequence whose logit row is the
// i-th of b.
func (b *Batch) SeqTable(i int) []int32 { return b.Tables[b.RowSeq[b.LogitRows[i]]] }

// Proposer is implemented by host nodes that draft tokens (port type
// draft). The engine reserves KV and step budget for up to DraftTokens
// drafts per decoding sequence before the plan runs, and tells each
// sequence's share in SeqState.Lookahead.
type Proposer interface {
	DraftTokens() int
}

// Verifier is implemented by the host node that accepts drafts. MaxBatch
// is the most running sequences at which the engine still speculates; 0
// means no limit.
type Verifier interface {
	MaxBatch() int
}

// AdaptiveVerifier is a Verifier that turns speculation off for a
// sequence whose drafts keep failing: below MinAcceptance (an average of
// its recent rounds' accepted/drafted), the sequence decodes without
// drafts for a number of steps that doubles while its probes keep
// failing; 0 means always draft.
type AdaptiveVerifier interface {
	Verifier
	MinAcceptance() float64
}

// DraftDist is the distribution a proposer drew one draft token from: ids
// and their probabilities, summing to 1; other tokens have probability 0.
// The zero value is a point mass on the drafted token (a greedy draft).
type DraftDist struct {
	IDs   []int32
	Probs []float64
}

// Prob is the probability of id, or, for the zero DraftDist, 1 (the
// drafted token's).
func (d DraftDist) Prob(id int32) float64 {
	if len(d.IDs) == 0 {
		return 1
	}
	for i, x := range d.IDs {
		if x == id {
			return d.Probs[i]
		}
	}
	return 0
}

// DraftProbs are the proposal distributions of a step's drafts: per
// sampled sequence (HostContext.Rows order), one DraftDist per draft token
// of the same proposer's Drafts; a sequence's slice is nil when its drafts
// are greedy.
type DraftProbs [][]DraftDist

// Carried is one sequence's value of a carried port ($prev.NAME, a plan's
// carry:): the device rows of the tokens at positions Pos, Pos+1, ... that
// the sequence's steps since its last sampled step accepted (a prefill
// chunk's every row; a verify step's last token and accepted drafts). A
// host node gets one per HostContext row; a sequence whose KV was
// preempted starts again from its recomputed rows.
type Carried struct {
	Pos   int       // position of the first row
	Width int       // floats per row
	Data  []float32 // [rows, Width]
}

// Rows is the number of carried rows.
func (c Carried) Rows() int {
	if c.Width == 0 {
		return 0
	}
	return len(c.Data) / c.Width
}

// Row returns row i, [Width].
func (c Carried) Row(i int) []float32 { return c.Data[i*c.Width : (i+1)*c.Width] }

// Append returns c followed by rows of o when o starts where c ends, or
// o alone otherwise (a sequence recomputed from an earlier position).
func (c Carried) Append(o Carried) Carried {
	if c.Rows() == 0 || o.Width != c.Width || o.Pos != c.Pos+c.Rows() {
		return Carried{Pos: o.Pos, Width: o.Width, Data: slices.Clone(o.Data)}
	}
	c.Data = append(c.Data, o.Data...)
	return c
}

// RowWidther is implemented by device nodes whose float outputs have rows
// of a width known once the node is bound (model.forward's hidden: E;
// taps: one E per tap): the width of a value carried from them.
type RowWidther interface {
	RowWidth(port string) int
}

// HiddenEntry is implemented by the device nodes of a draft loop that
// enters carried hidden states whose entries sit at their hidden state's
// position: entry p pairs the hidden state of p with the token at p+1
// (EAGLE-3). Without it an entry sits at its token's position: token p
// with the hidden state of p-1 (an MTP head).
type HiddenEntry interface {
	EntersAtHidden() bool
}

// BlockDrafter is implemented by the device node of a block loop's body
// (plan.Loop.Block): a drafter that fills a block of mask tokens in one
// non-causal pass (DFlash). MaskToken is the token id of the mask rows,
// known once the node is bound; MaxBlock the most mask tokens a block
// holds. In a pass that enters carried hidden states the node only writes
// its cache; in the block pass it reads no $loop.hidden (its input is
// absent).
type BlockDrafter interface {
	MaskToken() int32
	MaxBlock() int
}
