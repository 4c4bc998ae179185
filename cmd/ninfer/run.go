package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/suites/bench"
)

// modelFlags are the flags every command that loads a model shares.
type modelFlags struct {
	model, graph, backend string            // model: the target's path
	models                map[string]string // --model ALIAS=FILE but the target, by alias
	threads, kvTokens     int
	kvMemory              int64
	noCUDAGraph, mmap     bool
	noPrefixCache         bool
	mmproj                string
	checkpointMemory      int64
	checkpointEvery       int
	checkpointDType       string
	set                   setFlag
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.Var(modelFlag{m}, "model", "GGUF model file (required): FILE or target=FILE is the model that decodes; ALIAS=FILE a further model a graph runs, e.g. draft=FILE (repeatable)")
	fs.StringVar(&m.graph, "graph", "plain", "graph YAML file or embedded graph name")
	fs.StringVar(&m.backend, "backend", "cpu", "compute backend: cpu, or cuda in binaries built with -tags cuda")
	fs.BoolVar(&m.noCUDAGraph, "no-cuda-graph", false, "cuda backend: launch each step's kernels one by one instead of replaying captured CUDA graphs")
	fs.BoolVar(&m.mmap, "mmap", false, "map the model files instead of reading them into huge-page memory (cpu backend; mapping starts faster and shares the page cache, decode is slower)")
	fs.IntVar(&m.threads, "threads", 0, "backend threads (0 = all cores)")
	fs.IntVar(&m.kvTokens, "kv-capacity", 0, "KV cache capacity in tokens (0 = min(context length, 4096) per sequence)")
	fs.Int64Var(&m.kvMemory, "kv-memory", 0, "KV cache capacity in bytes, scales included, in the graph's KV format (instead of --kv-capacity)")
	fs.Var(&m.set, "set", "graph parameter override NAME=VALUE (repeatable)")
	fs.BoolVar(&m.noPrefixCache, "no-prefix-cache", false, "turn automatic prefix caching off (full KV blocks shared by prompts that begin the same way, their prefill skipped)")
	fs.StringVar(&m.mmproj, "mmproj", "", "vision tower of a vision-language model (a qwen3vl_merger mmproj GGUF, or a Qwen3.5 Hugging Face folder holding one): requests may carry images; a graph that encodes none gets the tower wired in before its target forwards")
	fs.Int64Var(&m.checkpointMemory, "checkpoint-memory", 0, "hybrid models: bytes of recurrent state checkpoints, the prefix cache's (0 = 512 MiB, at most 16 per running sequence; -1 = none, prefix caching off)")
	fs.IntVar(&m.checkpointEvery, "checkpoint-every", 0, "hybrid models: KV blocks between a long prompt's periodic state checkpoints (0 = 32; -1 = none)")
	fs.StringVar(&m.checkpointDType, "checkpoint-dtype", "", "hybrid models: how state checkpoints are stored: as the state is (f32 unless the graph's kv.cache says state: bf16), or bf16 (half the memory each; the f32 state is rounded once where a checkpoint is taken; not with speculative graphs)")
}

func (m *modelFlags) options() (instance.Options, error) {
	if m.model == "" {
		return instance.Options{}, errors.New("--model is required")
	}
	if m.threads < 0 {
		return instance.Options{}, fmt.Errorf("--threads %d must be >= 0", m.threads)
	}
	if m.kvTokens < 0 {
		return instance.Options{}, fmt.Errorf("--kv-capacity %d must be >= 0", m.kvTokens)
	}
	if m.kvMemory < 0 || (m.kvMemory > 0 && m.kvTokens > 0) {
		return instance.Options{}, fmt.Errorf("--kv-memory %d must be >= 0 and not given with --kv-capacity", m.kvMemory)
	}
	return instance.Options{Model: m.model, Models: m.models, Graph: m.graph, Set: m.set.params, Backend: m.backend,
		Threads: m.threads, Eager: m.noCUDAGraph, Mmap: m.mmap, KVTokens: m.kvTokens, KVMemory: m.kvMemory, MaxRunning: 1,
		NoPrefixCache: m.noPrefixCache, MMProj: m.mmproj, CheckpointMemory: m.checkpointMemory, CheckpointEvery: m.checkpointEvery,
		CheckpointDType: m.checkpointDType}, nil
}

// modelFlag is --model: FILE or target=FILE sets the target model, ALIAS=FILE
// (ALIAS matching ^[a-z][a-z0-9_-]*$) a further model by alias. A path
// that itself looks like ALIAS=FILE can be given as ./ALIAS=FILE.
type modelFlag struct{ m *modelFlags }

