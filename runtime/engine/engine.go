// Package engine runs the serving loop: one goroutine owns the scheduler,
// the KV block manager and the backend, and repeats schedule -> execute the
// compiled plan -> commit tokens -> emit events.
package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/executor"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/sched"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Config configures an Engine.
type Config struct {
	Plan    *plan.Plan
	Model   *weights.File
	Backend exec.Backend // already constructed; the engine loads and reserves it
	// KVTokens is the KV cache capacity in tokens (rounded up to whole
	// blocks); 0 means min(context, DefaultKVTokensPerSeq) times MaxRunning.
	KVTokens int
	// KVMemory, used when KVTokens is 0, sizes the KV cache to the most
	// whole blocks whose K and V pages (in the plan's KV format, scales
	// included: page.CapacityTokens) fit in KVMemory bytes.
	KVMemory int64
	// MaxRunning bounds the sequences that hold KV at once; 0 means 8.
	MaxRunning int
	// StepTokens bounds the tokens one step computes across sequences
	// (sched.Config.StepTokens): decode rows and their drafts first, then
	// prefill chunks. 0 means the plan's prefill chunk plus a decode row
	// (and its drafts) for each of MaxRunning sequences. Smaller values
	// shorten the steps decode rows share with prefill (inter-token
	// latency) at the cost of slower prefill (time to first token); it may
	// not be less than MaxRunning*(1+draft), or decoding sequences would
	// skip steps.
	StepTokens int
	// Context bounds prompt + generated tokens of one request; 0 means the model's.
	Context int
	// Observer, if not nil, is told about every step (traces, metrics).
	Observer StepObserver
	// Models are further models by alias (exec.Models; Model is the
	// target), for the plan's nodes that run a model of their own
	// (exec.ModelBinder). Each alias such a node names gets a backend of
	// its own from NewBackend, with a KV cache of the target's capacity in
	// tokens, block size and format (memory on top of KVMemory, which sizes
	// the target's cache). Unused aliases are ignored.
	Models exec.Models
	// NewBackend constructs the backend of each model in Models that a
	// node runs; required when one does.
	NewBackend func() (exec.Backend, error)
	// Tower is the vision tower file (an mmproj) of a plan that encodes
	// images (vision.encode); it runs on a backend of its own from
	// NewBackend (EncodeImage).
	Tower *weights.File
	// NoPrefixCache turns automatic prefix caching off: by default full KV
	// blocks are shared between sequences whose tokens begin the same way
	// (kv.Manager), and a prompt's cached blocks skip prefill.
	NoPrefixCache bool
	// CheckpointMemory is the memory of a hybrid model's recurrent state
	// checkpoints, its prefix cache (sched.StateGroup): 0 means
	// DefaultCheckpointMemory, negative none (the prefix cache is then off
	// for the model). It is reserved beside the KV cache (not part of
	// KVMemory), at most DefaultCheckpointsPerSeq checkpoints per running
	// sequence.
	CheckpointMemory int64
	// CheckpointEvery is the interval, in KV blocks, of a long prompt's
	// periodic checkpoints, counted from the last message end before them
	// (Request.MessageEnds; sched.StateGroup.Target): 0 means DefaultCheckpointEvery, negative none
	// (checkpoints are then taken at the prompt's last block boundary and
	// at the last block a sequence generates only).
	CheckpointEvery int
	// CheckpointDType is how the checkpoints are stored: "" (the state's
	// own storage) or "f32", or "bf16": half the memory each, the f32
	// running state rounded once where a checkpoint is taken (and the
	// sequence that took it continues from the rounded state), widened back
	// when a sequence adopts it. Not with a speculative graph, whose
	// snapshot slots change places with checkpoints.
	CheckpointDType string
}

// Checkpoint defaults (Config.CheckpointMemory, CheckpointEvery).
const (
	DefaultCheckpointMemory  = 512 << 20
	DefaultCheckpointsPerSeq = 16
	DefaultCheckpointEvery   = 32
)

