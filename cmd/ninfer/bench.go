package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ninfer/ninfer-go/nodes/model"
	"github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/suites/bench"
)

// maxBenchBatch is the most concurrent sequences --batch takes.
const maxBenchBatch = 256

// benchTest is one test to run: kind, prompt and generated tokens.
type benchTest struct {
	kind          string
	nPrompt, nGen int
}

// prompt is the prompt length a test sends (a tg test sends one token).
func (t benchTest) prompt() int { return max(t.nPrompt, 1) }

// outputs is the tokens a test asks for: the prefill's token plus n_gen.
func (t benchTest) outputs() int { return t.nGen + 1 }

// intList is a comma-separated list of non-negative ints; repeating the
// flag appends.
type intList []int

func (l *intList) String() string { return fmt.Sprint(*l) }

func (l *intList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a token count", f)
		}
		*l = append(*l, n)
	}
	return nil
}

// pgList is llama-bench's -pg: PROMPT,GEN pairs separated by ';' or given
// by repeating the flag.
type pgList [][2]int

func (l *pgList) String() string { return fmt.Sprint(*l) }

func (l *pgList) Set(v string) error {
	for _, pair := range strings.Split(v, ";") {
		var p intList
		if err := p.Set(pair); err != nil || len(p) != 2 || p[0] < 1 || p[1] < 1 {
			return fmt.Errorf("want PROMPT,GEN (both >= 1), got %q", pair)
		}
		*l = append(*l, [2]int{p[0], p[1]})
	}
	return nil
}

// benchOptions are the parsed flags of `ninfer bench`.
type benchOptions struct {
	mf          modelFlags
	prompts     intList
	gens        intList
	batches     intList // concurrent sequences per step; every test runs at each
	pg          pgList
	reps        int
	warmup      int
	kvDType     string
	chunk       int
	output      string
	outputFile  string
	corpus      string
	peakGBs     float64
	triadMiB    int
	image       string    // appended to every prompt, encoded by the vision tower (--mmproj)
	progressOut io.Writer // nil: no progress bar
}

// tests lists the tests in llama-bench order: every pp, every tg, every pp+tg.
func (o *benchOptions) tests() []benchTest {
	var ts []benchTest
	for _, p := range o.prompts {
		if p > 0 {
			ts = append(ts, benchTest{bench.KindPP, p, 0})
		}
	}
	for _, g := range o.gens {
		if g > 0 {
			ts = append(ts, benchTest{bench.KindTG, 0, g})
		}
	}
	for _, pg := range o.pg {
		ts = append(ts, benchTest{bench.KindPPTG, pg[0], pg[1]})
	}
	return ts
}

