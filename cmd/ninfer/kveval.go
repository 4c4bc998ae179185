package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/suites/golden"
)

const kvEvalUsage = `usage: ninfer kv-eval --model FILE --kv FORMAT[,FORMAT...]|all --prompts PROMPTS.json [--n 64] [--threads N] [--speed-rounds 5] [--json]

For every prompt, greedy-decodes n tokens with an f32 KV cache, then feeds the
same tokens through a KV cache in each FORMAT and compares, position by position:
  top1      fraction of positions whose argmax equals the f32 greedy token
  first-div first position where greedy decoding with FORMAT would pick another token
  max|dl|, mean|dl|  absolute logit error; KL  KL(p_f32 || p_FORMAT) of next-token distributions
and reports bytes per token (K+V, all layers, scales included), tokens per GiB,
and decode tokens/s with its ratio to f32 measured in the same run.
FORMAT state-bf16 (hybrid models) keeps f32 KV pages and stores the recurrent
state slots as bf16 instead (kv.cache's state param), to measure what that costs.
FORMAT checkpoint-bf16 (hybrid models) keeps f32 state and the prefix cache on
with bf16 checkpoints (--checkpoint-dtype bf16): the state is rounded once at
each checkpoint position (the prompt's last block boundary, every 32 blocks,
each generated block).
`

// kvEvalReport is the --json output of `ninfer kv-eval`.
type kvEvalReport struct {
	Model   string           `json:"model"`
	Prompts int              `json:"prompts"`
	Tokens  int              `json:"tokens"` // greedy tokens compared per prompt
	Layers  int              `json:"layers"`
	KVDim   int              `json:"kv_dim"`
	F32     kvSpeed          `json:"f32"`
	Formats []kvFormatReport `json:"formats"`
}

// kvSpeed is the decode speed of one format's run.
type kvSpeed struct {
	BytesPerToken int64   `json:"bytes_per_token"`
	TokensPerGiB  int64   `json:"tokens_per_gib"`
	DecodeTPS     float64 `json:"decode_tokens_per_second"`
}

// kvFormatReport is one format compared with f32 over all prompts.
type kvFormatReport struct {
	Format string `json:"format"`
	kvSpeed
	DecodeRatio float64        `json:"decode_ratio_to_f32"`
	Stats       kvStats        `json:"stats"`
	Cases       []kvCaseReport `json:"cases"`
}

// kvCaseReport is one prompt's comparison.
type kvCaseReport struct {
	ID    string  `json:"id"`
	Stats kvStats `json:"stats"`
	// RefMargin is the f32 top1-top2 logit margin at FirstDivergence (0 when none).
	RefMargin float64 `json:"ref_margin_at_divergence"`
}

// kvStats compares logits of positions teacher-forced with the f32 greedy tokens.
type kvStats struct {
	Positions int     `json:"positions"`
	Agreement float64 `json:"top1_agreement"`   // fraction of positions whose argmax is the f32 token
	FirstDiv  int     `json:"first_divergence"` // earliest position whose argmax differs; -1 when none
	Diverged  int     `json:"diverged_prompts"` // prompts with a divergence (per case: 0 or 1)
	MaxAbs    float64 `json:"max_abs_logit_error"`
	MeanAbs   float64 `json:"mean_abs_logit_error"`
	KLMean    float64 `json:"kl_mean"`
	KLMax     float64 `json:"kl_max"`

	agree, cells int     // counts behind Agreement and MeanAbs
	sumAbs       float64 // behind MeanAbs
	sumKL        float64 // behind KLMean
}

// add folds one position's comparison into s: want is the f32 greedy
// token at position pos, top the format's own top token there, ref and got
// the [vocab] logits of f32 and the format.
func (s *kvStats) add(pos int, want, top int32, ref, got []float32) {
	if s.Positions == 0 {
		s.FirstDiv = -1
	}
	s.Positions++
	if top == want {
		s.agree++
	} else if s.FirstDiv < 0 {
		s.FirstDiv, s.Diverged = pos, 1
	}
	for i := range ref {
		d := math.Abs(float64(got[i]) - float64(ref[i]))
		s.MaxAbs = max(s.MaxAbs, d)
		s.sumAbs += d
	}
	s.cells += len(ref)
	kl := klDivergence(ref, got)
	s.sumKL += kl
	s.KLMax = max(s.KLMax, kl)
	s.finish()
}

