//go:build cuda

package cuda

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func init() {
	exec.Register("cuda", func(o exec.Options) exec.Backend { return New(o) })
}

// Backend runs recorded graphs on CUDA device 0 (CUDA_VISIBLE_DEVICES
// picks it) on one stream. Weights are uploaded once in their GGUF bytes;
// the KV cache is one page area per layer for K and for V, in the layout's
// page.Format, with one block past the engine's for pad rows. All graphs share
// one activation arena and one step-input buffer: the engine runs one step
// at a time, so they never run together.
//
// Steps in which every row samples (decode, verify) of at most MaxBucket
// rows are padded to a bucket (exec.Bucketer); each such graph is captured
// once as a CUDA Graph when it is prepared and replayed every step, unless
// the backend was made with Options.Eager. Other steps launch their kernels
// one by one at their own shape.
//
// Every output whose rows are the step's logit rows (the logits) is also
// reduced on the device to each row's greedy token (argmax_rows, inside the
// captured graph), and Run copies back only those ids; an output itself is
// copied when Output first asks for it (exec.ArgmaxOutputter: a greedy step
// without logprobs takes the ids and never copies the [rows, vocab]
// logits). Outputs not yet copied are copied before another graph, a
// capture or a reallocation overwrites the arena.
type Backend struct {
	opts    exec.Options
	buckets buckets

	ready  bool
	dev    cu.Device
	ctx    cu.CUContext
	stream cu.Stream
	k      *kernels

	file    *weights.File
	weights map[string]deviceTensor
	norms   map[string]cu.DevicePtr // f32 copies of rms_norm weights by name

	kvl      exec.KVLayout
	kvFormat page.Format
	kc, vc   []cu.DevicePtr // [layer] (Blocks+1)*BlockTokens rows of RowBytes(KVDim)
	// convState and deltaState are the recurrent state areas per state
	// layer (0 where the layer has none): kvl.State.Slots+1 slots of f32
	// or, with kvl.State.DType bf16, of bf16 (staged in f32 around each
	// op, program.stateful), the last for pad rows.
	convState, deltaState []cu.DevicePtr

	arena deviceBuf // activations of every graph
	step  deviceBuf // step inputs of every graph
	// arenaGen counts arena and step buffer reallocations: a graph captured
	// against an older generation is captured again before it runs.
	arenaGen int

	programs map[captureKey]*program
	captures []captureStat
	// pending is the program whose last Run left outputs in the arena that
	// Output has not copied yet; they are copied before anything else
	// overwrites or frees the arena.
	pending *program

	weightBytes, kvBytes int64
	deviceName           string
}

// deviceTensor is an uploaded weight.
type deviceTensor struct {
	ptr        cu.DevicePtr
	dt         tensor.DType
	rows, cols int
}

// deviceBuf is a device allocation that only grows.
type deviceBuf struct {
	ptr  cu.DevicePtr
	size int64
}

// captureStat is what capturing one graph cost.
type captureStat struct {
	origin string
	nodes  int
	took   time.Duration
}

// New returns a CUDA backend. The device is opened by Load.
func New(o exec.Options) *Backend {
	return &Backend{opts: o, buckets: newBuckets(DefaultBuckets), programs: map[captureKey]*program{}}
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return "cuda" }

// Bucket implements exec.Bucketer.
func (b *Backend) Bucket(rows, logitRows int) (int, int) { return b.buckets.shape(rows, logitRows) }

// MaxBucket implements exec.Bucketer.
func (b *Backend) MaxBucket() int { return b.buckets.max() }

// enter pins the calling goroutine to its thread and makes the backend's
// context current there; the returned func undoes the pin. Every method
// that calls the driver starts with it: the engine's goroutine may move
// between threads from one call to the next.
func (b *Backend) enter() (func(), error) {
	runtime.LockOSThread()
	if b.ready {
		if err := cu.SetCurrentContext(b.ctx); err != nil {
			runtime.UnlockOSThread()
			return nil, fmt.Errorf("cuda: set context: %w", err)
		}
	}
	return runtime.UnlockOSThread, nil
}

// open retains device 0's primary context and loads the kernels.
func (b *Backend) open() error {
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("cuda: count devices: %w", err)
	}
	if n == 0 {
		return errors.New("cuda: no CUDA device")
	}
	if b.dev, err = cu.GetDevice(0); err != nil {
		return fmt.Errorf("cuda: device 0: %w", err)
	}
	if b.ctx, err = b.dev.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("cuda: primary context: %w", err)
	}
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		b.dev.ReleasePrimaryCtx()
		return fmt.Errorf("cuda: set context: %w", err)
	}
	name, _ := b.dev.Name()
	major, _ := b.dev.Attribute(cu.ComputeCapabilityMajor)
	minor, _ := b.dev.Attribute(cu.ComputeCapabilityMinor)
	b.deviceName = fmt.Sprintf("%s (sm_%d%d)", name, major, minor)
	if b.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		b.dev.ReleasePrimaryCtx()
		return fmt.Errorf("cuda: stream: %w", err)
	}
	if b.k, err = loadKernels(); err != nil {
		b.stream.Destroy()
		b.dev.ReleasePrimaryCtx()
		return err
	}
	b.ready = true
	return nil
}

