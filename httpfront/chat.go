package httpfront

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// chat serves /v1/chat/completions.
func (s *Server) chat(ctx *fasthttp.RequestCtx, m *Model) {
	received := time.Now()
	r, e := DecodeChat(ctx.PostBody(), s.decodeOptions(ctx))
	var prompt []int32
	if e == nil {
		prompt, e = s.prepareAdmitted(ctx, m, r, false)
	}
	if e != nil {
		s.fail(ctx, e)
		return
	}
	s.generate(ctx, m, true, r.Params, [][]int32{prompt}, received)
}

// prepareChat turns a decoded chat request into its prompt: it checks the
// model and the token ids, renders the messages with the model's template,
// and sets r.Params' reasoning split, tool call format and compiled
// constraint (a forced tool call's included). /v1/chat/completions,
// /v1/responses and /v1/messages serve through it. Its images are read
// and encoded within ctx, or, when countOnly (a token count, nothing
// generated), only sized.
func prepareChat(ctx context.Context, m *Model, r *ChatRequest, countOnly bool) ([]int32, *Error) {
	if r.Model != m.ID {
		return nil, unknownModel(r.Model)
	}
	if e := checkTokenIDs(m.Tokenizer, &r.Params); e != nil {
		return nil, e
	}
	if m.Chat == nil {
		return nil, badRequest("chat_template_unsupported", "This model's chat template cannot be rendered (%v); use /v1/completions.", m.ChatErr)
	}
	text, e := renderChat(m.Chat, r)
	if e != nil {
		return nil, e
	}
	if !r.ContinueFinal {
		r.Params.Reasoning = reasoningOf(m.Chat.Source(), text)
	}
	if r.ToolChoice != "none" {
		r.Params.ToolFormat = toolFormatOf(m.Chat.Source())
		r.Params.SingleToolCall = !r.ParallelToolCalls
	}
	if r.ToolChoice == "required" || r.ToolChoice == "function" {
		if r.Params.Constraint, e = toolCallGrammar(r.Tools, r.ToolName, r.Params.ToolFormat, r.ParallelToolCalls, r.Params.Interrupt); e != nil {
			return nil, e
		}
		r.Params.ConstraintField = "tool_choice"
	}
	if r.Params.Grammar, e = compileParams(&r.Params); e != nil {
		return nil, e
	}
	var ends []int // byte offsets in text where messages end, for a hybrid model's checkpoints
	if !countOnly && m.Engine.Snapshot().CheckpointsMax > 0 {
		ends = m.Chat.MessageEnds(r.Messages, text, renderOptions(r))
	}
	if r.Images != nil {
		return encodeImages(ctx, m, text, ends, r.Images, &r.Params, countOnly)
	}
	ids := m.Tokenizer.EncodeChat(text)
	if ends != nil {
		r.Params.MessageEnds = m.Tokenizer.TokenOffsets(ids, text, ends)
	}
	return ids, nil
}

// prepareAdmitted is prepareChat under the request's preparation context
// (prepareContext), after the queue check (queueFull) unless countOnly.
func (s *Server) prepareAdmitted(ctx *fasthttp.RequestCtx, m *Model, r *ChatRequest, countOnly bool) ([]int32, *Error) {
	if !countOnly {
		if e := s.queueFull(ctx, m, r.N); e != nil {
			return nil, e
		}
	}
	pctx, cancel := s.prepareContext(ctx)
	defer cancel()
	return prepareChat(pctx, m, r, countOnly)
}

// renderChat renders r's messages with the model's template: with the
// generation prompt, or with the final message left open when r continues
// it (the text after the final message's content, its end-of-turn markup,
// is cut, as vLLM's continue_final_message).
func renderChat(ct *tok.ChatTemplate, r *ChatRequest) (string, *Error) {
	text, err := ct.Render(r.Messages, renderOptions(r))
	if err != nil {
		param := "messages"
		if len(r.TemplateKwargs) > 0 {
			param = "chat_template_kwargs"
		}
		return "", badParam(param, "The model's chat template rejected the request: %v", err)
	}
	if r.ContinueFinal {
		final := r.Messages[len(r.Messages)-1].Content
		i := strings.LastIndex(text, final)
		if i < 0 {
			return "", badParam("continue_final_message", "The model's chat template does not render the final message's text as given, so it cannot be continued.")
		}
		text = text[:i+len(final)]
	}
	return text, nil
}