const benchUsage = `usage: ninfer bench --model FILE [--graph FILE] [-p 512] [-n 128] [-pg 2048,512]
                    [--batch 1,8,32] [-r 3] [--warmup 1] [--kv-dtype FORMAT] [--prefill-chunk N]
                    [--threads N] [--output json|md] [--output-file F]

Measures prompt processing (pp{P}), text generation (tg{G}) and both
(pp{P}+tg{G}) as llama-bench does; with --batch B a test also runs as B
concurrent requests decoded together (label suffix @bB, tokens and rates
summed over the B). Writes the ninfer_bench_report JSON
(schema 15, suites/bench/schema.json) or a Markdown table. Prompts are taken
from a token corpus with a different token substituted in every repetition,
warm-up repetitions are discarded, generation ignores end-of-sequence tokens.

`

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	o := benchOptions{progressOut: stderr}
	o.mf.register(fs)
	fs.Var(&o.prompts, "p", "prompt lengths of pp tests, comma-separated (0 = none; default 512)")
	fs.Var(&o.gens, "n", "generated tokens of tg tests, comma-separated (0 = none; default 128)")
	fs.Var(&o.pg, "pg", "PROMPT,GEN of pp+tg tests; ';' separates pairs; repeatable")
	fs.Var(&o.batches, "batch", "concurrent sequences per step, comma-separated: every test runs at each (default 1)")
	fs.IntVar(&o.reps, "r", 3, "measured repetitions per test")
	fs.IntVar(&o.warmup, "warmup", 1, "discarded warm-up repetitions per test")
	fs.StringVar(&o.kvDType, "kv-dtype", "", "KV cache format: "+strings.Join(page.FormatNames(), ", ")+" (selects the embedded kv-FORMAT graph; default the graph's)")
	fs.IntVar(&o.chunk, "prefill-chunk", 0, "prefill chunk in tokens (sets the graph's chunk parameter; 0 = the graph's)")
	fs.StringVar(&o.output, "output", "md", "report format: json or md")
	fs.StringVar(&o.outputFile, "output-file", "", "write the report to this file instead of stdout")
	fs.StringVar(&o.corpus, "corpus", "", "prompt corpus, a UTF-8 text file (default the built-in one)")
	fs.Float64Var(&o.peakGBs, "peak-bandwidth", 0, "peak memory bandwidth in GB/s to compare with (0 = measure with a triad, < 0 = none)")
	fs.IntVar(&o.triadMiB, "triad-mib", 256, "memory of the bandwidth triad's three arrays, MiB")
	fs.StringVar(&o.image, "image", "", "an image file appended to every prompt and encoded by the vision tower each repetition (needs --mmproj): vision_seconds and memory.vision_workspace")
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	if o.prompts == nil {
		o.prompts = intList{512}
	}
	if o.gens == nil {
		o.gens = intList{128}
	}
	if o.batches == nil {
		o.batches = intList{1}
	}
	rep, err := benchRun(&o, args)
	if err != nil {
		return fail(err)
	}
	var out []byte
	if o.output == "json" {
		if out, err = json.MarshalIndent(rep, "", "  "); err != nil {
			return fail(err)
		}
		if err := bench.Validate(out); err != nil {
			return fail(fmt.Errorf("the report does not match suites/bench/schema.json:\n%v", err))
		}
		out = append(out, '\n')
	} else {
		out = []byte(rep.Markdown())
	}
	if o.outputFile == "" {
		stdout.Write(out)
		return 0
	}
	if err := os.WriteFile(o.outputFile, out, 0o644); err != nil {
		return fail(err)
	}
	return 0
}