// Load implements exec.Backend: it opens the device and uploads every
// weight in its stored bytes.
func (b *Backend) Load(f *weights.File) error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !b.ready {
		if err := b.open(); err != nil {
			return err
		}
	}
	var need int64
	for _, t := range f.Tensors {
		need += int64(len(t.Data))
	}
	if free, _, err := cu.MemInfo(); err == nil && need > free {
		return fmt.Errorf("cuda: weights need %d MiB, the device has %d MiB free", need>>20, free>>20)
	}
	b.file = f
	b.weights = make(map[string]deviceTensor, len(f.Tensors))
	b.norms = map[string]cu.DevicePtr{}
	for _, t := range f.Tensors {
		if _, err := t.DType.RowBytes(t.RowLen()); err != nil {
			continue // a dtype no kernel reads; Prepare fails if a graph uses it
		}
		ptr, err := upload(t.Data)
		if err != nil {
			return fmt.Errorf("cuda: upload %q: %w", t.Name, err)
		}
		b.weights[t.Name] = deviceTensor{ptr: ptr, dt: t.DType, rows: t.Rows(), cols: t.RowLen()}
		b.weightBytes += int64(len(t.Data))
	}
	return nil
}

// upload copies data into a new device allocation.
func upload(data []byte) (cu.DevicePtr, error) {
	ptr, err := cu.MemAlloc(int64(max(len(data), 1)))
	if err != nil {
		return 0, err
	}
	if len(data) > 0 {
		if err := cu.MemcpyHtoD(ptr, unsafe.Pointer(&data[0]), int64(len(data))); err != nil {
			cu.MemFree(ptr)
			return 0, err
		}
	}
	return ptr, nil
}

// Reserve implements exec.Backend: a K and a V page area per layer of
// l.Blocks+1 blocks (the last for pad rows), and the recurrent state areas
// in l.State.DType (stateDTypes), zeroed.
func (b *Backend) Reserve(l exec.KVLayout) error {
	if l.Layers <= 0 || l.KVDim <= 0 || l.BlockTokens <= 0 || l.Blocks <= 0 {
		return fmt.Errorf("cuda: bad kv layout %+v", l)
	}
	f, err := page.LookupFormat(l.DType)
	if err != nil {
		return fmt.Errorf("cuda: kv dtype: %w", err)
	}
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !b.ready {
		return errors.New("cuda: Reserve before Load")
	}
	if why := stateLayout(l.State); why != "" {
		return errors.New("cuda: " + why)
	}
	area := int64(l.Blocks+1) * int64(l.BlockTokens) * int64(f.RowBytes(l.KVDim))
	stateBytes := int64(l.State.Slots+1) * l.State.BytesPerSlot()
	if l.State.Layers() == 0 {
		stateBytes = 0
	}
	if free, _, err := cu.MemInfo(); err == nil && 2*int64(l.Layers)*area+stateBytes > free {
		return fmt.Errorf("cuda: kv cache and recurrent state need %d MiB, the device has %d MiB free", (2*int64(l.Layers)*area+stateBytes)>>20, free>>20)
	}
	b.freeKV()
	b.kvl, b.kvFormat = l, f
	for range l.Layers {
		for _, pages := range []*[]cu.DevicePtr{&b.kc, &b.vc} {
			ptr, err := cu.MemAlloc(area)
			if err != nil {
				b.freeKV()
				return fmt.Errorf("cuda: kv cache: %w", err)
			}
			*pages = append(*pages, ptr)
			if err := cu.MemsetD8(ptr, 0, area); err != nil {
				b.freeKV()
				return fmt.Errorf("cuda: kv cache: %w", err)
			}
		}
	}
	for i := range l.State.Layers() {
		for _, st := range []struct {
			areas  *[]cu.DevicePtr
			floats []int
		}{{&b.convState, l.State.Conv}, {&b.deltaState, l.State.Delta}} {
			var ptr cu.DevicePtr
			if i < len(st.floats) && st.floats[i] > 0 {
				n := stateValueBytes(l.State.DType) * int64(l.State.Slots+1) * int64(st.floats[i])
				if ptr, err = cu.MemAlloc(n); err == nil {
					err = cu.MemsetD8(ptr, 0, n)
				}
				if err != nil {
					b.freeKV()
					return fmt.Errorf("cuda: recurrent state: %w", err)
				}
			}
			*st.areas = append(*st.areas, ptr)
		}
	}
	b.kvBytes = 2*int64(l.Layers)*area + stateBytes
	return nil
}