// Request is one generation request.
type Request struct {
	Prompt    []int32 // token ids, at least one
	MaxTokens int     // tokens to generate, >= 1
	Sampling  request.Sampling
	// Stop reports whether a generated token ends the request (EOS, a
	// completed stop sequence): the token is the last one the request
	// yields and counts, and no step computes past it. It is called from
	// the engine's loop exactly once per generated token, in order (so it
	// may keep state, e.g. detokenize), and must be quick. nil never stops.
	Stop func(id int32) bool
	// TopLogits asks for the n largest raw logits of each generated
	// position (from the logits the token was chosen from), in Event.Top.
	TopLogits int
	// Logprobs asks for Event.Logprob and Event.LogZ on every token event.
	Logprobs bool
	// Logits asks for each generated position's whole raw logit row (the
	// logits the token was chosen from, before penalties and sampling
	// filters) in Event.Logits: what a caller comparing two runs' logits
	// needs (ninfer kv-eval).
	Logits bool
	// Tag is carried, untouched, into StepInfo.Tags of the steps that
	// advance this request (e.g. its trace span context).
	Tag any
	// Force, when set, teacher-forces the request: its first len(Force)
	// generated tokens are Force's, in order, whatever the sampler chose
	// (each Event.Token is the forced token; ask TopLogits for the model's
	// own choice at that position); sampling resumes after them. Plans that
	// speculate cannot force tokens.
	Force []int32
	// Embed asks for the prompt's embedding instead of generated tokens:
	// the final norm's hidden state at the last prompt token (last-token
	// pooling, as vLLM pools causal models), L2-normalised, in the final
	// Event.Embedding. The request generates nothing (MaxTokens >= 1 still
	// reserves room for the step that computes it).
	Embed bool
	// Images are the prompt's images, in prompt order, each taking rows
	// of Prompt (any token ids there: their embeddings are the images').
	// Only a plan that reads $in.images takes them.
	Images []Image
	// MessageEnds are token offsets into Prompt, ascending, where chat
	// messages end (tok.Tokenizer.TokenOffsets): a hybrid model
	// checkpoints its recurrent state at the block boundary at or before
	// each, so a later prompt that shares the messages (a system prompt, a
	// conversation's history) resumes there.
	MessageEnds []int
}

// TokenLogit is a token id and its raw logit.
type TokenLogit struct {
	ID    int32
	Logit float32
}

// Finish reasons, as in the OpenAI API.
const (
	FinishStop   = "stop"   // Stop matched
	FinishLength = "length" // MaxTokens reached
	FinishAbort  = "abort"  // the request's context was cancelled
	FinishError  = "error"  // the step failed; Event.Err says why
)

// Event reports progress of one request: one per generated token, and a
// final one with Done set.
type Event struct {
	Token int32        // valid when !Done
	Top   []TokenLogit // Request.TopLogits largest logits, descending (ties: lower id first)
	// Logprob is Token's log-probability under the raw logits (before
	// penalties and sampling filters), and LogZ their log-sum-exp, so that
	// Top[i].Logit-LogZ is Top[i]'s log-probability. Both are set when
	// Request.Logprobs or Request.TopLogits asks, else 0.
	Logprob float32
	LogZ    float32
	// Logits is the position's raw logit row, [vocab], when Request.Logits
	// asks (a copy the receiver owns), else nil.
	Logits []float32
	Done   bool
	Finish string
	Err    error
	Stats  Stats // filled on the final event
	// Embedding is an Embed request's embedding, on its final event.
	Embedding []float32
}

// Stats are one request's timings and counts.
type Stats struct {
	PromptTokens    int
	GeneratedTokens int
	// CachedTokens is how many leading prompt tokens came from the prefix
	// cache (their prefill was skipped).
	CachedTokens int
	Queue        time.Duration // submit -> first step
	Prefill      time.Duration // first step -> first token
	Decode       time.Duration // first token -> done
	Preempted    int

	// Phase boundaries (zero when a phase did not happen).
	Submitted, Started, FirstToken, Done time.Time
	// Chunks are the prompt pieces each step computed, in order.
	Chunks []Chunk
	// Rounds counts the steps that produced tokens for the request.
	Rounds int
	// Speculative counts the request's speculative decoding; zero unless
	// the plan speculates.
	Speculative SpecStats
}

// Chunk is one piece of a prompt computed by one step.
type Chunk struct {
	At     time.Time // when the step ended
	Start  int       // first position
	Tokens int
}

// DefaultKVTokensPerSeq bounds the default KV capacity per running sequence,
// so models with very long contexts do not reserve memory for all of it.
const DefaultKVTokensPerSeq = 4096