// merge folds another prompt's stats into s (positions of o are not
// comparable with s's, so FirstDiv keeps the earliest).
func (s *kvStats) merge(o kvStats) {
	if s.Positions == 0 {
		s.FirstDiv = -1
	}
	s.Positions += o.Positions
	s.agree += o.agree
	s.cells += o.cells
	s.sumAbs += o.sumAbs
	s.sumKL += o.sumKL
	s.MaxAbs = max(s.MaxAbs, o.MaxAbs)
	s.KLMax = max(s.KLMax, o.KLMax)
	s.Diverged += o.Diverged
	if o.FirstDiv >= 0 && (s.FirstDiv < 0 || o.FirstDiv < s.FirstDiv) {
		s.FirstDiv = o.FirstDiv
	}
	s.finish()
}

func (s *kvStats) finish() {
	s.Agreement = float64(s.agree) / float64(s.Positions)
	s.MeanAbs = s.sumAbs / float64(s.cells)
	s.KLMean = s.sumKL / float64(s.Positions)
}

// klDivergence is KL(softmax(p) || softmax(q)) in nats, computed in float64.
func klDivergence(p, q []float32) float64 {
	lp, lq := logSoftmax(p), logSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return max(kl, 0)
}

func logSoftmax(x []float32) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	out := make([]float64, len(x))
	lse := m + math.Log(sum)
	for i, v := range x {
		out[i] = float64(v) - lse
	}
	return out
}

func runKVEval(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kv-eval", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, kvEvalUsage); fs.PrintDefaults() }
	model := fs.String("model", "", "GGUF model file (required)")
	formats := fs.String("kv", "", "KV formats to compare with f32, comma-separated, or all (required)")
	prompts := fs.String("prompts", "", "prompts JSON: [{\"id\":..,\"text\":..}], e.g. ../shared/golden/prompts.json (required)")
	n := fs.Int("n", 64, "greedy tokens per prompt")
	threads := fs.Int("threads", 0, "backend threads (0 = all cores)")
	rounds := fs.Int("speed-rounds", 5, "times each format decodes the longest prompt for its speed (0 = no timing)")
	asJSON := fs.Bool("json", false, "print one JSON object instead of tables")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer kv-eval: %v\n", err); return 1 }
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *model == "" || *formats == "" || *prompts == "" {
		return fail(errors.New("--model, --kv and --prompts are required"))
	}
	if *n < 1 || *threads < 0 || *rounds < 0 {
		return fail(fmt.Errorf("--n %d must be >= 1, --threads %d and --speed-rounds %d >= 0", *n, *threads, *rounds))
	}
	names, err := parseKVFormats(*formats)
	if err != nil {
		return fail(err)
	}
	ps, err := golden.LoadPrompts(*prompts)
	if err != nil {
		return fail(err)
	}
	rep, err := kvEval(*model, names, ps, *n, *threads, *rounds)
	if err != nil {
		return fail(err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fail(err)
		}
		return 0
	}
	printKVEval(stdout, rep)
	return 0
}

// The kv-eval "formats" of a hybrid model's recurrent state, with f32 KV
// pages: stateBF16 stores the running state as bf16, checkpointBF16 the
// prefix cache's checkpoints (the f32 state rounded at checkpoint
// positions).
const (
	stateBF16      = "state-bf16"
	checkpointBF16 = "checkpoint-bf16"
)

// parseKVFormats splits a --kv value into known format names; "all" is
// every format but f32.
func parseKVFormats(s string) ([]string, error) {
	if s == "all" {
		return page.FormatNames()[1:], nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name := strings.TrimSpace(name); name == stateBF16 || name == checkpointBF16 {
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
			continue
		}
		f, err := page.LookupFormat(strings.TrimSpace(name))
		if err != nil || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--kv %q: unknown format %q (have %s, %s, %s, or all)", s, name, strings.Join(page.FormatNames(), ", "), stateBF16, checkpointBF16)
		}
		if !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out, nil
}

