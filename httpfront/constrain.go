package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// Constraint requests: the fields that ask for output constrained by a
// grammar. At most one per request.
var constraintFields = []string{"response_format", "grammar", "json_schema", "guided_json", "guided_grammar", "guided_choice"}

// constraintOf reads the request's output constraint as GBNF: "" when it
// has none (or response_format text). A JSON Schema compiles under a
// grammar.Work of grammar.MaxSchemaWork units that polls interrupt.
func constraintOf(f fields, interrupt func() error) (src, field string, e *Error) {
	var set []string
	for _, k := range constraintFields {
		if f.has(k) {
			set = append(set, k)
		}
	}
	if len(set) > 1 {
		return "", "", badParam(set[1], "Invalid request: '%s' and '%s' both constrain the output; send one.", set[0], set[1])
	}
	if len(set) == 0 {
		return "", "", nil
	}
	field = set[0]
	schema := func(param string, raw json.RawMessage) (string, string, *Error) {
		var g string
		err := withCompileSlot(interrupt, func(w *grammar.Work) (err error) {
			g, err = grammar.FromSchemaWork(raw, w)
			return err
		})
		if err != nil {
			return "", "", schemaError(param, "Invalid '%s': %v", err)
		}
		return g, field, nil
	}
	switch field {
	case "response_format":
		var rf struct {
			Type       string          `json:"type"`
			Schema     json.RawMessage `json:"schema"` // llama-server's form
			JSONSchema *struct {
				Name   string          `json:"name"`
				Schema json.RawMessage `json:"schema"`
				Strict *bool           `json:"strict"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(f[field], &rf); err != nil {
			return "", "", badParam(field, "Invalid type for 'response_format': expected an object with a 'type'.")
		}
		switch rf.Type {
		case "text":
			return "", "", nil
		case "json_object":
			if len(rf.Schema) > 0 {
				return schema("response_format.schema", rf.Schema)
			}
			return "root ::= object\n" + grammar.JSONRules, field, nil
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return "", "", badParam("response_format.json_schema.schema", "Missing required parameter: 'response_format.json_schema.schema'.")
			}
			return schema("response_format.json_schema.schema", rf.JSONSchema.Schema)
		}
		return "", "", badParam("response_format.type", "Invalid value for 'response_format.type': expected 'text', 'json_object' or 'json_schema', got '%.32s'.", rf.Type)
	case "json_schema", "guided_json":
		raw := f[field]
		var s string
		if json.Unmarshal(raw, &s) == nil { // vLLM takes the schema as a string too
			raw = json.RawMessage(s)
		}
		return schema(field, raw)
	case "grammar", "guided_grammar":
		var s string
		if e := f.decode(field, "a string (GBNF)", &s); e != nil {
			return "", "", e
		}
		return s, field, nil
	case "guided_choice":
		var choices []string
		if e := f.decode(field, "an array of strings", &choices); e != nil {
			return "", "", e
		}
		if len(choices) == 0 {
			return "", "", badParam(field, "Invalid 'guided_choice': expected at least one choice.")
		}
		alts := make([]string, len(choices))
		for i, c := range choices {
			b, _ := json.Marshal(c)
			alts[i] = string(b)
		}
		return "root ::= " + strings.Join(alts, " | ") + "\n", field, nil
	}
	return "", "", nil
}

// compileConstraint compiles src, naming field in errors. It runs in the
// request's handler, never on the engine's goroutine, one compilation per
// compileSlots at a time: a large constraint makes its own request wait,
// not the others.
func compileConstraint(src, field string, interrupt func() error) (*grammar.Grammar, *Error) {
	compiledMu.Lock()
	g, ok := compiled[src]
	compiledMu.Unlock()
	if ok {
		return g, nil
	}
	err := withCompileSlot(interrupt, func(w *grammar.Work) (err error) {
		g, err = grammar.ParseWork(src, w)
		return err
	})
	if err != nil { // a GBNF error, a schema that recurses before any output, a size limit
		return nil, schemaError(field, "Invalid '%s': %v", err)
	}
	compiledMu.Lock()
	if compiledSize += g.Size(); len(compiled) >= maxSharedGrammars || compiledSize > maxCompiledSymbols {
		clear(compiled)
		compiledSize = g.Size()
	}
	compiled[src] = g
	compiledMu.Unlock()
	return g, nil
}

// compileSlots bounds the constraint compilations (and first masks) that
// run at once, so that large ones leave CPU to the engine.
var compileSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))

// withCompileSlot runs compile holding one of compileSlots, with a
// yieldingWork of grammar.MaxSchemaWork units polling interrupt (nil: one
// that only yields). It waits for the slot until interrupt reports an
// error (polled every peerPollInterval), and then returns that error.
func withCompileSlot(interrupt func() error, compile func(w *grammar.Work) error) error {
	if interrupt == nil {
		interrupt = func() error { return nil }
	}
	select {
	case compileSlots <- struct{}{}:
	default:
		t := time.NewTicker(peerPollInterval)
		defer t.Stop()
	wait:
		for {
			select {
			case compileSlots <- struct{}{}:
				break wait
			case <-t.C:
				if err := interrupt(); err != nil {
					return err
				}
			}
		}
	}
	defer func() { <-compileSlots }()
	return compile(yieldingWork(grammar.MaxSchemaWork, interrupt))
}

// yieldingWork is a Work of limit units for a task in a request's handler
// (a compile, a first mask) that holds no lock the engine waits for: every
// compilePollEvery units it yields the processor and polls interrupt.
func yieldingWork(limit int64, interrupt func() error) *grammar.Work {
	yielding := func() error {
		runtime.Gosched()
		return interrupt()
	}
	return &grammar.Work{Limit: limit, Interrupt: yielding, PollEvery: compilePollEvery}
}

// compilePollEvery is the Work units between two polls of a compile's
// interrupt, each of which yields the processor (runtime.Gosched): a few
// tens of microseconds, so that a compile running beside the engine's
// step hands its processor back at once instead of holding it for the
// scheduler's 10 ms time slice.
const compilePollEvery = 64

// interrupted is the error a request's compile Interrupt stops its
// compilation with: the request's answer.
type interrupted struct{ e *Error }

func (i interrupted) Error() string { return i.e.Message }

// decodeOptions are the DecodeOptions of the request ctx: its constraint
// compiles until the request's deadline (--timeout after it arrived: 504),
// the server's shutdown (once Shutdown's drain ends: 503), or its client
// leaving (polled every peerPollInterval: 499).
func (s *Server) decodeOptions(ctx *fasthttp.RequestCtx) DecodeOptions {
	deadline := ctx.Time().Add(s.cfg.Timeout)
	conn := ctx.Conn()
	var polled time.Time
	interrupt := func() error {
		now := time.Now()
		switch {
		case s.generations.Err() != nil:
			return interrupted{shuttingDownError()}
		case now.After(deadline): // New sets a Timeout (DefaultTimeout when none is given)
			return interrupted{deadlineError()}
		case conn != nil && now.Sub(polled) >= peerPollInterval:
			polled = now
			if closed, _ := peerClosed(conn); closed {
				return interrupted{clientClosedError("The client closed the connection.")}
			}
		}
		return nil
	}
	return DecodeOptions{Strict: s.cfg.StrictFields, Interrupt: interrupt, Media: s.cfg.Media}
}

// prepareContext bounds the work of preparing the request ctx before it
// is admitted (reading and encoding its images) as decodeOptions bounds
// its compiles: it ends at the request's deadline, the server's shutdown,
// or its client leaving (polled every peerPollInterval). abortError gives
// the answer. The caller calls cancel when the preparation is done.
func (s *Server) prepareContext(ctx *fasthttp.RequestCtx) (context.Context, context.CancelFunc) {
	withCause, cancelCause := context.WithCancelCause(s.generations)
	pctx, cancelDeadline := context.WithDeadline(withCause, ctx.Time().Add(s.cfg.Timeout))
	conn := ctx.Conn()
	if conn != nil {
		go func() {
			t := time.NewTicker(peerPollInterval)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
					if closed, _ := peerClosed(conn); closed {
						cancelCause(errClientClosed)
						return
					}
				}
			}
		}()
	}
	return pctx, func() { cancelDeadline(); cancelCause(nil) }
}

// errClientClosed is the cause of a request preparation whose client left.
var errClientClosed = errors.New("the client closed the connection")

// schemaError is the answer to a constraint that failed to compile
// (format has a %s for param and a %v for err): the interrupt's answer
// when interrupted, a 400 constraint_too_complex past the Work's limit,
// else a 400 naming param.
func schemaError(param, format string, err error) *Error {
	var in interrupted
	switch {
	case errors.As(err, &in):
		return in.e
	case errors.Is(err, grammar.ErrSchemaTooComplex) || errors.Is(err, grammar.ErrWorkLimit):
		e := badParam(param, format, param, err)
		e.Code = "constraint_too_complex"
		return e
	}
	return badParam(param, format, param, err)
}

// thinkPrefix is the GBNF of the reasoning a thinking template's reply
// may start with, before the constrained part: the constraint starts
// after </think>. open: the prompt opened the block.
func thinkPrefix(mode Reasoning) string {
	body := `think-body ::= ( [^<] | "<" [^/] | "</" [^t] | "</t" [^h] | "</th" [^i] | "</thi" [^n] | "</thin" [^k] | "</think" [^>] )*` + "\n"
	switch mode {
	case ReasoningOpen:
		return "think ::= think-body \"</think>\" [ \\n]{0,4}\n" + body
	case ReasoningTagged:
		return "think ::= ( [ \\n]{0,2} \"<think>\" think-body \"</think>\" [ \\n]{0,4} )?\n" + body
	}
	return ""
}

// withThinking wraps a grammar's GBNF so that a reasoning block may come
// first (its root renamed).
func withThinking(src string, mode Reasoning) string {
	if mode == ReasoningOff {
		return src
	}
	return "root ::= think constrained-root\n" + renameRoot(src) + thinkPrefix(mode)
}

// renameRoot renames rule root to constrained-root in GBNF source (its
// definition and references).
func renameRoot(src string) string {
	var b strings.Builder
	inStr, inClass, comment := false, false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case comment:
			if c == '\n' {
				comment = false
			}
		case inStr:
			if c == '\\' && i+1 < len(src) {
				b.WriteByte(c)
				i++
				c = src[i]
			} else if c == '"' {
				inStr = false
			}
		case inClass:
			if c == '\\' && i+1 < len(src) {
				b.WriteByte(c)
				i++
				c = src[i]
			} else if c == ']' {
				inClass = false
			}
		case c == '#':
			comment = true
		case c == '"':
			inStr = true
		case c == '[':
			inClass = true
		case strings.HasPrefix(src[i:], "root") && (i == 0 || !isIdentByte(src[i-1])) && (i+4 == len(src) || !isIdentByte(src[i+4])):
			b.WriteString("constrained-root")
			i += 3
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '-' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// toolCallGrammar is the GBNF of replies that call one of tools (all, or
// only the named one), in format: the call markup with the function's
// name and arguments valid against its parameters schema; several calls
// when parallel.
func toolCallGrammar(raw json.RawMessage, only, format string, parallel bool, interrupt func() error) (string, *Error) {
	var tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &tools); err != nil {
		return "", badParam("tools", "Invalid type for 'tools': expected an array of tools.")
	}
	var b strings.Builder
	var calls []string
	for i, t := range tools {
		if only != "" && t.Function.Name != only {
			continue
		}
		args := "object"
		if len(t.Function.Parameters) > 0 {
			var name, rules string
			err := withCompileSlot(interrupt, func(w *grammar.Work) (err error) {
				name, rules, err = grammar.SchemaRulesWork(t.Function.Parameters, fmt.Sprintf("t%d-", i), w)
				return err
			})
			if err != nil {
				return "", schemaError(fmt.Sprintf("tools[%d].function.parameters", i), "Invalid '%s' for a forced call: %v", err)
			}
			args = name
			b.WriteString(rules)
		}
		nameJSON, _ := json.Marshal(t.Function.Name)
		call := fmt.Sprintf("call-%d", i)
		switch format {
		case "llama3_json":
			fmt.Fprintf(&b, "%s ::= %s %s %s\n", call, lit(`{"name": `+string(nameJSON)+`, "parameters": `), args, lit("}"))
		default:
			fmt.Fprintf(&b, "%s ::= %s %s %s\n", call, lit("<tool_call>\n"+`{"name": `+string(nameJSON)+`, "arguments": `), args, lit("}\n</tool_call>"))
		}
		calls = append(calls, call)
	}
	sep := `"\n"`
	if format == "llama3_json" {
		sep = `"; "`
	}
	root := "root ::= call\n"
	if parallel {
		root = "root ::= call ( " + sep + " call )*\n"
	}
	return root + "call ::= " + strings.Join(calls, " | ") + "\n" + b.String() + grammar.JSONRules, nil
}

// lit is s as a GBNF literal.
func lit(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// vocabs caches each tokenizer's grammar vocabulary: every token but the
// control and end-of-generation ones, by its bytes.
var vocabs sync.Map // *tok.Tokenizer -> *grammar.Vocab

func vocabOf(tk *tok.Tokenizer) *grammar.Vocab {
	if v, ok := vocabs.Load(tk); ok {
		return v.(*grammar.Vocab)
	}
	v := grammar.NewVocab(tk.VocabSize(), func(id int32) []byte {
		if tk.IsControl(id) || tk.IsEOG(id) {
			return nil
		}
		return tk.Piece(id)
	})
	got, _ := vocabs.LoadOrStore(tk, v)
	return got.(*grammar.Vocab)
}

// Work limits of constrained generation, in grammar.Work units (20-60 ns
// each on a 2-core machine). A mask may spend maskWorkPerNode units per
// node of the vocabulary's trie (a json_object grammar's costliest mask,
// inside a string met for the first time, needs about 2), at least
// minMaskWork; a choice's first mask and its start, computed in the
// request's handler before the choice reaches the engine, may spend
// firstMaskFactor times that. A constraint past the limit is refused (400
// naming its field), before generation or when generation reaches it.
const (
	maskWorkPerNode     = 64
	minMaskWork         = 1 << 20
	firstMaskFactor     = 16
	lockedFirstMaskWork = 1 << 16 // a few milliseconds
)

// maskWorkLimit is the Work limit of one mask over v.
func maskWorkLimit(v *grammar.Vocab) int64 { return max(minMaskWork, maskWorkPerNode*int64(v.Nodes())) }

// grammarMask is one choice's request.Sampling.Mask: it keeps the states the
// grammar reached after each generated token (so verify's per-position
// calls and rollbacks replay nothing twice) and allows the tokens that keep
// the output completable within the choice's token budget, and
// end-of-generation tokens once the output is a sentence. Each call's work
// is bounded (maskWorkLimit) and stops when the choice's context ends; a
// call past its limit fails the choice: it cancels ctx with a
// constraintFailure, which the choice's runner reports.
type grammarMask struct {
	shared    *sharedGrammar
	v         *grammar.Vocab
	tk        *tok.Tokenizer
	field     string // the request field the constraint came from
	maxTokens int
	ctx       context.Context
	fail      context.CancelCauseFunc
	toks      []int32
	states    []*grammar.State // states[i]: after toks[:i] (interned); nil once a token left the grammar
	first     []uint64         // the mask of states[0] at budget maxTokens
}

// constraintFailure is the cause a grammarMask cancels its choice with:
// the constraint needs more work than the server allows.
type constraintFailure struct{ e *Error }

func (f constraintFailure) Error() string { return f.e.Message }

// tooComplex is the 400 for a constraint whose work passed its limit.
func tooComplex(field string, err error) *Error {
	e := badParam(field, "The output constraint ('%s') is too complex to follow: %v. Simplify it (fewer overlapping alternatives).", field, err)
	e.Code = "constraint_too_complex"
	return e
}

// newGrammarMask prepares a choice's mask in the request's handler: the
// start state, its distance to a sentence (checked against maxTokens) and
// its first mask, all computed here rather than on the engine's goroutine.
// ctx is the choice's context and fail cancels it. The engine's masks of
// other choices with the same grammar wait for the shared cache's lock,
// so it is held for at most lockedFirstMaskWork units: a first mask that
// needs more is computed in a cache of the choice's own, which then
// becomes the shared one (its start's mask is what later choices need).
func newGrammarMask(ctx context.Context, fail context.CancelCauseFunc, p *Params, tk *tok.Tokenizer, maxTokens int) (*grammarMask, *Error) {
	sg := sharedOf(p.Grammar)
	v := vocabOf(tk)
	m := &grammarMask{shared: sg, v: v, tk: tk, field: p.ConstraintField, maxTokens: maxTokens, ctx: ctx, fail: fail}
	compileSlots <- struct{}{}
	defer func() { <-compileSlots }()
	first := func(c *grammar.Cache, w *grammar.Work) (*grammar.State, error) {
		start := c.Start()
		c.Bind(w)
		m.first = v.Mask(start, maxTokens)
		c.Bind(nil)
		return start, w.Err()
	}
	sg.mu.Lock()
	start := sg.cache.Start()
	if need := start.Remaining(); need > maxTokens {
		sg.mu.Unlock()
		return nil, badParam("max_tokens", "The output constraint ('%s') needs at least %d tokens, but max_tokens allows %d.", p.ConstraintField, need, maxTokens)
	}
	start, err := first(sg.cache, &grammar.Work{Limit: lockedFirstMaskWork, Interrupt: ctx.Err}) // sg.mu held: no yields
	sg.mu.Unlock()
	if errors.Is(err, grammar.ErrWorkLimit) {
		own := p.Grammar.NewCache()
		if start, err = first(own, yieldingWork(firstMaskFactor*maskWorkLimit(v), ctx.Err)); err == nil {
			sg.mu.Lock()
			sg.cache = own
			sg.mu.Unlock()
		}
	}
	switch {
	case ctx.Err() != nil:
		return nil, abortError(ctx)
	case err != nil:
		return nil, tooComplex(p.ConstraintField, err)
	}
	m.states = []*grammar.State{start}
	return m, nil
}

// sharedGrammar is a grammar's state cache, shared by the requests that
// use the grammar so that a state's mask is computed once for all; mu
// guards it (and the caches it replaced, whose states requests still
// hold). A cache that grows past maxSharedStates states or
// maxSharedStacks stacks is replaced.
type sharedGrammar struct {
	g     *grammar.Grammar
	mu    sync.Mutex
	cache *grammar.Cache
}

const (
	maxSharedStates    = 1 << 14
	maxSharedStacks    = 1 << 20
	maxSharedGrammars  = 64
	maxCompiledSymbols = 1 << 23 // summed over the compiled grammars kept
)

var (
	sharedMu       sync.Mutex
	sharedGrammars = map[*grammar.Grammar]*sharedGrammar{}
)

func sharedOf(g *grammar.Grammar) *sharedGrammar {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	sg, ok := sharedGrammars[g]
	if !ok {
		if len(sharedGrammars) >= maxSharedGrammars {
			clear(sharedGrammars)
		}
		sg = &sharedGrammar{g: g, cache: g.NewCache()}
		sharedGrammars[g] = sg
	}
	return sg
}

// compiled caches grammars by source, so that requests with the same
// constraint share one grammar (and its state cache); compiledSize is
// their symbols, summed.
var (
	compiledMu   sync.Mutex
	compiled     = map[string]*grammar.Grammar{}
	compiledSize int
)

func (m *grammarMask) mask(gen []int32, logits []float32) {
	if m.ctx.Err() != nil { // the engine aborts the choice at its next step
		m.apply(nil, true, logits)
		return
	}
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	if c := m.shared.cache; c.Len() > maxSharedStates || c.Size() > maxSharedStacks {
		m.shared.cache = m.shared.g.NewCache()
	}
	k := 0
	for k < len(m.toks) && k < len(gen) && m.toks[k] == gen[k] {
		k++
	}
	m.toks, m.states = m.toks[:k], m.states[:k+1]
	c := m.states[0].Cache()
	w := &grammar.Work{Limit: maskWorkLimit(m.v), Interrupt: m.ctx.Err}
	c.Bind(w)
	defer c.Bind(nil)
	for _, id := range gen[k:] {
		st := m.states[len(m.states)-1]
		if st != nil {
			st = st.AdvanceBytes(m.tk.Piece(id))
		}
		m.toks, m.states = append(m.toks, id), append(m.states, st)
	}
	st := m.states[len(m.states)-1]
	var bits []uint64
	switch {
	case st == nil:
	case len(gen) == 0 && m.first != nil:
		bits = m.first
	default:
		bits = m.v.Mask(st, m.maxTokens-len(gen))
	}
	eogOK := st == nil || st.Accepting()
	if err := w.Err(); err != nil {
		// Stopped: the choice ends here. Past the limit it fails with a
		// 400; an ended context (abort, deadline, shutdown) is the
		// engine's to report. Only end-of-generation stays allowed, so
		// the step finishes at once and nothing is kept of this token.
		m.toks, m.states = m.toks[:k], m.states[:k+1]
		if m.ctx.Err() == nil {
			m.fail(constraintFailure{tooComplex(m.field, err)})
		}
		bits, eogOK = nil, true
	}
	m.apply(bits, eogOK, logits)
}

// apply sets to -Inf the logits of the tokens bits does not allow, but
// end-of-generation tokens when eogOK.
func (m *grammarMask) apply(bits []uint64, eogOK bool, logits []float32) {
	neg := float32(math.Inf(-1))
	for i := range logits {
		if w := i / 64; w >= len(bits) || bits[w]&(1<<(i%64)) == 0 {
			if !(eogOK && m.tk.IsEOG(int32(i))) {
				logits[i] = neg
			}
		}
	}
}