// benchRun validates the options, loads the model and runs every test.
func benchRun(o *benchOptions, args []string) (*bench.Report, error) {
	switch {
	case o.output != "json" && o.output != "md":
		return nil, fmt.Errorf("--output %q: want json or md", o.output)
	case o.reps < 1:
		return nil, fmt.Errorf("-r %d must be >= 1", o.reps)
	case o.warmup < 0:
		return nil, fmt.Errorf("--warmup %d must be >= 0", o.warmup)
	case o.chunk < 0:
		return nil, fmt.Errorf("--prefill-chunk %d must be >= 0", o.chunk)
	case o.triadMiB < 1:
		return nil, fmt.Errorf("--triad-mib %d must be >= 1", o.triadMiB)
	case o.image != "" && o.mf.mmproj == "":
		return nil, errors.New("--image needs --mmproj (the vision tower that encodes it)")
	}
	var image []byte
	if o.image != "" {
		var err error
		if image, err = os.ReadFile(o.image); err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
	}
	for _, b := range o.batches {
		if b < 1 || b > maxBenchBatch {
			return nil, fmt.Errorf("--batch %d: want 1 to %d concurrent sequences", b, maxBenchBatch)
		}
	}
	tests := o.tests()
	if len(tests) == 0 {
		return nil, errors.New("no tests: give -p, -n or -pg")
	}
	var kvFormat page.Format
	if o.kvDType != "" {
		f, err := page.LookupFormat(o.kvDType)
		if err != nil {
			return nil, fmt.Errorf("--kv-dtype: %w", err)
		}
		kvFormat = f
		if o.mf.graph == "plain" && f.Name != page.F32.Name {
			o.mf.graph = "kv-" + f.Name
		}
	}
	if o.chunk > 0 {
		o.mf.set.Set("chunk=" + strconv.Itoa(o.chunk))
	}
	opts, err := o.mf.options()
	if err != nil {
		return nil, err
	}
	// A batch runs its sequences together; the KV cache, unless sized by a
	// flag, holds them all with a block of slack each (the default, a
	// context per sequence, would be far larger than the tests need).
	opts.MaxRunning = slices.Max(o.batches)
	if opts.MaxRunning > 1 && opts.KVTokens == 0 && opts.KVMemory == 0 {
		need := 0
		if image != nil {
			// The image's rows; the few tokens around them fit in the slack.
			if need, err = imageGridTokens(o.mf.mmproj, image); err != nil {
				return nil, fmt.Errorf("--image %s: %w", o.image, err)
			}
		}
		longest := 0
		for _, t := range tests {
			longest = max(longest, t.prompt()+t.outputs())
		}
		opts.KVTokens = opts.MaxRunning * (need + longest + kvSlackTokens)
	}
	var corpusText string
	corpusPath := "builtin:suites/bench/corpus.txt"
	if o.corpus != "" {
		data, err := os.ReadFile(o.corpus)
		if err != nil {
			return nil, fmt.Errorf("--corpus: %w", err)
		}
		corpusText, corpusPath = string(data), o.corpus
	} else {
		corpusText = bench.Corpus
	}
	inst, err := openInstance(opts)
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	if inst.BackendReport != "" && o.progressOut != nil {
		fmt.Fprintf(o.progressOut, "ninfer bench: %s\n", inst.BackendReport)
	}
	pol := inst.Plan.Policy
	if o.kvDType != "" && pol.KVDType != kvFormat.Name {
		return nil, fmt.Errorf("--kv-dtype %s: graph %s stores KV as %s", kvFormat.Name, o.mf.graph, pol.KVDType)
	}
	if o.chunk > 0 && pol.PrefillChunk != o.chunk {
		return nil, fmt.Errorf("--prefill-chunk %d: graph %s runs chunks of %d", o.chunk, o.mf.graph, pol.PrefillChunk)
	}
	imageTokens := 0
	if image != nil {
		ip, err := inst.PromptWithImages(context.Background(), vision.MediaMarker, [][]byte{image}, false, vision.DecodeLimits{}, false)
		if err != nil {
			return nil, fmt.Errorf("--image %s: %w", o.image, err)
		}
		imageTokens = len(ip.IDs)
	}
	ctxLen := inst.Engine.ContextLength()
	// parts spells out a sequence's tokens in errors.
	parts := func(t benchTest) string {
		if imageTokens > 0 {
			return fmt.Sprintf("prompt %d + image %d + %d outputs", t.prompt(), imageTokens, t.outputs())
		}
		return fmt.Sprintf("prompt %d + %d outputs", t.prompt(), t.outputs())
	}
	for _, t := range tests {
		if need := t.prompt() + imageTokens + t.outputs(); need > ctxLen {
			return nil, fmt.Errorf("test %s needs %d tokens (%s), more than the context length %d",
				bench.Label(t.kind, t.nPrompt, t.nGen), need, parts(t), ctxLen)
		}
	}
	cfg, err := model.ReadConfig(inst.File)
	if err != nil {
		return nil, err
	}
	format, err := page.LookupFormat(pol.KVDType)
	if err != nil {
		return nil, err
	}
	corpus := newPromptCorpus(inst, corpusText)
	if len(corpus.tokens) == 0 {
		return nil, errors.New("the prompt corpus encodes to no tokens")
	}

	rep := newReport(o, args, inst, format, corpusPath, len(corpus.tokens))
	var work int64
	for _, t := range tests {
		for _, b := range o.batches {
			work += int64(o.warmup+o.reps) * int64(b) * int64(t.prompt()+t.outputs())
		}
	}
	prog := newProgress(o.progressOut, work)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	kvPerToken := rep.Memory.KVBytesPerToken
	blockTokens := pol.KVBlockTokens
	_, totalBlocks := inst.Engine.KVBlocks()
	for _, t := range tests {
		for _, b := range o.batches {
			if need := b * ceilDiv(t.prompt()+imageTokens+t.outputs(), blockTokens); need > totalBlocks {
				prog.done()
				return nil, fmt.Errorf("--batch %d: test %s needs %d KV blocks of %d tokens for its %d sequences (%s each), the cache holds %d (raise --kv-capacity)",
					b, bench.Label(t.kind, t.nPrompt, t.nGen), need, blockTokens, b, parts(t), totalBlocks)
			}
		}
	}
	r := benchRunner{inst: inst, corpus: corpus, prog: prog, warmup: o.warmup, reps: o.reps, blockTokens: blockTokens, image: image}
	for _, t := range tests {
		for _, b := range o.batches {
			bt, err := r.test(ctx, t, b)
			if err != nil {
				prog.done()
				return nil, err
			}
			bench.Aggregate(&bt)
			bench.SetBandwidth(&bt, decodeBytesPerToken(inst, cfg, kvPerToken, bt), rep.Bandwidth.PeakBytesPerSecond)
			rep.Tests = append(rep.Tests, bt)
		}
	}
	prog.done()
	used, _ := inst.Engine.KVBlocks()
	blockBytes := int64(blockTokens) * kvPerToken
	rep.Memory.Sequence.UsedBytes = int64(used) * blockBytes
	rep.Memory.Sequence.PeakUsedBytes = int64(r.peakBlocks) * blockBytes
	if w, ok := inst.Workspace(); ok {
		rep.Memory.Workspace = &bench.Arena{CapacityBytes: w.CapacityBytes, UsedBytes: w.UsedBytes, PeakUsedBytes: w.PeakUsedBytes}
	}
	if w, ok := inst.VisionWorkspace(); ok {
		rep.Memory.VisionWorkspace = &bench.Arena{CapacityBytes: w.CapacityBytes, UsedBytes: w.UsedBytes, PeakUsedBytes: w.PeakUsedBytes}
	}
	rep.Config.DecodeGraphPrime = bench.Prime{Primed: o.warmup > 0, OutputTokens: r.primed}
	return rep, nil
}

