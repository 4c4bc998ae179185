// Package node defines what a graph node is: its Spec (typed ports and params,
// declared once), the Registry the nodes/* packages register their specs into
// from init(), and the Policy that policy nodes fold into a plan.
//
// One declaration drives everything about a node: the compiler validates YAML
// graphs against it, `ninfer graph docs` renders it (Docs), and the constructor of
// its placement (Spec.NewDevice, NewHost, NewPolicy) builds the instance a
// plan step runs.
package node

import "fmt"

// Placement says where a node's work happens in an engine step.
type Placement uint8

const (
	// Device nodes are recorded into the device op list each step (model
	// forward) and lowered by a backend.
	Device Placement = iota + 1
	// Host nodes run as Go code between device segments (sampling, lookup).
	Host
	// Policy nodes have no per-step work: the compiler folds them into the
	// plan's Policy at compile time.
	Policy
)

// String returns "device", "host" or "policy", and "placement(N)" for a value
// outside the enumeration.
func (p Placement) String() string {
	switch p {
	case Device:
		return "device"
	case Host:
		return "host"
	case Policy:
		return "policy"
	}
	return fmt.Sprintf("placement(%d)", uint8(p))
}

// PortType is the type of the values that flow through a port. An output may
// only feed an input of the same type. A type also says how its values are
// laid out over a step: one value per row (Tokens, Positions, Logits,
// Hidden), one list per sampled sequence (Draft, DraftProbs), or a
// sequence's whole history (History), so a per-row output cannot feed an
// input that wants histories.
type PortType string

const (
	// Tokens are token ids, one per row.
	Tokens PortType = "tokens"
	// History is each sampled sequence's tokens so far (prompt and
	// generated), one list per sequence: what a proposer looks up.
	History PortType = "history"
	// Positions are the positions of tokens in their sequence.
	Positions PortType = "positions"
	// Logits are per-token scores over the vocabulary.
	Logits PortType = "logits"
	// Hidden are hidden states of the model.
	Hidden PortType = "hidden"
	// Draft are proposed (speculative) tokens awaiting verification.
	Draft PortType = "draft"
	// DraftProbs are the distributions drafts were drawn from.
	DraftProbs PortType = "draft_probs"
	// Images mark the rows of a step that are image tokens, one value per
	// row: the engine binds their embeddings (the vision tower's output
	// rows) and M-RoPE positions beside it (BindImageEmbeddings,
	// BindMRoPE).
	Images PortType = "images"
	// ImageEmbeddings are the input embeddings of a step's image rows, one
	// row per step row [T, E] (zero on text rows): vision.encode's output,
	// the vision tower's rows that model.forward puts in place of the
	// image placeholder tokens' embeddings (mix_rows on BindImages).
	ImageEmbeddings PortType = "image_embeddings"
)

// Step bindings: the names under which a step binds its per-row values,
// declared once. A graph reads them as $in.NAME (and a loop body as
// $loop.NAME); a device graph declares tokens, positions and logit_rows as
// its inputs (tensor.Builder.Input), bound from exec.Batch.
const (
	// BindTokens is the step's token ids, one per row [T].
	BindTokens = "tokens"
	// BindPositions is each row's position in its sequence [T].
	BindPositions = "positions"
	// BindHistory is each sampled sequence's tokens so far (host values).
	BindHistory = "history"
	// BindHidden is a loop pass's hidden-state rows ($loop.hidden), and the
	// hidden output of a forward.
	BindHidden = "hidden"
	// BindLogitRows is the device input selecting the rows whose logits a
	// step computes [R]: the last row of each sampled sequence, and its
	// drafts' rows.
	BindLogitRows = "logit_rows"
	// BindImages is the device input marking each row that is an image
	// token [T] (1) or text (0): what $in.images carries.
	BindImages = "images"
	// BindImageEmbeddings is the f32 input of the image rows' embeddings
	// [T, E] (zero on text rows), read beside BindImages.
	BindImageEmbeddings = "image_embeddings"
)

// FedToken is the token id a pass feeds for history entry t: t itself, or
// image for an image row, whose history entry is the image's key (a
// negative id, no token). The target's forward replaces that row's
// embedding with the tower's (mix_rows), so any id does there; a drafter
// (model.mtp, a draft model, EAGLE-3, DFlash) embeds image, the id the
// prompt holds at the image rows (<|image_pad|>), beside the target's
// hidden state of the row where it reads one.
func FedToken(t, image int32) int32 {
	if t < 0 {
		return image
	}
	return t
}

// BindMRoPE are the device inputs of each row's M-RoPE position
// components t, h and w [T] each, read beside BindImages: a text row's
// three are its position in the model's numbering (which resumes after an
// image at its start plus the larger side of its token grid), an image
// token's are its image's start, that plus its row, that plus its column.
var BindMRoPE = [3]string{"mrope_t", "mrope_h", "mrope_w"}

// Target is the alias of the model a plan's model.forward runs: the model
// whose tokens the engine commits. Other aliases ("draft") name further
// models that nodes run on devices of their own (Info.ModelAlias).
const Target = "target"

// Port is a named, typed input or output of a node.
type Port struct {
	// Name is the port's name as written in YAML; it matches ^[a-z][a-z0-9_]*$.
	Name string
	// Type is what flows through the port; it must not be empty.
	Type PortType
	// Doc is a one-line description for the generated reference.
	Doc string
	// Optional marks an input that a graph may leave unwired. It has no
	// meaning on outputs.
	Optional bool
}
