package httpfront

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func defaults() Params {
	return Params{Temperature: 1, TopP: 1, Repetition: 1, N: 1, SkipSpecial: true}
}

func TestDecodeChatAcceptsValidRequests(t *testing.T) {
	seed := int64(-3)
	hi := []tok.Message{{Role: "user", Content: "hi"}}
	for _, tc := range []struct {
		name string
		body string
		want *ChatRequest
	}{
		{"a minimal request takes OpenAI's defaults", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: defaults()}},
		{"every sampling parameter is read",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":7,"temperature":0.5,"top_p":0.9,"top_k":40,
			"min_p":0.1,"presence_penalty":-1,"frequency_penalty":2,"repetition_penalty":1.3,"seed":-3,"stop":["a","b"],"n":3,
			"logprobs":true,"top_logprobs":5,"stream":true,"stream_options":{"include_usage":true}}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: Params{MaxTokens: 7, Temperature: 0.5, TopP: 0.9, TopK: 40, MinP: 0.1,
				Presence: -1, Frequency: 2, Repetition: 1.3, Seed: &seed, Stop: []string{"a", "b"}, N: 3, Logprobs: true,
				TopLogprobs: 5, Stream: true, IncludeUsage: true, SkipSpecial: true}}},
		{"max_completion_tokens wins over max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9,"max_completion_tokens":4}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: func() Params { p := defaults(); p.MaxTokens = 4; return p }()}},
		{"a single stop string becomes a list", `{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":"\n"}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: func() Params { p := defaults(); p.Stop = []string{"\n"}; return p }()}},
		{"top_k -1 means off", `{"model":"m","messages":[{"role":"user","content":"hi"}],"top_k":-1}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: defaults()}},
		{"developer is a system message and text parts are joined",
			`{"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","name":"ann","content":[{"type":"text","text":"h"},{"type":"text","text":"i"}]}]}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: []tok.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hi", Extra: map[string]json.RawMessage{"name": json.RawMessage(`"ann"`)}}}, Params: defaults()}},
		{"fields that change nothing are accepted",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u","metadata":{"k":"v"},"store":false,"logit_bias":{},
			"tools":[],"tool_choice":"none","response_format":{"type":"text"},"parallel_tool_calls":true,"temperature":null}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: defaults()}},
		{"the fields vLLM and llama.cpp clients send are read",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"ignore_eos":true,"min_tokens":8,
			"stop_token_ids":[3,4],"skip_special_tokens":false,"logit_bias":{"5":-100,"7":2.5},"n_probs":3,"cache_prompt":true}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: func() Params {
				p := defaults()
				p.MaxTokens, p.IgnoreEOS, p.MinTokens, p.StopTokenIDs, p.SkipSpecial = 8, true, 8, []int32{3, 4}, false
				p.LogitBias = map[int32]float32{5: -100, 7: 2.5}
				p.Logprobs, p.TopLogprobs = true, 3
				return p
			}()}},
		{"continue_final_message leaves out the generation prompt and template kwargs are kept",
			`{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Once"}],
			"continue_final_message":true,"chat_template_kwargs":{"enable_thinking":false}}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, ContinueFinal: true, Messages: []tok.Message{hi[0], {Role: "assistant", Content: "Once"}},
				TemplateKwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}, Params: defaults()}},
		{"add_generation_prompt false is read", `{"model":"m","messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, Messages: hi, Params: defaults()}},
		{"tool calls and tool results reach the template, arguments parsed",
			`{"model":"m","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}]}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: []tok.Message{hi[0],
				{Role: "assistant", Extra: map[string]json.RawMessage{"tool_calls": json.RawMessage(`[{"id":"c1","type":"function","function":{"name":"f","arguments":{"x":1}}}]`)}},
				{Role: "tool", Content: "42", Extra: map[string]json.RawMessage{"tool_call_id": json.RawMessage(`"c1"`)}}}, Params: defaults()}},
		{"a tool result may answer a call that has no id",
			`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f"}}]},
			{"role":"tool","tool_call_id":"any","content":"42"}]}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: []tok.Message{
				{Role: "assistant", Extra: map[string]json.RawMessage{"tool_calls": json.RawMessage(`[{"type":"function","function":{"name":"f","arguments":{}}}]`)}},
				{Role: "tool", Content: "42", Extra: map[string]json.RawMessage{"tool_call_id": json.RawMessage(`"any"`)}}}, Params: defaults()}},
		{"a forced call of a named function",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
			&ChatRequest{Model: "m", AddGenerationPrompt: true, Messages: hi, Tools: json.RawMessage(`[{"type":"function","function":{"name":"f"}}]`),
				ToolChoice: "function", ToolName: "f", ParallelToolCalls: true, Params: defaults()}},
		{"a json_object response format is a grammar",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`,
			&ChatRequest{Model: "m", AddGenerationPrompt: true, Messages: hi, ToolChoice: "none", ParallelToolCalls: true, Params: func() Params {
				p := defaults()
				p.Constraint, p.ConstraintField = "root ::= object\n"+grammar.JSONRules, "response_format"
				return p
			}()}},
		{"tools with tool_choice auto and no parallel calls",
			`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{}}}],"tool_choice":"auto","parallel_tool_calls":false}`,
			&ChatRequest{Model: "m", AddGenerationPrompt: true, Messages: hi, Tools: json.RawMessage(`[{"type":"function","function":{"name":"get_weather","parameters":{}}}]`),
				ToolChoice: "auto", Params: defaults()}},
		{"unknown fields are ignored", `{"model":"m","messages":[{"role":"user","content":"hi","x_mood":"calm"}],"temprature":1,"stream":true,"stream_options":{"x":1}}`,
			&ChatRequest{Model: "m", ToolChoice: "none", ParallelToolCalls: true, AddGenerationPrompt: true, Messages: hi, Params: func() Params { p := defaults(); p.Stream = true; return p }()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, e := DecodeChat([]byte(tc.body), DecodeOptions{})
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
		{"a tool without a function name", true, `{"model":"m",` + msg + `,"tools":[{"type":"function"}]}`, "tools[0].function.name"},
		{"tools that are not an array", true, `{"model":"m",` + msg + `,"tools":{"type":"function"}}`, "tools"},
		{"a tool of another type", true, `{"model":"m",` + msg + `,"tools":[{"type":"code_interpreter"}]}`, "tools[0].type"},
		{"tool_choice required without tools", true, `{"model":"m",` + msg + `,"tool_choice":"required"}`, "tool_choice"},
		{"a forced tool call and a response format", true, `{"model":"m",` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","response_format":{"type":"json_object"}}`, "tool_choice"},
		{"tool_choice naming an unknown function", true, `{"model":"m",` + msg + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}}`, "tool_choice"},
		{"an unknown tool_choice", true, `{"model":"m",` + msg + `,"tool_choice":"sometimes"}`, "tool_choice"},
		{"a string parallel_tool_calls", true, `{"model":"m",` + msg + `,"parallel_tool_calls":"no"}`, "parallel_tool_calls"},
		{"a json_schema response format without a schema", true, `{"model":"m",` + msg + `,"response_format":{"type":"json_schema"}}`, "response_format.json_schema.schema"},
		{"a response format that is not an object", true, `{"model":"m",` + msg + `,"response_format":"json"}`, "response_format"},
		{"a grammar that is not a string", true, `{"model":"m",` + msg + `,"grammar":5}`, "grammar"},
		{"an empty guided_choice", true, `{"model":"m",` + msg + `,"guided_choice":[]}`, "guided_choice"},
		{"a logit_bias above 100", true, `{"model":"m",` + msg + `,"logit_bias":{"5":101}}`, "logit_bias"},
		{"a logit_bias key that is not a token id", true, `{"model":"m",` + msg + `,"logit_bias":{"a":1}}`, "logit_bias"},
		{"a negative logit_bias key", true, `{"model":"m",` + msg + `,"logit_bias":{"-1":1}}`, "logit_bias"},
		{"a logit_bias that is not an object", true, `{"model":"m",` + msg + `,"logit_bias":[1]}`, "logit_bias"},
		{"negative min_tokens", true, `{"model":"m",` + msg + `,"min_tokens":-1}`, "min_tokens"},
		{"min_tokens above max_tokens", true, `{"model":"m",` + msg + `,"max_tokens":2,"min_tokens":3}`, "min_tokens"},
		{"a string ignore_eos", true, `{"model":"m",` + msg + `,"ignore_eos":"yes"}`, "ignore_eos"},
		{"a negative stop token id", true, `{"model":"m",` + msg + `,"stop_token_ids":[-1]}`, "stop_token_ids"},
		{"stop_token_ids that are not ids", true, `{"model":"m",` + msg + `,"stop_token_ids":["a"]}`, "stop_token_ids"},
		{"a string skip_special_tokens", true, `{"model":"m",` + msg + `,"skip_special_tokens":1}`, "skip_special_tokens"},
		{"n_probs above 20", true, `{"model":"m",` + msg + `,"n_probs":21}`, "n_probs"},
		{"n_probs with logprobs", true, `{"model":"m",` + msg + `,"n_probs":2,"logprobs":true}`, "n_probs"},
		{"a string cache_prompt", true, `{"model":"m",` + msg + `,"cache_prompt":"no"}`, "cache_prompt"},
		{"continue_final_message with add_generation_prompt", true, `{"model":"m",` + msg + `,"continue_final_message":true,"add_generation_prompt":true}`, "continue_final_message"},
		{"chat_template_kwargs that set messages", true, `{"model":"m",` + msg + `,"chat_template_kwargs":{"messages":[]}}`, "chat_template_kwargs.messages"},
		{"chat_template_kwargs that are not an object", true, `{"model":"m",` + msg + `,"chat_template_kwargs":[1]}`, "chat_template_kwargs"},
		{"an unsupported role", true, `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages[0].role"},
		{"a tool message without tool_call_id", true, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id"},
		{"a tool message that answers no call", true, `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"x"}]}`, "messages[1].tool_call_id"},
		{"a tool message that answers another call", true, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c2","content":"x"}]}`, "messages[1].tool_call_id"},
		{"two tools with the same name", true, `{"model":"m",` + msg + `,"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]}`, "tools[1].function.name"},
		{"tool parameters that are not an object", true, `{"model":"m",` + msg + `,"tools":[{"type":"function","function":{"name":"a","parameters":[1]}}]}`, "tools[0].function.parameters"},
		{"tool calls on a user message", true, `{"model":"m","messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "messages[0].tool_calls"},
		{"an unknown message member when strict", true, `{"model":"m","messages":[{"role":"user","content":"x","mood":1}]}`, "messages[0].mood"},
		{"an image part", true, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0]"},
		{"a tool call without a function", true, `{"model":"m","messages":[{"role":"assistant","content":"x","tool_calls":[{}]}]}`, "messages[0].tool_calls[0].function"},
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
		{"echo with logprobs", false, `{"model":"m","prompt":"x","echo":true,"logprobs":1}`, "echo"},
		{"a string echo", false, `{"model":"m","prompt":"x","echo":"yes"}`, "echo"},
		{"best_of", false, `{"model":"m","prompt":"x","best_of":3}`, "best_of"},
		{"legacy logprobs above 5", false, `{"model":"m","prompt":"x","logprobs":6}`, "logprobs"},
		{"messages on completions", false, `{"model":"m","prompt":"x",` + msg + `}`, "messages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e *Error
			if tc.chat {
				_, e = DecodeChat([]byte(tc.body), DecodeOptions{Strict: true})
			} else {
				_, e = DecodeCompletion([]byte(tc.body), DecodeOptions{Strict: true})
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
			got, e := DecodeCompletion([]byte(`{"model":"m","prompt":`+tc.prompt+`,"logprobs":2}`), DecodeOptions{})
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

// Unknown fields are ignored and each name is logged once per process;
// strict decoding rejects them naming the field.
func TestUnknownFieldsAreLoggedOnce(t *testing.T) {
	var lines []string
	u := unknown
	unknown = &unknownFields{print: func(s string) { lines = append(lines, s) }}
	defer func() { unknown = u }()
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi","mood":1}],"temprature":1,"zz_extra":[1]}`)
	for range 3 {
		if _, e := DecodeChat(body, DecodeOptions{}); e != nil {
			t.Fatal(e)
		}
	}
	if _, e := DecodeCompletion([]byte(`{"model":"m","prompt":"x","temprature":1}`), DecodeOptions{}); e != nil {
		t.Fatal(e)
	}
	want := []string{"temprature", "zz_extra", "messages[].mood"}
	if len(lines) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, name := range want {
		if !strings.Contains(lines[i], `"`+name+`"`) {
			t.Errorf("line %d %q does not name %q", i, lines[i], name)
		}
	}
	_, e := DecodeChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi","mood":1}]}`), DecodeOptions{Strict: true})
	if e == nil || e.Param != "messages[0].mood" {
		t.Errorf("strict: error %v, want one naming messages[0].mood", e)
	}
	for i := range maxUnknownNames + 10 {
		unknown.note(fmt.Sprintf("f%d", i))
	}
	if n := len(unknown.seen); n != maxUnknownNames {
		t.Errorf("remembered %d names, want at most %d", n, maxUnknownNames)
	}
}

// The stopper ends a choice where vLLM would: not before min_tokens, at an
// end-of-generation token unless ignore_eos, at a stop token id (its text
// left out), at a stop sequence; control tokens' text only when
// skip_special_tokens is false.
func TestStopperFollowsTheRequestFields(t *testing.T) {
	tk := tinyTokenizer(t)
	eos := tk.EOS()
	ids := tk.Encode("Hello world again", false, false)
	if len(ids) < 3 || !tk.IsControl(eos) {
		t.Fatalf("test tokenizer: %d ids, EOS %d control %v", len(ids), eos, tk.IsControl(eos))
	}
	seq := append(append([]int32{}, ids...), eos, ids[0])
	world := 0 // the token that completes "world"
	for !strings.Contains(tk.Decode(ids[:world+1]), "world") {
		world++
	}
	for _, tc := range []struct {
		name     string
		p        Params
		seq      []int32
		wantStop int // index of the token that ends the choice, -1 for none
		wantText string
	}{
		{"EOS ends a choice", Params{SkipSpecial: true}, seq, len(ids), tk.Decode(ids)},
		{"ignore_eos goes past EOS and hides its text", Params{SkipSpecial: true, IgnoreEOS: true}, seq, -1, tk.Decode(ids) + tk.Decode(ids[:1])},
		{"ignore_eos without skip_special_tokens shows EOS", Params{IgnoreEOS: true}, seq, -1, tk.Decode(seq)},
		{"min_tokens defers EOS", Params{SkipSpecial: true, MinTokens: len(ids) + 2}, seq, -1, tk.Decode(ids) + tk.Decode(ids[:1])},
		{"a stop token id ends a choice without its text", Params{SkipSpecial: true, StopTokenIDs: []int32{ids[1]}}, seq, 1, tk.Decode(ids[:1])},
		{"min_tokens defers a stop token id", Params{SkipSpecial: true, IgnoreEOS: true, StopTokenIDs: []int32{ids[0]}, MinTokens: 2}, seq, len(ids) + 1, tk.Decode(ids)},
		{"a stop sequence cuts the text", Params{SkipSpecial: true, Stop: []string{"world"}}, seq, world, "Hello "},
		{"min_tokens defers a stop sequence", Params{SkipSpecial: true, IgnoreEOS: true, Stop: []string{"Hello"}, MinTokens: 2}, seq, len(ids) + 1, tk.Decode(ids)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newStopper(tk, &tc.p)
			var text strings.Builder
			stopAt := -1
			for i, id := range tc.seq {
				out, stop := st.push(id)
				text.WriteString(out)
				if stop {
					stopAt = i
					break
				}
			}
			out, _ := st.flush()
			text.WriteString(out)
			if stopAt != tc.wantStop || text.String() != tc.wantText {
				t.Errorf("stopped at %d with %q, want %d with %q", stopAt, text.String(), tc.wantStop, tc.wantText)
			}
			// The engine-side predicate stops at the same token.
			pred := stopCondition(tk, &tc.p)
			predAt := -1
			for i, id := range tc.seq {
				if pred(id) {
					predAt = i
					break
				}
			}
			if predAt != tc.wantStop {
				t.Errorf("stopCondition stopped at %d, want %d", predAt, tc.wantStop)
			}
		})
	}
}

// tinyTokenizer is the tokenizer of the bundled tiny-qwen3 model.
func tinyTokenizer(t *testing.T) *tok.Tokenizer {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "shared", "models", "tiny-qwen3-f32.gguf")
	f, err := weights.Open(p)
	if err != nil {
		t.Skipf("model not found: %v", err)
	}
	t.Cleanup(func() { f.Close() })
	tk, err := tok.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}
