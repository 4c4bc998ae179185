package httpfront_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ninfer/ninfer-go/httpfront"
)

// Schemas for constrained requests: nested arrays, enums, anyOf, required
// and optional fields.
var constrainedSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},"tags":{"type":"array","items":{"type":"string","enum":["a","b","c"]},"maxItems":4}},"required":["name","age"]}`,
	`{"type":"object","properties":{"grid":{"type":"array","items":{"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3},"minItems":2,"maxItems":3}},"required":["grid"],"additionalProperties":false}`,
	`{"type":"object","properties":{"kind":{"enum":["circle","square",3,null]},"size":{"anyOf":[{"type":"number"},{"type":"string","maxLength":5},{"type":"null"}]},"note":{"type":["string","null"],"maxLength":8}},"required":["kind"]}`,
	`{"type":"object","properties":{"ok":{"type":"boolean"},"why":{"type":"string"},"n":{"type":"number"}},"required":["ok"]}`,
	`{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"label":{"enum":["x","y"]}},"required":["id","label"]},"maxItems":3}},"required":["items"]}`,
}

// GBNF grammars with a regular-expression equivalent to check outputs by.
var constrainedGrammars = []struct{ gbnf, re string }{
	{`root ::= ("yes" | "no") "." `, `^(yes|no)\.$`},
	{"root ::= [a-z]{2,6} (\" \" [a-z]{2,6}){0,3}", `^[a-z]{2,6}( [a-z]{2,6}){0,3}$`},
	{"root ::= \"(\" num (\",\" num)* \")\"\nnum ::= [0-9]{1,3}", `^\([0-9]{1,3}(,[0-9]{1,3})*\)$`},
}

func compileSchema(t testing.TB, src string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// constrainedCase is one constrained request and how to check its output.
type constrainedCase struct {
	name  string
	field string // the request's constraint member
	check func(text string) error
}

func constrainedCases(t testing.TB) []constrainedCase {
	cases := []constrainedCase{{name: "json_object", field: `"response_format":{"type":"json_object"}`, check: func(text string) error {
		var v map[string]any
		return json.Unmarshal([]byte(text), &v)
	}}}
	for i, src := range constrainedSchemas {
		sch := compileSchema(t, src)
		cases = append(cases, constrainedCase{name: fmt.Sprint("schema ", i),
			field: `"response_format":{"type":"json_schema","json_schema":{"name":"s","strict":true,"schema":` + src + `}}`,
			check: func(text string) error {
				inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
				if err != nil {
					return err
				}
				return sch.Validate(inst)
			}})
	}
	for i, g := range constrainedGrammars {
		b, _ := json.Marshal(g.gbnf)
		re := regexp.MustCompile(g.re)
		cases = append(cases, constrainedCase{name: fmt.Sprint("grammar ", i), field: `"grammar":` + string(b), check: func(text string) error {
			if !re.MatchString(text) {
				return fmt.Errorf("%q does not match %s", text, re)
			}
			return nil
		}})
	}
	return cases
}

// Constrained requests on random-weight models always give output that
// parses and validates (greedy and sampled, chat and completions), and a
// speculative graph gives the plain graph's output at temperature 0.
func TestConstrainedOutputsValidate(t *testing.T) {
	cases := constrainedCases(t)
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{MaxQueue: 64}, 8)
	requests := 1000
	if testing.Short() {
		requests = 100
	}
	var wg sync.WaitGroup
	errs := make(chan string, requests)
	sem := make(chan struct{}, 8)
	for i := range requests {
		tc := cases[i%len(cases)]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			path, body := "/v1/chat/completions", fmt.Sprintf(`{"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"item %d"}],"max_tokens":96,"temperature":%g,"seed":%d,%s}`, i, float64(i%3)*0.5, i, tc.field)
			if i%4 == 3 {
				path, body = "/v1/completions", fmt.Sprintf(`{"model":"tiny-qwen3-f32","prompt":"item %d:","max_tokens":96,"temperature":%g,"seed":%d,%s}`, i, float64(i%3)*0.5, i, tc.field)
			}
			status, doc := s.call(t, "POST", path, body)
			if status != 200 {
				errs <- fmt.Sprintf("%s: status %d %v", tc.name, status, doc)
				return
			}
			c := choices(doc)[0]
			text, _ := c["text"].(string)
			if m, ok := c["message"].(map[string]any); ok {
				text, _ = m["content"].(string)
			}
			if err := tc.check(text); err != nil {
				errs <- fmt.Sprintf("%s (request %d, finish %v): %v", tc.name, i, c["finish_reason"], err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for e := range errs {
		if n++; n <= 10 {
			t.Error(e)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d constrained outputs are invalid", n, requests)
	}

	spec := startGraph(t, "tiny-qwen3-f32.gguf", "ngram")
	for _, tc := range cases {
		body := `{"model":"tiny-qwen3-f32","prompt":"a b a b a b a b","max_tokens":64,"temperature":0,` + tc.field + `}`
		want := choices(s.completion(t, "/v1/completions", body))[0]["text"]
		got := choices(spec.completion(t, "/v1/completions", body))[0]["text"]
		if got != want {
			t.Errorf("%s: speculative output %q, plain %q", tc.name, got, want)
		}
	}
}

// tool_choice required or naming a function forces a call whose arguments
// validate against the function's parameters; the reply carries it as
// tool_calls, streaming and not.
func TestForcedToolCalls(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 2)
	params := `{"type":"object","properties":{"city":{"type":"string","maxLength":10},"unit":{"enum":["c","f"]}},"required":["city"]}`
	sch := compileSchema(t, params)
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":` + params + `}},{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}]`
	for _, tc := range []struct{ name, choice, want string }{
		{"required", `"required"`, ""},
		{"a named function", `{"type":"function","function":{"name":"get_weather"}}`, "get_weather"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range 6 {
				body := fmt.Sprintf(`{"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"weather?"}],"max_tokens":80,"temperature":0.7,"seed":%d,"tools":%s,"tool_choice":%s,"parallel_tool_calls":false}`, seed, tools, tc.choice)
				c := choices(s.completion(t, "/v1/chat/completions", body))[0]
				m := c["message"].(map[string]any)
				calls, _ := m["tool_calls"].([]any)
				if c["finish_reason"] != "tool_calls" || len(calls) != 1 || m["content"] != nil {
					t.Fatalf("seed %d: %v", seed, c)
				}
				fn := calls[0].(map[string]any)["function"].(map[string]any)
				name, args := fn["name"].(string), fn["arguments"].(string)
				if tc.want != "" && name != tc.want {
					t.Errorf("seed %d: called %s, want %s", seed, name, tc.want)
				}
				if name == "get_weather" {
					inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
					if err == nil {
						err = sch.Validate(inst)
					}
					if err != nil {
						t.Errorf("seed %d: arguments %s: %v", seed, args, err)
					}
				}
			}
		})
	}
}

func TestConstraintErrors(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	msg := `"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct{ name, body, param string }{
		{"a GBNF grammar that does not parse", `{` + msg + `,"grammar":"root ::= \"a"}`, "grammar"},
		{"an unsupported schema keyword", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"string","pattern":"(?=a)b"}}}}`, "response_format.json_schema.schema"},
		{"a json_schema without its schema", `{` + msg + `,"response_format":{"type":"json_schema","json_schema":{"name":"s"}}}`, "response_format.json_schema.schema"},
		{"an unknown response_format type", `{` + msg + `,"response_format":{"type":"yaml"}}`, "response_format.type"},
		{"two constraints", `{` + msg + `,"grammar":"root ::= \"a\"","response_format":{"type":"json_object"}}`, "grammar"},
		{"max_tokens below the grammar's shortest output", `{` + msg + `,"max_tokens":2,"grammar":"root ::= \"abcdefgh\""}`, "max_tokens"},
		{"a grammar over the size limit", `{` + msg + `,"grammar":"root ::= ` + strings.Repeat(`\"abcdefghij\"{1000} `, 210) + `"}`, "grammar"},
		{"a surrogate escape", `{` + msg + `,"grammar":"root ::= \"\\uD800\""}`, "grammar"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, "POST", "/v1/chat/completions", tc.body)
			if e := errorOf(doc); status != 400 || e == nil || e["param"] != tc.param {
				t.Errorf("status %d %v, want 400 naming %s", status, doc, tc.param)
			}
		})
	}
}

// ambiguousGrammars are GBNF grammars whose parses multiply with each
// "a" (left factoring cannot merge their alternatives: they begin with
// different rules), and one whose start alone is exponential.
var ambiguousGrammars = []struct{ name, gbnf string }{
	{"two ways per a", "root ::= x \"z\"\nx ::= a1 x \"b\" | a2 x \"c\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\""},
	{"three ways per a", "root ::= x\nx ::= a1 x \"1\" | a2 x \"2\" | a3 x \"3\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"\na3 ::= [a]"},
	{"ambiguity inside a JSON array", "root ::= \"[\" v \"]\"\nv ::= a1 v \"b\" | a2 v \"c\" | \"0\"\na1 ::= \"a\"\na2 ::= \"a\" \"\"?"},
	{"choices that double before any byte", func() string {
		var b strings.Builder
		b.WriteString("root ::= r0\n")
		for i := range 40 { // p and q are r(i+1) by other names: nothing to factor
			fmt.Fprintf(&b, "r%d ::= p%d \"x\" | q%d \"y\"\np%d ::= r%d\nq%d ::= r%d\n", i, i, i, i, i+1, i, i+1)
		}
		b.WriteString("r40 ::= \"a\"*\n")
		return b.String()
	}()},
}

// The class 1: a grammar whose parses grow exponentially, with
// logit_bias pushing the byte that grows them, is answered within bounded
// time by a 400 naming the constraint (code constraint_too_complex, or
// refused when compiled), while a request sent at the same time starts
// streaming within a second; the server stays healthy.
func TestAmbiguousGrammarsFailAloneAndFast(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 4)
	ids := s.inst.Tokenizer.Encode("a", false, false)
	bias := fmt.Sprintf(`{"%d":100}`, ids[len(ids)-1])
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tc := range ambiguousGrammars {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := json.Marshal(tc.gbnf)
			ttft := make(chan time.Duration, 1)
			go func() {
				ttft <- firstTokenTime(t, client, s.url, `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":2,"stream":true}`)
			}()
			body := `{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":200,"temperature":0,"logit_bias":` + bias + `,"grammar":` + string(g) + `}`
			resp, err := client.Post(s.url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("the constrained request got no answer: %v", err)
			}
			var doc map[string]any
			json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			if e := errorOf(doc); resp.StatusCode != 400 || e == nil || e["param"] != "grammar" {
				t.Errorf("status %d %v, want 400 naming grammar", resp.StatusCode, doc)
			}
			if d := <-ttft; d < 0 || d > time.Second {
				t.Errorf("a concurrent request's first token took %v, want under 1s", d)
			}
		})
	}
	t.Run("a stream ends with the error event", func(t *testing.T) {
		g, _ := json.Marshal(ambiguousGrammars[0].gbnf)
		resp, err := client.Post(s.url+"/v1/completions", "application/json", strings.NewReader(
			`{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":200,"temperature":0,"stream":true,"logit_bias":`+bias+`,"grammar":`+string(g)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := sseEvents(t, resp.Body)
		var last struct{ Error map[string]any }
		if len(events) > 0 {
			json.Unmarshal([]byte(events[len(events)-1]), &last)
		}
		if last.Error["code"] != "constraint_too_complex" || last.Error["param"] != "grammar" {
			t.Errorf("the stream's last event is %q, want a constraint_too_complex error naming grammar", events[max(0, len(events)-1):])
		}
	})
	s.waitIdle(t)
}

// firstTokenTime sends a streaming request and returns how long its first
// event took (-1 when it failed).
func firstTokenTime(t *testing.T, client *http.Client, url, body string) time.Duration {
	began := time.Now()
	resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return -1
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return -1
		}
		if strings.HasPrefix(line, "data: ") {
			d := time.Since(began)
			io.Copy(io.Discard, br)
			return d
		}
	}
}