func (f modelFlag) String() string {
	if f.m == nil {
		return ""
	}
	s := f.m.model
	for _, alias := range slices.Sorted(maps.Keys(f.m.models)) {
		s += " " + alias + "=" + f.m.models[alias]
	}
	return s
}

func (f modelFlag) Set(v string) error {
	alias, path, ok := strings.Cut(v, "=")
	if !ok || !exec.AliasPattern.MatchString(alias) {
		alias, path = node.Target, v
	}
	if path == "" {
		return fmt.Errorf("model %q: empty path", alias)
	}
	if alias == node.Target {
		if f.m.model != "" {
			return fmt.Errorf("the target model is given twice (%s and %s)", f.m.model, path)
		}
		f.m.model = path
		return nil
	}
	if f.m.models == nil {
		f.m.models = map[string]string{}
	}
	if old, dup := f.m.models[alias]; dup {
		return fmt.Errorf("model %q is given twice (%s and %s)", alias, old, path)
	}
	f.m.models[alias] = path
	return nil
}

// openInstance is instance.Open, with a hint on how to give a model alias
// the graph runs but the command line did not name.
func openInstance(o instance.Options) (*instance.Instance, error) {
	in, err := instance.Open(o)
	if errors.Is(err, engine.ErrNoModel) {
		err = fmt.Errorf("%w: give it with --model ALIAS=FILE", err)
	}
	return in, err
}

// setFlag collects NAME=VALUE graph parameter overrides; values are parsed
// as int, float or bool when they look like one, else kept as strings.
type setFlag struct{ params node.Params }

func (s *setFlag) String() string { return fmt.Sprint(s.params) }

func (s *setFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	if s.params == nil {
		s.params = node.Params{}
	}
	if i, err := strconv.ParseInt(val, 10, 64); err == nil {
		s.params[name] = i
	} else if f, err := strconv.ParseFloat(val, 64); err == nil {
		s.params[name] = f
	} else if b, err := strconv.ParseBool(val); err == nil {
		s.params[name] = b
	} else {
		s.params[name] = val
	}
	return nil
}

// samplingFlags are the sampling flags of run and golden.
type samplingFlags struct {
	temperature, topP, minP float64
	topK                    int
	seed                    uint64
	logitBias               logitBiasFlag
}

// logitBiasFlag is --logit-bias: ID=BIAS pairs, comma-separated or
// repeated; BIAS may be -inf (the token is never chosen).
type logitBiasFlag map[int32]float32

func (f *logitBiasFlag) String() string { return fmt.Sprint(map[int32]float32(*f)) }

func (f *logitBiasFlag) Set(v string) error {
	if *f == nil {
		*f = map[int32]float32{}
	}
	for _, pair := range strings.Split(v, ",") {
		id, bias, ok := strings.Cut(strings.TrimSpace(pair), "=")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return fmt.Errorf("%q: want TOKEN_ID=BIAS", pair)
		}
		b, err := strconv.ParseFloat(bias, 32)
		if err != nil || math.IsNaN(b) || math.IsInf(b, 1) {
			return fmt.Errorf("%q: the bias must be a number or -inf", pair)
		}
		(*f)[int32(n)] = float32(b)
	}
	return nil
}

func (s *samplingFlags) register(fs *flag.FlagSet) {
	fs.Float64Var(&s.temperature, "temperature", 0, "sampling temperature (0 = greedy)")
	fs.IntVar(&s.topK, "top-k", 0, "keep the K most likely tokens (0 = off)")
	fs.Float64Var(&s.topP, "top-p", 1, "keep the smallest set of tokens with probability >= P (1 = off)")
	fs.Float64Var(&s.minP, "min-p", 0, "drop tokens less likely than P x the most likely (0 = off)")
	fs.Uint64Var(&s.seed, "seed", 0, "random seed for stochastic sampling")
	fs.Var(&s.logitBias, "logit-bias", "add BIAS to token ID's logit before choosing: ID=BIAS[,ID=BIAS...], repeatable; -inf bans the token")
}

func (s *samplingFlags) sampling() (request.Sampling, error) {
	switch {
	case !request.Temperature.Contains(s.temperature):
		return request.Sampling{}, fmt.Errorf("--temperature %g must be in %s", s.temperature, request.Temperature)
	case s.topK < 0:
		return request.Sampling{}, fmt.Errorf("--top-k %d must be >= 0", s.topK)
	case !request.TopP.Contains(s.topP):
		return request.Sampling{}, fmt.Errorf("--top-p %g must be in %s", s.topP, request.TopP)
	case !request.MinP.Contains(s.minP):
		return request.Sampling{}, fmt.Errorf("--min-p %g must be in %s", s.minP, request.MinP)
	}
	out := request.Sampling{Temperature: float32(s.temperature), TopK: s.topK, TopP: float32(s.topP), MinP: float32(s.minP), Seed: s.seed}
	if len(s.logitBias) > 0 {
		out.LogitBias = s.logitBias
	}
	return out, nil
}