// freeKV frees the KV pages and the recurrent state.
func (b *Backend) freeKV() {
	for _, p := range slices.Concat(b.kc, b.vc, b.convState, b.deltaState) {
		if p != 0 {
			cu.MemFree(p)
		}
	}
	b.kc, b.vc, b.convState, b.deltaState, b.kvBytes = nil, nil, nil, nil, 0
}

// KVBytes is the device memory the KV cache holds, pad block included.
func (b *Backend) KVBytes() int64 { return b.kvBytes }

// Report implements exec.Reporter.
func (b *Backend) Report() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "cuda: %s, weights %d MiB, kv cache %d MiB (%s)", b.deviceName, b.weightBytes>>20, b.kvBytes>>20, b.kvFormat.Name)
	if b.opts.Eager {
		sb.WriteString(", eager launches (no CUDA graphs)")
		return sb.String()
	}
	var total, worst time.Duration
	nodes := 0
	for _, c := range b.captures {
		total += c.took
		worst = max(worst, c.took)
		nodes = max(nodes, c.nodes)
	}
	fmt.Fprintf(&sb, ", %d CUDA graphs captured in %.1f ms (slowest %.1f ms, up to %d kernels each)",
		len(b.captures), total.Seconds()*1e3, worst.Seconds()*1e3, nodes)
	return sb.String()
}

// Device implements exec.Reporter.
func (b *Backend) Device() exec.DeviceInfo {
	v := func(n int) string { return fmt.Sprintf("%d.%d", n/1000, n%1000/10) }
	return exec.DeviceInfo{Name: b.deviceName, ID: 0, Driver: v(cu.Version()), Runtime: v(headerVersion())}
}

// Close implements exec.Backend.
func (b *Backend) Close() error {
	leave, err := b.enter()
	if err != nil {
		return err
	}
	defer leave()
	if !b.ready {
		return nil
	}
	var errs []error
	for _, p := range b.programs {
		errs = append(errs, p.release())
	}
	b.programs = map[captureKey]*program{}
	for _, t := range b.weights {
		errs = append(errs, cu.MemFree(t.ptr))
	}
	for _, p := range b.norms {
		errs = append(errs, cu.MemFree(p))
	}
	b.weights, b.norms = nil, nil
	b.freeKV()
	for _, buf := range []*deviceBuf{&b.arena, &b.step} {
		if buf.ptr != 0 {
			errs = append(errs, cu.MemFree(buf.ptr))
		}
		*buf = deviceBuf{}
	}
	errs = append(errs, b.stream.Destroy(), b.dev.ReleasePrimaryCtx())
	b.ready = false
	return errors.Join(errs...)
}

// grow makes buf at least n bytes, synchronising first: a kernel in
// flight may still use the old allocation.
func (b *Backend) grow(buf *deviceBuf, n int64) error {
	if buf.size >= n {
		return nil
	}
	if err := b.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: synchronize: %w", err)
	}
	if err := b.flush(); err != nil {
		return err
	}
	if buf.ptr != 0 {
		if err := cu.MemFree(buf.ptr); err != nil {
			return err
		}
		*buf = deviceBuf{}
	}
	ptr, err := cu.MemAlloc(n)
	if err != nil {
		return fmt.Errorf("cuda: allocate %d MiB of activations: %w", n>>20, err)
	}
	*buf = deviceBuf{ptr: ptr, size: n}
	b.arenaGen++
	return nil
}

// flush copies the outputs of the pending program that Output has not
// copied yet to their host buffers, so that the arena may be reused.
func (b *Backend) flush() error {
	p := b.pending
	if p == nil {
		return nil
	}
	b.pending = nil
	for _, name := range slices.Sorted(maps.Keys(p.outputs)) {
		if err := p.fetch(p.outputs[name]); err != nil {
			return err
		}
	}
	return nil
}

// norm returns the f32 device copy of an rms_norm weight, uploading it the
// first time.
func (b *Backend) norm(f *weights.File, name string) (cu.DevicePtr, error) {
	if p, ok := b.norms[name]; ok {
		return p, nil
	}
	t, err := f.Tensor(name)
	if err != nil {
		return 0, err
	}
	v, err := t.Float32s()
	if err != nil {
		return 0, fmt.Errorf("cuda: rms_norm weight %q: %w", name, err)
	}
	p, err := upload(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)))
	if err != nil {
		return 0, err
	}
	b.norms[name] = p
	return p, nil
}

// program is a prepared graph: its buffer plan, its step layout and, when
// captured, its graph executable. Identical graphs share one (refs).
type program struct {
	b       *Backend
	g       *tensor.Graph
	key     captureKey
	refs    int
	plan    bufferPlan
	layout  stepLayout
	packer  stepPacker
	vocab   int            // token ids must be below it (the get_rows table's rows)
	w       []deviceTensor // [op] weight of OpWeight ops
	norms   []cu.DevicePtr // [op] f32 weight of rms_norm ops
	inputAt []int          // [op] word offset in the step buffer of OpInput ops
	argmax  []argmaxOut    // outputs reduced to ids on the device
	capture bool           // replayed as a CUDA graph
	graph   *graphExec
	gen     int // arena generation graph was captured against
	host    unsafe.Pointer
	hostCap int64
	outputs map[string]*output
	// rows and logitRows of the last Run, which Output reports.
	rows, logitRows int
}