// renderOptions are the template options r's messages render with: its
// generation prompt flag, its chat_template_kwargs and its tools.
func renderOptions(r *ChatRequest) tok.RenderOptions {
	vars := r.TemplateKwargs
	if r.Tools != nil {
		vars = maps.Clone(vars)
		if vars == nil {
			vars = map[string]json.RawMessage{}
		}
		vars["tools"] = r.Tools
	}
	return tok.RenderOptions{AddGenerationPrompt: r.AddGenerationPrompt, Vars: vars}
}

// checkTokenIDs checks the token ids of p (logit_bias, stop_token_ids)
// against the vocabulary.
func checkTokenIDs(tk *tok.Tokenizer, p *Params) *Error {
	n := tk.VocabSize()
	for id := range p.LogitBias {
		if int(id) >= n {
			return badParam("logit_bias", "Invalid 'logit_bias': token %d is outside the vocabulary of %d tokens.", id, n)
		}
	}
	for _, id := range p.StopTokenIDs {
		if int(id) >= n {
			return badParam("stop_token_ids", "Invalid 'stop_token_ids': token %d is outside the vocabulary of %d tokens.", id, n)
		}
	}
	return nil
}

// completion serves /v1/completions.
func (s *Server) completion(ctx *fasthttp.RequestCtx, m *Model) {
	received := time.Now()
	r, e := DecodeCompletion(ctx.PostBody(), s.decodeOptions(ctx))
	if e == nil && r.Model != m.ID {
		e = unknownModel(r.Model)
	}
	if e == nil {
		e = checkTokenIDs(m.Tokenizer, &r.Params)
	}
	if e != nil {
		s.fail(ctx, e)
		return
	}
	prompts, e := promptTokens(m.Tokenizer, r.Prompts, "prompt")
	if e != nil {
		s.fail(ctx, e)
		return
	}
	if r.Echo {
		r.Params.Echo = make([]string, len(r.Prompts)) // before the constraint
		for i, p := range r.Prompts {
			r.Params.Echo[i] = p.Text
			if p.IDs != nil {
				r.Params.Echo[i] = strings.ToValidUTF8(m.Tokenizer.Decode(p.IDs), "\uFFFD")
			}
		}
	}
	if r.Params.Grammar, e = compileParams(&r.Params); e != nil {
		s.fail(ctx, e)
		return
	}
	s.generate(ctx, m, false, r.Params, prompts, received)
}

// compileParams compiles p's output constraint, after the reasoning block
// when the reply thinks; nil when there is none. Errors are reported
// against the constraint as sent (lines and columns of the client's GBNF).
func compileParams(p *Params) (*grammar.Grammar, *Error) {
	if p.Constraint == "" {
		return nil, nil
	}
	g, e := compileConstraint(withThinking(p.Constraint, p.Reasoning), p.ConstraintField, p.Interrupt)
	if e != nil && p.Reasoning != ReasoningOff {
		if _, own := compileConstraint(p.Constraint, p.ConstraintField, p.Interrupt); own != nil {
			return nil, own
		}
	}
	return g, e
}

// promptTokens is each prompt's token ids: token id prompts as sent, each
// id inside the vocabulary, text prompts encoded with BOS and special
// tokens, none empty. param ("prompt", "input") names the field in errors.
func promptTokens(tk *tok.Tokenizer, ps []Prompt, param string) ([][]int32, *Error) {
	out := make([][]int32, len(ps))
	for i, p := range ps {
		if p.IDs != nil {
			for _, id := range p.IDs {
				if id < 0 || int(id) >= tk.VocabSize() {
					return nil, badParam(param, "Invalid token id %d in %s %d: the vocabulary has %d tokens.", id, param, i, tk.VocabSize())
				}
			}
			out[i] = p.IDs
			continue
		}
		out[i] = tk.Encode(p.Text, true, true)
		if len(out[i]) == 0 {
			return nil, badParam(param, "%s%s %d encodes to no tokens.", strings.ToUpper(param[:1]), param[1:], i)
		}
	}
	return out, nil
}