// Engine serves requests with one compiled plan on one backend: its loop
// goroutine owns the scheduler, the KV block manager and the executor.
type Engine struct {
	cfg        Config
	plan       *plan.Plan
	x          *executor.Executor
	kv         *kv.Manager
	drafts     map[string]*sched.DraftKVGroup // draft models' caches (the executor's), by alias
	sched      *sched.Scheduler
	context    int
	images     bool // the plan reads $in.images (ImagesInput)
	maxRunning int
	wake       chan struct{}
	mu         sync.Mutex // guards pending
	pending    []*inflight
	// snap is the load the loop published after its last change (admit,
	// step, finish); readers load it and never touch the scheduler or the
	// KV manager, which only the loop goroutine uses. npending counts
	// submitted requests the loop has not admitted yet.
	snap      atomic.Pointer[Snapshot]
	npending  atomic.Int64
	closed    chan struct{}
	loopDone  chan struct{}
	nextID    uint64
	reqs      map[*sched.Seq]*inflight
	intervals intervals
	// draftK is the most drafts a decoding sequence verifies per step (the
	// plan's proposers' largest k); 0 when the plan does not speculate.
	// minAccept is the verifier's MinAcceptance (0: always draft).
	draftK    int
	minAccept float64
	// specPrior is the backoff state the latest verified round left, where
	// a new request starts (startBackoff).
	specPrior backoff
	// state is the model's recurrent state cache group (zero without one);
	// prefixCacheOff says why prefix caching is off for the model, if it is.
	state       exec.StateLayout
	checkpoints int // of state.Slots, the checkpoint pool's
	// draftsChecked, when set (by tests, before the first Submit), is
	// called on the engine goroutine with each verify step's drafts of a
	// request (by its Tag).
	draftsChecked  func(tag any, drafts []int32)
	prefixCacheOff string
	kvBlockBytes   int64
	model          ModelInfo

	// feedImages and draftImages are the image inputs' buffers of a
	// step's feed and of that feed with drafts inserted (bindImages).
	feedImages, draftImages imageRows
}

// inflight is a submitted request with what the engine keeps of it.
type inflight struct {
	Request
	ctx       context.Context
	events    *mailbox
	seq       *sched.Seq
	state     node.SeqState
	submitted time.Time
	started   time.Time
	firstTok  time.Time
	chunks    []Chunk
	rounds    int
	spec      SpecStats
	embedding []float32 // an Embed request's result
	backoff   backoff
}

// New binds the plan's nodes to the model, loads the backend and reserves
// the KV cache for the worst case.
func New(cfg Config) (*Engine, error) {
	p := cfg.Plan
	if p == nil || cfg.Model == nil || cfg.Backend == nil {
		return nil, errors.New("engine: plan, model and backend are required")
	}
	x, shape, err := executor.New(executor.Config{Plan: p, Model: cfg.Model, Backend: cfg.Backend, Models: cfg.Models, NewBackend: cfg.NewBackend, Tower: cfg.Tower})
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, plan: p, x: x, wake: make(chan struct{}, 1), closed: make(chan struct{}),
		loopDone: make(chan struct{}), reqs: map[*sched.Seq]*inflight{}}
	maxBatch, err := e.speculation()
	if err != nil {
		return nil, err
	}
	if e.model, err = modelInfo(cfg.Model, shape); err != nil {
		return nil, err
	}
	snapshots := e.stateSnapshots(shape.State)
	if e.context, err = contextLength(cfg, e.model.Info); err != nil {
		return nil, err
	}
	e.maxRunning = cfg.MaxRunning
	if e.maxRunning <= 0 {
		e.maxRunning = 8
	}
	layout, err := e.sizeCaches(shape, snapshots)
	if err != nil {
		return nil, err
	}
	if err := x.Start(layout); err != nil {
		return nil, err
	}
	if err := e.newScheduler(maxBatch, snapshots); err != nil {
		x.CloseModels()
		return nil, err
	}
	e.images = p.Reads(ImagesInput)
	e.publish()
	if err := x.Warmup(e.maxRunning*(1+e.draftK), e.maxRunning); err != nil {
		x.CloseModels()
		return nil, err
	}
	go e.loop()
	return e, nil
}

// modelInfo reads the model's info once (weights.File.Info) and adds the
// cache shape the bound plan needs of it.
func modelInfo(f *weights.File, shape executor.Shape) (ModelInfo, error) {
	info, err := f.Info()
	if err != nil {
		return ModelInfo{}, fmt.Errorf("engine: %w", err)
	}
	if info.Vocab == 0 {
		return ModelInfo{}, errors.New("engine: the model has no token_embd.weight")
	}
	return ModelInfo{Info: info, KVLayers: shape.Layers, KVDim: shape.KVDim, State: shape.State}, nil
}

// contextLength is the most tokens one request may use: Config.Context,
// or the model's context length.
func contextLength(cfg Config, info weights.Info) (int, error) {
	if cfg.Context > 0 {
		return cfg.Context, nil
	}
	if info.ContextLength == 0 {
		return 0, fmt.Errorf("engine: the model does not say its context length (%s.context_length): give one (Config.Context)", info.Arch)
	}
	return info.ContextLength, nil
}

