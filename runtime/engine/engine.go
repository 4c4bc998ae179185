// Package engine runs the serving loop: one goroutine owns the scheduler,
// the KV block manager and the backend, and repeats schedule -> execute the
// compiled plan -> commit tokens -> emit events.
package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/sched"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/vec"
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
	// included: kv.CapacityTokens) fit in KVMemory bytes.
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
	// NoPrefixCache turns automatic prefix caching off: by default full KV
	// blocks are shared between sequences whose tokens begin the same way
	// (kv.Manager), and a prompt's cached blocks skip prefill.
	NoPrefixCache bool
}

// Request is one generation request.
type Request struct {
	Prompt    []int32 // token ids, at least one
	MaxTokens int     // tokens to generate, >= 1
	Sampling  exec.Sampling
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
	Done    bool
	Finish  string
	Err     error
	Stats   Stats // filled on the final event
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

// Engine serves requests with one compiled plan on one backend.
type Engine struct {
	cfg        Config
	plan       *plan.Plan
	backend    exec.Backend
	kv         *kv.Manager
	sched      *sched.Scheduler
	context    int
	vocab      int
	embed      int // hidden size (token_embd's row length)
	maxRunning int
	execs      map[execKey]exec.Executable
	planHash   string
	wake       chan struct{}
	mu         sync.Mutex // guards pending
	pending    []*request
	// snap is the load the loop published after its last change (admit,
	// step, finish); readers load it and never touch the scheduler or the
	// KV manager, which only the loop goroutine uses. npending counts
	// submitted requests the loop has not admitted yet.
	snap      atomic.Pointer[Snapshot]
	npending  atomic.Int64
	closed    chan struct{}
	loopDone  chan struct{}
	nextID    uint64
	reqs      map[*sched.Seq]*request
	intervals intervals
	// draftK is the most drafts a decoding sequence verifies per step (the
	// plan's proposers' largest k); 0 when the plan does not speculate.
	// minAccept is the verifier's MinAcceptance (0: always draft).
	draftK    int
	minAccept float64
	// specPrior is the backoff state the latest verified round left, where
	// a new request starts (startBackoff).
	specPrior backoff
	// models are the devices of the models nodes run besides the target,
	// by alias; releasers are the nodes told when a sequence ends.
	models    map[string]*modelDevice
	releasers []exec.SeqReleaser
	// modelLoops are the plan's draft loops over a draft model, by step id;
	// loopHidden is the row width of $loop.hidden in each loop that reads
	// a carried value (in.hidden).
	modelLoops map[string]*modelLoop
	loopHidden map[string]loopWidths
	// state is the model's recurrent state cache group (zero without one);
	// prefixCacheOff says why prefix caching is off for the model, if it is.
	state          exec.StateLayout
	prefixCacheOff string
	kvBlockBytes   int64
	// stepEmbeds is set while a step runs whose sampled sequences include
	// an Embed request: only then are hidden rows copied back.
	stepEmbeds bool
	// stepCarry holds, while a step runs, the carried values its device
	// segments computed, by name.
	stepCarry map[string]carryRows
}

// execKey names a prepared graph: a plan segment ("seg0", ...) or a host
// node's extra device work, at the shape it was recorded at (the backend's
// bucket of the step's shape, exec.BucketShape).
type execKey struct {
	name            string
	rows, logitRows int
}

// newExecKey is the key of pass name over b on be.
func newExecKey(be exec.Backend, name string, b *exec.Batch) execKey {
	rows, logitRows := exec.BucketShape(be, len(b.Tokens), len(b.LogitRows))
	return execKey{name, rows, logitRows}
}

type request struct {
	Request
	ctx       context.Context
	events    *mailbox
	seq       *sched.Seq
	state     exec.SeqState
	submitted time.Time
	started   time.Time
	firstTok  time.Time
	chunks    []Chunk
	rounds    int
	spec      SpecStats
	embedding []float32 // an Embed request's result
	// carry holds the plan's carried values (Plan.Carry) for the
	// sequence's next sampled step, by name.
	carry map[string]exec.Carried
	// ahead holds what the plan's ahead loops drafted for the sequence's
	// next step (Plan.Carry names them): its drafts ([]int32) or their
	// distributions ([]exec.DraftDist).
	ahead   map[string]any
	backoff backoff
}

// New binds the plan's nodes to the model, loads the backend and reserves
// the KV cache for the worst case.
func New(cfg Config) (*Engine, error) {
	p := cfg.Plan
	if p == nil || cfg.Model == nil || cfg.Backend == nil {
		return nil, errors.New("engine: plan, model and backend are required")
	}
	e := &Engine{cfg: cfg, plan: p, backend: cfg.Backend, execs: map[execKey]exec.Executable{}, planHash: p.Hash(),
		wake: make(chan struct{}, 1), closed: make(chan struct{}), loopDone: make(chan struct{}),
		reqs: map[*sched.Seq]*request{}, models: map[string]*modelDevice{}, modelLoops: map[string]*modelLoop{},
		loopHidden: map[string]loopWidths{}, stepCarry: map[string]carryRows{}}
	layers, kvDim := 0, 0
	var state exec.StateLayout
	var binders []modelBinding
	drafting := map[*plan.Step]bool{} // body steps of loops over a draft model: bound to it
	for _, st := range p.Steps {
		l, ok := st.Node.(*plan.Loop)
		if ok && l.Block && l.Model == exec.Target {
			return nil, fmt.Errorf("engine: block loop %s runs the target: a block drafter runs a model of its own (its model param)", st.ID)
		}
		if ok && l.Model != exec.Target {
			ml := &modelLoop{step: st.ID, loop: l}
			mb, err := bindModel(cfg, st, ml)
			if err != nil {
				return nil, err
			}
			binders = append(binders, mb)
			e.releasers = append(e.releasers, ml)
			e.modelLoops[st.ID] = ml
			for _, bs := range l.Steps {
				drafting[bs] = true
			}
		}
	}
	for _, st := range p.AllSteps() {
		if drafting[st] {
			continue
		}
		if b, ok := st.Node.(exec.Binder); ok {
			if err := b.Bind(cfg.Model); err != nil {
				return nil, fmt.Errorf("engine: bind %s (%s): %w", st.ID, st.Op, err)
			}
		}
		if b, ok := st.Node.(exec.ModelBinder); ok {
			mb, err := bindModel(cfg, st, b)
			if err != nil {
				return nil, err
			}
			binders = append(binders, mb)
		}
		if r, ok := st.Node.(exec.SeqReleaser); ok {
			e.releasers = append(e.releasers, r)
		}
		if s, ok := st.Node.(exec.StateShaper); ok && s.StateShape().Layers() > 0 {
			state = s.StateShape()
		}
		if s, ok := st.Node.(exec.KVShaper); ok {
			// A step with fewer layers uses the leading ones (a head's
			// layer follows its trunk's).
			l, d := s.KVShape()
			if layers != 0 && d != kvDim {
				return nil, fmt.Errorf("engine: step %s wants kv %dx%d, another step %dx%d", st.ID, l, d, layers, kvDim)
			}
			layers, kvDim = max(layers, l), d
		}
	}
	if layers == 0 {
		return nil, errors.New("engine: the plan has no step that owns a KV cache (model.forward)")
	}
	if err := e.resolveLoopHidden(); err != nil {
		return nil, err
	}
	maxBatch, err := e.speculation()
	if err != nil {
		return nil, err
	}
	snapshots := 0
	if state.Layers() > 0 && e.draftK > 0 {
		// A verify step writes the state after each of its 1+k rows into a
		// snapshot slot; commit keeps the last accepted row's.
		snapshots = e.draftK + 1
		for _, st := range p.Steps {
			if r, ok := st.Node.(exec.StateRollbacker); ok && r.DraftsWithTargetState() {
				return nil, fmt.Errorf("engine: step %s (%s) drafts with the target's own layers, which would advance the model's recurrent state (a hybrid model): use a proposer that does not run the target (ngram, draft)", st.ID, st.Op)
			}
		}
	}
	e.context = cfg.Context
	if e.context <= 0 {
		c, err := cfg.Model.Uint(cfg.Model.Arch() + ".context_length")
		if err != nil {
			return nil, fmt.Errorf("engine: model context length: %w", err)
		}
		e.context = int(c)
	}
	maxRunning := cfg.MaxRunning
	if maxRunning <= 0 {
		maxRunning = 8
	}
	e.maxRunning = maxRunning
	pol := p.Policy
	kvTokens := cfg.KVTokens
	if state.Layers() > 0 {
		// State slots are sized first (one per running sequence); the KV
		// pages get the rest of KVMemory.
		state.Slots = maxRunning * (1 + snapshots)
		state.DType = pol.StateDType
		if state.DType == "bf16" && snapshots > 0 {
			// A verify step's rows chain through unrounded f32 state, plain
			// decoding rounds after every token: not the same tokens.
			return nil, errors.New("engine: recurrent state stored as bf16 is rounded once per step, so a speculative verify step would not give plain decoding's tokens: use f32 state (kv.cache state: f32) with a speculative graph")
		}
		e.state = state
		if cfg.KVMemory > 0 {
			if cfg.KVMemory -= int64(state.Slots) * state.BytesPerSlot(); cfg.KVMemory <= 0 {
				return nil, fmt.Errorf("engine: kv memory does not hold %d state slots of %d bytes", state.Slots, state.BytesPerSlot())
			}
		}
	}
	if kvTokens <= 0 && cfg.KVMemory > 0 {
		f, err := kv.LookupFormat(pol.KVDType)
		if err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if kvTokens = int(kv.CapacityTokens(cfg.KVMemory, f, layers, kvDim, pol.KVBlockTokens)); kvTokens == 0 {
			return nil, fmt.Errorf("engine: kv memory %d bytes holds no block of %d tokens (%d bytes per token in %s)",
				cfg.KVMemory, pol.KVBlockTokens, kv.BytesPerToken(f, layers, kvDim), f.Name)
		}
	}
	if kvTokens <= 0 {
		kvTokens = min(e.context, DefaultKVTokensPerSeq) * maxRunning
	}
	blocks := (kvTokens + pol.KVBlockTokens - 1) / pol.KVBlockTokens
	m, err := kv.New(blocks, pol.KVBlockTokens)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	switch {
	case state.Layers() > 0:
		e.prefixCacheOff = "prefix caching is off for this model: its recurrent state has no checkpoints at block boundaries to resume from"
	case len(p.Carry) > 0:
		e.prefixCacheOff = "prefix caching is off for this plan: it carries hidden states ($prev) that the cache does not keep"
	case !cfg.NoPrefixCache:
		m.EnablePrefixCache(prefixSalt(cfg.Model, p, pol.KVDType))
	}
	e.kv = m
	stepTokens := cfg.StepTokens
	switch {
	case stepTokens == 0:
		stepTokens = pol.PrefillChunk + maxRunning*(1+e.draftK)
	case stepTokens < maxRunning*(1+e.draftK):
		return nil, fmt.Errorf("engine: step tokens %d is less than %d: %d running sequences x %d tokens per decode step",
			stepTokens, maxRunning*(1+e.draftK), maxRunning, 1+e.draftK)
	}
	e.sched, err = sched.New(sched.Config{Chunk: pol.PrefillChunk, StepTokens: stepTokens,
		MaxRunning: maxRunning, Draft: e.draftK, DraftMaxBatch: maxBatch, StateSlots: state.Slots, Snapshots: snapshots}, m)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := e.backend.Load(cfg.Model); err != nil {
		return nil, fmt.Errorf("engine: load: %w", err)
	}
	layout := exec.KVLayout{Layers: layers, KVDim: kvDim, BlockTokens: pol.KVBlockTokens, Blocks: blocks, DType: pol.KVDType, State: state}
	if f, err := kv.LookupFormat(pol.KVDType); err == nil {
		e.kvBlockBytes = kv.BytesPerToken(f, layers, kvDim) * int64(pol.KVBlockTokens)
	}
	if err := e.backend.Reserve(layout); err != nil {
		return nil, fmt.Errorf("engine: reserve: %w", err)
	}
	if err := e.attachModels(binders, layout); err != nil {
		e.closeModels()
		return nil, err
	}
	emb, err := cfg.Model.Tensor("token_embd.weight")
	if err != nil {
		e.closeModels()
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.vocab, e.embed = emb.Rows(), emb.RowLen()
	e.publish()
	if err := e.warmup(maxRunning * (1 + e.draftK)); err != nil {
		e.closeModels()
		return nil, err
	}
	go e.loop()
	return e, nil
}

// Vocab is the model's vocabulary size.
func (e *Engine) Vocab() int { return e.vocab }

// EmbeddingLength is the width of an Embed request's embedding (the
// model's hidden size).
func (e *Engine) EmbeddingLength() int { return e.embed }

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
	KVBlockBytes                    int64 // K and V of one block, every layer, in the KV format
}

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
	e.snap.Store(&Snapshot{Running: e.sched.Running(), Waiting: e.sched.Waiting(),
		KVBlocksUsed: e.kv.Used(), KVBlocksTotal: e.kv.Total(), KVBlockTokens: e.kv.BlockTokens(),
		MaxRunning: e.maxRunning, PrefixCache: e.kv.PrefixCaching(), KVBlocksCached: e.kv.Cached(),
		PrefixQueries: ps.Queries, PrefixHits: ps.Hits,
		StateSlotsUsed: e.state.Slots - e.sched.StateSlotsFree(), StateSlotsTotal: e.state.Slots, StateSlotBytes: e.state.BytesPerSlot(),
		KVBlockBytes: e.kvBlockBytes})
}

