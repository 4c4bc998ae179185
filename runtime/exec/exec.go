// Package exec defines the contract between the engine and a compute backend:
// weights are loaded once, KV memory is reserved for the worst case before
// serving, and each recorded device graph is prepared once per bucket and then
// run many times with new per-step bindings.
package exec

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// KVLayout is the paged KV cache a backend reserves: Blocks blocks of
// BlockTokens token slots, for each of Layers layers a K and a V row of
// KVDim elements per slot, stored as DType.
type KVLayout struct {
	Layers      int
	KVDim       int
	BlockTokens int
	Blocks      int
	DType       string
	// State is the recurrent state of a hybrid model's state layers,
	// reserved beside the KV pages; zero for a model without one.
	State StateLayout
}

// StateLayout is a cache group of per-sequence recurrent state (Gated
// DeltaNet's conv window and delta-rule matrices): Slots slots, each
// holding, for state layer l, Conv[l] + Delta[l] float32s. The paged KV
// group's Layers count only the layers that attend.
type StateLayout struct {
	Slots int
	Conv  []int // per state layer: floats of the conv window (tensor.StateArgs.ConvStateFloats)
	Delta []int // per state layer: floats of the delta-rule state (tensor.StateArgs.DeltaStateFloats)
	// DType is how the slots are stored: "" or "f32", or "bf16" (computed
	// in f32, rounded to bf16 when a step writes them back).
	DType string
	// Checkpoints is how many of the Slots, the last ones, are a prefix
	// cache's checkpoint pool. CheckpointDType, when set, is how those are
	// stored instead of DType: with "bf16" (and f32 DType) a step that
	// writes a pool slot rounds the state into it, and a row that reads one
	// widens it back into its own f32 slot.
	Checkpoints     int
	CheckpointDType string
}

// Layers is the number of state layers.
func (l StateLayout) Layers() int { return max(len(l.Conv), len(l.Delta)) }

// BytesPerSlot is the memory of one slot: every layer's state, in DType.
func (l StateLayout) BytesPerSlot() int64 { return l.floats() * dtypeBytes(l.DType) }

// CheckpointBytes is the memory of one checkpoint pool slot.
func (l StateLayout) CheckpointBytes() int64 { return l.floats() * dtypeBytes(l.PoolDType()) }

// PoolDType is how the checkpoint pool's slots are stored.
func (l StateLayout) PoolDType() string {
	if l.CheckpointDType != "" {
		return l.CheckpointDType
	}
	return l.DType
}

// Bytes is the memory of all Slots.
func (l StateLayout) Bytes() int64 {
	return int64(l.Slots-l.Checkpoints)*l.BytesPerSlot() + int64(l.Checkpoints)*l.CheckpointBytes()
}

// floats is the number of values in one slot.
func (l StateLayout) floats() int64 {
	var n int64
	for _, c := range l.Conv {
		n += int64(c)
	}
	for _, d := range l.Delta {
		n += int64(d)
	}
	return n
}

// dtypeBytes is the size of one state value stored as dtype ("" is f32).
func dtypeBytes(dtype string) int64 {
	if dtype == "bf16" {
		return 2
	}
	return 4
}

// StateShaper is implemented by nodes whose model keeps recurrent state:
// the layout of one slot (Slots is the engine's to set).
type StateShaper interface {
	StateShape() StateLayout
}

// Slots is the number of token slots per layer.
func (l KVLayout) Slots() int { return l.Blocks * l.BlockTokens }

