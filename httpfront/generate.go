package httpfront

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ninfer/ninfer-go/httpfront/wire"
	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/request"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// tokenLogprob is one generated token's log-probability and the most
// likely alternatives at its position.
type tokenLogprob struct {
	id      int32
	logprob float32
	top     []engine.TokenLogit // Logit holds the log-probability
}

// delta is a piece of one choice's output, sent by its runner in order.
// The last delta of a choice has final set.
type delta struct {
	index    int
	text     string
	logprobs []tokenLogprob
	final    bool
	finish   string // "stop" or "length" on a successful final delta
	stopSeq  string // the stop sequence that ended the choice, on its final delta
	err      *Error // a failed final delta
	stats    engine.Stats
}

// job is one API request's choices running on the engine.
type job struct {
	ctx      context.Context    // bounded by the server deadline; the engine aborts on its end
	cancel   context.CancelFunc // cancels ctx
	gone     chan struct{}      // closed by leave: nobody reads out any more
	goneOnce sync.Once
	m        *Model
	p        Params
	prompts  [][]int32
	// promptParam names the request field the prompts came from in
	// errors: "messages" (chat) or "prompt".
	promptParam string
	choices     int
	out         chan delta
	// maxLag is how many token deltas of one choice may wait for the
	// reader before the choice is ended (Config.MaxStreamLag for streams).
	maxLag    int
	done      sync.WaitGroup // one per running choice
	finishes  int            // final deltas received by the consumer
	tag       any            // engine.Request.Tag of every choice (the root span's context)
	series    *modelSeries   // the metrics tokens are counted in as they arrive (nil: none)
	maxTokens int            // the first choice's engine MaxTokens (max_tokens or its default)
	task      int64          // the server's number for the request (llama-server's id_task)
	received  time.Time
	decoded   []atomic.Int64 // tokens each choice has received so far (/slots)

	// Filled by the runners, read after done.Wait(): each choice's engine
	// stats and finish reason, and the first failure.
	mu            sync.Mutex
	stats         []engine.Stats
	finishReasons []string
	err           error
}

// echo is the prompt text that goes before choice i's text (Params.Echo),
// or "".
func (j *job) echo(i int) string {
	if p := i / j.p.N; p < len(j.p.Echo) {
		return j.p.Echo[p]
	}
	return ""
}

// leave tells the runners that nobody reads their output any more and
// aborts the choices still running, which frees their KV at the engine's
// next step.
func (j *job) leave() {
	j.goneOnce.Do(func() {
		close(j.gone)
		j.cancel()
	})
}

// start submits every choice of j (len(prompts) x n) to the engine. On
// error nothing stays submitted.
func (s *Server) start(j *job) *Error {
	j.out = make(chan delta, 64)
	j.gone = make(chan struct{})
	j.decoded = make([]atomic.Int64, len(j.prompts)*j.p.N)
	for pi, prompt := range j.prompts {
		for k := range j.p.N {
			idx := pi*j.p.N + k
			cctx, ccancel := context.WithCancelCause(j.ctx)
			req, e := j.engineRequest(cctx, ccancel, prompt, k)
			if e != nil {
				ccancel(nil)
				j.leave()
				return e
			}
			if idx == 0 {
				j.maxTokens = req.MaxTokens
			}
			events, err := j.m.Engine.Submit(cctx, req)
			if err != nil {
				ccancel(nil)
				j.leave()
				if errors.Is(err, engine.ErrContext) {
					return j.contextError(prompt, req.MaxTokens)
				}
				if errors.Is(err, engine.ErrClosed) {
					return shuttingDownError()
				}
				return badRequest("", "%v", err)
			}
			j.done.Add(1)
			go func() {
				defer ccancel(nil)
				j.run(cctx, idx, events, ccancel)
			}()
		}
	}
	j.choices = len(j.prompts) * j.p.N
	return nil
}