// kvEval runs the comparison of formats with f32 described in kvEvalUsage:
// every format decodes through an engine of its own (the format's graph),
// which hands out each position's whole logit row (engine.Request.Logits).
func kvEval(model string, formats []string, prompts []golden.Prompt, n, threads, rounds int) (*kvEvalReport, error) {
	engines := map[string]*instance.Instance{}
	defer func() {
		for _, in := range engines {
			in.Close()
		}
	}()
	for _, format := range append([]string{page.F32.Name}, formats...) {
		in, err := openKVEngine(model, format, threads)
		if err != nil {
			return nil, err
		}
		engines[format] = in
	}
	ref := engines[page.F32.Name]
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		ids[i] = ref.Tokenizer.Encode(p.Text, true, true)
		if len(ids[i]) == 0 {
			return nil, fmt.Errorf("prompt %s encodes to no tokens", p.ID)
		}
		if ctxLen := ref.Engine.ContextLength(); len(ids[i])+n > ctxLen {
			return nil, fmt.Errorf("prompt %s: %d tokens + %d > context %d", p.ID, len(ids[i]), n, ctxLen)
		}
	}
	info := ref.Engine.Model()
	rep := &kvEvalReport{Model: filepath.Base(model), Prompts: len(prompts), Tokens: n, Layers: info.KVLayers, KVDim: info.KVDim}
	refs := make([][]engine.Event, len(prompts)) // [prompt][n]: f32's greedy tokens and their logits
	for i := range prompts {
		evs, _, err := kvGenerate(ref, engine.Request{Prompt: ids[i], MaxTokens: n, Logits: true, TopLogits: 2})
		if err != nil {
			return nil, fmt.Errorf("prompt %s (f32): %w", prompts[i].ID, err)
		}
		refs[i] = evs
	}
	for _, format := range formats {
		fr, err := kvCompare(engines[format], format, prompts, ids, refs)
		if err != nil {
			return nil, err
		}
		rep.Formats = append(rep.Formats, fr)
	}
	best, err := kvDecodeSpeeds(engines, ids, n, rounds)
	if err != nil {
		return nil, err
	}
	speed := func(format string) kvSpeed {
		fm, err := page.LookupFormat(format)
		if err != nil { // state-bf16, checkpoint-bf16: f32 pages
			fm = page.F32
		}
		return kvSpeed{BytesPerToken: page.BytesPerToken(fm, info.KVLayers, info.KVDim),
			TokensPerGiB: page.CapacityTokens(1<<30, fm, info.KVLayers, info.KVDim, 1), DecodeTPS: best[format]}
	}
	rep.F32 = speed(page.F32.Name)
	for i := range rep.Formats {
		fr := &rep.Formats[i]
		fr.kvSpeed = speed(fr.Format)
		if rounds > 0 {
			fr.DecodeRatio = fr.DecodeTPS / rep.F32.DecodeTPS
		}
	}
	return rep, nil
}

// kvCompare teacher-forces every prompt's f32 greedy tokens (refs) through
// in, whose KV cache is stored in format, and compares each position's
// logits with f32's.
func kvCompare(in *instance.Instance, format string, prompts []golden.Prompt, ids [][]int32, refs [][]engine.Event) (kvFormatReport, error) {
	fr := kvFormatReport{Format: format}
	for i, p := range prompts {
		force := make([]int32, len(refs[i]))
		for pos, ev := range refs[i] {
			force[pos] = ev.Token
		}
		evs, _, err := kvGenerate(in, engine.Request{Prompt: ids[i], MaxTokens: len(force), Force: force, Logits: true, TopLogits: 1})
		if err != nil {
			return fr, fmt.Errorf("prompt %s (%s): %w", p.ID, format, err)
		}
		c := kvCaseReport{ID: p.ID}
		for pos, ev := range evs {
			c.Stats.add(pos, force[pos], ev.Top[0].ID, refs[i][pos].Logits, ev.Logits)
		}
		if d := c.Stats.FirstDiv; d >= 0 {
			top := refs[i][d].Top
			c.RefMargin = float64(top[0].Logit) - float64(top[1].Logit)
		}
		fr.Stats.merge(c.Stats)
		fr.Cases = append(fr.Cases, c)
	}
	return fr, nil
}

// kvDecodeSpeeds runs rounds of the longest prompt through every engine in
// turn, keeping each format's fastest decode (tokens per second after the
// first token), so that load from other processes affects all formats
// alike (0 rounds: no speeds).
func kvDecodeSpeeds(engines map[string]*instance.Instance, ids [][]int32, n, rounds int) (map[string]float64, error) {
	long := ids[0]
	for _, x := range ids {
		if len(x) > len(long) {
			long = x
		}
	}
	best := map[string]float64{}
	for range rounds {
		for format, in := range engines {
			_, st, err := kvGenerate(in, engine.Request{Prompt: long, MaxTokens: n})
			if err != nil {
				return nil, err
			}
			if decoded := st.GeneratedTokens - 1; decoded > 0 {
				best[format] = max(best[format], float64(decoded)/st.Decode.Seconds())
			}
		}
	}
	return best, nil
}