// PrefixCacheOff says why prefix caching is off for the model ("" when it
// is on, or was turned off by Config.NoPrefixCache).
func (e *Engine) PrefixCacheOff() string { return e.prefixCacheOff }

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
		if id < 0 || int(id) >= e.vocab {
			return nil, fmt.Errorf("engine: prompt token %d at %d out of vocabulary [0,%d)", id, i, e.vocab)
		}
	}
	if r.Embed && len(r.Force) > 0 {
		return nil, errors.New("engine: an embedding request cannot force tokens")
	}
	if len(r.Force) > 0 && e.draftK > 0 {
		return nil, errors.New("engine: a plan that speculates cannot teacher-force tokens")
	}
	for i, id := range r.Force {
		if id < 0 || int(id) >= e.vocab {
			return nil, fmt.Errorf("engine: forced token %d at %d out of vocabulary [0,%d)", id, i, e.vocab)
		}
	}
	if n := len(r.Prompt) + r.MaxTokens; n > e.context {
		return nil, fmt.Errorf("engine: %w: prompt %d + max tokens %d = %d > %d", ErrContext, len(r.Prompt), r.MaxTokens, n, e.context)
	}
	if blocks := e.kv.BlocksFor(len(r.Prompt) + r.MaxTokens); blocks > e.kv.Total() {
		return nil, fmt.Errorf("engine: %w: request needs %d kv blocks, cache has %d", ErrContext, blocks, e.kv.Total())
	}
	req := &request{Request: r, ctx: ctx, submitted: time.Now()}
	req.state = exec.SeqState{Sampling: r.Sampling, Prompt: len(r.Prompt), RNG: rand.New(rand.NewPCG(r.Sampling.Seed, 0x6e696e666572))}
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
	for _, x := range e.execs {
		x.Close()
	}
	return errors.Join(e.closeModels(), e.backend.Close())
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
			Limit: len(r.Prompt) + r.MaxTokens, Stop: r.Stop}
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