// benchRunner runs the repetitions of the tests on one instance and keeps
// what the report needs across them.
type benchRunner struct {
	inst               *instance.Instance
	corpus             *promptCorpus
	prog               *progress
	warmup, reps       int
	blockTokens        int
	peakBlocks, primed int    // the most KV blocks a repetition held; warm-up output tokens
	image              []byte // appended to every prompt (--image), nil for none
}

// test runs test t at batch b: its warm-up and measured repetitions.
func (r *benchRunner) test(ctx context.Context, t benchTest, b int) (bench.Test, error) {
	label := bench.Label(t.kind, t.nPrompt, t.nGen)
	if b > 1 {
		label += "@b" + strconv.Itoa(b)
	}
	bt := bench.Test{Label: label, Kind: t.kind, NPrompt: t.nPrompt, NGen: t.nGen, Batch: b, RequestedOutputTokens: t.outputs()}
	for i := range r.warmup + r.reps {
		r.prog.label = fmt.Sprintf("%s rep %d/%d", label, i-r.warmup+1, r.reps)
		if i < r.warmup {
			r.prog.label = fmt.Sprintf("%s warm-up %d/%d", label, i+1, r.warmup)
		}
		rep, err := r.rep(ctx, t, b)
		if err != nil {
			return bench.Test{}, fmt.Errorf("%s: %w", label, err)
		}
		if i < r.warmup {
			r.primed += rep.GeneratedOutputTokens
			continue
		}
		bt.Reps = append(bt.Reps, rep)
	}
	return bt, nil
}