// contextError is the 400 for a choice the engine cannot hold: it blames
// the prompt (j.promptParam) when the prompt leaves no room for one
// generated token in the context window or the KV cache, else max_tokens.
func (j *job) contextError(prompt []int32, maxTokens int) *Error {
	ctxLen := j.m.Engine.ContextLength()
	snap := j.m.Engine.Snapshot()
	room := min(ctxLen, snap.KVBlocksTotal*snap.KVBlockTokens) // tokens one sequence can hold
	if len(prompt)+1 > room {
		return badParam(j.promptParam, "This model's maximum context length is %d tokens (%d fit the KV cache); the prompt has %d tokens, leaving no room to generate.",
			ctxLen, room, len(prompt))
	}
	return badParam("max_tokens", "This model's maximum context length is %d tokens (%d fit the KV cache); the prompt has %d tokens, so max_tokens may be at most %d, got %d.",
		ctxLen, room, len(prompt), room-len(prompt), maxTokens)
}

// engineRequest builds the engine request of choice k of a prompt; ctx
// is the choice's context and cancel ends it (a constraint that fails
// mid-generation cancels it with a constraintFailure).
func (j *job) engineRequest(ctx context.Context, cancel context.CancelCauseFunc, prompt []int32, k int) (engine.Request, *Error) {
	p := j.p
	var seed uint64
	if p.Seed != nil {
		seed = uint64(*p.Seed) + uint64(k)
	} else {
		var b [8]byte
		rand.Read(b[:]) //nolint:errcheck // crypto/rand.Read never fails
		seed = binary.LittleEndian.Uint64(b[:])
	}
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		snap := j.m.Engine.Snapshot()
		maxTokens = min(j.m.Engine.ContextLength(), snap.KVBlocksTotal*snap.KVBlockTokens) - len(prompt)
		if maxTokens < 1 {
			return engine.Request{}, j.contextError(prompt, 1)
		}
	}
	req := engine.Request{
		Prompt:    prompt,
		MaxTokens: maxTokens,
		Stop:      stopCondition(j.m.Tokenizer, &j.p),
		Sampling: request.Sampling{
			Temperature: float32(p.Temperature), TopK: p.TopK, TopP: float32(p.TopP), MinP: float32(p.MinP),
			PresencePenalty: float32(p.Presence), FrequencyPenalty: float32(p.Frequency),
			RepetitionPenalty: float32(p.Repetition), Seed: seed, LogitBias: p.LogitBias,
		},
		Logprobs:    p.Logprobs,
		Tag:         j.tag,
		Images:      p.Images,
		MessageEnds: p.MessageEnds,
	}
	var grammarMask func(generated []int32, logits []float32)
	if p.Grammar != nil {
		m, e := newGrammarMask(ctx, cancel, &j.p, j.m.Tokenizer, maxTokens)
		if e != nil {
			return engine.Request{}, e
		}
		grammarMask = m.mask
	}
	var budgetMask func(generated []int32, logits []float32)
	if b := newReasoningBudget(j.m.Tokenizer, p.Reasoning, p.ReasoningBudget); b != nil {
		budgetMask = b.mask
	}
	req.Sampling.Mask = masks(grammarMask, budgetMask)
	if p.MinTokens > 0 {
		req.Sampling.SuppressUntil = p.MinTokens
		req.Sampling.Suppress = suppressed(j.m.Tokenizer, p)
	}
	if p.Logprobs {
		req.TopLogits = p.TopLogprobs
	}
	return req, nil
}

// eogIDs caches each tokenizer's end-of-generation ids.
var eogIDs sync.Map // *tok.Tokenizer -> []int32

// suppressed are the ids a choice may not generate before p.MinTokens:
// the end-of-generation tokens (unless p.IgnoreEOS, when they end
// nothing) and p.StopTokenIDs, as vLLM's min_tokens.
func suppressed(tk *tok.Tokenizer, p Params) []int32 {
	var ids []int32
	if !p.IgnoreEOS {
		v, ok := eogIDs.Load(tk)
		if !ok {
			var eog []int32
			for id := range int32(tk.VocabSize()) {
				if tk.IsEOG(id) {
					eog = append(eog, id)
				}
			}
			v, _ = eogIDs.LoadOrStore(tk, eog)
		}
		ids = append(ids, v.([]int32)...)
	}
	return append(ids, p.StopTokenIDs...)
}