func (e *Engine) finish(r *request, reason string, err error) {
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
	for _, rel := range e.releasers {
		rel.ReleaseSeq(r.seq.ID)
	}
	delete(e.reqs, r.seq)
	e.publish() // a reader that sees the final event sees the freed KV
	r.events.put(Event{Done: true, Finish: reason, Err: err, Stats: st, Embedding: r.embedding})
}

// Step runs one engine step: schedule, execute the plan, and hand the
// tokens to the scheduler (sched.Update), which appends them and decides
// stop and length; then it publishes the new load and emits the events.
// It is called by the loop goroutine; tests may call it on an engine they
// drive.
func (e *Engine) Step(ctx context.Context) error {
	for _, r := range e.reqs {
		if r.ctx.Err() != nil {
			e.finish(r, FinishAbort, r.ctx.Err())
		}
	}
	work := e.sched.Schedule()
	e.dropCarry()
	e.publish() // admitted and preempted sequences, while the step runs
	if len(work) == 0 {
		if !e.sched.Idle() && e.sched.Running() == 0 {
			return errors.New("engine: no request fits the kv cache")
		}
		return nil
	}
	now := time.Now()
	batch := &exec.Batch{}
	hc := &exec.HostContext{Ctx: ctx, Batch: batch}
	var sampled []*request
	var sampledAt []int // sampled[i] is work[sampledAt[i]]'s request
	var history [][]int32
	info := StepInfo{Start: now}
	for _, r := range e.reqs {
		if len(r.seq.KV.Blocks) == 0 {
			continue // waiting: holds no KV
		}
		info.Running++
		switch p := r.seq.Pending(); {
		case p == 1 && r.seq.Generated() > 0:
			info.DecodeReady++
		case p > 0:
			info.Prefilling++
		}
	}
	decodeRow := make([]bool, len(work)) // feeds the sequence's last generated token
	for si, w := range work {
		r := e.reqs[w.Seq]
		if r.started.IsZero() {
			r.started = now
		}
		info.Tags = append(info.Tags, r.Tag)
		decodeRow[si] = w.Seq.Pending() == 1 && w.Seq.Generated() > 0
		if decodeRow[si] {
			info.DecodeRows++
		} else {
			info.PrefillTokens += w.N
		}
		batch.Tables = append(batch.Tables, w.Seq.KV.Blocks)
		if e.state.Slots > 0 {
			batch.StateSlots = append(batch.StateSlots, w.Seq.StateSlot)
			var snaps []int32
			if w.Draft > 0 {
				snaps = w.Seq.Snapshots
			}
			batch.StateSnapshots = append(batch.StateSnapshots, snaps)
		}
		for i := 0; i < w.N; i++ {
			batch.Tokens = append(batch.Tokens, w.Seq.Tokens[w.Start+i])
			batch.Positions = append(batch.Positions, int32(w.Start+i))
			batch.RowSeq = append(batch.RowSeq, int32(si))
		}
		if w.Sample {
			batch.LogitRows = append(batch.LogitRows, int32(len(batch.Tokens)-1))
			r.state.History = w.Seq.Tokens
			r.state.Lookahead = e.lookahead(r, w.Draft)
			hc.Rows = append(hc.Rows, &r.state)
			sampled = append(sampled, r)
			sampledAt = append(sampledAt, si)
			history = append(history, w.Seq.Tokens)
		}
	}
	e.stepEmbeds = slices.ContainsFunc(sampled, func(r *request) bool { return r.Embed })
	out, values, err := e.runPlan(ctx, batch, hc, history, sampled)
	if err != nil {
		return err
	}
	tokens, err := stepTokens(out["tokens"], len(sampled))
	if err != nil {
		return err
	}
	drafts := e.verifiedDrafts(values, len(sampled))
	res := make([]sched.Result, len(work))
	for i, si := range sampledAt {
		a, err := checkAccepted(tokens[i], drafts[i], work[si])
		if err != nil {
			return err
		}
		if g := work[si].Seq.Generated(); g < len(sampled[i].Force) {
			tokens[i] = sampled[i].Force[g : g+1] // teacher-forced (plans without drafts yield one token)
		}
		res[si] = sched.Result{Tokens: tokens[i], Accepted: a}
		if sampled[i].Embed {
			res[si].Tokens = nil // the prompt is computed: nothing to append
		}
	}
	logits, _ := values[e.sampledFrom()].(exec.Logits)
	first, _ := drafts.Spans() // each sequence's first logit row
	if logits.Rows != len(drafts)+drafts.Total() {
		logits = exec.Logits{} // not one row per token: no logprobs
	}
	decoding := make([]bool, len(sampled)) // the sampled token is not the first
	for i, r := range sampled {
		r.rounds++
		w := work[sampledAt[i]]
		decoding[i] = w.Seq.Generated() > 0
		if decoding[i] && e.draftK > 0 && w.N == 1 {
			r.spec.count(drafts[i], res[sampledAt[i]].Accepted, min(e.draftK, r.seq.Limit-len(r.seq.Tokens)-1))
			e.observeRound(r, len(drafts[i]), res[sampledAt[i]].Accepted)
			info.Drafted += len(drafts[i])
			info.DraftAccepted += res[sampledAt[i]].Accepted
		}
	}
	e.keepCarry(work, res)
	outcomes := e.sched.Update(work, res)
	if err := e.draftAhead(ctx, sampled, outcomes); err != nil {
		return err
	}
	e.publish() // before any event: a reader of an event sees the load after it
	done := time.Now()
	for si, w := range work {
		if !decodeRow[si] {
			r := e.reqs[w.Seq]
			r.chunks = append(r.chunks, Chunk{At: done, Start: w.Start, Tokens: w.N})
		}
	}
	for i, o := range outcomes {
		if decoding[i] {
			info.DecodeTokens += len(o.Tokens)
		}
	}
	// Observers see the step before its events go out, so a caller that has
	// read a request's last event also sees the steps that produced it.
	info.End, info.Rows = done, len(batch.Tokens)
	e.intervals.observe(info)
	if e.cfg.Observer != nil {
		e.cfg.Observer.ObserveStep(info)
	}
	hidden, _ := values[e.hiddenOf()].(exec.Logits)
	for i, o := range outcomes {
		r := sampled[i]
		if r.Embed {
			if hidden.Data == nil || first[i] >= hidden.Rows {
				return fmt.Errorf("engine: the plan's %s gave no hidden rows for an embedding request", e.hiddenOf().Node)
			}
			row := first[i]
			if hidden.Rows == len(batch.Tokens) && hidden.Rows != len(batch.LogitRows) {
				row = int(batch.LogitRows[first[i]]) // hidden_rows: all (an embedding step verifies no drafts)
			}
			r.embedding = normalized(hidden.Row(row))
			e.finish(r, FinishStop, nil)
			continue
		}
		if r.firstTok.IsZero() {
			r.firstTok = done
		}
		for j, tok := range o.Tokens {
			ev := Event{Token: tok}
			if (r.TopLogits > 0 || r.Logprobs) && logits.Rows > 0 {
				row := logits.Row(first[i] + j)
				if r.TopLogits > 0 {
					ev.Top = topLogits(row, r.TopLogits)
				}
				ev.LogZ = vec.LogSumExp(row)
				ev.Logprob = row[tok] - ev.LogZ
			}
			r.events.put(ev)
		}
		switch o.Finish {
		case sched.Stopped:
			e.finish(r, FinishStop, nil)
		case sched.Length:
			e.finish(r, FinishLength, nil)
		}
	}
	return nil
}