// rep runs one repetition of t: b requests submitted together, each with
// its own prompt (bench.Rep says how a batch's phases are measured; a
// single request's come from the engine's own clock).
func (r *benchRunner) rep(ctx context.Context, t benchTest, b int) (bench.Rep, error) {
	type seq struct {
		prompt []int32
		pos    int
		sub    int32
		images []engine.Image
		res    *instance.Result
		err    error
	}
	seqs := make([]seq, b)
	var visionTime time.Duration // encoding each sequence's image, one after another
	for i := range seqs {
		s := &seqs[i]
		s.prompt, s.pos, s.sub = r.corpus.next(t.prompt())
		r.prog.add(int64(len(s.prompt)))
		if r.image != nil {
			ip, err := r.inst.PromptWithImages(ctx, vision.MediaMarker, [][]byte{r.image}, false, vision.DecodeLimits{}, true)
			if err != nil {
				return bench.Rep{}, err
			}
			visionTime += ip.Encode
			for _, im := range ip.Images {
				im.At += len(s.prompt)
				s.images = append(s.images, im)
			}
			s.prompt = append(s.prompt, ip.IDs...)
		}
	}
	var mu sync.Mutex // guards r.prog
	start := time.Now()
	var wg sync.WaitGroup
	for i := range seqs {
		s := &seqs[i]
		wg.Go(func() {
			s.res, s.err = r.inst.Generate(ctx, engine.Request{Prompt: s.prompt, Images: s.images, MaxTokens: t.outputs()}, func(int32) {
				mu.Lock()
				r.prog.add(1)
				mu.Unlock()
			})
		})
	}
	wg.Wait()
	total := time.Since(start)
	blocks := 0
	for _, s := range seqs {
		if s.err != nil {
			return bench.Rep{}, s.err
		}
		if s.res.Finish == engine.FinishAbort {
			return bench.Rep{}, errors.New("interrupted")
		}
		// Every token but the last sampled one has its K and V stored.
		blocks += ceilDiv(len(s.prompt)+len(s.res.IDs)-1, r.blockTokens)
	}
	r.peakBlocks = max(r.peakBlocks, blocks)
	first := seqs[0]
	rep := bench.Rep{PromptTokens: len(first.prompt), SubstitutedPosition: first.pos, SubstitutedToken: first.sub, FinishReason: first.res.Finish}
	specs := make([]bench.Speculative, b)
	for i, s := range seqs {
		rep.GeneratedOutputTokens += len(s.res.IDs)
		specs[i] = specBlock(r.inst, s.res.Stats.Speculative)
	}
	rep.Speculative = bench.SumSpeculative(specs)
	if b == 1 {
		st := first.res.Stats
		dec := max(len(first.res.IDs)-1, 0)
		rep.DecodeOutputTokens, rep.DecodeEngineTokens = dec, dec
		rep.Timings = bench.Timings{PrepareSeconds: st.Queue.Seconds(), VisionSeconds: visionTime.Seconds(), PrefillSeconds: st.Prefill.Seconds(),
			DecodeSeconds: st.Decode.Seconds(), TotalSeconds: (visionTime + total).Seconds()}
		return rep, nil
	}
	// The batch's phases on the engine's clock: the first request started,
	// every request has its first token, the last one is done.
	fs := first.res.Stats
	submitted, started, prefilled, done, decodeFrom := fs.Submitted, fs.Started, fs.FirstToken, fs.Done, fs.FirstToken
	for _, s := range seqs {
		st := s.res.Stats
		rep.DecodeOutputTokens += max(len(s.res.IDs)-1, 0)
		submitted, started, decodeFrom = earlier(submitted, st.Submitted), earlier(started, st.Started), earlier(decodeFrom, st.FirstToken)
		prefilled, done = later(prefilled, st.FirstToken), later(done, st.Done)
	}
	rep.DecodeEngineTokens = rep.DecodeOutputTokens
	rep.Timings = bench.Timings{PrepareSeconds: started.Sub(submitted).Seconds(), VisionSeconds: visionTime.Seconds(), PrefillSeconds: prefilled.Sub(started).Seconds(),
		DecodeSeconds: done.Sub(decodeFrom).Seconds(), TotalSeconds: (visionTime + total).Seconds()}
	return rep, nil
}