// stopCondition is a choice's engine-side Request.Stop: an
// end-of-generation token (unless p.IgnoreEOS), one of p.StopTokenIDs, or a
// token whose text completes one of p.Stop, once p.MinTokens tokens are
// generated. It runs a stopper exactly as the choice's runner does, so the
// engine ends the request at the token where the runner's output ends:
// nothing past it is computed, streamed or counted in usage.
func stopCondition(tk *tok.Tokenizer, p *Params) func(int32) bool {
	if len(p.Stop) == 0 && len(p.StopTokenIDs) == 0 && p.MinTokens == 0 && !p.IgnoreEOS {
		return tk.IsEOG
	}
	st := newStopper(tk, p)
	return func(id int32) bool {
		_, stop := st.push(id)
		return stop
	}
}

// stopper turns a choice's tokens into its output text and says where the
// choice ends. Tokens before p.MinTokens neither stop the choice nor reach
// the stop sequence matcher (a stop sequence that begins before then is not
// found, as in vLLM). The token that stops a choice (end of generation, a
// stop token id) adds no text; control tokens add none with
// p.SkipSpecial.
type stopper struct {
	tk      *tok.Tokenizer
	p       *Params
	dec     *tok.Decoder
	sm      stopMatcher
	n       int  // tokens pushed
	ended   bool // a token or a stop sequence ended the choice
	matched bool // a stop sequence ended it
}

func newStopper(tk *tok.Tokenizer, p *Params) *stopper {
	return &stopper{tk: tk, p: p, dec: tk.NewDecoder(), sm: stopMatcher{stops: p.Stop}}
}

// push takes the next generated token and returns the text it lets out and
// whether the choice ends at it. After the end it returns "", true.
func (s *stopper) push(id int32) (string, bool) {
	if s.ended {
		return "", true
	}
	s.n++
	armed := s.n >= s.p.MinTokens
	eog := s.tk.IsEOG(id)
	if armed && ((eog && !s.p.IgnoreEOS) || slices.Contains(s.p.StopTokenIDs, id)) {
		s.ended = true
		return "", true
	}
	var text string
	if !s.p.SkipSpecial || !(eog || s.tk.IsControl(id)) {
		text = s.dec.Add(id)
	}
	if !armed {
		return text, false
	}
	out, hit := s.sm.push(text)
	s.ended, s.matched = hit, hit
	return out, hit
}

// flush returns the text still held back when the choice's tokens have
// ended (incomplete UTF-8, a possible start of a stop sequence), and
// whether it completes a stop sequence.
func (s *stopper) flush() (string, bool) {
	if s.matched {
		return "", true
	}
	text := s.dec.Flush()
	if s.n < s.p.MinTokens {
		return text, false
	}
	out, hit := s.sm.push(text)
	if hit {
		s.matched = true
		return out, true
	}
	return out + s.sm.flush(), false
}