// runPlan executes the plan's segments in order for one batch and returns
// the plan's outputs.
func (e *Engine) runPlan(ctx context.Context, batch *exec.Batch, hc *exec.HostContext, history [][]int32, sampled []*request) (map[string]any, map[plan.Ref]any, error) {
	values := map[plan.Ref]any{
		{Node: "$in", Port: "tokens"}:    batch.Tokens,
		{Node: "$in", Port: "positions"}: batch.Positions,
		{Node: "$in", Port: "history"}:   history,
	}
	clear(e.stepCarry) // a failed step's
	e.takeCarry(sampled, values)
	for si, seg := range e.plan.Segments {
		switch seg.Placement {
		case node.Device:
			if err := e.runDevice(ctx, si, seg, batch, hc, values); err != nil {
				return nil, nil, err
			}
		case node.Host:
			for _, idx := range seg.Steps {
				if l, ok := e.plan.Steps[idx].Node.(*plan.Loop); ok && l.Ahead {
					continue // runs once the step's tokens are accepted (draftAhead)
				}
				if err := e.runHost(e.plan.Steps[idx], hc, values); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	out := map[string]any{}
	for name, ref := range e.plan.Out {
		out[name] = values[ref]
	}
	return out, values, nil
}

// runHost runs host step st (a host node, or a loop) with its inputs
// from values and stores its outputs there.
func (e *Engine) runHost(st *plan.Step, hc *exec.HostContext, values map[plan.Ref]any) error {
	in := map[string]any{}
	for port, ref := range st.In {
		v, ok := values[ref]
		if !ok {
			return fmt.Errorf("engine: step %s: input %s has no value", st.ID, port)
		}
		in[port] = v
	}
	var res map[string]any
	var err error
	switch n := st.Node.(type) {
	case *plan.Loop:
		res, err = e.runLoop(st, n, hc, in)
	case exec.HostNode:
		res, err = n.RunHost(hc, in)
	default:
		return fmt.Errorf("engine: host step %s (%s) has no host implementation", st.ID, st.Op)
	}
	if err != nil {
		return err
	}
	for port, v := range res {
		values[plan.Ref{Node: st.ID, Port: port}] = v
	}
	return nil
}

// runDevice records the segment's device steps for this batch shape (once
// per shape), runs it, and stores the outputs later segments read. A
// segment whose steps verify drafts (an input of type draft) runs over the
// batch with those drafts inserted (exec.Batch.WithDrafts).
func (e *Engine) runDevice(ctx context.Context, si int, seg plan.Segment, batch *exec.Batch, hc *exec.HostContext, values map[plan.Ref]any) error {
	feed, err := e.feed(seg, batch, hc, values)
	if err != nil {
		return err
	}
	x, err := e.preparedSegment(e.plan.Steps, seg, newExecKey(e.backend, segmentName(si), feed))
	if err != nil {
		return err
	}
	if err := x.Run(ctx, feed); err != nil {
		return err
	}
	ax, reduces := x.(exec.ArgmaxOutputter)
	greedy := reduces && e.greedyStep(hc)
	for _, idx := range seg.Steps {
		st := e.plan.Steps[idx]
		for _, p := range st.Spec.Out {
			if p.Type == node.Hidden {
				if err := e.recordCarry(x, plan.Ref{Node: st.ID, Port: p.Name}, feed); err != nil {
					return err
				}
			}
			if p.Type == node.Hidden && e.stepEmbeds {
				data, rows, cols, err := x.Output(st.ID + "." + p.Name)
				if err == nil {
					values[plan.Ref{Node: st.ID, Port: p.Name}] = exec.Logits{Data: data, Rows: rows, Vocab: cols}
				}
				continue
			}
			if p.Type != node.Logits {
				continue
			}
			name := st.ID + "." + p.Name
			if greedy && ax.HasArgmax(name) {
				ids, err := ax.OutputArgmax(name) // ids, not [rows, vocab] floats, come back
				if err != nil {
					return err
				}
				values[plan.Ref{Node: st.ID, Port: p.Name}] = exec.Logits{Rows: len(ids), Argmax: ids}
				continue
			}
			data, rows, cols, err := x.Output(name)
			if err != nil {
				continue // not consumed outside the segment
			}
			values[plan.Ref{Node: st.ID, Port: p.Name}] = exec.Logits{Data: data, Rows: rows, Vocab: cols}
		}
	}
	return nil
}

// greedyStep reports whether a step's logits may be reduced to argmax ids
// on the device: the plan does not speculate (verify reads whole rows) and
// every sampled sequence picks greedily, without penalties, and asks for
// no logprobs.
func (e *Engine) greedyStep(hc *exec.HostContext) bool {
	if e.draftK > 0 || len(hc.Rows) == 0 {
		return false
	}
	for _, row := range hc.Rows {
		if !row.Sampling.Greedy() || row.Sampling.Penalized() {
			return false
		}
	}
	for _, r := range e.reqs {
		if r.seq.KV.Blocks != nil && (r.Logprobs || r.TopLogits > 0) {
			return false
		}
	}
	return true
}

// warmup prepares, on a Bucketer backend, every device segment at every
// bucket a step of up to maxRows rows that all sample can fall in, so that
// graph capture happens (and is paid for) at start-up, not in the first
// requests. Larger shapes go first: a backend that shares scratch memory
// between its graphs sizes it once.
func (e *Engine) warmup(maxRows int) error {
	bk, ok := e.backend.(exec.Bucketer)
	if !ok {
		return nil
	}
	for _, s := range bucketShapes(bk, maxRows) {
		rows, logitRows := s[0], s[1]
		for si, seg := range e.plan.Segments {
			if seg.Placement != node.Device {
				continue
			}
			key := execKey{segmentName(si), rows, logitRows}
			if _, err := e.preparedSegment(e.plan.Steps, seg, key); err != nil {
				return fmt.Errorf("engine: warm-up %s: %w", key, err)
			}
		}
	}
	return e.warmLoops(bk)
}

// bucketShapes are the distinct (rows, logit rows) buckets of steps of 1
// to maxRows rows that all sample, largest first.
func bucketShapes(bk exec.Bucketer, maxRows int) [][2]int { return seqShapes(bk, maxRows, 1, 1) }

// seqShapes are the distinct bucketed [rows, logit rows] of steps of 1 to
// maxSeqs sequences of rows rows and logitRows logit rows each, that fit
// the backend's largest bucket.
func seqShapes(bk exec.Bucketer, maxSeqs, rows, logitRows int) [][2]int {
	var shapes [][2]int
	for n := min(maxSeqs, bk.MaxBucket()/rows); n >= 1; n-- {
		r, lr := bk.Bucket(n*rows, n*logitRows)
		if s := [2]int{r, lr}; !slices.Contains(shapes, s) {
			shapes = append(shapes, s)
		}
	}
	return shapes
}

// segmentName names device segment si in exec keys: "seg0", "seg1", ...
func segmentName(si int) string { return fmt.Sprintf("seg%d", si) }

// preparedSegment returns the executable of device segment seg of steps
// (the plan's or a loop body's) at key, recording and preparing it the
// first time.
func (e *Engine) preparedSegment(steps []*plan.Step, seg plan.Segment, key execKey) (exec.Executable, error) {
	return prepare(e.backend, e.execs, key, func() (*tensor.Graph, error) { return e.record(e.cfg.Model, steps, seg, key, 0) })
}

// prepare returns the executable of key in execs, recording it with build
// and preparing it on be the first time.
func prepare(be exec.Backend, execs map[execKey]exec.Executable, key execKey, build func() (*tensor.Graph, error)) (exec.Executable, error) {
	if x, ok := execs[key]; ok {
		return x, nil
	}
	g, err := build()
	if err != nil {
		return nil, err
	}
	x, err := be.Prepare(g)
	if err != nil {
		return nil, err
	}
	if len(execs) >= maxExecs {
		for k, old := range execs {
			old.Close()
			delete(execs, k)
			break
		}
	}
	execs[key] = x
	return x, nil
}

// maxExecs bounds the prepared graphs kept (one per name and batch shape).
const maxExecs = 32

// record records device segment seg of steps (the plan's, or a loop
// body's, whose $loop.tokens and $loop.positions are the pass's rows, and
// $loop.hidden, of hiddenWidth floats, the float input loopHiddenInput)
// at key's shape, over the weights of f (the target's, or a draft
// model's).
func (e *Engine) record(f *weights.File, steps []*plan.Step, seg plan.Segment, key execKey, hiddenWidth int) (*tensor.Graph, error) {
	b := tensor.NewBuilder(weightInfo(f))
	tokens, positions := b.Input("tokens", key.rows), b.Input("positions", key.rows)
	vals := map[plan.Ref]tensor.Tensor{
		{Node: plan.InputNode, Port: "tokens"}: tokens, {Node: plan.InputNode, Port: "positions"}: positions,
		{Node: plan.LoopNode, Port: "tokens"}: tokens, {Node: plan.LoopNode, Port: "positions"}: positions,
	}
	if hiddenWidth > 0 {
		vals[plan.Ref{Node: plan.LoopNode, Port: "hidden"}] = b.InputF32(loopHiddenInput, key.rows, hiddenWidth)
	}
	b.Input("logit_rows", key.logitRows)
	for _, idx := range seg.Steps {
		st := steps[idx]
		dn, ok := st.Node.(exec.DeviceNode)
		if !ok {
			return nil, fmt.Errorf("engine: device step %s (%s) cannot record ops", st.ID, st.Op)
		}
		in := map[string]tensor.Tensor{}
		for port, ref := range st.In {
			if p := st.Spec.Input(port); p != nil && p.Type == node.Draft {
				continue // shapes the feed (see feed), recorded as tokens
			}
			t, ok := vals[ref]
			if !ok && ref == (plan.Ref{Node: plan.LoopNode, Port: "hidden"}) {
				continue // a block pass enters no hidden rows: the input is absent
			}
			if !ok {
				return nil, fmt.Errorf("engine: step %s: input %s from %s.%s is not a device value", st.ID, port, ref.Node, ref.Port)
			}
			in[port] = t
		}
		res, err := dn.Record(b, in)
		if err != nil {
			return nil, err
		}
		for port, t := range res {
			vals[plan.Ref{Node: st.ID, Port: port}] = t
			b.Output(st.ID+"."+port, t)
		}
	}
	g, err := b.Finish()
	if err != nil {
		return nil, err
	}
	g.Origin = fmt.Sprintf("plan %.12s %s", e.planHash, key)
	return g, nil
}

// String renders k for logs: "seg0 rows 8 logits 8".
func (k execKey) String() string {
	return fmt.Sprintf("%s rows %d logits %d", k.name, k.rows, k.logitRows)
}

// weightInfo resolves weight names to [rows, cols] for the tensor builder.
func weightInfo(f *weights.File) tensor.WeightInfo {
	return func(name string) (tensor.DType, int, int, bool) {
		t, err := f.Tensor(name)
		if err != nil {
			return 0, 0, 0, false
		}
		return t.DType, t.Rows(), t.RowLen(), true
	}
}

// hiddenOf is the hidden output of the step whose logits the plan samples
// from (model.forward's "hidden"), which Embed requests read.
func (e *Engine) hiddenOf() plan.Ref {
	return plan.Ref{Node: e.sampledFrom().Node, Port: "hidden"}
}

// normalized returns v / |v| (float64 norm), or v itself when it is zero.
func normalized(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if sum == 0 {
		copy(out, v)
		return out
	}
	inv := 1 / math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(float64(x) * inv)
	}
	return out
}

// sampledFrom is the logits value the plan's output tokens were chosen from:
// the "logits" input of the step that produces out.tokens.
func (e *Engine) sampledFrom() plan.Ref {
	if st := e.plan.Step(e.plan.Out["tokens"].Node); st != nil {
		return st.In["logits"]
	}
	return plan.Ref{}
}

// topLogits returns the n largest logits of row, descending, ties to the lower id.
func topLogits(row []float32, n int) []TokenLogit {
	n = min(n, len(row))
	top := make([]TokenLogit, 0, n+1)
	for id, v := range row {
		if len(top) == n && v <= top[n-1].Logit {
			continue
		}
		i := len(top)
		for i > 0 && v > top[i-1].Logit {
			i--
		}
		top = append(top, TokenLogit{})
		copy(top[i+1:], top[i:])
		top[i] = TokenLogit{ID: int32(id), Logit: v}
		if len(top) > n {
			top = top[:n]
		}
	}
	return top
}