// imageGridTokens is the number of image rows the tower at mmproj makes
// of image (the vision pad tokens of its prompt).
func imageGridTokens(mmproj string, image []byte) (int, error) {
	f, cfg, err := vision.OpenMMProj(mmproj)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	src, _, err := vision.Decode(image, vision.DecodeLimits{})
	if err != nil {
		return 0, err
	}
	p, err := vision.PreprocessRGB(src, cfg.Options(vision.DecodeLimits{}))
	if err != nil {
		return 0, err
	}
	return p.Grid.Tokens(), nil
}

// kvSlackTokens is the KV a batched bench adds per sequence to its need,
// for the block a sequence's last tokens round up to.
const kvSlackTokens = 256

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// later and earlier are the later and the earlier of two times.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// decodeBytesPerToken is the mean memory one decode step of t reads per
// token it decodes: every weight (only one embedding row when the output
// matrix is separate), read once for the step's t.Batch sequences, and
// the K and V of every position a sequence attends, averaged over the
// decode steps (step j of D attends prompt + j positions).
func decodeBytesPerToken(inst *instance.Instance, cfg *model.Config, kvPerToken int64, t bench.Test) float64 {
	var w int64
	for _, tn := range inst.File.Tensors {
		if tn.Name == "token_embd.weight" && cfg.OutputName != tn.Name {
			w += int64(tn.RowBytes())
			continue
		}
		w += int64(len(tn.Data))
	}
	var ctx []float64
	for _, r := range t.Reps {
		ctx = append(ctx, float64(r.PromptTokens)+(float64(r.DecodeOutputTokens)/float64(max(t.Batch, 1))+1)/2)
	}
	perSeq := float64(w) / float64(max(t.Batch, 1))
	if len(ctx) == 0 {
		return perSeq
	}
	return perSeq + float64(kvPerToken)*bench.Mean(ctx)
}

