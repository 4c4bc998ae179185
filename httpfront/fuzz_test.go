package httpfront

import (
	"testing"
)

// FuzzDecode feeds arbitrary bodies to both request decoders: they never
// panic, every error is a 400 invalid_request_error with a message, and an
// accepted request's parameters are within their documented ranges.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"n":2,"stop":["x"],"logprobs":true,"top_logprobs":3}`,
		`{"model":"m","prompt":[[1,2],[3]],"stream":true,"stream_options":{"include_usage":true},"logprobs":2}`,
		`{"model":"m","prompt":"x","temperature":2,"top_k":-1,"seed":9007199254740993}`,
		`{"model":1}`, `[]`, `null`, `{"model":"m","messages":[null]}`, `{"model":"m","prompt":["a",1]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(p *Params, e *Error) {
			if e != nil {
				if e.Status != 400 || e.Type != typeInvalid || e.Message == "" {
					t.Fatalf("error %+v is not a 400 invalid_request_error with a message", e)
				}
				return
			}
			if p.N < 1 || p.N > MaxN || p.MaxTokens < 0 || p.Temperature < 0 || p.Temperature > 2 ||
				p.TopP <= 0 || p.TopP > 1 || p.TopK < 0 || len(p.Stop) > MaxStops ||
				p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs || (p.IncludeUsage && !p.Stream) {
				t.Fatalf("accepted out-of-range params %+v", p)
			}
		}
		if r, e := DecodeChat(body, DecodeOptions{}); e == nil {
			if len(r.Messages) == 0 {
				t.Fatal("accepted a chat request without messages")
			}
			check(&r.Params, nil)
		} else {
			check(nil, e)
		}
		if r, e := DecodeCompletion(body, DecodeOptions{}); e == nil {
			if len(r.Prompts) == 0 || len(r.Prompts) > MaxPrompts {
				t.Fatalf("accepted %d prompts", len(r.Prompts))
			}
			check(&r.Params, nil)
		} else {
			check(nil, e)
		}
	})
}