// output is a graph output and its host copy, made when Output first asks
// for it after a Run (or when the arena is needed for something else).
type output struct {
	t       tensor.Tensor
	src     rowSource
	host    []float32 // [recorded rows, cols], in p.host
	fetched bool      // host holds the last Run's values
	ids     []int32   // [recorded rows] argmax per row, in p.host; nil if not reduced
	idsOff  int64     // arena offset of the device ids
}

// Prepare implements exec.Backend. It refuses a graph with an op or a
// weight dtype the kernels lack (checkGraph, support.go), naming them;
// plans the graph's buffers; and, for a captured shape, captures the graph
// now, so that the engine's warm-up pays for it.
func (b *Backend) Prepare(g *tensor.Graph) (exec.Executable, error) {
	leave, err := b.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if !b.ready || b.kc == nil {
		return nil, errors.New("cuda: Prepare before Load and Reserve")
	}
	key := graphKey(g)
	if p, ok := b.programs[key]; ok {
		p.refs++
		return &handle{p: p}, nil
	}
	p, err := b.newProgram(g, key)
	if err != nil {
		return nil, err
	}
	if p.capture {
		if err := p.captureGraph(); err != nil {
			p.release()
			return nil, err
		}
	}
	b.programs[key] = p
	return &handle{p: p}, nil
}