// newReport fills everything but the tests and the run's peak KV use.
func newReport(o *benchOptions, args []string, inst *instance.Instance, format page.Format, corpusPath string, corpusTokens int) *bench.Report {
	f, info := inst.File, inst.Engine.Model()
	pol := inst.Plan.Policy
	var weightBytes int64
	formats := map[string]bool{}
	for _, t := range f.Tensors {
		weightBytes += int64(len(t.Data))
		formats[strings.ToLower(t.DType.String())] = true
	}
	var size int64
	if fi, err := os.Stat(f.Path); err == nil {
		size = fi.Size()
	}
	sig := sha256.Sum256([]byte(inst.Plan.String()))
	_, blocks := inst.Engine.KVBlocks()
	kvPerToken := page.BytesPerToken(format, info.KVLayers, info.KVDim)
	payload := int64(blocks) * int64(pol.KVBlockTokens) * kvPerToken
	increment := int64(pol.KVBlockTokens) * kvPerToken
	mode := "automatic"
	if o.mf.kvTokens > 0 {
		mode = "explicit"
	}
	threads := o.mf.threads
	snap := inst.Engine.Snapshot()
	r := &bench.Report{
		SchemaVersion: bench.SchemaVersion, ArtifactType: "ninfer_bench_report", Tool: "ninfer_bench",
		Command:     commandLine(append([]string{"ninfer", "bench"}, args...)),
		Environment: hostEnvironment(o.mf.backend, threads),
		Artifact:    bench.Artifact{Path: f.Path, FileSizeBytes: size},
		Load: bench.Load{Architecture: info.Arch, Name: info.Name, Formats: slices.Sorted(maps.Keys(formats)),
			PrefillSignature: hex.EncodeToString(sig[:]), LoadSeconds: inst.LoadTime.Seconds(),
			ArtifactBytesRead: f.DataOffset, ArtifactBytesMapped: size, HostObjectCount: len(f.Tensors)},
		Memory: bench.Memory{MaxContext: inst.Engine.ContextLength(), KVCapacityMode: mode,
			KVCapacity: blocks * pol.KVBlockTokens, KVCapacityPageGroups: blocks, KVCapacityMaxPageGroups: blocks,
			KVCache: format.Name, Weights: bench.Arena{CapacityBytes: weightBytes, UsedBytes: weightBytes, PeakUsedBytes: weightBytes},
			Sequence:                 bench.Arena{CapacityBytes: payload},
			KVCapacityIncrementBytes: &increment, KVPayloadBytes: payload, KVBlockTokens: pol.KVBlockTokens,
			KVBytesPerToken: kvPerToken, KVTokensPerGiB: page.CapacityTokens(1<<30, format, info.KVLayers, info.KVDim, pol.KVBlockTokens),
			KVAccounting:          "runtime/kv: " + format.Name + ", " + strconv.Itoa(info.KVLayers) + " attending layers x K,V x " + strconv.Itoa(info.KVDim) + " values",
			StateBytesPerSequence: snap.StateSlotBytes, StateSlots: snap.StateSlotsTotal,
			StateCheckpoints: snap.CheckpointsMax, StateCheckpointBytes: int64(snap.CheckpointsMax) * snap.CheckpointSlotBytes},
		Config: bench.Config{MaxContext: inst.Engine.ContextLength(), PrefillChunk: pol.PrefillChunk, KVCache: format.Name,
			DecodePath: "cpu_op_list", Repetitions: o.reps, Warmup: o.warmup, CorpusPath: corpusPath, CorpusTokens: corpusTokens,
			Graph: inst.Plan.Name, Backend: o.mf.backend, Threads: threads, Sampling: "greedy"},
	}
	if o.mf.backend != "cpu" {
		r.Config.UseCUDAGraph = !o.mf.noCUDAGraph
		r.Config.DecodePath = decodePath(o.mf.backend, specBackend(inst), o.mf.noCUDAGraph)
	}
	if d := inst.Device; d.Name != "" {
		r.Environment.GPUName, r.Environment.DeviceID = &d.Name, &d.ID
		r.Environment.CUDADriverVersion, r.Environment.CUDARuntimeVersion = &d.Driver, &d.Runtime
	}
	if k := inst.Engine.DraftWindow(); k > 0 {
		backend, head := specBackend(inst), "speculative."+specBackend(inst)
		r.Config.SpeculativeBackend, r.Config.DraftTokens, r.Config.ProposalHead = &backend, k, &head
	}
	r.Bandwidth = peakBandwidth(o)
	return r
}

// decodePath names how a decode step runs on a device backend, as the
// seed's reports do ("mtp_cuda_graph"): the speculative backend, if any,
// then the backend, then "graph" (captured CUDA graphs replayed per
// bucket) or "eager" (each kernel launched).
func decodePath(backend, spec string, eager bool) string {
	p := backend + "_graph"
	if eager {
		p = backend + "_eager"
	}
	if spec != "none" {
		p = spec + "_" + p
	}
	return p
}

// peakBandwidth is the given peak, or a triad measured with the bench's threads.
func peakBandwidth(o *benchOptions) bench.Bandwidth {
	switch {
	case o.peakGBs > 0:
		p := o.peakGBs * bench.GB
		return bench.Bandwidth{PeakBytesPerSecond: &p, PeakSource: "given"}
	case o.peakGBs < 0:
		return bench.Bandwidth{PeakSource: "none"}
	}
	threads := o.mf.threads
	if threads == 0 {
		threads = runtime.NumCPU()
	}
	elems := o.triadMiB << 20 / 24
	p, moved := bench.Triad(elems, threads, 5)
	return bench.Bandwidth{PeakBytesPerSecond: &p, PeakSource: "triad", TriadBytes: moved, TriadThreads: threads}
}