// Batch holds the bindings of one engine step. Rows are tokens; each row
// belongs to one sequence of the step.
type Batch struct {
	Tokens    []int32   // [T] token ids
	Positions []int32   // [T] position of each token in its sequence
	RowSeq    []int32   // [T] index into Tables of the row's sequence
	Tables    [][]int32 // [S][blocks] KV block ids of each sequence, in position order
	LogitRows []int32   // [R] rows whose logits the step needs
	// StateSlots [S] is each sequence's recurrent state slot (a model
	// with StateLayout); nil otherwise. A row reads and writes its
	// sequence's slot, unless the sequence has StateSnapshots.
	StateSlots []int32
	// StateFrom [S], when not nil, is the slot each sequence's first row
	// reads instead of its StateSlots (or StateSnapshots) slot: a state
	// checkpoint the sequence resumes from, copied by that row into the
	// slot it writes. An entry of -1 (or a nil StateFrom) reads the
	// sequence's own slot; a row at position 0 reads nothing (zero state).
	StateFrom []int32
	// StateRound [S], when not nil, says that the state sequence s's step
	// leaves in its slot is rounded to the checkpoint pool's dtype
	// (StateLayout.CheckpointDType): the step ends where a checkpoint is
	// taken but does not take it (it is cached already), so the running
	// state equals what taking or adopting it gives.
	StateRound []bool
	// StateSnapshots [S], for a sequence that verifies drafts, are the
	// slots its rows write in order: row j reads the state row j-1 wrote
	// (row 0 the StateSlots slot, left unchanged) and writes slot j, so
	// the state after any accepted prefix of the drafts is kept; nil for
	// the other sequences.
	StateSnapshots [][]int32
	// Floats are the float32 bindings of tensor.Builder.InputF32 inputs,
	// by name: rows x cols values, row-major; nil for a step without any.
	Floats map[string][]float32
	// Ints are the int32 bindings of tensor.Builder.Input inputs other
	// than the step's own (a vision tower's patch rows and columns), by
	// name; nil for a step without any.
	Ints map[string][]int32
}

// StateRows returns, for every row of b, the state slot it reads and the
// one it writes (see StateSlots and StateSnapshots). Rows of a sequence
// are in position order.
func (b *Batch) StateRows() (read, write []int32) {
	read, write = make([]int32, len(b.RowSeq)), make([]int32, len(b.RowSeq))
	seen := make([]int, len(b.StateSlots)) // rows of each sequence so far
	for r, s := range b.RowSeq {
		cur := b.StateSlots[s]
		read[r], write[r] = cur, cur
		if s := int(s); s < len(b.StateSnapshots) && b.StateSnapshots[s] != nil {
			j := seen[s]
			if j > 0 {
				read[r] = b.StateSnapshots[s][j-1]
			}
			write[r] = b.StateSnapshots[s][j]
		}
		if from := b.firstRead(int(s)); seen[s] == 0 && from >= 0 {
			read[r] = from
		}
		seen[s]++
	}
	return read, write
}

// firstRead is StateFrom[s], or -1 when sequence s reads its own slot.
func (b *Batch) firstRead(s int) int32 {
	if s < len(b.StateFrom) {
		return b.StateFrom[s]
	}
	return -1
}

// Inputs returns the named int32 bindings the recorded graph may declare:
// the step's own, then Ints.
func (b *Batch) Inputs() map[string][]int32 {
	m := map[string][]int32{node.BindTokens: b.Tokens, node.BindPositions: b.Positions, node.BindLogitRows: b.LogitRows}
	for name, v := range b.Ints {
		if _, own := m[name]; !own {
			m[name] = v
		}
	}
	return m
}

// Backend executes recorded graphs on one device. Calls are made by one
// goroutine (the engine's) in the order Load, Reserve, then Prepare/Run.
type Backend interface {
	// Name is the registered name ("cpu", "cuda").
	Name() string
	// Load binds the model weights; the file stays open while the backend is used.
	Load(f *weights.File) error
	// Reserve allocates the KV cache; it fails now rather than under load.
	Reserve(l KVLayout) error
	// Prepare lowers a recorded graph for repeated execution.
	Prepare(g *tensor.Graph) (Executable, error)
	// Close releases everything the backend holds.
	Close() error
}

// InnerStateTaker is implemented by a backend whose stateful ops run a
// sequence's rows in runs that keep the state in one slot (its rows'
// exec.Batch.StateSnapshots repeat a slot) as they would run each run as
// a step of its own: a checkpoint taken inside a step (the rows up to it
// write a pool slot, the next one reads it back) then gives the state and
// outputs of a step cut there, at no step's fixed cost
// (sched.Config.InnerCheckpoints).
type InnerStateTaker interface {
	TakesStateInside() bool
}