func (b *Backend) newProgram(g *tensor.Graph, key captureKey) (*program, error) {
	if err := checkGraph(g); err != nil {
		return nil, err
	}
	rows, logitRows := -1, 0
	for _, op := range g.Ops {
		if op.Kind == tensor.OpInput {
			switch op.Name {
			case node.BindTokens, node.BindPositions:
				if rows >= 0 && rows != op.Out.Rows() {
					return nil, fmt.Errorf("cuda: inputs tokens and positions have %d and %d rows", rows, op.Out.Rows())
				}
				rows = op.Out.Rows()
			case node.BindLogitRows:
				logitRows = op.Out.Rows()
			default:
				if op.Out.DType != tensor.F32 { // float inputs: step-buffer floats
					return nil, fmt.Errorf("cuda: no binding for input %q", op.Name)
				}
			}
		}
	}
	if rows < 0 {
		return nil, errors.New("cuda: graph has no tokens input")
	}
	stage := 0 // staged slots of a bf16 state
	if b.kvl.State.DType == "bf16" {
		stage = stageSlots(rows, b.kvl.State.Slots)
	}
	plan, err := planBuffers(g, stage)
	if err != nil {
		return nil, err
	}
	argmax, arenaSize := planArgmax(g, plan)
	p := &program{b: b, g: g, key: key, refs: 1, plan: plan, vocab: math.MaxInt32, argmax: argmax,
		w: make([]deviceTensor, len(g.Ops)), norms: make([]cu.DevicePtr, len(g.Ops)), inputAt: make([]int, len(g.Ops)),
		outputs: map[string]*output{}}
	p.layout = newStepLayout(rows, logitRows, b.kvl.Blocks)
	p.layout.StateSlots = b.kvl.State.Slots
	for i, op := range g.Ops {
		switch op.Kind {
		case tensor.OpInput:
			p.inputAt[i] = map[string]int{node.BindTokens: p.layout.Tokens, node.BindPositions: p.layout.Positions, node.BindLogitRows: p.layout.LogitRowsAt}[op.Name]
			if op.Out.DType == tensor.F32 {
				p.inputAt[i] = p.layout.addFloat(op.Name, op.Out.Rows(), op.Out.Cols())
			}
		case tensor.OpWeight:
			t, ok := b.weights[op.Name]
			if !ok {
				return nil, fmt.Errorf("cuda: weight %q not loaded", op.Name)
			}
			p.w[i] = t
		case tensor.OpRMSNorm:
			wop := g.Ops[op.Args[1].ID]
			if wop.Kind != tensor.OpWeight {
				return nil, errors.New("cuda: rms_norm: scale must be a weight")
			}
			ptr, err := b.norm(b.file, wop.Name)
			if err != nil {
				return nil, err
			}
			p.norms[i] = ptr
		case tensor.OpGetRows:
			if g.Ops[op.Args[0].ID].Kind != tensor.OpWeight {
				return nil, errors.New("cuda: get_rows: table must be a weight")
			}
			if ids := g.Ops[op.Args[1].ID]; ids.Kind == tensor.OpInput && ids.Name == node.BindTokens {
				p.vocab = min(p.vocab, op.Args[0].Rows())
			}
		case tensor.OpMatMul:
			if g.Ops[op.Args[1].ID].Kind != tensor.OpWeight {
				return nil, errors.New("cuda: matmul: the right operand must be a weight")
			}
		case tensor.OpAttention:
			a := op.Attn
			if a.Layer < 0 || a.Layer >= b.kvl.Layers || op.Args[1].Cols() != b.kvl.KVDim {
				return nil, fmt.Errorf("cuda: attention layer %d width %d does not fit kv layout %+v", a.Layer, op.Args[1].Cols(), b.kvl)
			}
		case tensor.OpSelectRows:
			if rop := g.Ops[op.Args[1].ID]; rop.Kind != tensor.OpInput {
				return nil, errors.New("cuda: select_rows: rows must be an input")
			}
		case tensor.OpRoPE, tensor.OpAddRow, tensor.OpMulRow:
			// The rope factors, add_row bias and mul_row scale are f32
			// weights (the builder checks), read in their uploaded bytes.
			if a := len(op.Args) - 1; (op.Kind != tensor.OpRoPE || a == 2) && g.Ops[op.Args[a].ID].Kind != tensor.OpWeight {
				return nil, fmt.Errorf("cuda: %v: argument %d must be a weight", op.Kind, a)
			}
		case tensor.OpMoE:
			for _, a := range op.Args[2:] {
				if g.Ops[a.ID].Kind != tensor.OpWeight {
					return nil, errors.New("cuda: moe: the experts must be weights")
				}
			}
		case tensor.OpShortConv, tensor.OpDeltaRule:
			if err := b.checkState(op); err != nil {
				return nil, err
			}
			if op.Kind == tensor.OpShortConv && g.Ops[op.Args[1].ID].Kind != tensor.OpWeight {
				return nil, errors.New("cuda: short_conv: the taps must be a weight")
			}
			if !p.layout.Stateful && stage > 0 {
				p.layout.addStage(stage)
			}
			p.layout.Stateful = true
		case tensor.OpAdd, tensor.OpSwiGLU, tensor.OpColumns, tensor.OpConcat, tensor.OpUnary, tensor.OpMul, tensor.OpL2Norm:
		default:
			return nil, fmt.Errorf("cuda: op %v not implemented", op.Kind)
		}
	}
	// Output host copies: pinned, one block for all outputs.
	var need int64
	for _, t := range g.Outputs {
		need += 4 * int64(t.Rows()) * int64(t.Cols())
	}
	for _, a := range argmax {
		need += 4 * int64(a.T.Rows())
	}
	need += p.layout.Bytes()
	host, err := hostAlloc(max(need, 4))
	if err != nil {
		return nil, err
	}
	p.host, p.hostCap = host, need
	off := p.layout.Bytes()
	for name, t := range g.Outputs {
		n := t.Rows() * t.Cols()
		p.outputs[name] = &output{t: t, src: plan.Rows[t.ID], host: unsafe.Slice((*float32)(unsafe.Add(host, off)), n)}
		off += 4 * int64(n)
	}
	for _, a := range argmax {
		o := p.outputs[a.Name]
		o.ids, o.idsOff = unsafe.Slice((*int32)(unsafe.Add(host, off)), a.T.Rows()), a.Off
		off += 4 * int64(a.T.Rows())
	}
	if err := b.grow(&b.arena, max(arenaSize, arenaAlign)); err != nil {
		hostFree(host)
		return nil, err
	}
	if err := b.grow(&b.step, p.layout.Bytes()); err != nil {
		hostFree(host)
		return nil, err
	}
	p.capture = !b.opts.Eager && b.buckets.captured(rows, logitRows)
	return p, nil
}

// stepWords is the pinned host staging of the step inputs.
func (p *program) stepWords() []int32 {
	return unsafe.Slice((*int32)(p.host), p.layout.Words)
}

// captureGraph captures the program's kernel launches as a CUDA graph and
// replays it once over pad rows only (which makes the driver finish any
// lazy set-up now, not in the first request).
func (p *program) captureGraph() error {
	b := p.b
	if err := b.flush(); err != nil { // the replay below overwrites the arena
		return err
	}
	if p.graph != nil {
		if err := p.graph.destroy(); err != nil {
			return err
		}
		p.graph = nil
	}
	empty := &exec.Batch{}
	if err := p.packer.pack(p.stepWords(), p.layout, empty, b.kvl.BlockTokens, p.vocab); err != nil {
		return err
	}
	start := time.Now()
	if err := beginCapture(b.stream); err != nil {
		return err
	}
	launchErr := p.launch()
	g, err := endCapture(b.stream)
	if launchErr != nil {
		if g != nil {
			g.destroy()
		}
		return fmt.Errorf("cuda: capture %s: %w", p.g.Origin, launchErr)
	}
	if err != nil {
		return fmt.Errorf("cuda: capture %s: %w", p.g.Origin, err)
	}
	p.graph, p.gen = g, b.arenaGen
	if err := cu.MemcpyHtoDAsync(b.step.ptr, p.host, p.layout.Bytes(), b.stream); err != nil {
		return err
	}
	if err := p.graph.launch(b.stream); err != nil {
		return err
	}
	if err := b.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: first replay of %s: %w", p.g.Origin, err)
	}
	b.captures = append(b.captures, captureStat{origin: p.g.Origin, nodes: g.nodes, took: time.Since(start)})
	return nil
}

