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
	"time"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/node"
	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
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

// add folds one position's comparison into s: ref and got are [vocab]
// logits, want the f32 greedy token at the position pos.
func (s *kvStats) add(pos int, want int32, ref, got []float32) {
	if s.Positions == 0 {
		s.FirstDiv = -1
	}
	s.Positions++
	if argmax(got) == want {
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

// argmax is the index of the largest logit, ties to the lower id (as greedy sampling).
func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// margin is the top1 - top2 logit gap of x.
func margin(x []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range x {
		f := float64(v)
		if f > a {
			a, b = f, a
		} else if f > b {
			b = f
		}
	}
	return a - b
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

// stateBF16 is the kv-eval "format" that stores a hybrid model's recurrent
// state as bf16, with f32 KV pages.
const stateBF16 = "state-bf16"

// parseKVFormats splits a --kv value into known format names; "all" is
// every format but f32.
func parseKVFormats(s string) ([]string, error) {
	if s == "all" {
		return kv.FormatNames()[1:], nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		if strings.TrimSpace(name) == stateBF16 {
			if !slices.Contains(out, stateBF16) {
				out = append(out, stateBF16)
			}
			continue
		}
		f, err := kv.LookupFormat(strings.TrimSpace(name))
		if err != nil || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--kv %q: unknown format %q (have %s, %s, or all)", s, name, strings.Join(kv.FormatNames(), ", "), stateBF16)
		}
		if !slices.Contains(out, f.Name) {
			out = append(out, f.Name)
		}
	}
	return out, nil
}

// kvEval runs the comparison of formats with f32 described in kvEvalUsage.
func kvEval(model string, formats []string, prompts []golden.Prompt, n, threads, rounds int) (*kvEvalReport, error) {
	f, err := weights.Open(model)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tk, err := tok.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model, err)
	}
	fwd, err := forwardNode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", model, err)
	}
	layers, kvDim := fwd.(exec.KVShaper).KVShape()
	ctxLen, err := f.ContextLength()
	if err != nil {
		return nil, fmt.Errorf("%s: context length: %w", model, err)
	}
	ids := make([][]int32, len(prompts))
	longest := 0
	for i, p := range prompts {
		ids[i] = tk.Encode(p.Text, true, true)
		if len(ids[i]) == 0 {
			return nil, fmt.Errorf("prompt %s encodes to no tokens", p.ID)
		}
		if len(ids[i])+n > int(ctxLen) {
			return nil, fmt.Errorf("prompt %s: %d tokens + %d > context %d", p.ID, len(ids[i]), n, ctxLen)
		}
		longest = max(longest, len(ids[i])+n)
	}
	rep := &kvEvalReport{Model: filepath.Base(model), Prompts: len(prompts), Tokens: n, Layers: layers, KVDim: kvDim}
	runners := map[string]*kvRunner{}
	defer func() {
		for _, r := range runners {
			r.close()
		}
	}()
	for _, format := range append([]string{kv.F32.Name}, formats...) {
		r, err := newKVRunner(f, fwd, format, layers, kvDim, longest, threads)
		if err != nil {
			return nil, err
		}
		runners[format] = r
	}
	type refCase struct {
		tokens []int32
		logits [][]float32 // [n][vocab]
	}
	refs := make([]refCase, len(prompts))
	for i := range prompts {
		err := runners[kv.F32.Name].generate(ids[i], n, func(pos int, logits []float32) int32 {
			t := argmax(logits)
			refs[i].tokens = append(refs[i].tokens, t)
			refs[i].logits = append(refs[i].logits, slices.Clone(logits))
			return t
		})
		if err != nil {
			return nil, fmt.Errorf("prompt %s (f32): %w", prompts[i].ID, err)
		}
	}
	for _, format := range formats {
		fr := kvFormatReport{Format: format}
		for i, p := range prompts {
			c := kvCaseReport{ID: p.ID}
			err := runners[format].generate(ids[i], n, func(pos int, logits []float32) int32 {
				c.Stats.add(pos, refs[i].tokens[pos], refs[i].logits[pos], logits)
				return refs[i].tokens[pos]
			})
			if err != nil {
				return nil, fmt.Errorf("prompt %s (%s): %w", p.ID, format, err)
			}
			if c.Stats.FirstDiv >= 0 {
				c.RefMargin = margin(refs[i].logits[c.Stats.FirstDiv])
			}
			fr.Stats.merge(c.Stats)
			fr.Cases = append(fr.Cases, c)
		}
		rep.Formats = append(rep.Formats, fr)
	}
	// Decode speed: rounds of the longest prompt through every format in
	// turn, keeping each format's fastest round, so that load from other
	// processes affects all formats alike (0 rounds: speeds stay 0).
	long := ids[0]
	for _, x := range ids {
		if len(x) > len(long) {
			long = x
		}
	}
	best := map[string]float64{}
	for range rounds {
		for format, r := range runners {
			r.decode, r.decoded = 0, 0
			if err := r.generate(long, n, func(_ int, logits []float32) int32 { return argmax(logits) }); err != nil {
				return nil, err
			}
			best[format] = max(best[format], r.decodeTPS())
		}
	}
	speed := func(format string) kvSpeed {
		fm, err := kv.LookupFormat(format)
		if err != nil { // state-bf16: f32 pages
			fm = kv.F32
		}
		return kvSpeed{BytesPerToken: kv.BytesPerToken(fm, layers, kvDim),
			TokensPerGiB: kv.CapacityTokens(1<<30, fm, layers, kvDim, 1), DecodeTPS: best[format]}
	}
	rep.F32 = speed(kv.F32.Name)
	for i := range rep.Formats {
		fr := &rep.Formats[i]
		fr.kvSpeed = speed(fr.Format)
		if rounds > 0 {
			fr.DecodeRatio = fr.DecodeTPS / rep.F32.DecodeTPS
		}
	}
	return rep, nil
}