// run turns one choice's engine events into deltas: detokenized text with
// stop sequences applied (the text before the first match is kept; the
// engine ended the request at the matching token, see stopCondition),
// log-probabilities, and a final delta. ctx is the choice's context: a
// constraintFailure cause fails the choice with its error, and drops the
// token of the step that failed.
//
// It reads the engine's events as they come, so that they never pile up
// in the engine, and holds the deltas its reader has not taken yet: at
// most j.maxLag token deltas. A reader that falls further behind (an SSE
// client that stopped reading) ends the choice: abort cancels it in the
// engine, the held deltas are dropped, and its final delta is a
// slow_reader error. The choice leaves j.done when the engine has finished it
// and its figures are recorded, before its last deltas are taken.
func (j *job) run(ctx context.Context, index int, events <-chan engine.Event, abort context.CancelCauseFunc) {
	st := newStopper(j.m.Tokenizer, &j.p)
	clock := tokenClock{ms: j.series, prompt: len(j.prompts[index/j.p.N])}
	var pending []delta // made, not yet taken by the reader
	tokens := 0         // token deltas in pending
	overrun := false    // the reader fell more than j.maxLag behind
	gone := j.gone      // nil once the reader has left
	for events != nil || len(pending) > 0 {
		var out chan delta // nil (never ready) while nothing is pending
		var next delta
		if len(pending) > 0 {
			out, next = j.out, pending[0]
		}
		select {
		case out <- next:
			pending[0] = delta{}
			pending = pending[1:]
			if !next.final {
				tokens--
			}
			continue
		case <-gone: // nobody reads: drop what is held, drain the engine
			gone, pending = nil, nil
			continue
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			var failed constraintFailure
			constraintFailed := ctx.Err() != nil && errors.As(context.Cause(ctx), &failed)
			if !ev.Done {
				clock.token(time.Now())
				j.decoded[index].Add(1)
				if st.matched || overrun || gone == nil || constraintFailed {
					continue
				}
				d := delta{index: index}
				if j.p.Logprobs {
					d.logprobs = []tokenLogprob{logprobOf(ev)}
				}
				d.text, _ = st.push(ev.Token)
				if d.text != "" || d.logprobs != nil {
					pending = append(pending, d)
					tokens++
				}
				if tokens > j.maxLag {
					overrun = true
					abort(nil)
					pending, tokens = nil, 0 // the client gets the error next, not the backlog
				}
				continue
			}
			last := delta{index: index, final: true, stats: ev.Stats, finish: "stop"}
			switch {
			case constraintFailed:
				last.err = failed.e
			case st.matched:
				last.stopSeq = st.sm.hit
			default:
				last.text, last.finish, last.err = j.ending(ctx, ev, st, overrun)
			}
			reason := last.finish
			var err error
			if last.err != nil {
				reason, err = ev.Finish, fmt.Errorf("%s", last.err.Message)
			}
			j.record(ev, reason, err)
			j.done.Done()
			if gone != nil {
				pending = append(pending, last)
			}
		}
	}
}

// ending is the final delta's text, finish reason and failure of a
// choice that no stop sequence ended: the text the stopper still holds,
// and why the engine finished it (overrun: its reader fell behind).
func (j *job) ending(ctx context.Context, ev engine.Event, st *stopper, overrun bool) (string, string, *Error) {
	text, hit := st.flush()
	switch {
	case overrun:
		return "", "stop", &Error{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "slow_reader",
			Message: fmt.Sprintf("The client read the stream too slowly: more than %d tokens waited unread, so the request was ended.", j.maxLag)}
	case hit || ev.Finish == engine.FinishStop:
		return text, "stop", nil
	case ev.Finish == engine.FinishLength:
		return text, "length", nil
	case ev.Finish == engine.FinishAbort: // the engine saw ctx end
		return text, "stop", abortError(ctx)
	default:
		return text, "stop", &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: "The engine failed: " + errString(ev.Err)}
	}
}

// record keeps a finished choice's engine stats, finish reason and
// failure (the job's first) for the trace and /metrics.
func (j *job) record(ev engine.Event, reason string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stats = append(j.stats, ev.Stats)
	j.finishReasons = append(j.finishReasons, reason)
	if j.err == nil {
		j.err = err
	}
}

func errString(err error) string {
	if err == nil {
		return "unknown error"
	}
	return err.Error()
}

func logprobOf(ev engine.Event) tokenLogprob {
	lp := tokenLogprob{id: ev.Token, logprob: ev.Logprob}
	for _, t := range ev.Top {
		lp.top = append(lp.top, engine.TokenLogit{ID: t.ID, Logit: t.Logit - ev.LogZ})
	}
	return lp
}

// stopMatcher finds stop sequences in streamed text. It holds back the
// longest tail that could still begin a stop sequence, so text it returns
// never contains part of a match.
type stopMatcher struct {
	stops []string
	held  string
	hit   string // the stop sequence matched
}

