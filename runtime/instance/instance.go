// Package instance loads what serving one model needs: the model (a GGUF
// file or a Hugging Face checkpoint folder), its tokenizer, a compiled graph
// and a running engine on a backend.
package instance

import (
	"context"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ninfer/ninfer-go/graphs"
	"github.com/ninfer/ninfer-go/runtime/compile"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/graphdef"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Options select the model, graph and backend.
type Options struct {
	// Model is the target model: a GGUF file, or a Hugging Face checkpoint
	// folder (config.json, safetensors weights, tokenizer.json; see
	// weights.OpenHF and tok.FromHF).
	Model string
	// Models are further model paths by alias ("draft"), for graph nodes
	// that run a model of their own (a draft loop's model.forward); a path equal to
	// Model shares its mapping. The alias "target" is Model and may not be
	// given here.
	Models     map[string]string
	Graph      string      // graph file path or embedded graph name; "" = "plain"
	Set        node.Params // graph parameter overrides
	Backend    string      // "" = "cpu"
	Threads    int         // backend threads; 0 = all cores
	Eager      bool        // backends that capture graphs launch kernels one by one instead
	KVTokens   int         // KV capacity in tokens; 0 = engine default
	KVMemory   int64       // KV capacity in bytes when KVTokens is 0; 0 = engine default
	MaxRunning int         // concurrent sequences; 0 = engine default
	StepTokens int         // most tokens per engine step; 0 = engine default (engine.Config)
	Context    int         // per-request token limit; 0 = the model's
	// Mmap maps the model files (weights.Open) for every backend. Without
	// it, files for a backend that streams host weights (exec.HostStreamer,
	// the CPU) are read into huge-page memory (weights.Load), which decodes
	// faster and keeps the whole model resident.
	Mmap bool
	// Observer is told about every engine step (traces, metrics); may be nil.
	Observer engine.StepObserver
	// NoPrefixCache turns automatic prefix caching off (engine.Config).
	NoPrefixCache bool
	// MMProj is the vision tower (a qwen3vl_merger mmproj GGUF, or a
	// Hugging Face folder's) of a vision-language model, for a graph that
	// reads images; "" for none, or the tower of Model when Model is a
	// Hugging Face folder that has one (weights.HFHasVision).
	MMProj string
	// CheckpointMemory, CheckpointEvery and CheckpointDType size and store
	// a hybrid model's recurrent state checkpoints (engine.Config): 0 or ""
	// means the default.
	CheckpointMemory int64
	CheckpointEvery  int
	CheckpointDType  string
}

// Instance is a loaded model with a running engine.
type Instance struct {
	File *weights.File // the target model
	// Models are the files of Options.Models, by alias.
	Models    exec.Models
	Tokenizer *tok.Tokenizer
	Plan      *plan.Plan
	Engine    *engine.Engine
	// Chat renders chat messages with the model's tokenizer.chat_template
	// (tok.PlainTemplate when it has none). It is nil when the model's
	// template does not compile; ChatErr then says why.
	Chat     *tok.ChatTemplate
	ChatErr  error
	LoadTime time.Duration
	// BackendReport is the backend's start-up line (exec.Reporter): the
	// device, memory reserved, graphs captured and their cost; "" for
	// backends with nothing to say.
	BackendReport string
	// Device is the backend's accelerator (exec.Reporter); zero on the CPU.
	Device exec.DeviceInfo
	// Vision is the vision tower (Options.MMProj); nil without one.
	Vision *Vision
	// backend is the target model's backend.
	backend exec.Backend
}

// Open loads the model and graph and starts the engine.
func Open(o Options) (*Instance, error) {
	start := time.Now()
	if o.MMProj == "" {
		if has, note := weights.HFHasVision(o.Model); has {
			o.MMProj = o.Model
		} else if note != "" {
			log.Printf("ninfer: %s: %s; loading the text model only", o.Model, note)
		}
	}
	loadPlan := LoadPlan
	if o.MMProj != "" {
		loadPlan = LoadPlanWithImages
	}
	p, err := loadPlan(o.Graph, node.Default, o.Set)
	if err != nil {
		return nil, err
	}
	name := o.Backend
	if name == "" {
		name = "cpu"
	}
	newBackend := func() (exec.Backend, error) { return exec.New(name, exec.Options{Threads: o.Threads, Eager: o.Eager}) }
	be, err := newBackend()
	if err != nil {
		return nil, err
	}
	load := false
	if hs, ok := be.(exec.HostStreamer); ok && hs.StreamsHostWeights() && !o.Mmap {
		load = true
	}
	open := func(path string) (*weights.File, error) { return openModel(path, load, nil) }
	var tk *tok.Tokenizer
	if weights.IsHFDir(o.Model) {
		// The folder's tokenizer files hold the chat template, which the
		// File carries under its GGUF key.
		if tk, err = tok.FromHF(o.Model); err != nil {
			be.Close()
			return nil, err
		}
		var kv []weights.KV
		if src := tk.ChatTemplateSource(); src != "" {
			kv = append(kv, weights.KV{Key: tok.KeyChatTemplate, Value: weights.Str(src)})
		}
		open = func(path string) (*weights.File, error) {
			if path == o.Model {
				return openModel(path, load, kv)
			}
			return openModel(path, load, nil)
		}
	}
	f, err := open(o.Model)
	if err != nil {
		be.Close()
		return nil, err
	}
	models, err := openModels(f, o.Models, open)
	if err != nil {
		be.Close()
		f.Close()
		return nil, err
	}
	closeAll := func() {
		be.Close()
		closeModels(f, models)
		f.Close()
	}
	if tk == nil {
		if tk, err = tok.FromGGUF(f); err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", o.Model, err)
		}
	}
	var vis *Vision
	if o.MMProj != "" {
		tf, cfg, err := vision.OpenMMProj(o.MMProj)
		if err != nil {
			closeAll()
			return nil, err
		}
		vis = &Vision{File: tf, Config: cfg}
		closeText := closeAll
		closeAll = func() { closeText(); vis.Close() }
	}
	var tower *weights.File
	if vis != nil {
		tower = vis.File
	}
	eng, err := engine.New(engine.Config{Plan: p, Model: f, Backend: be, KVTokens: o.KVTokens, KVMemory: o.KVMemory,
		MaxRunning: o.MaxRunning, StepTokens: o.StepTokens, Context: o.Context, Observer: o.Observer, Models: models, NewBackend: newBackend, Tower: tower,
		NoPrefixCache: o.NoPrefixCache, CheckpointMemory: o.CheckpointMemory, CheckpointEvery: o.CheckpointEvery,
		CheckpointDType: o.CheckpointDType})
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("%s: %w", o.Model, err)
	}
	chat, chatErr := tok.ChatTemplateFromGGUF(f, tk)
	inst := &Instance{File: f, Models: models, Tokenizer: tk, Plan: p, Engine: eng, Chat: chat, ChatErr: chatErr, LoadTime: time.Since(start), Vision: vis, backend: be}
	if r, ok := be.(exec.Reporter); ok {
		inst.BackendReport, inst.Device = r.Report(), r.Device()
	}
	return inst, nil
}