// Large constraints (100,000 choices as an enum, guided_choice and GBNF
// alternatives) compile in their request's handler: each answers with one
// of its choices, and a stream running meanwhile keeps receiving tokens
// while the constraint compiles.
func TestLargeConstraintsCompileOffTheEngine(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("compiles three 100,000-choice constraints (about 10 s; a minute under -race)")
	}
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 4)
	items := make([]string, 100000)
	for i := range items {
		items[i] = fmt.Sprintf("item%06d", i)
	}
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	quoted := make([]string, len(items))
	for i, it := range items {
		quoted[i] = js(it)
	}
	for _, tc := range []struct{ name, field string }{
		{"enum", `"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"enum":` + js(items) + `}}}`},
		{"guided_choice", `"guided_choice":` + js(items)},
		{"GBNF alternatives", `"grammar":` + js("root ::= "+strings.Join(quoted, " | "))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			received := streamMeanwhile(t, ctx, s)
			before := received.Load()
			c := choices(s.completion(t, "/v1/completions", `{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":20,"temperature":0,`+tc.field+`}`))[0]
			during := received.Load() - before
			text := strings.Trim(c["text"].(string), `"`)
			if !strings.HasPrefix(text, "item") || len(text) != len("item000000") {
				t.Errorf("output %q is not one of the choices", c["text"])
			}
			if during == 0 {
				t.Error("the concurrent stream received nothing while the constraint compiled")
			}
			t.Logf("%d tokens streamed to another client meanwhile", during)
			cancel()
			s.waitIdle(t)
		})
	}
}

// A Shutdown whose drain time ends aborts the generations still running,
// constrained ones included (their masks stop with the choice's
// context): the stream ends with a shutting_down error at once instead of
// running to max_tokens.
func TestShutdownPastItsDrainAbortsGenerations(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 2)
	br := s.startStream(t, "/v1/completions", `{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":4000,"ignore_eos":true,"stream":true,"grammar":"root ::= [a-z ]+"}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no drain time at all
	if err := s.srv.Shutdown(ctx); err == nil {
		t.Fatal("Shutdown returned nil with a stream of 4000 tokens in flight")
	}
	rest, _ := io.ReadAll(br)
	events := sseEvents(t, bytes.NewReader(rest))
	if len(events) == 0 || !strings.Contains(events[len(events)-1], `"shutting_down"`) {
		t.Errorf("the stream did not end with a shutting_down error: %d events, last %q", len(events), events[max(0, len(events)-1):])
	}
	if len(events) > 2000 {
		t.Errorf("the stream ran on for %d events after the shutdown", len(events))
	}
}