// ptr is the device address of op id's f32 output: in the arena, or for a
// float input in the step buffer.
func (p *program) ptr(id int) cu.DevicePtr {
	if off := p.plan.Offset[id]; off >= 0 {
		return p.b.arena.ptr + cu.DevicePtr(off)
	}
	return p.in(id)
}

// in is the device address of input op id's words.
func (p *program) in(id int) cu.DevicePtr { return p.b.step.ptr + cu.DevicePtr(4*p.inputAt[id]) }

// word is the device address of word w of the step buffer.
func (p *program) word(w int) cu.DevicePtr { return p.b.step.ptr + cu.DevicePtr(4*w) }

// stateRows are the step buffer's state slots and positions of the rows.
func (p *program) stateRows() stateRows {
	l := p.layout
	return stateRows{read: ptr(p.word(l.StateRead)), write: ptr(p.word(l.StateWrite)), pos: ptr(p.word(l.Positions))}
}

// stateful launches a short_conv or delta_rule op on its layer's state
// area; on a bf16 state, on the op's f32 staging between state_widen and
// state_narrow (the step buffer's rows then bind staging entries).
func (p *program) stateful(i int, op tensor.Op, out cu.DevicePtr) error {
	b, k, s := p.b, p.b.k, p.b.stream
	store, per := b.deltaState[op.State.Layer], stateFloats(op)
	if op.Kind == tensor.OpShortConv {
		store = b.convState[op.State.Layer]
	}
	state := store
	l := p.layout
	var st stateStage
	if l.Stage > 0 {
		st = stateStage{area: ptr(b.arena.ptr + cu.DevicePtr(p.plan.Scratch[i])), slot: ptr(p.word(l.StageSlot)),
			written: ptr(p.word(l.StageWritten)), count: ptr(p.word(l.StageCount)), capacity: l.Stage}
		if err := k.stateStage(s, true, st, store, per); err != nil {
			return err
		}
		state = cu.DevicePtr(st.area)
	}
	var err error
	if a := op.Args; op.Kind == tensor.OpShortConv {
		err = k.shortConv(s, out, p.ptr(a[0].ID), p.w[a[1].ID].ptr, state, p.stateRows(), a[0].Rows(), a[0].Cols(), op.State.Kernel)
	} else {
		err = k.deltaRule(s, out, p.ptr(a[0].ID), p.ptr(a[1].ID), p.ptr(a[2].ID), p.ptr(a[3].ID), p.ptr(a[4].ID),
			state, p.stateRows(), op.Out.Rows(), op.State)
	}
	if err != nil || l.Stage == 0 {
		return err
	}
	return k.stateStage(s, false, st, store, per)
}

// checkState reports whether op's state fits the reserved layout: its
// state layer has an area of the op's size per slot.
func (b *Backend) checkState(op tensor.Op) error {
	l, st := op.State.Layer, b.kvl.State
	need, have, what := op.State.DeltaStateFloats(), st.Delta, "delta_rule"
	if op.Kind == tensor.OpShortConv {
		need, have, what = op.State.ConvStateFloats(op.Out.Cols()), st.Conv, "short_conv"
	}
	if l < 0 || l >= len(have) || have[l] != need || st.Slots == 0 {
		return fmt.Errorf("cuda: %s of state layer %d needs %d floats per slot, the reserved layout has %v in %d slots", what, l, need, have, st.Slots)
	}
	return nil
}