// push appends text and returns what may be emitted. When a stop sequence
// occurs, matched is true and out ends just before its earliest occurrence;
// the matcher must not be used further.
func (m *stopMatcher) push(text string) (out string, matched bool) {
	if len(m.stops) == 0 {
		return text, false
	}
	buf := m.held + text
	first := -1
	for _, s := range m.stops {
		if i := strings.Index(buf, s); i >= 0 && (first < 0 || i < first) {
			first, m.hit = i, s
		}
	}
	if first >= 0 {
		m.held = ""
		return buf[:first], true
	}
	keep := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(buf)); k > keep; k-- {
			if strings.HasSuffix(buf, s[:k]) {
				keep = k
				break
			}
		}
	}
	m.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held-back text (the stream ended without a match).
func (m *stopMatcher) flush() string {
	h := m.held
	m.held = ""
	return h
}

// choiceResult is one choice collected for a non-streaming response.
type choiceResult struct {
	text     strings.Builder
	logprobs []tokenLogprob
	finish   string
	stopSeq  string // the stop sequence that ended it, if one did
	stats    engine.Stats
}

// collect reads every delta of j and returns the choices in index order,
// or the first choice's error (then it aborts the other choices).
func (j *job) collect() ([]*choiceResult, *Error) {
	res := make([]*choiceResult, j.choices)
	for i := range res {
		res[i] = &choiceResult{}
	}
	for j.finishes < j.choices {
		var d delta
		select {
		case d = <-j.out:
		case <-j.gone: // the client left (watchPeer): nobody gets a response
			return nil, clientClosedError("The client closed the connection.")
		}
		r := res[d.index]
		r.text.WriteString(d.text)
		r.logprobs = append(r.logprobs, d.logprobs...)
		if d.final {
			j.finishes++
			r.finish, r.stats, r.stopSeq = d.finish, d.stats, d.stopSeq
			if d.err != nil {
				j.leave()
				return nil, d.err
			}
		}
	}
	return res, nil
}

// account sums the choices' stats (stats[i] is choice i's: prompt i/n):
// prompts count once, with the most cached tokens any of their choices
// had; completions per choice; timings take the slowest choice's phases.
func (j *job) account(stats []engine.Stats) (wire.Usage, wire.Timings) {
	u := wire.Usage{PromptTokensDetails: &wire.PromptTokensDetails{}}
	for _, p := range j.prompts {
		u.PromptTokens += len(p)
	}
	cached := make([]int, len(j.prompts))
	var prompt, predicted time.Duration
	for i, s := range stats {
		u.CompletionTokens += s.GeneratedTokens
		prompt = max(prompt, s.Prefill)
		predicted = max(predicted, s.Decode)
		if p := i / j.p.N; p < len(cached) {
			cached[p] = max(cached[p], s.CachedTokens)
		}
	}
	for _, c := range cached {
		u.PromptTokensDetails.CachedTokens += c
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	t := wire.Timings{CacheN: u.PromptTokensDetails.CachedTokens, PromptN: u.PromptTokens - u.PromptTokensDetails.CachedTokens,
		PromptMS: ms(prompt), PredictedN: u.CompletionTokens, PredictedMS: ms(predicted)}
	t.PromptPerTokenMS, t.PromptPerSecond = rates(t.PromptN, t.PromptMS)
	t.VisionMS = ms(j.p.Vision.End.Sub(j.p.Vision.Start))
	t.PredictedPerTokenMS, t.PredictedPerSecond = rates(t.PredictedN, t.PredictedMS)
	if j.m.Engine.DraftWindow() > 0 {
		var drafted, accepted int
		for _, s := range stats {
			drafted += s.Speculative.Drafted
			accepted += s.Speculative.Accepted
		}
		t.DraftN, t.DraftNAccepted = &drafted, &accepted
	}
	return u, t
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func rates(n int, ms float64) (perToken, perSecond float64) {
	if n == 0 || ms == 0 {
		return 0, 0
	}
	return ms / float64(n), float64(n) * 1000 / ms
}
