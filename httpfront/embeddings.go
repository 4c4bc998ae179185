package httpfront

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/ninfer/ninfer-go/runtime/engine"
)

// EmbeddingsPath serves OpenAI's embeddings: POST {"model", "input": a
// string, strings, token ids or lists of token ids, "encoding_format":
// "float" | "base64", "dimensions"} -> {"object": "list", "data":
// [{"object": "embedding", "index", "embedding"}], "model", "usage"}.
// An embedding is the final norm's hidden state at the input's last token
// (last-token pooling, as vLLM pools causal models), L2-normalised; text is
// tokenized as /v1/completions does (BOS per the model).
const EmbeddingsPath = "/v1/embeddings"

var embeddingFields = map[string]fieldKind{"model": fieldUsed, "input": fieldUsed, "encoding_format": fieldUsed,
	"dimensions": fieldUsed, "user": fieldIgnored}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
}

type embeddingUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
}

func (s *Server) embeddings(ctx *fasthttp.RequestCtx, m *Model) {
	f, e := object(ctx.PostBody(), embeddingFields, s.cfg.StrictFields)
	var id, format string
	if e == nil {
		id, e = model(f)
	}
	if e == nil && id != m.ID {
		e = unknownModel(id)
	}
	var ps []Prompt
	if e == nil {
		if !f.has("input") {
			e = badParam("input", "Missing required parameter: 'input'.")
		} else if ps, e = prompts(fields{"prompt": f["input"]}); e != nil {
			e.Param, e.Message = "input", strings.ReplaceAll(e.Message, "'prompt'", "'input'")
		}
	}
	if e == nil {
		format = "float"
		e = f.decode("encoding_format", "a string", &format)
		if e == nil && format != "float" && format != "base64" {
			e = badParam("encoding_format", "Invalid value for 'encoding_format': expected 'float' or 'base64', got %q.", format)
		}
	}
	width := m.Engine.EmbeddingLength()
	if e == nil && f.has("dimensions") {
		var dims int
		if e = f.int("dimensions", &dims); e == nil && dims != width {
			e = badParam("dimensions", "This model's embeddings have %d dimensions and cannot be shortened; got %d.", width, dims)
		}
	}
	if e != nil {
		s.fail(ctx, e)
		return
	}
	ids, e := promptTokens(m.Tokenizer, ps, "input")
	if e != nil {
		s.fail(ctx, e)
		return
	}
	k, limit := int64(len(ids)), int64(m.Engine.Snapshot().MaxRunning+s.cfg.MaxQueue)
	if k > limit {
		s.fail(ctx, badParam("input", "The request has %d inputs, more than the server ever holds at once (%d).", k, limit))
		return
	}
	if !s.takeSlots(ctx, k, limit) {
		return
	}
	defer s.inflight.Add(-k)
	jctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	chans := make([]<-chan engine.Event, len(ids))
	for i, p := range ids {
		ch, err := m.Engine.Submit(jctx, engine.Request{Prompt: p, MaxTokens: 1, Embed: true})
		if err != nil {
			cancel()
			for _, c := range chans[:i] {
				for range c {
				}
			}
			if errors.Is(err, engine.ErrContext) {
				s.fail(ctx, badParam("input", "Input %d has %d tokens, more than this model's context (%d) or KV cache holds.", i, len(p), m.Engine.ContextLength()))
				return
			}
			s.fail(ctx, badRequest("", "%v", err))
			return
		}
		chans[i] = ch
	}
	data := make([]embeddingData, len(ids))
	var failure *Error
	tokens := 0
	for i, ch := range chans {
		for ev := range ch {
			if !ev.Done {
				continue
			}
			if ev.Err != nil || ev.Embedding == nil {
				if failure == nil {
					failure = &Error{Status: http.StatusInternalServerError, Type: typeServer, Message: "The engine failed: " + errString(ev.Err)}
					if errors.Is(ev.Err, context.DeadlineExceeded) {
						failure = deadlineError()
					}
				}
				continue
			}
			data[i] = embeddingData{Object: "embedding", Index: i, Embedding: encodeEmbedding(ev.Embedding, format)}
		}
		tokens += len(ids[i])
	}
	if failure != nil {
		s.fail(ctx, failure)
		return
	}
	s.writeJSON(ctx, http.StatusOK, map[string]any{"object": "list", "data": data, "model": m.ID,
		"usage": embeddingUsage{PromptTokens: tokens, TotalTokens: tokens}})
}

// encodeEmbedding is v as JSON numbers, or for "base64" the base64 of its
// little-endian float32 bytes (what OpenAI's SDKs decode).
func encodeEmbedding(v []float32, format string) any {
	if format != "base64" {
		return v
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}
