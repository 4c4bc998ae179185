package httpfront

import (
	"bufio"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/httpfront/wire"
	"github.com/ninfer/ninfer-go/runtime/engine"
)

// llama-server's own endpoints (besides /tokenize and /detokenize).
const (
	CompletionPath    = "/completion"     // POST: llama-server's completion shape
	InfillPath        = "/infill"         // POST: fill-in-the-middle, for models with FIM tokens
	PropsPath         = "/props"          // GET: server and model properties
	SlotsPath         = "/slots"          // GET: the sequence slots, read-only
	ApplyTemplatePath = "/apply-template" // POST: a chat request's rendered prompt
)

// unprefixed maps the OpenAI paths llama-server also serves without /v1
// to the /v1 path that serves them.
var unprefixed = map[string]string{
	"/chat/completions": "/v1/chat/completions",
	"/completions":      "/v1/completions",
	"/models":           "/v1/models",
	"/embeddings":       EmbeddingsPath,
}

// llamaMethods are the methods of llama-server's own endpoints.
var llamaMethods = map[string]string{
	CompletionPath: "POST", InfillPath: "POST", ApplyTemplatePath: "POST", PropsPath: "GET", SlotsPath: "GET",
}

// llamaFields are the fields of a /completion or /infill body: the
// completion fields, minus OpenAI's prompt forms llama-server does not
// have, plus its own.
var llamaFields = func() map[string]fieldKind {
	f := merged(completionFields, map[string]fieldKind{
		"id_slot": fieldIgnored, "n_keep": fieldIgnored, "samplers": fieldIgnored, "t_max_predict_ms": fieldIgnored,
		"return_tokens": fieldRejected, "n_cmpl": fieldRejected,
		"input_prefix": fieldUsed, "input_suffix": fieldUsed, "input_extra": fieldRejected,
	})
	for _, openAIOnly := range []string{"echo", "best_of", "suffix"} {
		delete(f, openAIOnly)
	}
	return f
}()

// llama serves llama-server's own endpoints: GET /props and /slots, POST
// /completion, /infill and /apply-template. Like /v1/ calls they need the
// API key when one is set, and a loaded model.
func (s *Server) llama(ctx *fasthttp.RequestCtx, path string) {
	if method := llamaMethods[path]; string(ctx.Method()) != method {
		s.fail(ctx, methodNotAllowed(ctx, method))
		return
	}
	m := s.servingModel(ctx)
	if m == nil {
		return
	}
	switch path {
	case PropsPath:
		s.writeJSON(ctx, http.StatusOK, s.props(m))
		return
	case SlotsPath:
		s.writeJSON(ctx, http.StatusOK, s.slots(m))
		return
	}
	if e := jsonContentType(ctx); e != nil {
		s.fail(ctx, e)
		return
	}
	switch path {
	case ApplyTemplatePath:
		s.applyTemplate(ctx, m)
	case CompletionPath, InfillPath:
		if s.refuseWhileClosing(ctx) {
			return
		}
		s.llamaCompletion(ctx, m, path == InfillPath)
	}
}

// llamaSettings are llama-server's generation settings, as /completion
// answers report them and /props and /slots show them.
type llamaSettings struct {
	NPredict         int      `json:"n_predict"` // -1: up to the context
	Seed             int64    `json:"seed"`      // -1: random
	Temperature      float64  `json:"temperature"`
	TopK             int      `json:"top_k"`
	TopP             float64  `json:"top_p"`
	MinP             float64  `json:"min_p"`
	RepeatPenalty    float64  `json:"repeat_penalty"`
	PresencePenalty  float64  `json:"presence_penalty"`
	FrequencyPenalty float64  `json:"frequency_penalty"`
	Stop             []string `json:"stop"`
	IgnoreEOS        bool     `json:"ignore_eos"`
	Stream           bool     `json:"stream"`
	NProbs           int      `json:"n_probs"`
	Grammar          string   `json:"grammar"`
}

func settingsOf(p *Params) llamaSettings {
	st := llamaSettings{NPredict: p.MaxTokens, Seed: -1, Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP, MinP: p.MinP,
		RepeatPenalty: p.Repetition, PresencePenalty: p.Presence, FrequencyPenalty: p.Frequency, Stop: p.Stop,
		IgnoreEOS: p.IgnoreEOS, Stream: p.Stream, NProbs: p.TopLogprobs, Grammar: p.Constraint}
	if st.NPredict == 0 {
		st.NPredict = -1
	}
	if p.Seed != nil {
		st.Seed = *p.Seed
	}
	if st.Stop == nil {
		st.Stop = []string{}
	}
	return st
}