// stateSnapshots is how many snapshot slots each sequence of a model with
// recurrent state needs besides its own: a verify step writes the state
// after each of its 1+k rows into one, and commit keeps the last accepted
// row's. (executor.BindTarget refuses a plan that drafts with the target's
// own layers on such a model.)
func (e *Engine) stateSnapshots(state exec.StateLayout) int {
	if state.Layers() == 0 || e.draftK == 0 {
		return 0
	}
	return e.draftK + 1
}

// StateStorage returns state with its slots stored as dtype (the plan's
// Policy.StateDType) and its checkpoints as checkpoint (--checkpoint-dtype:
// "" for the state's own, f32 or bf16), or the error the engine refuses the
// pair with; speculative says the plan drafts, so its state keeps snapshot
// slots.
func StateStorage(state exec.StateLayout, dtype, checkpoint string, speculative bool) (exec.StateLayout, error) {
	state.DType = dtype
	if state.DType == "bf16" && speculative {
		// A verify step's rows chain through unrounded f32 state, plain
		// decoding rounds after every token: not the same tokens.
		return state, errors.New("engine: recurrent state stored as bf16 is rounded once per step, so a speculative verify step would not give plain decoding's tokens: use f32 state (kv.cache state: f32) with a speculative graph")
	}
	switch checkpoint {
	case "", state.DType, "f32" + state.DType: // "f32" with f32 ("") state
	case "f32":
		return state, errors.New("engine: f32 checkpoints (--checkpoint-dtype f32) of bf16 state (kv.cache state: bf16) would only hold bf16 values: leave --checkpoint-dtype out")
	case "bf16":
		if speculative {
			return state, errors.New("engine: bf16 checkpoints (--checkpoint-dtype bf16) need a graph without speculation: a speculative step's snapshot slots hold f32 state and change places with checkpoints")
		}
		state.CheckpointDType = "bf16"
	default:
		return state, fmt.Errorf("engine: checkpoint dtype %q (--checkpoint-dtype): want f32 or bf16", checkpoint)
	}
	return state, nil
}

// sizeCaches sizes the recurrent state slots (first: one per running
// sequence and its snapshots) and the KV blocks (the rest of KVMemory, or
// KVTokens), creates the KV block manager, and returns the caches' layout.
func (e *Engine) sizeCaches(shape executor.Shape, snapshots int) (exec.KVLayout, error) {
	cfg, pol, state := e.cfg, e.plan.Policy, shape.State
	if state.Layers() > 0 {
		state.Slots = e.maxRunning * (1 + snapshots)
		var err error
		if state, err = StateStorage(state, pol.StateDType, cfg.CheckpointDType, snapshots > 0); err != nil {
			return exec.KVLayout{}, err
		}
		e.state = state
		if cfg.KVMemory > 0 {
			if cfg.KVMemory -= int64(state.Slots) * state.BytesPerSlot(); cfg.KVMemory <= 0 {
				return exec.KVLayout{}, fmt.Errorf("engine: kv memory does not hold %d state slots of %d bytes", state.Slots, state.BytesPerSlot())
			}
		}
	}
	kvTokens, err := e.kvTokens(cfg, shape)
	if err != nil {
		return exec.KVLayout{}, err
	}
	blocks := (kvTokens + pol.KVBlockTokens - 1) / pol.KVBlockTokens
	m, err := kv.New(blocks, pol.KVBlockTokens)
	if err != nil {
		return exec.KVLayout{}, fmt.Errorf("engine: %w", err)
	}
	switch {
	case !e.x.ResumesFromHidden():
		e.prefixCacheOff = "prefix caching is off for this plan: it carries values ($prev) that the cache does not keep"
	case e.x.EntersTargetHidden() && state.Layers() == 0:
		e.prefixCacheOff = "prefix caching is off for this plan: its drafter resumes from the target's hidden state, which only a hybrid model's checkpoints keep"
	case cfg.NoPrefixCache:
	case state.Layers() > 0 && e.checkpointSlots(state) == 0:
		e.prefixCacheOff = "prefix caching is off for this model: its recurrent state checkpoint memory (--checkpoint-memory) holds no checkpoint"
	default:
		salt := prefixSalt(cfg.Model, e.plan, pol.KVDType)
		if state.Layers() > 0 {
			e.checkpoints = e.checkpointSlots(state)
			e.state.Slots += e.checkpoints
			e.state.Checkpoints = e.checkpoints
			state = e.state
			salt = append(salt, "|state="+state.DType+"|checkpoint="+state.PoolDType()...)
		}
		m.EnablePrefixCache(salt)
	}
	e.kv = m
	if f, err := page.LookupFormat(pol.KVDType); err == nil {
		e.kvBlockBytes = page.BytesPerToken(f, shape.Layers, shape.KVDim) * int64(pol.KVBlockTokens)
	}
	return exec.KVLayout{Layers: shape.Layers, KVDim: shape.KVDim, BlockTokens: pol.KVBlockTokens, Blocks: blocks, DType: pol.KVDType, State: state}, nil
}