// runOutput is the --json contract of `ninfer run`.
type runOutput struct {
	PromptIDs []int32    `json:"prompt_ids"`
	IDs       []int32    `json:"ids"`
	Text      string     `json:"text"`
	Finish    string     `json:"finish_reason"`
	Timings   runTimings `json:"timings"`
	// Speculative has the bench report's speculative fields (enabled false
	// and zero counts for a graph that does not speculate).
	Speculative bench.Speculative `json:"speculative"`
	// ForcedArgmax, with --teacher-force IDS, is the model's argmax after
	// the prompt and after each forced id: len(IDS)+1 ids.
	ForcedArgmax []int32 `json:"forced_argmax,omitempty"`
	// TopLogits, with --top-logits N, are the N largest raw logits of each
	// generated position, [id, logit] pairs, descending.
	TopLogits [][][2]float64 `json:"top_logits,omitempty"`
	// Chunks, with --image, are the prompt's text and image chunks in
	// order (llama.cpp's mtmd chunks).
	Chunks []runChunk `json:"chunks,omitempty"`
}

// runChunk is one chunk of a prompt with images: text tokens, or an
// image's tokens with its grid, positions and embedding checksums.
type runChunk struct {
	Type     string  `json:"type"` // "text" or "image"
	Tokens   []int32 `json:"tokens,omitempty"`
	Image    int     `json:"image_index"`
	NTokens  int     `json:"n_tokens"`
	Grid     [2]int  `json:"grid_tokens"` // [nx, ny]
	PosStart int     `json:"pos_start"`
	NPos     int     `json:"n_pos"`
	// EmbdStats, EmbdFirst8 and EmbdLastRowFirst8 describe the tower's
	// output rows of an image chunk [n_tokens, n_embd].
	EmbdStats         *vision.Stats `json:"embd_stats,omitempty"`
	EmbdFirst8        []float32     `json:"embd_first8,omitempty"`
	EmbdLastRowFirst8 []float32     `json:"embd_last_row_first8,omitempty"`
}

// runChunks reports p's chunks with the embedding checksums of its images.
func runChunks(p *instance.ImagePrompt) []runChunk {
	var out []runChunk
	img := 0
	for _, c := range p.Chunks {
		rc := runChunk{Type: "text", Tokens: c.Tokens, Image: c.Image, NTokens: c.Len(), PosStart: c.PosStart, NPos: c.NPos}
		if c.Image >= 0 {
			emb := p.Images[img].Embeddings
			img++
			width := len(emb) / c.Grid.Tokens()
			rc.Type, rc.Grid = "image", [2]int{c.Grid.NX, c.Grid.NY}
			stats := vision.StatsOf(emb)
			rc.EmbdStats, rc.EmbdFirst8, rc.EmbdLastRowFirst8 = &stats, emb[:min(8, width)], emb[len(emb)-width:][:min(8, width)]
		}
		out = append(out, rc)
	}
	return out
}

// filesFlag collects repeated FILE arguments.
type filesFlag []string

func (f *filesFlag) String() string     { return strings.Join(*f, ",") }
func (f *filesFlag) Set(v string) error { *f = append(*f, v); return nil }