// hostEnvironment describes this machine and process for a report of the
// given backend and backend threads.
func hostEnvironment(backend string, threads int) bench.Environment {
	return bench.Environment{Backend: backend, CPUModel: cpuModel(), CPUCores: runtime.NumCPU(), CPUKernels: cpu.KernelLevel(),
		Threads: threads, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// cpuModel is /proc/cpuinfo's first "model name", or "".
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// commandLine joins args, quoting those a shell would split.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$;&|<>*?()[]{}`!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// promptCorpus hands out prompts taken from a tokenized corpus, each with a
// token substituted that no earlier prompt of the run had at that position,
// so no two requests share a prompt (identical prompts let caches and
// context-copying drafters flatter the result).
type promptCorpus struct {
	tokens []int32 // the corpus, BOS first when the model adds one
	bos    bool
	pool   []int32 // substitution tokens: the corpus's distinct tokens, then the rest of the vocabulary
	n      int     // prompts handed out
}

func newPromptCorpus(inst *instance.Instance, text string) *promptCorpus {
	tk := inst.Tokenizer
	c := &promptCorpus{tokens: tk.Encode(text, true, false)}
	c.bos = tk.AddBOS() && len(c.tokens) > 0 && c.tokens[0] == tk.BOS()
	special := func(id int32) bool { return tk.IsEOG(id) || id == tk.BOS() }
	seen := map[int32]bool{}
	for _, id := range c.tokens {
		if !seen[id] && !special(id) {
			seen[id] = true
			c.pool = append(c.pool, id)
		}
	}
	for id := int32(0); int(id) < inst.Engine.Vocab(); id++ {
		if !seen[id] && !special(id) {
			c.pool = append(c.pool, id)
		}
	}
	return c
}

// next returns a prompt of n tokens (the corpus repeated, without its BOS,
// if it is shorter), the position of the substituted token and the token.
func (c *promptCorpus) next(n int) ([]int32, int, int32) {
	p := make([]int32, 0, n)
	body := c.tokens
	if c.bos {
		p = append(p, c.tokens[0])
		body = c.tokens[1:]
	}
	for len(p) < n && len(body) > 0 {
		p = append(p, body[:min(len(body), n-len(p))]...)
	}
	for len(p) < n { // a corpus of BOS alone
		p = append(p, c.tokens[0])
	}
	pos := 0
	if c.bos && n > 1 {
		pos = 1
	}
	sub := c.pool[c.n%len(c.pool)]
	c.n++
	if sub == p[pos] {
		sub = c.pool[c.n%len(c.pool)]
		c.n++
	}
	p[pos] = sub
	return p, pos, sub
}

// progress draws a progress bar on w once a run has taken a second.
type progress struct {
	w            io.Writer
	total, count int64
	start, drawn time.Time
	label        string
	shown        bool
}

func newProgress(w io.Writer, total int64) *progress {
	return &progress{w: w, total: max(total, 1), start: time.Now()}
}

func (p *progress) add(n int64) {
	p.count += n
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < time.Second || now.Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.drawn = now
	p.draw(now)
}

func (p *progress) draw(now time.Time) {
	const width = 30
	frac := min(float64(p.count)/float64(p.total), 1)
	fill := int(frac * width)
	eta := ""
	if frac > 0 && frac < 1 {
		el := now.Sub(p.start)
		eta = fmt.Sprintf(" ETA %s", (time.Duration(float64(el)/frac) - el).Round(time.Second))
	}
	fmt.Fprintf(p.w, "\r[%s%s] %3.0f%% %-28s%s   ", strings.Repeat("=", fill), strings.Repeat(" ", width-fill), frac*100, p.label, eta)
	p.shown = true
}

// done completes the bar if it was shown.
func (p *progress) done() {
	if p.w == nil || !p.shown {
		return
	}
	p.count = p.total
	p.label = "done"
	p.draw(time.Now())
	fmt.Fprintln(p.w)
	p.shown = false
}