// checkpointSlots is how many recurrent state checkpoints of state's slot
// size Config.CheckpointMemory holds, at most DefaultCheckpointsPerSeq per
// running sequence.
func (e *Engine) checkpointSlots(state exec.StateLayout) int {
	budget := e.cfg.CheckpointMemory
	if budget == 0 {
		budget = DefaultCheckpointMemory
	}
	if budget < 0 {
		return 0
	}
	return int(min(budget/state.CheckpointBytes(), int64(DefaultCheckpointsPerSeq*e.maxRunning)))
}

// kvTokens is the KV cache's capacity in tokens: cfg.KVTokens, or what
// cfg.KVMemory (less the state slots') holds, or min(context,
// DefaultKVTokensPerSeq) per running sequence.
func (e *Engine) kvTokens(cfg Config, shape executor.Shape) (int, error) {
	pol := e.plan.Policy
	kvTokens := cfg.KVTokens
	if kvTokens <= 0 && cfg.KVMemory > 0 {
		f, err := page.LookupFormat(pol.KVDType)
		if err != nil {
			return 0, fmt.Errorf("engine: %w", err)
		}
		if kvTokens = int(page.CapacityTokens(cfg.KVMemory, f, shape.Layers, shape.KVDim, pol.KVBlockTokens)); kvTokens == 0 {
			return 0, fmt.Errorf("engine: kv memory %d bytes holds no block of %d tokens (%d bytes per token in %s)",
				cfg.KVMemory, pol.KVBlockTokens, page.BytesPerToken(f, shape.Layers, shape.KVDim), f.Name)
		}
	}
	if kvTokens <= 0 {
		kvTokens = min(e.context, DefaultKVTokensPerSeq) * e.maxRunning
	}
	return kvTokens, nil
}

// newScheduler creates the scheduler over the KV block manager and the
// draft models' caches (the executor's, once it started), with the
// step budget of Config.StepTokens.
func (e *Engine) newScheduler(maxBatch, snapshots int) error {
	pol, maxRunning := e.plan.Policy, e.maxRunning
	stepTokens := e.cfg.StepTokens
	switch {
	case stepTokens == 0:
		stepTokens = pol.PrefillChunk + maxRunning*(1+e.draftK)
	case stepTokens < maxRunning*(1+e.draftK):
		return fmt.Errorf("engine: step tokens %d is less than %d: %d running sequences x %d tokens per decode step",
			stepTokens, maxRunning*(1+e.draftK), maxRunning, 1+e.draftK)
	}
	every := e.cfg.CheckpointEvery
	switch {
	case every == 0:
		every = DefaultCheckpointEvery
	case every < 0:
		every = 0
	}
	caches := e.x.DraftCaches()
	e.drafts = map[string]*sched.DraftKVGroup{}
	var drafts []*sched.DraftKVGroup
	for _, alias := range slices.Sorted(maps.Keys(caches)) {
		e.drafts[alias] = sched.NewDraftKVGroup(caches[alias])
		drafts = append(drafts, e.drafts[alias])
	}
	var err error
	e.sched, err = sched.New(sched.Config{Chunk: pol.PrefillChunk, StepTokens: stepTokens,
		MaxRunning: maxRunning, Draft: e.draftK, DraftMaxBatch: maxBatch, StateSlots: e.state.Slots - e.checkpoints, Snapshots: snapshots,
		Checkpoints: e.checkpoints, CheckpointEvery: every, DrafterEntries: e.x.EntersTargetHidden(),
		InnerCheckpoints: e.innerCheckpoints()}, e.kv, drafts...)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	return nil
}

// innerCheckpoints reports whether a prefill step takes its prompt's
// checkpoints in passing rather than being cut at them: the backend takes
// them inside a step (exec.InnerStateTaker), the plan does not speculate
// (its verify steps own the snapshot slots) and state and checkpoints are
// f32 (a bf16 one rounds the state where it is taken, which only a step's
// end does).
func (e *Engine) innerCheckpoints() bool {
	t, ok := e.cfg.Backend.(exec.InnerStateTaker)
	return ok && t.TakesStateInside() && e.draftK == 0 && !e.x.EntersTargetHidden() &&
		e.state.DType != "bf16" && e.state.PoolDType() != "bf16"
}

// ErrNoModel is wrapped by New's error when a node runs a model alias that
// Config.Models does not hold.
var ErrNoModel = executor.ErrNoModel