// launch issues every kernel of the graph on the stream, in op order, at
// the recorded (padded) shape.
func (p *program) launch() error {
	b, k, s := p.b, p.b.k, p.b.stream
	for i, op := range p.g.Ops {
		out := func() cu.DevicePtr { return p.ptr(i) }
		var err error
		switch op.Kind {
		case tensor.OpInput, tensor.OpWeight:
		case tensor.OpGetRows:
			w := p.w[op.Args[0].ID]
			err = k.getRows(s, out(), w.ptr, p.in(op.Args[1].ID), w.dt, op.Out.Rows(), op.Out.Cols())
		case tensor.OpRMSNorm:
			err = k.rmsNorm(s, out(), p.ptr(op.Args[0].ID), p.norms[i], op.Out.Rows(), op.Out.Cols(), op.Group, op.Eps)
		case tensor.OpMatMul:
			x, w := op.Args[0], p.w[op.Args[1].ID]
			var xq cu.DevicePtr
			if quantized(w.dt) {
				off := p.plan.QuantOffset[x.ID]
				if kquant(w.dt) {
					off = p.plan.QuantKOffset[x.ID]
				}
				xq = b.arena.ptr + cu.DevicePtr(off)
				if p.plan.QuantBefore[i] {
					if err = k.quantize(s, xq, p.ptr(x.ID), w.dt, x.Rows(), x.Cols()); err != nil {
						break
					}
				}
			}
			err = k.matmul(s, out(), p.ptr(x.ID), xq, w.ptr, w.dt, x.Rows(), x.Cols(), w.rows)
		case tensor.OpRoPE:
			var factors cu.DevicePtr
			if len(op.Args) > 2 {
				factors = p.w[op.Args[2].ID].ptr
			}
			err = k.rope(s, out(), p.ptr(op.Args[0].ID), p.in(op.Args[1].ID), factors, op.Out.Rows(), op.Out.Cols(), op.RoPE)
		case tensor.OpAttention:
			l, a := p.layout, op.Attn
			err = k.kvWrite(s, b.kc[a.Layer], b.vc[a.Layer], p.ptr(op.Args[1].ID), p.ptr(op.Args[2].ID), p.word(l.Slots),
				b.kvFormat.Name, op.Out.Rows(), b.kvl.KVDim)
			attends := l.Positions // row t attends positions 0..pos[t]
			if a.NonCausal {
				attends = l.Reach // ... or 0..its sequence's last
			}
			if err == nil {
				err = k.attention(s, out(), p.ptr(op.Args[0].ID), b.kc[a.Layer], b.vc[a.Layer], p.word(attends),
					p.word(l.RowTables), p.word(l.Tables), b.kvFormat.Name, op.Out.Rows(), a, b.kvl.BlockTokens, b.kvl.KVDim)
			}
		case tensor.OpAdd:
			err = k.add(s, out(), p.ptr(op.Args[0].ID), p.ptr(op.Args[1].ID), op.Out.Rows()*op.Out.Cols())
		case tensor.OpSwiGLU:
			err = k.swiglu(s, out(), p.ptr(op.Args[0].ID), p.ptr(op.Args[1].ID), op.Out.Rows()*op.Out.Cols())
		case tensor.OpColumns:
			x := op.Args[0]
			err = k.columns(s, out(), p.ptr(x.ID), x.Rows(), x.Cols(), op.Group, op.Offset, op.Width)
		case tensor.OpConcat:
			err = k.concat(s, out(), p.ptr(op.Args[0].ID), p.ptr(op.Args[1].ID), op.Out.Rows(), op.Args[0].Cols(), op.Args[1].Cols())
		case tensor.OpUnary:
			err = k.unary(s, out(), p.ptr(op.Args[0].ID), op.Out.Rows()*op.Out.Cols(), op.Fn)
		case tensor.OpMul:
			d := 0 // y as x's shape
			if y := op.Args[1]; y.Cols() == 1 && op.Out.Cols() != 1 {
				d = op.Out.Cols() // y [T, 1] scales each row
			}
			err = k.mul(s, out(), p.ptr(op.Args[0].ID), p.ptr(op.Args[1].ID), op.Out.Rows()*op.Out.Cols(), d)
		case tensor.OpAddRow, tensor.OpMulRow:
			err = k.row(s, op.Kind.String(), out(), p.ptr(op.Args[0].ID), p.w[op.Args[1].ID].ptr, op.Out.Rows()*op.Out.Cols(), op.Out.Cols())
		case tensor.OpL2Norm:
			err = k.l2Norm(s, out(), p.ptr(op.Args[0].ID), op.Out.Rows(), op.Out.Cols(), op.Group, op.Eps)
		case tensor.OpMoE:
			a := op.Args
			err = k.moe(s, out(), p.ptr(a[0].ID), p.ptr(a[1].ID), b.arena.ptr+cu.DevicePtr(p.plan.Scratch[i]),
				p.w[a[2].ID], p.w[a[3].ID], p.w[a[4].ID], op.Out.Rows(), op.Out.Cols(), op.MoE)
		case tensor.OpShortConv, tensor.OpDeltaRule:
			err = p.stateful(i, op, out())
		case tensor.OpSelectRows:
			err = k.selectRows(s, out(), p.ptr(op.Args[0].ID), p.in(op.Args[1].ID), op.Out.Rows(), op.Out.Cols())
		default:
			err = fmt.Errorf("op %v not implemented", op.Kind)
		}
		if err != nil {
			return fmt.Errorf("cuda: op %d (%v): %w", i, op.Kind, err)
		}
	}
	for _, a := range p.argmax {
		if err := k.argmax(s, b.arena.ptr+cu.DevicePtr(a.Off), p.ptr(a.T.ID), a.T.Rows(), a.T.Cols()); err != nil {
			return fmt.Errorf("cuda: argmax of output %s: %w", a.Name, err)
		}
	}
	return nil
}