// kvFormatGraph is the embedded graph that stores the KV cache (or, for
// state-bf16, the recurrent state) in format.
func kvFormatGraph(format string) string {
	switch format {
	case page.F32.Name, checkpointBF16:
		return "plain"
	case stateBF16:
		return stateBF16
	}
	return "kv-" + format
}

// openKVEngine starts the model with its KV cache in format, for one
// sequence at a time and without a prefix cache (every run computes its
// prompt) but for checkpoint-bf16's, on a CPU backend of its own.
func openKVEngine(model, format string, threads int) (*instance.Instance, error) {
	o := instance.Options{Model: model, Graph: kvFormatGraph(format), Threads: threads, MaxRunning: 1, Mmap: true, NoPrefixCache: true}
	if format == checkpointBF16 {
		o.NoPrefixCache, o.CheckpointDType = false, "bf16"
	}
	in, err := instance.Open(o)
	if err != nil {
		return nil, err
	}
	if (format == stateBF16 || format == checkpointBF16) && in.Engine.Model().State.Layers() == 0 {
		in.Close()
		return nil, fmt.Errorf("--kv %s: the model keeps no recurrent state", format)
	}
	return in, nil
}

// kvGenerate runs r to its length limit on in and returns its token events
// and statistics.
func kvGenerate(in *instance.Instance, r engine.Request) ([]engine.Event, engine.Stats, error) {
	ch, err := in.Engine.Submit(context.Background(), r)
	if err != nil {
		return nil, engine.Stats{}, err
	}
	var evs []engine.Event
	for ev := range ch {
		if !ev.Done {
			evs = append(evs, ev)
			continue
		}
		if ev.Err != nil {
			return nil, ev.Stats, ev.Err
		}
		if ev.Finish != engine.FinishLength {
			return nil, ev.Stats, fmt.Errorf("stopped after %d of %d tokens (%s)", len(evs), r.MaxTokens, ev.Finish)
		}
		return evs, ev.Stats, nil
	}
	return nil, engine.Stats{}, errors.New("the engine closed the request's events without a final one")
}

func printKVEval(w io.Writer, rep *kvEvalReport) {
	fmt.Fprintf(w, "kv-eval %s: %d prompts x %d greedy tokens, each format vs f32 KV (layers %d, kv dim %d)\n\n",
		rep.Model, rep.Prompts, rep.Tokens, rep.Layers, rep.KVDim)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "format\tbytes/token\ttokens/GiB\ttop1\tfirst-div\tdiverged\tmax|dl|\tmean|dl|\tKL mean\tKL max\tdecode tok/s\tvs f32\t")
	fmt.Fprintf(tw, "f32\t%d\t%d\t1.0000\t-\t0/%d\t0\t0\t0\t0\t%.0f\t1.00\t\n", rep.F32.BytesPerToken, rep.F32.TokensPerGiB, rep.Prompts, rep.F32.DecodeTPS)
	for _, f := range rep.Formats {
		s := f.Stats
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%s\t%d/%d\t%.3g\t%.3g\t%.3g\t%.3g\t%.0f\t%.2f\t\n", f.Format, f.BytesPerToken, f.TokensPerGiB,
			s.Agreement, divText(s.FirstDiv), s.Diverged, rep.Prompts, s.MaxAbs, s.MeanAbs, s.KLMean, s.KLMax, f.DecodeTPS, f.DecodeRatio)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nper prompt: first divergence (f32 top1-top2 margin there), top1 agreement, max|dl|, KL max")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "prompt"
	for _, f := range rep.Formats {
		header += "\t" + f.Format
	}
	fmt.Fprintln(tw, header+"\t")
	for i := 0; len(rep.Formats) > 0 && i < len(rep.Formats[0].Cases); i++ {
		line := rep.Formats[0].Cases[i].ID
		for _, f := range rep.Formats {
			c := f.Cases[i]
			div := divText(c.Stats.FirstDiv)
			if c.Stats.FirstDiv >= 0 {
				div += fmt.Sprintf(" (%.3g)", c.RefMargin)
			}
			line += fmt.Sprintf("\t%s %.3f %.3g %.3g", div, c.Stats.Agreement, c.Stats.MaxAbs, c.Stats.KLMax)
		}
		fmt.Fprintln(tw, line+"\t")
	}
	tw.Flush()
}

func divText(pos int) string {
	if pos < 0 {
		return "none"
	}
	return fmt.Sprint(pos)
}