// KVUsage is a KV cache's used and total blocks.
type KVUsage struct{ Used, Total int }

// ModelKVBlocks reports the KV blocks of each model the plan's nodes run
// besides the target (by alias; empty when there are none). Like KVBlocks
// it is a snapshot, safe to call from any goroutine.
func (e *Engine) ModelKVBlocks() map[string]KVUsage { return e.Snapshot().ModelKV }

// ModelInfo is what the engine reads of its model once, at New: the
// file's facts (weights.Info; its ContextLength is the training context,
// the engine's limit per request is Engine.ContextLength) and the cache
// shapes the plan's nodes declare for the target.
type ModelInfo struct {
	weights.Info
	// KVLayers are the target's layers that keep K and V, KVDim the width
	// of one token's K (or V) row in one of them.
	KVLayers, KVDim int
	// State is a hybrid model's recurrent state as its nodes declare it
	// (Layers() == 0 without one; the engine sizes Slots and DType).
	State exec.StateLayout
}

// Model is the model's info (ModelInfo).
func (e *Engine) Model() ModelInfo { return e.model }

// EncodeImage runs the plan's vision tower (vision.encode) over one
// preprocessed image: the rows [p.Grid.Tokens(), E] a Request's Image
// carries. It may be called from any goroutine (the tower has a device of
// its own and encodes one image at a time).
func (e *Engine) EncodeImage(ctx context.Context, p *vision.Preprocessed) ([]float32, error) {
	return e.x.EncodeImage(ctx, p)
}

// VisionWorkspace is the scratch memory of the vision tower's backend;
// false without a tower or when the backend does not account it.
func (e *Engine) VisionWorkspace() (exec.Workspace, bool) { return e.x.TowerWorkspace() }

// Vocab is the model's vocabulary size.
func (e *Engine) Vocab() int { return e.model.Vocab }

// EmbeddingLength is the width of an Embed request's embedding (the
// model's hidden size).
func (e *Engine) EmbeddingLength() int { return e.model.Embed }

// ContextLength is the most tokens (prompt + generated) one request may use.
func (e *Engine) ContextLength() int { return e.context }

// KVBlocks reports used and total KV blocks (a snapshot, for health checks).
func (e *Engine) KVBlocks() (used, total int) {
	s := e.Snapshot()
	return s.KVBlocksUsed, s.KVBlocksTotal
}

// Snapshot is a consistent view of the engine's load at one instant.
type Snapshot struct {
	Running       int // sequences admitted to the scheduler that hold KV
	Waiting       int // submitted, not yet admitted (includes preempted ones)
	KVBlocksUsed  int // held by sequences
	KVBlocksTotal int
	KVBlockTokens int // tokens per KV block
	MaxRunning    int // the most sequences that share a step
	// PrefixCache reports whether prefix caching is on. KVBlocksCached
	// are free blocks that still hold a cached prefix (not in
	// KVBlocksUsed); PrefixQueries and PrefixHits count prompt tokens
	// looked up at admission and found cached, since start.
	PrefixCache    bool
	KVBlocksCached int
	PrefixQueries  int64
	PrefixHits     int64
	// StateSlotsUsed and StateSlotsTotal count a hybrid model's recurrent
	// state slots (0 without one), StateSlotBytes the memory of one.
	StateSlotsUsed, StateSlotsTotal int
	StateSlotBytes                  int64
	// Checkpoints counts a hybrid model's recurrent state checkpoints
	// held (its prefix cache, each of CheckpointSlotBytes), CheckpointsMax
	// the most its memory budget holds.
	Checkpoints, CheckpointsMax int
	CheckpointSlotBytes         int64
	KVBlockBytes                int64 // K and V of one block, every layer, in the KV format
	// ModelKV is the KV blocks of each model the plan's nodes run besides
	// the target, by alias (nil when there are none): its cache group's
	// usage (sched.DraftKVGroup).
	ModelKV map[string]KVUsage
}

// CheckpointBytes is the memory of the recurrent state checkpoints held.
func (s Snapshot) CheckpointBytes() int64 { return int64(s.Checkpoints) * s.CheckpointSlotBytes }

// CacheUsage is the fraction (0..1) of the cache memory held by sequences:
// KV blocks and recurrent state slots together, by bytes.
func (s Snapshot) CacheUsage() float64 {
	total := float64(s.KVBlocksTotal)*float64(s.KVBlockBytes) + float64(s.StateSlotsTotal)*float64(s.StateSlotBytes)
	if total == 0 {
		if s.KVBlocksTotal == 0 {
			return 0
		}
		return float64(s.KVBlocksUsed) / float64(s.KVBlocksTotal)
	}
	return (float64(s.KVBlocksUsed)*float64(s.KVBlockBytes) + float64(s.StateSlotsUsed)*float64(s.StateSlotBytes)) / total
}

