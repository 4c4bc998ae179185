package httpfront

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/tok"
)

func defaults() Params { return Params{Temperature: 1, TopP: 1, Repetition: 1, N: 1} }

func TestDecodeChatAcceptsValidRequests(t *testing.T) {
	seed := int64(-3)
	hi := []tok.Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name string
		body string
		want *ChatRequest
	}{
		{"a minimal request takes OpenAI's defaults", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			&ChatRequest{Model: "m", Messages: hi, Params: defaults()}},
		{"every sampling parameter is read",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,
			"min_p":0.1,"presence_penalty":-1,"frequency_penalty":2,"repetition_penalty":1.3,"seed":-3,"stop":["a","b"],"n":3,
			"logprobs":true,"top_logprobs":5,"stream":true,"stream_options":{"include_usage":true}}`,
			&ChatRequest{Model: "m", Messages: hi, Params: Params{MaxTokens: 7, Temperature: 0.5, TopP: 0.9, TopK: 40, MinP: 0.1,
				Presence: -1, Frequency: 2, Repetition: 1.3, Seed: &seed, Stop: []string{"a", "b"}, N: 3, Logprobs: true,
				TopLogprobs: 5, Stream: true, IncludeUsage: true}}},
		{"max_completion_tokens wins over max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9,"max_completion_tokens":4}`,
			&ChatRequest{Model: "m", Messages: hi, Params: func() Params { p := defaults(); p.MaxTokens = 4; return p }()}},
		{"a single stop string becomes a list", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":"\n"}`,
			&ChatRequest{Model: "m", Messages: hi, Params: func() Params { p := defaults(); p.Stop = []string{"\n"}; return p }()}},
		{"top_k -1 means off", `{"model":"m","messages":[{"role":"user","content":"hi"}],"top_k":-1}`,
			&ChatRequest{Model: "m", Messages: hi, Params: defaults()}},
		{"developer is a system message and text parts are joined",
			`{"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","name":"ann","content":[{"type":"text","text":"h"},{"type":"text","text":"i"}]}]}`,
			&ChatRequest{Model: "m", Messages: []tok.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi"}}, Params: defaults()}},
		{"fields that change nothing are accepted",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u","metadata":{"k":"v"},"store":false,"logit_bias":{},
			"tools":[],"tool_choice":"none","response_format":{"type":"text"},"parallel_tool_calls":true,"temperature":null}`,
			&ChatRequest{Model: "m", Messages: hi, Params: defaults()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, e := DecodeChat([]byte(tc.body))
			if e != nil {
				t.Fatalf("DecodeChat: %v", e)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DecodeChat (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRejectsBadRequestsNamingTheField(t *testing.T) {
	const msg = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name      string
		chat      bool
		body      string
		wantParam any
	}{
		{"a body that is not JSON", true, `{"model":`, nil},
		{"a body that is not an object", true, `[1]`, nil},
		{"a missing model", true, `{` + msg + `}`, "model"},
		{"missing messages", true, `{"model":"m"}`, "messages"},
		{"empty messages", true, `{"model":"m","messages":[]}`, "messages"},
		{"an unknown field", true, `{"model":"m",` + msg + `,"temprature":1}`, "temprature"},
		{"tools", true, `{"model":"m",` + msg + `,"tools":[{"type":"function"}]}`, "tools"},
		{"a json_schema response format", true, `{"model":"m",` + msg + `,"response_format":{"type":"json_schema"}}`, "response_format"},
		{"a non-empty logit_bias", true, `{"model":"m",` + msg + `,"logit_bias":{"5":10}}`, "logit_bias"},
		{"an unsupported role", true, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].role"},
		{"an image part", true, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0]"},
		{"tool calls in a message", true, `{"model":"m","messages":[{"role":"assistant","content":"x","tool_calls":[{}]}]}`, "messages[0].tool_calls"},
		{"a string temperature", true, `{"model":"m",` + msg + `,"temperature":"hot"}`, "temperature"},
		{"temperature above 2", true, `{"model":"m",` + msg + `,"temperature":2.5}`, "temperature"},
		{"top_p 0", true, `{"model":"m",` + msg + `,"top_p":0}`, "top_p"},
		{"top_k -2", true, `{"model":"m",` + msg + `,"top_k":-2}`, "top_k"},
		{"min_p above 1", true, `{"model":"m",` + msg + `,"min_p":1.5}`, "min_p"},
		{"presence_penalty below -2", true, `{"model":"m",` + msg + `,"presence_penalty":-3}`, "presence_penalty"},
		{"frequency_penalty above 2", true, `{"model":"m",` + msg + `,"frequency_penalty":2.1}`, "frequency_penalty"},
		{"repetition_penalty 0", true, `{"model":"m",` + msg + `,"repetition_penalty":0}`, "repetition_penalty"},
		{"max_tokens 0", true, `{"model":"m",` + msg + `,"max_tokens":0}`, "max_tokens"},
		{"fractional max_tokens", true, `{"model":"m",` + msg + `,"max_tokens":1.5}`, "max_tokens"},
		{"max_completion_tokens 0", true, `{"model":"m",` + msg + `,"max_completion_tokens":0}`, "max_completion_tokens"},
		{"n 0", true, `{"model":"m",` + msg + `,"n":0}`, "n"},
		{"n above the limit", true, `{"model":"m",` + msg + `,"n":17}`, "n"},
		{"five stop sequences", true, `{"model":"m",` + msg + `,"stop":["a","b","c","d","e"]}`, "stop"},
		{"an empty stop sequence", true, `{"model":"m",` + msg + `,"stop":[""]}`, "stop"},
		{"a numeric stop", true, `{"model":"m",` + msg + `,"stop":5}`, "stop"},
		{"top_logprobs without logprobs", true, `{"model":"m",` + msg + `,"top_logprobs":2}`, "top_logprobs"},
		{"top_logprobs above 20", true, `{"model":"m",` + msg + `,"logprobs":true,"top_logprobs":21}`, "top_logprobs"},
		{"stream_options without stream", true, `{"model":"m",` + msg + `,"stream_options":{"include_usage":true}}`, "stream_options"},
		{"an unknown stream option", true, `{"model":"m",` + msg + `,"stream":true,"stream_options":{"x":1}}`, "stream_options.x"},
		{"a fractional seed", true, `{"model":"m",` + msg + `,"seed":1.5}`, "seed"},
		{"a missing prompt", false, `{"model":"m"}`, "prompt"},
		{"an object prompt", false, `{"model":"m","prompt":{}}`, "prompt"},
		{"an empty token list among prompts", false, `{"model":"m","prompt":[[1],[]]}`, "prompt"},
		{"echo", false, `{"model":"m","prompt":"x","echo":true}`, "echo"},
		{"best_of", false, `{"model":"m","prompt":"x","best_of":3}`, "best_of"},
		{"legacy logprobs above 5", false, `{"model":"m","prompt":"x","logprobs":6}`, "logprobs"},
		{"messages on completions", false, `{"model":"m","prompt":"x",` + msg + `}`, "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Error
			if tc.chat {
				_, e = DecodeChat([]byte(tc.body))
			} else {
				_, e = DecodeCompletion([]byte(tc.body))
			}
			if e == nil {
				t.Fatal("accepted")
			}
			if e.Status != 400 || e.Type != typeInvalid || e.Message == "" {
				t.Errorf("error %+v, want a 400 %s with a message", e, typeInvalid)
			}
			if diff := cmp.Diff(tc.wantParam, e.Param); diff != "" {
				t.Errorf("param (-want +got):\n%s\nmessage: %s", diff, e.Message)
			}
		})
	}
}

func TestDecodeCompletionPrompts(t *testing.T) {
	for _, tc := range []struct {
		name, prompt string
		want         []Prompt
		logprobs     bool
		top          int
	}{
		{"a string", `"hello"`, []Prompt{{Text: "hello"}}, false, 0},
		{"token ids", `[1,2,3]`, []Prompt{{IDs: []int32{1, 2, 3}}}, false, 0},
		{"several strings", `["a","b"]`, []Prompt{{Text: "a"}, {Text: "b"}}, false, 0},
		{"several id lists", `[[1],[2,3]]`, []Prompt{{IDs: []int32{1}}, {IDs: []int32{2, 3}}}, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, e := DecodeCompletion([]byte(`{"model":"m","prompt":` + tc.prompt + `,"logprobs":2}`))
			if e != nil {
				t.Fatal(e)
			}
			if diff := cmp.Diff(tc.want, got.Prompts); diff != "" {
				t.Errorf("prompts (-want +got):\n%s", diff)
			}
			if !got.Logprobs || got.TopLogprobs != 2 {
				t.Errorf("legacy logprobs 2 read as logprobs=%v top=%d", got.Logprobs, got.TopLogprobs)
			}
		})
	}
}

func TestStopMatcher(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stops   []string
		pieces  []string
		want    []string // emitted per piece, then the flush
		matched bool
	}{
		{"no stops passes text through", nil, []string{"ab", "c"}, []string{"ab", "c", ""}, false},
		{"a match inside one piece cuts it", []string{"lo"}, []string{"hello world"}, []string{"hel"}, true},
		{"a match across pieces is held back", []string{"END"}, []string{"abE", "N", "Dxyz"}, []string{"ab", "", ""}, true},
		{"a false start is released", []string{"END"}, []string{"abE", "Nx", "y"}, []string{"ab", "ENx", "y", ""}, false},
		{"the tail is flushed at the end", []string{"END"}, []string{"abEN"}, []string{"ab", "EN"}, false},
		{"the earliest of several stops wins", []string{"c", "ab"}, []string{"xabc"}, []string{"x"}, true},
		{"multi-byte stops split only at character boundaries", []string{"é!"}, []string{"café", "!"}, []string{"caf", ""}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := stopMatcher{stops: tc.stops}
			var got []string
			matched := false
			for _, p := range tc.pieces {
				out, hit := m.push(p)
				got = append(got, out)
				if hit {
					matched = true
					break
				}
			}
			if !matched {
				got = append(got, m.flush())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || matched != tc.matched {
				t.Errorf("emitted (-want +got):\n%s\nmatched %v, want %v", diff, matched, tc.matched)
			}
		})
	}
}
