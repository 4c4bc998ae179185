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
		`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","min_tokens":2,"max_tokens":3,"ignore_eos":true,"logit_bias":{"1":-5}}`,
		`{"model":"m","prompt":"x","echo":true,"stop_token_ids":[1],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"}}},"n_probs":2,"chat_template_kwargs":{"a":1}}`,
		`{"prompt":"x","n_predict":-1,"repeat_penalty":1.1,"cache_prompt":true,"id_slot":0}`,
		`{"prompt":[1,2],"n_predict":0,"input_prefix":"a","input_extra":[]}`,
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
		if _, p, e := decodeLlama(body, "m", DecodeOptions{}); e == nil {
			if p.N != 1 || p.Logprobs {
				t.Fatalf("/completion accepted n=%d logprobs=%v", p.N, p.Logprobs)
			}
			check(&p, nil)
		} else if e.Status != 404 {
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

// FuzzReplyParsers: the reasoning splitter and the tool call parsers never
// panic, and give the same result for a reply whole or cut in two.
func FuzzReplyParsers(f *testing.F) {
	for _, s := range []string{"<think>\nx\n</think>\n\nHi", "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"}\"}}\n</tool_call>",
		`<|python_tag|>{"name": "a", "parameters": {}}; {"name": "b"}`, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"\\\"\"}]}}"} {
		f.Add(s, uint(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, reply string, cut uint) {
		at := int(cut % uint(len(reply)+1))
		for _, mode := range []Reasoning{ReasoningTagged, ReasoningOpen} {
			r1, c1 := splitReasoning(mode, reply)
			s := newReasoningSplitter(mode)
			ra, ca := s.push(reply[:at])
			rb, cb := s.push(reply[at:])
			rc, cc := s.flush()
			if r1 != ra+rb+rc || c1 != ca+cb+cc {
				t.Fatalf("reasoning split of %q differs when cut at %d", reply, at)
			}
		}
		for format := range toolFormats {
			whole := newToolParser(format)
			c1, d1 := whole.push(reply)
			c1b, d1b := whole.flush()
			cut := newToolParser(format)
			ca, da := cut.push(reply[:at])
			cb, db := cut.push(reply[at:])
			cc, dc := cut.flush()
			calls1 := collectCalls(nil, append(d1, d1b...))
			calls2 := collectCalls(nil, append(append(da, db...), dc...))
			if c1+c1b != ca+cb+cc || len(calls1) != len(calls2) {
				t.Fatalf("%s: parse of %q differs when cut at %d", format, reply, at)
			}
			for i := range calls1 {
				if calls1[i] != calls2[i] {
					t.Fatalf("%s: call %d of %q differs when cut at %d: %+v vs %+v", format, i, reply, at, calls1[i], calls2[i])
				}
			}
		}
	})
}

// FuzzDecodeMessages feeds arbitrary bodies to the Messages decoder: it
// never panics, every error is a 400 invalid_request_error with a message,
// and an accepted request has messages, max_tokens (unless counting) and
// parameters within their ranges.
func FuzzDecodeMessages(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","max_tokens":5,"system":"s","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":4096,"system":[{"type":"text","text":"a"}],"messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":""},{"type":"tool_use","id":"t1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r"}],"is_error":false}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true},"stop_sequences":["x"],"thinking":{"type":"enabled","budget_tokens":2048},"top_k":4,"stream":true}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]}`,
		`{"model":"m","messages":[{"role":"user","content":[null]}]}`, `{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use"}]}]}`,
		`{"model":"m","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"url","url":"https://a.example/x.png"}}]}]}],"thinking":{"type":"enabled","budget_tokens":4096}}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"d"},"title":"t","context":"c"},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"a"}]}},{"type":"image","source":{"type":"url","url":"u"}},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBE"}}]}]}`,
		`[]`, `null`, `{"max_tokens":1e300}`,
	} {
		f.Add([]byte(seed), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, countOnly bool) {
		r, e := DecodeMessages(body, DecodeOptions{}, countOnly)
		if e != nil {
			if e.Status != 400 || e.Type != typeInvalid || e.Message == "" {
				t.Fatalf("error %+v is not a 400 invalid_request_error with a message", e)
			}
			return
		}
		p := r.Chat.Params
		if len(r.Chat.Messages) == 0 || (!countOnly && p.MaxTokens < 1) || p.Temperature < 0 || p.Temperature > 2 ||
			p.TopP <= 0 || p.TopP > 1 || p.TopK < 0 || len(p.Stop) > MaxStops {
			t.Fatalf("accepted %+v", r.Chat)
		}
	})
}
