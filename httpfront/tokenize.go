package httpfront

import (
	"net/http"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// Tokenizer endpoints, in llama-server's shapes.
const (
	TokenizePath   = "/tokenize"
	DetokenizePath = "/detokenize"
)

// tokenPiece is one token of a /tokenize answer with with_pieces: the
// piece as a string when it is valid UTF-8, else its bytes (llama-server).
type tokenPiece struct {
	ID    int32 `json:"id"`
	Piece any   `json:"piece"`
}

// tokenizer answers POST /tokenize and /detokenize. Like /v1/ calls they
// need the API key when one is set, and a loaded model.
func (s *Server) tokenizer(ctx *fasthttp.RequestCtx, path string) {
	if !ctx.IsPost() {
		s.fail(ctx, methodNotAllowed(ctx, "POST"))
		return
	}
	m := s.servingModel(ctx)
	if m == nil {
		return
	}
	if e := jsonContentType(ctx); e != nil {
		s.fail(ctx, e)
		return
	}
	if path == TokenizePath {
		s.tokenize(ctx, m)
	} else {
		s.detokenize(ctx, m)
	}
}

var tokenizeFields = map[string]fieldKind{"content": fieldUsed, "prompt": fieldUsed, "add_special": fieldUsed,
	"parse_special": fieldUsed, "with_pieces": fieldUsed, "model": fieldIgnored}

// tokenize answers {"content": TEXT, "add_special": false, "parse_special":
// true, "with_pieces": false} with {"tokens": [ids]} (or [{"id","piece"}]
// with_pieces), plus vLLM's "count" and "max_model_len". vLLM's "prompt"
// is accepted for "content".
func (s *Server) tokenize(ctx *fasthttp.RequestCtx, m *Model) {
	f, e := object(ctx.PostBody(), tokenizeFields, s.cfg.StrictFields)
	if e != nil {
		s.fail(ctx, e)
		return
	}
	var text string
	addSpecial, parseSpecial, withPieces := false, true, false
	field := "content"
	if !f.has("content") && f.has("prompt") {
		field = "prompt"
	}
	for _, err := range []*Error{
		f.decode(field, "a string", &text),
		f.decode("add_special", "a boolean", &addSpecial),
		f.decode("parse_special", "a boolean", &parseSpecial),
		f.decode("with_pieces", "a boolean", &withPieces),
	} {
		if err != nil {
			s.fail(ctx, err)
			return
		}
	}
	if !f.has(field) {
		s.fail(ctx, badParam("content", "Missing required parameter: 'content'."))
		return
	}
	ids := m.Tokenizer.Encode(text, addSpecial, parseSpecial)
	var tokens any = ids
	if withPieces {
		ps := make([]tokenPiece, len(ids))
		for i, id := range ids {
			b := m.Tokenizer.Piece(id)
			ps[i] = tokenPiece{ID: id, Piece: string(b)}
			if !utf8.Valid(b) {
				bs := make([]int, len(b))
				for k, c := range b {
					bs[k] = int(c)
				}
				ps[i].Piece = bs
			}
		}
		tokens = ps
	}
	if ids == nil {
		tokens = []int32{}
	}
	s.writeJSON(ctx, http.StatusOK, map[string]any{"tokens": tokens, "count": len(ids), "max_model_len": m.Engine.ContextLength()})
}

// detokenize answers {"tokens": [ids]} with {"content": TEXT}: the tokens'
// text with invalid UTF-8 as U+FFFD.
func (s *Server) detokenize(ctx *fasthttp.RequestCtx, m *Model) {
	f, e := object(ctx.PostBody(), map[string]fieldKind{"tokens": fieldUsed, "model": fieldIgnored}, s.cfg.StrictFields)
	if e != nil {
		s.fail(ctx, e)
		return
	}
	var ids []int32
	if e := f.decode("tokens", "an array of token ids", &ids); e != nil {
		s.fail(ctx, e)
		return
	}
	if !f.has("tokens") {
		s.fail(ctx, badParam("tokens", "Missing required parameter: 'tokens'."))
		return
	}
	for _, id := range ids {
		if id < 0 || int(id) >= m.Tokenizer.VocabSize() {
			s.fail(ctx, badParam("tokens", "Invalid token id %d: the vocabulary has %d tokens.", id, m.Tokenizer.VocabSize()))
			return
		}
	}
	dec := m.Tokenizer.NewDecoder()
	var b []byte
	for _, id := range ids {
		b = append(b, dec.Add(id)...)
	}
	b = append(b, dec.Flush()...)
	s.writeJSON(ctx, http.StatusOK, map[string]any{"content": string(b)})
}