// Executable is a prepared graph.
type Executable interface {
	// Run executes the graph with the step's bindings. Row counts must equal
	// those the graph was recorded with, except on a Bucketer backend, where
	// they may be fewer: rows and logit rows that Bucket rounds up to the
	// recorded ones.
	Run(ctx context.Context, b *Batch) error
	// Output returns the named output as [rows, cols] float32 data, valid
	// until the next Run or Close. rows are the last Run's (not the padded
	// rows a Bucketer backend computed).
	Output(name string) (data []float32, rows, cols int, err error)
	// Close releases the executable's buffers.
	Close() error
}

// Bucketer is implemented by backends whose executables run fixed shapes
// (steps captured once as CUDA Graphs and replayed): the engine records a
// step of rows tokens and logitRows sampled rows at the shape Bucket
// returns, and runs it with the unpadded batch; the backend pads it.
type Bucketer interface {
	// Bucket returns the recorded shape for a step: paddedRows >= rows and
	// paddedLogitRows >= logitRows, equal to them when the backend runs
	// such a step at its own size.
	Bucket(rows, logitRows int) (paddedRows, paddedLogitRows int)
	// MaxBucket is the most rows a padded shape has; steps with more rows
	// run at their own shape.
	MaxBucket() int
}

// Reporter is implemented by backends that run on an accelerator.
type Reporter interface {
	// Report is a start-up log line: the device, memory reserved, graphs
	// captured and what capturing them cost.
	Report() string
	// Device describes the accelerator, for benchmark reports.
	Device() DeviceInfo
}

// Workspace is a backend's scratch memory: what its kernels compute in
// besides the weights, the KV cache and recurrent state.
type Workspace struct {
	CapacityBytes int64 // allocated now
	UsedBytes     int64 // used by the last step
	PeakUsedBytes int64 // the most one step has used
}

// WorkspaceReporter is implemented by backends that account their scratch
// memory. Workspace may be called between steps.
type WorkspaceReporter interface {
	Workspace() Workspace
}

// HostStreamer is implemented by backends that compute from the weights
// in host memory and read every one of them each decode step (the CPU).
// Their model files are best loaded into private huge-page memory
// (weights.Load) rather than mapped (weights.Open).
type HostStreamer interface {
	StreamsHostWeights() bool
}

// DeviceInfo names an accelerator and its software.
type DeviceInfo struct {
	Name    string // "NVIDIA H200 (sm_90)"
	ID      int    // ordinal among the process's visible devices
	Driver  string // driver API version, "12.8"
	Runtime string // the toolkit the kernels were compiled with, "11.8"
}

// BucketShape is the shape to record a step of rows tokens and logitRows
// sampled rows at on be: be's bucket, or the step's own shape.
func BucketShape(be Backend, rows, logitRows int) (int, int) {
	if bk, ok := be.(Bucketer); ok {
		return bk.Bucket(rows, logitRows)
	}
	return rows, logitRows
}

// Options configure a backend instance.
type Options struct {
	Threads int // host worker threads; <= 0 means all cores
	// Eager runs every kernel launch one by one instead of replaying
	// captured graphs (backends that capture graphs; others ignore it).
	Eager bool
}

var (
	mu       sync.Mutex
	backends = map[string]func(Options) Backend{}
)

// Register makes a backend constructor available by name. It panics on a
// duplicate name (a programmer error).
func Register(name string, ctor func(Options) Backend) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := backends[name]; dup {
		panic("exec: backend registered twice: " + name)
	}
	backends[name] = ctor
}

// New constructs the named backend.
func New(name string, o Options) (Backend, error) {
	mu.Lock()
	ctor, ok := backends[name]
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (have %v)", name, Names())
	}
	return ctor(o), nil
}

// Names lists the registered backends, sorted.
func Names() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