// llamaSlot is one entry of /slots (and /props' default_generation_settings).
type llamaSlot struct {
	ID            int            `json:"id"`
	IDTask        int64          `json:"id_task"` // the request's number; -1 when idle
	NCtx          int            `json:"n_ctx"`
	Speculative   bool           `json:"speculative"`
	IsProcessing  bool           `json:"is_processing"`
	Params        llamaSettings  `json:"params"`
	NPromptTokens int            `json:"n_prompt_tokens"`
	NextToken     llamaNextToken `json:"next_token"`
}

type llamaNextToken struct {
	HasNextToken bool `json:"has_next_token"`
	NRemain      int  `json:"n_remain"`
	NDecoded     int  `json:"n_decoded"`
}

// defaultParams are the generation parameters of a request that sets none.
func defaultParams() Params {
	p, _ := params(fields{}, false, DecodeOptions{})
	return p
}

// props is GET /props: llama-server's server properties.
func (s *Server) props(m *Model) map[string]any {
	tk := m.Tokenizer
	piece := func(id int32) string {
		if id < 0 {
			return ""
		}
		return string(tk.Piece(id))
	}
	tmpl := ""
	if m.Chat != nil {
		tmpl = m.Chat.Source()
	}
	def := defaultParams()
	return map[string]any{
		"default_generation_settings": llamaSlot{IDTask: -1, NCtx: m.Engine.ContextLength(), Speculative: m.Engine.DraftWindow() > 0,
			Params: settingsOf(&def)},
		"total_slots":   m.Engine.Snapshot().MaxRunning,
		"model_alias":   m.ID,
		"model_path":    m.Path,
		"chat_template": tmpl,
		"bos_token":     piece(tk.BOS()),
		"eos_token":     piece(tk.EOS()),
		"modalities":    map[string]bool{"vision": false, "audio": false},
		"build_info":    "ninfer",
	}
}

// slots is GET /slots: one entry per sequence the engine runs at once
// (--max-concurrency). The choices in flight fill them in arrival order
// (a choice still queued in the engine shows with n_decoded 0); the rest
// are idle.
func (s *Server) slots(m *Model) []llamaSlot {
	var jobs []*job
	s.jobs.Range(func(k, _ any) bool {
		if j := k.(*job); j.m == m {
			jobs = append(jobs, j)
		}
		return true
	})
	slices.SortFunc(jobs, func(a, b *job) int { return int(a.task - b.task) })
	n := m.Engine.Snapshot().MaxRunning
	ctxLen := m.Engine.ContextLength()
	spec := m.Engine.DraftWindow() > 0
	out := make([]llamaSlot, 0, n)
	for _, j := range jobs {
		settings := settingsOf(&j.p)
		for c := range j.decoded {
			if len(out) == n {
				break
			}
			decoded := int(j.decoded[c].Load())
			maxTokens := j.maxTokens
			out = append(out, llamaSlot{ID: len(out), IDTask: j.task, NCtx: ctxLen, Speculative: spec, IsProcessing: true,
				Params: settings, NPromptTokens: len(j.prompts[c/j.p.N]),
				NextToken: llamaNextToken{HasNextToken: true, NRemain: max(maxTokens-decoded, 0), NDecoded: decoded}})
		}
	}
	dp := defaultParams()
	def := settingsOf(&dp)
	for len(out) < n {
		out = append(out, llamaSlot{ID: len(out), IDTask: -1, NCtx: ctxLen, Speculative: spec, Params: def})
	}
	return out
}

// applyTemplate is POST /apply-template: the chat request's messages
// rendered with the model's template, {"prompt": TEXT}, generating
// nothing. "model" may be left out.
func (s *Server) applyTemplate(ctx *fasthttp.RequestCtx, m *Model) {
	body, e := withModel(ctx.PostBody(), m.ID)
	var r *ChatRequest
	if e == nil {
		r, e = DecodeChat(body, s.decodeOptions(ctx))
	}
	if e == nil && r.Model != m.ID {
		e = unknownModel(r.Model)
	}
	if e == nil && m.Chat == nil {
		e = badRequest("chat_template_unsupported", "This model's chat template cannot be rendered (%v).", m.ChatErr)
	}
	var text string
	if e == nil {
		text, e = renderChat(m.Chat, r)
	}
	if e != nil {
		s.fail(ctx, e)
		return
	}
	s.writeJSON(ctx, http.StatusOK, map[string]string{"prompt": text})
}