// Snapshot reports the engine's current load: what the loop published
// after its last step, plus the requests submitted since. It is safe to
// call from any goroutine at any rate and takes no lock.
func (e *Engine) Snapshot() Snapshot {
	s := *e.snap.Load()
	s.Waiting += int(e.npending.Load())
	return s
}

// publish stores the scheduler's and the KV manager's current state as the
// snapshot readers see. Only the loop goroutine (or a test driving Step)
// calls it.
func (e *Engine) publish() {
	ps := e.sched.PrefixStats()
	held, capacity := e.sched.Checkpoints()
	e.snap.Store(&Snapshot{Running: e.sched.Running(), Waiting: e.sched.Waiting(),
		KVBlocksUsed: e.kv.Used(), KVBlocksTotal: e.kv.Total(), KVBlockTokens: e.kv.BlockTokens(),
		MaxRunning: e.maxRunning, PrefixCache: e.kv.PrefixCaching(), KVBlocksCached: e.kv.Cached(),
		PrefixQueries: ps.Queries, PrefixHits: ps.Hits,
		StateSlotsUsed: e.state.Slots - e.checkpoints - e.sched.StateSlotsFree(), StateSlotsTotal: e.state.Slots - e.checkpoints, StateSlotBytes: e.state.BytesPerSlot(),
		Checkpoints: held, CheckpointsMax: capacity, CheckpointSlotBytes: e.state.CheckpointBytes(),
		KVBlockBytes: e.kvBlockBytes, ModelKV: e.modelKV()})
}

// modelKV is the usage of the draft models' cache groups, by alias.
func (e *Engine) modelKV() map[string]KVUsage {
	if len(e.drafts) == 0 {
		return nil
	}
	out := make(map[string]KVUsage, len(e.drafts))
	for alias, g := range e.drafts {
		used, total := g.Usage()
		out[alias] = KVUsage{used, total}
	}
	return out
}

// PrefixCacheOff says why prefix caching is off for the model ("" when it
// is on, or was turned off by Config.NoPrefixCache).
func (e *Engine) PrefixCacheOff() string { return e.prefixCacheOff }

// CheckpointsKeepHidden reports whether each recurrent state checkpoint
// also keeps the target's hidden state before its end ([E] floats, host
// memory beside the pool), which the plan's drafter resumes from (the mtp
// graph's MTP head).
func (e *Engine) CheckpointsKeepHidden() bool { return e.checkpoints > 0 && e.x.EntersTargetHidden() }

// prefixSalt is what, besides the tokens, determines a KV block's contents
// (kv.Chain): the model's architecture, shape and file, the plan (its
// graph and parameters) and the KV format.
func prefixSalt(f *weights.File, p *plan.Plan, kvDType string) []byte {
	return []byte(fmt.Sprintf("ninfer-kv-v1|%s|%s|%d tensors|data@%d|%s|kv=%s", f.Arch(), filepath.Base(f.Path), len(f.Tensors), f.DataOffset, p.Hash(), kvDType))
}

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("engine: closed")

// Submit validates r and queues it. Events arrive on the returned channel,
// which is closed after the final event; the caller must read it until
// then (the engine never waits for a reader: events not yet read are
// queued, one per generated token). Cancelling ctx aborts the request and
// frees its KV at the next step.
func (e *Engine) Submit(ctx context.Context, r Request) (<-chan Event, error) {
	if len(r.Prompt) == 0 {
		return nil, errors.New("engine: empty prompt")
	}
	if r.MaxTokens < 1 {
		return nil, fmt.Errorf("engine: max tokens %d < 1", r.MaxTokens)
	}
	for i, id := range r.Prompt {
		if id < 0 || int(id) >= e.model.Vocab {
			return nil, fmt.Errorf("engine: prompt token %d at %d out of vocabulary [0,%d)", id, i, e.model.Vocab)
		}
	}
	if err := e.keyImages(&r); err != nil {
		return nil, err
	}
	for i, end := range r.MessageEnds {
		if end < 0 || end > len(r.Prompt) || (i > 0 && end < r.MessageEnds[i-1]) {
			return nil, fmt.Errorf("engine: message ends %v: not ascending offsets within the prompt of %d tokens", r.MessageEnds, len(r.Prompt))
		}
	}
	if r.Embed && len(r.Force) > 0 {
		return nil, errors.New("engine: an embedding request cannot force tokens")
	}
	if len(r.Force) > 0 && e.draftK > 0 {
		return nil, errors.New("engine: a plan that speculates cannot teacher-force tokens")
	}
	for i, id := range r.Force {
		if id < 0 || int(id) >= e.model.Vocab {
			return nil, fmt.Errorf("engine: forced token %d at %d out of vocabulary [0,%d)", id, i, e.model.Vocab)
		}
	}
	if n := len(r.Prompt) + r.MaxTokens; n > e.context {
		return nil, fmt.Errorf("engine: %w: prompt %d + max tokens %d = %d > %d", ErrContext, len(r.Prompt), r.MaxTokens, n, e.context)
	}
	if blocks := e.kv.BlocksFor(len(r.Prompt) + r.MaxTokens); blocks > e.kv.Total() {
		return nil, fmt.Errorf("engine: %w: request needs %d kv blocks, cache has %d", ErrContext, blocks, e.kv.Total())
	}
	req := &inflight{Request: r, ctx: ctx, submitted: time.Now()}
	req.state = node.SeqState{Sampling: r.Sampling, Prompt: len(r.Prompt), RNG: rand.New(rand.NewPCG(r.Sampling.Seed, 0x6e696e666572))}
	e.mu.Lock()
	select {
	case <-e.closed:
		e.mu.Unlock()
		return nil, ErrClosed
	default:
	}
	req.events = newMailbox()
	e.pending = append(e.pending, req)
	e.npending.Add(1)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return req.events.out, nil
}