// forwardNode returns the model.forward node of the plain graph, bound to f.
func forwardNode(f *weights.File) (node.DeviceNode, error) {
	p, err := instance.LoadPlan("plain", node.Default, nil)
	if err != nil {
		return nil, err
	}
	for _, st := range p.Steps {
		dn, ok := st.Node.(node.DeviceNode)
		if _, shaped := st.Node.(exec.KVShaper); !ok || !shaped {
			continue
		}
		if b, ok := st.Node.(exec.Binder); ok {
			if err := b.Bind(f); err != nil {
				return nil, err
			}
		}
		return dn, nil
	}
	return nil, errors.New("the plain graph has no model.forward step")
}

// kvRunner decodes one sequence at a time on its own CPU backend, whose KV
// cache is stored in one format, returning the full logits of every
// generated position (the engine only hands out sampled tokens).
type kvRunner struct {
	file    *weights.File
	fwd     node.DeviceNode
	be      exec.Backend
	table   []int32                 // the one sequence's blocks: 0, 1, 2 ...
	execs   map[int]exec.Executable // by step rows
	decode  time.Duration           // time running one-row (decode) steps
	decoded int
	// stateful: the model keeps recurrent state (a hybrid model), in slot 0.
	stateful bool
}

func newKVRunner(f *weights.File, fwd node.DeviceNode, format string, layers, kvDim, maxTokens, threads int) (*kvRunner, error) {
	be, err := exec.New("cpu", exec.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	const blockTokens = 16
	blocks := (maxTokens + blockTokens - 1) / blockTokens
	r := &kvRunner{file: f, fwd: fwd, be: be, execs: map[int]exec.Executable{}, table: make([]int32, blocks)}
	for i := range r.table {
		r.table[i] = int32(i)
	}
	if err := be.Load(f); err != nil {
		be.Close()
		return nil, err
	}
	layout := exec.KVLayout{Layers: layers, KVDim: kvDim, BlockTokens: blockTokens, Blocks: blocks, DType: format}
	if format == stateBF16 {
		layout.DType = kv.F32.Name
	}
	if s, ok := fwd.(exec.StateShaper); ok && s.StateShape().Layers() > 0 {
		// A hybrid model: one recurrent state slot for the one sequence.
		layout.State = s.StateShape()
		layout.State.Slots = 1
		if format == stateBF16 {
			layout.State.DType = "bf16"
		}
		r.stateful = true
	} else if format == stateBF16 {
		be.Close()
		return nil, fmt.Errorf("--kv %s: the model keeps no recurrent state", stateBF16)
	}
	if err := be.Reserve(layout); err != nil {
		be.Close()
		return nil, err
	}
	return r, nil
}

func (r *kvRunner) close() {
	for _, x := range r.execs {
		x.Close()
	}
	r.be.Close()
}

func (r *kvRunner) decodeTPS() float64 {
	if r.decoded == 0 {
		return 0
	}
	return float64(r.decoded) / r.decode.Seconds()
}

// generate prefills prompt, then produces n positions: at each it calls
// next with the position (0..n-1) and its [vocab] logits (valid only during
// the call), and feeds the token next returns. Positions are decoded one
// token per step, as the engine does.
func (r *kvRunner) generate(prompt []int32, n int, next func(pos int, logits []float32) int32) error {
	logits, err := r.step(prompt, 0)
	if err != nil {
		return err
	}
	for pos := 0; pos < n; pos++ {
		t := next(pos, logits)
		if pos == n-1 {
			break
		}
		if logits, err = r.step([]int32{t}, len(prompt)+pos); err != nil {
			return err
		}
	}
	return nil
}

// step runs tokens at positions start.. and returns the logits of the last
// row. One-row steps (decode) are timed, not counting their first-time Prepare.
func (r *kvRunner) step(tokens []int32, start int) ([]float32, error) {
	x, ok := r.execs[len(tokens)]
	if !ok {
		b := tensor.NewBuilder(func(name string) (tensor.DType, int, int, bool) {
			t, err := r.file.Tensor(name)
			if err != nil {
				return 0, 0, 0, false
			}
			return t.DType, t.Rows(), t.RowLen(), true
		})
		in := map[string]tensor.Tensor{"tokens": b.Input(node.BindTokens, len(tokens)), "positions": b.Input(node.BindPositions, len(tokens))}
		b.Input(node.BindLogitRows, 1)
		out, err := r.fwd.Record(b, in)
		if err != nil {
			return nil, err
		}
		b.Output("logits", out["logits"])
		g, err := b.Finish()
		if err != nil {
			return nil, err
		}
		if x, err = r.be.Prepare(g); err != nil {
			return nil, err
		}
		r.execs[len(tokens)] = x
	}
	pos := make([]int32, len(tokens))
	for i := range pos {
		pos[i] = int32(start + i)
	}
	batch := &exec.Batch{Tokens: tokens, Positions: pos, RowSeq: make([]int32, len(tokens)),
		Tables: [][]int32{r.table}, LogitRows: []int32{int32(len(tokens) - 1)}}
	if r.stateful {
		batch.StateSlots = []int32{0} // reset at position 0, as the stateful ops do
	}
	started := time.Now()
	if err := x.Run(context.Background(), batch); err != nil {
		return nil, err
	}
	if len(tokens) == 1 {
		r.decode += time.Since(started)
		r.decoded++
	}
	data, _, _, err := x.Output("logits")
	return data, err
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