type runTimings struct {
	LoadSeconds    float64 `json:"load_seconds"`
	PrefillSeconds float64 `json:"prefill_seconds"`
	VisionSeconds  float64 `json:"vision_seconds"` // decoding, preprocessing and encoding the images
	DecodeSeconds  float64 `json:"decode_seconds"`
	PromptTokens   int     `json:"prompt_n"`
	Predicted      int     `json:"predicted_n"`
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var mf modelFlags
	var sf samplingFlags
	mf.register(fs)
	sf.register(fs)
	prompt := fs.String("prompt", "", "prompt text (special tokens parsed, BOS added per the model)")
	promptIDs := fs.String("prompt-ids", "", "comma-separated prompt token ids (bypasses the tokenizer)")
	maxTokens := fs.Int("max-tokens", 128, "tokens to generate (>= 1)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of streaming text")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past end-of-generation tokens")
	topLogits := fs.Int("top-logits", 0, "with --json, report the N largest raw logits of each generated position (top_logits)")
	var images filesFlag
	fs.Var(&images, "image", "image FILE (PNG, JPEG, GIF, WebP) for the prompt, which holds one <__media__> marker per image (repeatable; needs --mmproj)")
	teacher := fs.String("teacher-force", "", "comma-separated ids fed after the prompt instead of sampled ones; --json reports the model's argmax at each fed position as forced_argmax (--max-tokens is then len(IDS)+1)")
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	if *maxTokens < 1 {
		return fail(fmt.Errorf("--max-tokens %d must be >= 1", *maxTokens))
	}
	if *topLogits < 0 || *topLogits > 100 {
		return fail(fmt.Errorf("--top-logits %d must be in [0, 100]", *topLogits))
	}
	if (*prompt == "") == (*promptIDs == "") {
		return fail(errors.New("give exactly one of --prompt and --prompt-ids"))
	}
	samp, err := sf.sampling()
	if err != nil {
		return fail(err)
	}
	opts, err := mf.options()
	if err != nil {
		return fail(err)
	}
	var ids []int32
	if *promptIDs != "" {
		if ids, err = parseIDs(*promptIDs); err != nil {
			return fail(err)
		}
	}
	inst, err := openInstance(opts)
	if err != nil {
		return fail(err)
	}
	defer inst.Close()
	tk := inst.Tokenizer
	var withImages *instance.ImagePrompt
	switch {
	case len(images) > 0 && ids != nil:
		return fail(errors.New("--image needs --prompt (with one <__media__> marker per image), not --prompt-ids"))
	case inst.Vision != nil && ids == nil:
		var files [][]byte
		for _, name := range images {
			data, err := os.ReadFile(name)
			if err != nil {
				return fail(fmt.Errorf("--image: %w", err))
			}
			files = append(files, data)
		}
		if withImages, err = inst.PromptWithImages(context.Background(), *prompt, files, true, vision.DecodeLimits{}, true); err != nil {
			return fail(err)
		}
		ids = withImages.IDs
	case len(images) > 0:
		return fail(errors.New("--image needs --mmproj (the model's vision tower)"))
	case ids == nil:
		ids = tk.Encode(*prompt, true, true)
	}
	if len(ids) == 0 {
		return fail(errors.New("the prompt encodes to no tokens"))
	}
	req := engine.Request{Prompt: ids, MaxTokens: *maxTokens, Sampling: samp, TopLogits: *topLogits}
	if withImages != nil {
		req.Images = withImages.Images
	}
	if !*ignoreEOS {
		req.Stop = tk.IsEOG
	}
	if *teacher != "" {
		if req.Force, err = parseIDs(*teacher); err != nil {
			return fail(fmt.Errorf("--teacher-force: %w", err))
		}
		// Every fed position reports its argmax; EOS in the fed ids does not stop.
		req.MaxTokens, req.TopLogits, req.Stop = len(req.Force)+1, 1, nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dec := tk.NewDecoder()
	var onToken func(int32)
	if !*asJSON {
		onToken = func(id int32) { io.WriteString(stdout, dec.Add(id)) }
	}
	res, err := inst.Generate(ctx, req, onToken)
	if err != nil {
		return fail(err)
	}
	if !*asJSON {
		io.WriteString(stdout, dec.Flush()+"\n")
		return 0
	}
	out := runOutput{PromptIDs: ids, IDs: res.IDs, Text: tk.Decode(res.IDs), Finish: res.Finish,
		Timings: runTimings{LoadSeconds: inst.LoadTime.Seconds(), PrefillSeconds: res.Stats.Prefill.Seconds(),
			DecodeSeconds: res.Stats.Decode.Seconds(), PromptTokens: len(ids), Predicted: len(res.IDs)},
		Speculative: specBlock(inst, res.Stats.Speculative)}
	if withImages != nil {
		out.Timings.VisionSeconds = withImages.Encode.Seconds()
		if len(withImages.Images) > 0 {
			out.Chunks = runChunks(withImages)
		}
	}
	if req.Force != nil {
		for _, top := range res.Tops {
			out.ForcedArgmax = append(out.ForcedArgmax, top[0].ID)
		}
	} else if *topLogits > 0 {
		for _, top := range res.Tops {
			row := make([][2]float64, len(top))
			for i, tl := range top {
				row[i] = [2]float64{float64(tl.ID), float64(tl.Logit)}
			}
			out.TopLogits = append(out.TopLogits, row)
		}
	}
	if out.IDs == nil {
		out.IDs = []int32{}
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(out); err != nil {
		return fail(err)
	}
	return 0
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--prompt-ids: %q is not a token id", f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