// withModel is body with "model" set to id when the object has none
// (llama-server's endpoints serve their one model without it).
func withModel(body []byte, id string) ([]byte, *Error) {
	var f map[string]json.RawMessage
	if err := json.Unmarshal(body, &f); err != nil || f == nil {
		return body, nil // the decoder reports it
	}
	if _, ok := f["model"]; ok {
		return body, nil
	}
	f["model"], _ = json.Marshal(id)
	b, err := json.Marshal(f)
	if err != nil {
		return nil, badRequest("", "%v", err)
	}
	return b, nil
}

// llamaCompletion serves POST /completion and /infill: one prompt, one
// choice, answered in llama-server's shape (llamaAnswer).
func (s *Server) llamaCompletion(ctx *fasthttp.RequestCtx, m *Model, infill bool) {
	received := time.Now()
	a := &llamaAnswer{id: newID("cmpl-"), model: m.ID}
	f, p, e := decodeLlama(ctx.PostBody(), m.ID, s.decodeOptions(ctx))
	if e == nil {
		a.nPredict = f.has("n_predict") && !f.has("max_tokens")
		e = checkTokenIDs(m.Tokenizer, &p)
	}
	var prompt []int32
	if e == nil {
		if infill {
			prompt, a.prompt, e = infillPrompt(m, f)
		} else {
			prompt, a.prompt, e = llamaPrompt(m, f)
		}
	}
	if e == nil {
		p.Grammar, e = compileParams(&p)
	}
	if e != nil {
		s.fail(ctx, a.rename(e))
		return
	}
	a.settings = settingsOf(&p)
	s.serveAnswer(ctx, m, a, "prompt", p, [][]int32{prompt}, received)
}

// decodeLlama parses and validates a /completion or /infill body for the
// model named id ("model" may be left out): its fields (the prompt is read
// from them) and its parameters, one choice without log-probabilities.
func decodeLlama(body []byte, id string, o DecodeOptions) (fields, Params, *Error) {
	f, e := object(body, llamaFields, o.Strict)
	if e != nil {
		return nil, Params{}, e
	}
	if _, named := f["model"]; !named {
		f["model"], _ = json.Marshal(id)
	}
	if named, e := model(f); e != nil {
		return nil, Params{}, e
	} else if named != id {
		return nil, Params{}, unknownModel(named)
	}
	p, e := params(f, false, o)
	switch {
	case e != nil:
		return nil, p, e
	case p.N != 1:
		return nil, p, badParam("n", "Invalid value for 'n': /completion answers one completion; use /v1/completions for more.")
	case p.Logprobs:
		return nil, p, badParam("n_probs", "'n_probs' is not supported on /completion or /infill; /v1/completions returns log-probabilities ('logprobs').")
	}
	return f, p, nil
}

// llamaPrompt reads /completion's prompt: a string or token ids; it
// returns the ids and the prompt's text.
func llamaPrompt(m *Model, f fields) ([]int32, string, *Error) {
	ps, e := prompts(f)
	if e != nil {
		return nil, "", e
	}
	if len(ps) != 1 {
		return nil, "", badParam("prompt", "Invalid value for 'prompt': /completion takes one prompt (a string or token ids), got %d.", len(ps))
	}
	ids, e := promptTokens(m.Tokenizer, ps, "prompt")
	if e != nil {
		return nil, "", e
	}
	text := ps[0].Text
	if ps[0].IDs != nil {
		text = strings.ToValidUTF8(m.Tokenizer.Decode(ps[0].IDs), "\uFFFD")
	}
	return ids[0], text, nil
}

// infillPrompt builds /infill's prompt as llama.cpp does: BOS (when the
// model adds it), the FIM prefix token, input_prefix, the FIM suffix
// token, input_suffix, the FIM middle token, then prompt (text the
// middle starts with). Texts are tokenized without special tokens. A model
// without FIM tokens gets 501.
func infillPrompt(m *Model, f fields) ([]int32, string, *Error) {
	tk := m.Tokenizer
	pre, suf, mid, ok := tk.FIM()
	if !ok {
		return nil, "", &Error{Status: http.StatusNotImplemented, Type: typeInvalid, Code: "infill_unsupported",
			Message: "This model has no fill-in-the-middle tokens (prefix, suffix and middle: e.g. <|fim_prefix|>, <|fim_suffix|>, <|fim_middle|>, or the GGUF's tokenizer.ggml.fim_*_token_id), so /infill cannot be served; use a code model trained for infilling."}
	}
	var prefix, suffix, text string
	for _, x := range []struct {
		name string
		dst  *string
	}{{"input_prefix", &prefix}, {"input_suffix", &suffix}, {"prompt", &text}} {
		if e := f.decode(x.name, "a string", x.dst); e != nil {
			return nil, "", e
		}
	}
	var ids []int32
	if tk.AddBOS() {
		ids = append(ids, tk.BOS())
	}
	ids = append(ids, pre)
	ids = append(ids, tk.Encode(prefix, false, false)...)
	ids = append(ids, suf)
	ids = append(ids, tk.Encode(suffix, false, false)...)
	ids = append(ids, mid)
	ids = append(ids, tk.Encode(text, false, false)...)
	return ids, text, nil
}

