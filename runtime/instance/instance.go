// Package instance loads what serving one model needs: the GGUF file, its
// tokenizer, a compiled graph and a running engine on a backend.
package instance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/ninfer/ninfer-go/graphs"
	"github.com/ninfer/ninfer-go/runtime/compile"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/plan"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Options select the model, graph and backend.
type Options struct {
	Model      string      // GGUF path
	Graph      string      // graph file path or embedded graph name; "" = "plain"
	Set        node.Params // graph parameter overrides
	Backend    string      // "" = "cpu"
	Threads    int         // backend threads; 0 = all cores
	KVTokens   int         // KV capacity in tokens; 0 = engine default
	KVMemory   int64       // KV capacity in bytes when KVTokens is 0; 0 = engine default
	MaxRunning int         // concurrent sequences; 0 = engine default
	Context    int         // per-request token limit; 0 = the model's
	// Observer is told about every engine step (traces, metrics); may be nil.
	Observer engine.StepObserver
}

// Instance is a loaded model with a running engine.
type Instance struct {
	File      *weights.File
	Tokenizer *tok.Tokenizer
	Plan      *plan.Plan
	Engine    *engine.Engine
	// Chat renders chat messages with the model's tokenizer.chat_template
	// (tok.PlainTemplate when it has none). It is nil when the model's
	// template does not compile; ChatErr then says why.
	Chat     *tok.ChatTemplate
	ChatErr  error
	LoadTime time.Duration
}

// Open loads the model and graph and starts the engine.
func Open(o Options) (*Instance, error) {
	start := time.Now()
	p, err := LoadPlan(o.Graph, node.Default, o.Set)
	if err != nil {
		return nil, err
	}
	f, err := weights.Open(o.Model)
	if err != nil {
		return nil, err
	}
	tk, err := tok.FromGGUF(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", o.Model, err)
	}
	name := o.Backend
	if name == "" {
		name = "cpu"
	}
	be, err := exec.New(name, exec.Options{Threads: o.Threads})
	if err != nil {
		f.Close()
		return nil, err
	}
	eng, err := engine.New(engine.Config{Plan: p, Model: f, Backend: be, KVTokens: o.KVTokens, KVMemory: o.KVMemory, MaxRunning: o.MaxRunning, Context: o.Context, Observer: o.Observer})
	if err != nil {
		be.Close()
		f.Close()
		return nil, fmt.Errorf("%s: %w", o.Model, err)
	}
	chat, chatErr := tok.ChatTemplateFromGGUF(f, tk)
	return &Instance{File: f, Tokenizer: tk, Plan: p, Engine: eng, Chat: chat, ChatErr: chatErr, LoadTime: time.Since(start)}, nil
}

// LoadPlan compiles, against reg, the graph file at graph or, when no such
// file exists, the embedded graph of that name ("" is "plain").
func LoadPlan(graph string, reg *node.Registry, set node.Params) (*plan.Plan, error) {
	if graph == "" {
		graph = "plain"
	}
	if _, err := os.Stat(graph); err == nil {
		return compile.File(graph, reg, set)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	file, src, err := graphs.Source(graph)
	if err != nil {
		return nil, fmt.Errorf("%s: no such file or embedded graph (embedded: %s)", graph, strings.Join(graphs.Names(), ", "))
	}
	return compile.Source(file, src, reg, set)
}

// Close stops the engine and unmaps the model.
func (in *Instance) Close() error {
	return errors.Join(in.Engine.Close(), in.File.Close())
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