// run executes one step: inputs to the device, the graph (replayed or
// launched), outputs back, then waits for the stream.
func (p *program) run(ctx context.Context, batch *exec.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := p.b
	if b.pending != p {
		if err := b.flush(); err != nil {
			return err
		}
	}
	b.pending = nil
	for _, o := range p.outputs {
		o.fetched = false
	}
	if err := p.packer.pack(p.stepWords(), p.layout, batch, b.kvl.BlockTokens, p.vocab); err != nil {
		return err
	}
	p.rows, p.logitRows = len(batch.Tokens), len(batch.LogitRows)
	if p.capture && (p.graph == nil || p.gen != b.arenaGen) {
		if err := p.captureGraph(); err != nil {
			return err
		}
		// captureGraph replayed over pad rows: pack the batch again.
		if err := p.packer.pack(p.stepWords(), p.layout, batch, b.kvl.BlockTokens, p.vocab); err != nil {
			return err
		}
	}
	if err := cu.MemcpyHtoDAsync(b.step.ptr, p.host, p.layout.Bytes(), b.stream); err != nil {
		return fmt.Errorf("cuda: copy step inputs: %w", err)
	}
	if p.capture {
		if err := p.graph.launch(b.stream); err != nil {
			return err
		}
	} else if err := p.launch(); err != nil {
		return err
	}
	// Only the ids come back now: rows x 4 bytes instead of rows x vocab x
	// 4. The outputs themselves stay in the arena until Output asks (fetch).
	for _, o := range p.outputs {
		if n := int64(p.outRows(o)); o.ids != nil && n > 0 {
			if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&o.ids[0]), b.arena.ptr+cu.DevicePtr(o.idsOff), 4*n, b.stream); err != nil {
				return fmt.Errorf("cuda: copy output ids: %w", err)
			}
		}
	}
	if err := b.stream.Synchronize(); err != nil {
		return fmt.Errorf("cuda: step %s: %w", p.g.Origin, err)
	}
	b.pending = p
	return nil
}

// fetch copies output o of the last Run to its host buffer unless it is
// there already. The stream is idle: run synchronised it.
func (p *program) fetch(o *output) error {
	if o.fetched {
		return nil
	}
	if n := int64(p.outRows(o) * o.t.Cols()); n > 0 {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&o.host[0]), p.ptr(o.t.ID), 4*n); err != nil {
			return fmt.Errorf("cuda: copy output: %w", err)
		}
	}
	o.fetched = true
	return nil
}

// outRows is the rows of o the last Run computed for its batch.
func (p *program) outRows(o *output) int {
	switch o.src {
	case rowsTokens:
		return p.rows
	case rowsLogits:
		return p.logitRows
	}
	return o.t.Rows()
}

// release frees the program's graph and host memory.
func (p *program) release() error {
	if p.b.pending == p {
		p.b.pending = nil
	}
	var errs []error
	if p.graph != nil {
		errs = append(errs, p.graph.destroy())
		p.graph = nil
	}
	errs = append(errs, hostFree(p.host))
	p.host = nil
	return errors.Join(errs...)
}

var _ exec.ArgmaxOutputter = (*handle)(nil)

// handle is one Prepare's view of a (possibly shared) program.
type handle struct {
	p      *program
	closed bool
}

// Run implements exec.Executable.
func (h *handle) Run(ctx context.Context, b *exec.Batch) error {
	if h.closed {
		return errors.New("cuda: run of a closed executable")
	}
	leave, err := h.p.b.enter()
	if err != nil {
		return err
	}
	defer leave()
	return h.p.run(ctx, b)
}

// Output implements exec.Executable. It copies the output from the device
// the first time it is asked for after a Run.
func (h *handle) Output(name string) ([]float32, int, int, error) {
	o, ok := h.p.outputs[name]
	if !ok || h.closed {
		return nil, 0, 0, fmt.Errorf("cuda: no output %q", name)
	}
	if !o.fetched {
		leave, err := h.p.b.enter()
		if err != nil {
			return nil, 0, 0, err
		}
		err = h.p.fetch(o)
		leave()
		if err != nil {
			return nil, 0, 0, err
		}
	}
	rows, cols := h.p.outRows(o), o.t.Cols()
	return o.host[:rows*cols], rows, cols, nil
}

// HasArgmax implements exec.ArgmaxOutputter: the logits outputs (rows
// selected by logit_rows) are reduced on the device.
func (h *handle) HasArgmax(name string) bool {
	o, ok := h.p.outputs[name]
	return ok && o.ids != nil
}

// OutputArgmax implements exec.ArgmaxOutputter: the ids argmax_rows
// computed in the last Run, which Run copied back instead of the logits.
func (h *handle) OutputArgmax(name string) ([]int32, error) {
	o, ok := h.p.outputs[name]
	if !ok || h.closed || o.ids == nil {
		return nil, fmt.Errorf("cuda: no argmax of output %q", name)
	}
	return o.ids[:h.p.outRows(o)], nil
}

// Close implements exec.Executable.
func (h *handle) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	p := h.p
	if p.refs--; p.refs > 0 {
		return nil
	}
	leave, err := p.b.enter()
	if err != nil {
		return err
	}
	defer leave()
	delete(p.b.programs, p.key)
	return p.release()
}