// ErrContext is wrapped by Submit errors for requests that cannot fit the
// context window or the KV cache.
var ErrContext = errors.New("context length exceeded")

// Close stops the loop, aborts outstanding requests and releases the backend.
func (e *Engine) Close() error {
	e.mu.Lock()
	select {
	case <-e.closed:
		e.mu.Unlock()
		return nil
	default:
	}
	close(e.closed)
	e.mu.Unlock()
	<-e.loopDone
	return e.x.Close()
}

func (e *Engine) loop() {
	defer close(e.loopDone)
	for {
		e.admit()
		if e.sched.Idle() {
			select {
			case <-e.closed:
				return
			case <-e.wake:
				continue
			}
		}
		select {
		case <-e.closed:
			e.abortAll(ErrClosed)
			return
		default:
		}
		if err := e.Step(context.Background()); err != nil {
			e.abortAll(err)
		}
	}
}

// admit moves submitted requests into the scheduler.
func (e *Engine) admit() {
	e.mu.Lock()
	pend := e.pending
	e.pending = nil
	e.mu.Unlock()
	if len(pend) == 0 {
		return
	}
	for _, r := range pend {
		e.nextID++
		r.seq = &sched.Seq{ID: e.nextID, Tokens: append([]int32(nil), r.Prompt...), Prompt: len(r.Prompt),
			Limit: len(r.Prompt) + r.MaxTokens, Stop: r.Stop, Marks: r.MessageEnds}
		r.state.ID = e.nextID
		if e.draftK > 0 {
			r.spec.AcceptedPerPosition = make([]int, e.draftK)
		}
		r.backoff = e.startBackoff()
		e.reqs[r.seq] = r
		e.sched.Add(r.seq)
	}
	e.npending.Add(-int64(len(pend)))
	e.publish()
}

func (e *Engine) abortAll(err error) {
	for _, r := range e.reqs {
		e.finish(r, FinishError, err)
	}
	e.publish()
}

func (e *Engine) finish(r *inflight, reason string, err error) {
	now := time.Now()
	st := Stats{PromptTokens: len(r.Prompt), GeneratedTokens: r.seq.Generated(), CachedTokens: r.seq.Cached, Preempted: r.seq.Preempted,
		Submitted: r.submitted, Started: r.started, FirstToken: r.firstTok, Done: now, Chunks: r.chunks, Rounds: r.rounds,
		Speculative: r.spec}
	if !r.started.IsZero() {
		st.Queue = r.started.Sub(r.submitted)
		if !r.firstTok.IsZero() {
			st.Prefill = r.firstTok.Sub(r.started)
			st.Decode = now.Sub(r.firstTok)
		} else {
			st.Prefill = now.Sub(r.started)
		}
	}
	e.sched.Remove(r.seq) // a no-op for a sequence Update ended
	e.x.DropCarry(r.seq.ID)
	delete(e.reqs, r.seq)
	e.publish() // a reader that sees the final event sees the freed KV
	r.events.put(Event{Done: true, Finish: reason, Err: err, Stats: st, Embedding: r.embedding})
}

// Step runs one engine step: schedule, execute the plan, and hand the
// tokens to the scheduler (sched.Update), which appends them and decides
// stop and length; then it publishes the new load and emits the events.
// It is called by the loop goroutine; tests may call it on an engine they