// llamaAnswer is the answer of /completion and /infill in llama-server's
// shape.
type llamaAnswer struct {
	id, model, prompt string
	settings          llamaSettings
	nPredict          bool // the request limited its tokens with n_predict
}

// llamaCompletionDoc is a /completion answer, and the last event of its
// stream.
type llamaCompletionDoc struct {
	llamaChunk
	Model              string        `json:"model"`
	GenerationSettings llamaSettings `json:"generation_settings"`
	Prompt             string        `json:"prompt"`
	HasNewLine         bool          `json:"has_new_line"`
	Truncated          bool          `json:"truncated"`
	StopType           string        `json:"stop_type"` // "eos", "limit" or "word"
	StoppingWord       string        `json:"stopping_word"`
	TokensCached       int           `json:"tokens_cached"` // prompt tokens the prefix cache held
	Timings            wire.Timings  `json:"timings"`
}

// llamaChunk is one streamed /completion event before the last.
type llamaChunk struct {
	Index           int     `json:"index"`
	Content         string  `json:"content"`
	Tokens          []int32 `json:"tokens"`
	IDSlot          int     `json:"id_slot"`
	Stop            bool    `json:"stop"`
	TokensPredicted int     `json:"tokens_predicted"`
	TokensEvaluated int     `json:"tokens_evaluated"`
}

func (a *llamaAnswer) ident() string { return a.id }

// rename names n_predict in errors about max_tokens when the request set
// n_predict.
func (a *llamaAnswer) rename(e *Error) *Error {
	if a.nPredict && e.Param == "max_tokens" {
		e.Param = "n_predict"
		e.Message = strings.ReplaceAll(e.Message, "max_tokens", "n_predict")
	}
	return e
}

func (a *llamaAnswer) doc(j *job, text, finish, stopWord string, st engine.Stats) llamaCompletionDoc {
	_, t := j.account([]engine.Stats{st})
	stopType := "eos"
	switch {
	case finish == "length":
		stopType = "limit"
	case stopWord != "":
		stopType = "word"
	}
	return llamaCompletionDoc{
		llamaChunk: llamaChunk{Content: text, Tokens: []int32{}, IDSlot: -1, Stop: true,
			TokensPredicted: st.GeneratedTokens, TokensEvaluated: len(j.prompts[0])},
		Model: a.model, GenerationSettings: a.settings, Prompt: a.prompt, HasNewLine: strings.Contains(text, "\n"),
		StopType: stopType, StoppingWord: stopWord, TokensCached: t.CacheN, Timings: t,
	}
}

func (a *llamaAnswer) complete(j *job, res []*choiceResult) any {
	c := res[0]
	return a.doc(j, c.text.String(), c.finish, c.stopSeq, c.stats)
}

// stream writes one event per piece of text and a last one with the whole
// answer's fields (content empty), without a [DONE] line, as llama-server.
func (a *llamaAnswer) stream(w *bufio.Writer, j *job) bool {
	out := &sse{w: w}
	defer func() {
		if out.err != nil {
			j.leave()
		}
	}()
	for j.finishes < j.choices {
		d := <-j.out
		switch {
		case d.err != nil:
			out.event(struct {
				Error *Error `json:"error"`
			}{a.rename(d.err)})
			j.leave()
			return out.err == nil
		case d.final:
			j.finishes++
			if d.text != "" && !out.event(llamaChunk{Content: d.text, Tokens: []int32{}, IDSlot: -1,
				TokensPredicted: int(j.decoded[0].Load()), TokensEvaluated: len(j.prompts[0])}) {
				return false
			}
			if !out.event(a.doc(j, "", d.finish, d.stopSeq, d.stats)) {
				return false
			}
		case d.text != "":
			if !out.event(llamaChunk{Content: d.text, Tokens: []int32{}, IDSlot: -1,
				TokensPredicted: int(j.decoded[0].Load()), TokensEvaluated: len(j.prompts[0])}) {
				return false
			}
		}
	}
	return true
}