// openModel opens the model at path: a Hugging Face folder through
// weights.OpenHF (with the further metadata kv), else a GGUF file, read into
// huge-page memory when load is set and mapped otherwise.
func openModel(path string, load bool, kv []weights.KV) (*weights.File, error) {
	if weights.IsHFDir(path) {
		return weights.OpenHF(path, weights.HFOptions{Load: load, KV: kv})
	}
	if load {
		return weights.Load(path)
	}
	return weights.Open(path)
}

// openModels opens the model files of paths by alias with open; a path that
// is the target's (target.Path) shares target's memory.
func openModels(target *weights.File, paths map[string]string, open func(string) (*weights.File, error)) (exec.Models, error) {
	models := exec.Models{}
	for _, alias := range slices.Sorted(maps.Keys(paths)) {
		path := paths[alias]
		if alias == node.Target {
			return nil, fmt.Errorf("model alias %q is the target model: give it as Model", alias)
		}
		if path == target.Path {
			models[alias] = target
			continue
		}
		f, err := open(path)
		if err != nil {
			closeModels(target, models)
			return nil, fmt.Errorf("model %q: %w", alias, err)
		}
		models[alias] = f
	}
	return models, nil
}

// closeModels unmaps the files of models other than target.
func closeModels(target *weights.File, models exec.Models) error {
	var errs []error
	for _, f := range models {
		if f != target {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// LoadPlan compiles, against reg, the graph file at graph or, when no such
// file exists, the embedded graph of that name ("" is "plain").
func LoadPlan(graph string, reg *node.Registry, set node.Params) (*plan.Plan, error) {
	file, src, err := graphSource(graph)
	if err != nil {
		return nil, err
	}
	return compile.Source(file, src, reg, set)
}

// LoadPlanWithImages is LoadPlan for a model with a vision tower
// (Options.MMProj): a graph that encodes no images gets the tower wired in
// (withTower), so that plain and every speculative graph take images; the
// plan's Rewritten says so. A graph whose target forwards a host step
// splits cannot take the tower that way (device values do not cross host
// steps): that is an error asking for a vision.encode node in the graph.
func LoadPlanWithImages(graph string, reg *node.Registry, set node.Params) (*plan.Plan, error) {
	file, src, err := graphSource(graph)
	if err != nil {
		return nil, err
	}
	written, err := compile.Source(file, src, reg, set)
	if err != nil || written.Reads(engine.ImagesInput) {
		return written, err
	}
	g, err := graphdef.Parse(file, src)
	if err != nil {
		return nil, err
	}
	tower, fwds := withTower(g)
	if tower == "" {
		return written, nil
	}
	if err := oneSegment(written, fwds); err != nil {
		return nil, fmt.Errorf("%s: --mmproj cannot wire the vision tower into this graph: %w; add a vision.encode node on $in.images to the graph and wire its embeddings to the images input of each target forward (as graphs/vision.yaml does)", file, err)
	}
	p, err := compile.Compile(g, reg, set)
	if err != nil {
		return nil, err
	}
	p.Rewritten = fmt.Sprintf("--mmproj wired the vision tower in: node %s (vision.encode on $in.%s) feeds the images of %s", tower, node.BindImages, strings.Join(fwds, ", "))
	return p, nil
}

// graphSource reads the graph file at graph or, when no such file exists,
// the embedded graph of that name ("" is "plain").
func graphSource(graph string) (file string, src []byte, err error) {
	if graph == "" {
		graph = "plain"
	}
	if _, err := os.Stat(graph); err == nil {
		src, err := os.ReadFile(graph)
		return graph, src, err
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", nil, err
	}
	file, src, err = graphs.Source(graph)
	if err != nil {
		return "", nil, fmt.Errorf("%s: no such file or embedded graph (embedded: %s)", graph, strings.Join(graphs.Names(), ", "))
	}
	return file, src, nil
}

// Workspace reports the target backend's scratch memory
// (exec.WorkspaceReporter), and false for a backend that does not account
// it. Call it between generations.
func (in *Instance) Workspace() (exec.Workspace, bool) {
	r, ok := in.backend.(exec.WorkspaceReporter)
	if !ok {
		return exec.Workspace{}, false
	}
	return r.Workspace(), true
}

// VisionWorkspace reports the vision tower backend's scratch memory, false
// without a tower (Options.MMProj) or for a backend that does not account
// it. Call it between generations.
func (in *Instance) VisionWorkspace() (exec.Workspace, bool) { return in.Engine.VisionWorkspace() }

// Close stops the engine and unmaps the model.
func (in *Instance) Close() error {
	err := errors.Join(in.Engine.Close(), closeModels(in.File, in.Models), in.File.Close())
	if in.Vision != nil {
		err = errors.Join(err, in.Vision.Close())
	}
	return err
}

// Result is a finished generation.
type Result struct {
	PromptIDs []int32
	IDs       []int32
	Tops      [][]engine.TokenLogit // per generated token, when Request.TopLogits > 0
	Finish    string
	Stats     engine.Stats
}

// Generate runs one request to completion, calling onToken (if not nil) for
// each generated token as it arrives.
func (in *Instance) Generate(ctx context.Context, r engine.Request, onToken func(id int32)) (*Result, error) {
	ch, err := in.Engine.Submit(ctx, r)
	if err != nil {
		return nil, err
	}
	res := &Result{PromptIDs: r.Prompt}
	for ev := range ch {
		if ev.Done {
			res.Finish, res.Stats = ev.Finish, ev.Stats
			if ev.Err != nil && ev.Finish != engine.FinishAbort {
				return res, ev.Err
			}
			continue
		}
		res.IDs = append(res.IDs, ev.Token)
		if ev.Top != nil {
			res.Tops = append(res.Tops, ev.Top)
		}
		if onToken != nil {
			onToken(ev.Token)
		}
	}
	return res, nil
}
