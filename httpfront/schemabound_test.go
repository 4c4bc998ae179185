package httpfront_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ninfer/ninfer-go/httpfront"
)

// joined is n comma-separated items item(i).
func joined(n int, item func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return strings.Join(parts, ",")
}

// costlySchemas need far more work to compile than their size suggests
// (exponential $ref expansion, rules for many objects' properties, a regexp per
// property and pattern); before the compiler had a Work each ran for
// minutes in its request's handler.
var costlySchemas = []struct{ name, schema string }{
	{"oneOf over nested anyOf of refs", `{"oneOf":[{"$ref":"#/$defs/d0"},{"type":"string"}],"$defs":{` +
		joined(10, func(i int) string {
			return fmt.Sprintf(`"d%d":{"anyOf":[%s]}`, i, joined(20, func(int) string { return fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i+1) }))
		}) + `,"d10":{"type":"integer"}}}`},
	{"3,000 objects of 60 properties", `{"type":"object","properties":{` +
		joined(3000, func(i int) string {
			return fmt.Sprintf(`"o%d":{"type":"object","properties":{%s}}`, i, joined(60, func(j int) string { return fmt.Sprintf(`"p%d":{}`, j) }))
		}) + `}}`},
	{"properties against patternProperties", `{"type":"object","properties":{` +
		joined(3000, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `},"patternProperties":{` +
		joined(3000, func(i int) string { return fmt.Sprintf(`"^q%d$":{}`, i) }) + `}}`},
}

// streamMeanwhile sends short streams to s one after another until ctx
// ends (long contexts would grow the engine's buffers for later tests),
// counting the events received; it returns once the first arrived.
func streamMeanwhile(t *testing.T, ctx context.Context, s *server) *atomic.Int64 {
	var received atomic.Int64
	streaming := make(chan struct{})
	var started sync.Once
	go func() {
		defer started.Do(func() { close(streaming) })
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/completions",
				strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"Once","max_tokens":64,"ignore_eos":true,"stream":true}`))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				if ctx.Err() == nil {
					t.Errorf("the concurrent stream: %v %v", err, resp)
				}
				return
			}
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					break
				}
				if strings.HasPrefix(line, "data: ") && received.Add(1) == 1 {
					started.Do(func() { close(streaming) })
				}
			}
			resp.Body.Close()
		}
	}()
	<-streaming
	return &received
}

// Costly schemas, as a response format, a completion's json_schema and a
// forced tool call's parameters, are answered with a 400
// constraint_too_complex naming the field once their compilation reaches
// its Work limit, while another client keeps streaming; a schema past a
// size limit gets a 400 naming where.
func TestCostlySchemasAreBounded(t *testing.T) {
	if raceDetector {
		t.Skip("compiles to the Work limit several times (seconds each under -race)")
	}
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 4)
	chat := `"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"hi"}],"max_tokens":8`
	type request struct{ name, path, body, param, code, message string }
	var requests []request
	for _, c := range costlySchemas {
		requests = append(requests,
			request{c.name + " as response_format", "/v1/chat/completions",
				`{` + chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + c.schema + `}}}`,
				"response_format.json_schema.schema", "constraint_too_complex", "needs more work to compile"},
			request{c.name + " as a forced call's parameters", "/v1/chat/completions",
				`{` + chat + `,"tools":[{"type":"function","function":{"name":"f","parameters":` + c.schema + `}}],"tool_choice":"required"}`,
				"tools[0].function.parameters", "constraint_too_complex", "needs more work to compile"})
	}
	requests = append(requests,
		request{"3,000 objects of 60 properties as a completion's json_schema", "/v1/completions",
			`{"model":"tiny-qwen3-f32","prompt":"x","max_tokens":8,"json_schema":` + costlySchemas[1].schema + `}`,
			"json_schema", "constraint_too_complex", "needs more work to compile"},
		request{"an enum of 100,001 values", "/v1/chat/completions",
			`{` + chat + `,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"required":["a"],"properties":{"a":{"enum":[` +
				joined(100001, func(i int) string { return fmt.Sprint(i) }) + `]}}}}}}`,
			"response_format.json_schema.schema", "", "schema.properties.a.enum: more than 100000 values"},
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	received := streamMeanwhile(t, ctx, s)
	for _, r := range requests {
		t.Run(r.name, func(t *testing.T) {
			before := received.Load()
			began := time.Now()
			status, doc := s.call(t, "POST", r.path, r.body)
			took := time.Since(began)
			e := errorOf(doc)
			if status != 400 || e == nil || e["param"] != r.param || r.code != "" && e["code"] != r.code || !strings.Contains(fmt.Sprint(e["message"]), r.message) {
				t.Errorf("status %d %v, want 400 %s naming %s with %q", status, e, r.code, r.param, r.message)
			}
			if took > 30*time.Second {
				t.Errorf("answered after %v", took)
			}
			t.Logf("answered in %v; %d events streamed to another client meanwhile", took.Round(time.Millisecond), received.Load()-before)
		})
	}
	if received.Load() == 0 {
		t.Error("the concurrent stream received nothing")
	}
	cancel()
	s.waitIdle(t)
}

// A compilation stops at its request's deadline (--timeout from its
// arrival): 504, well before the Work limit.
func TestSchemaCompilationStopsAtTheDeadline(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{Timeout: 50 * time.Millisecond}, 2)
	body := `{"model":"tiny-qwen3-f32","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":` + costlySchemas[0].schema + `}}}`
	status, doc := s.call(t, "POST", "/v1/chat/completions", body)
	if e := errorOf(doc); status != http.StatusGatewayTimeout || e == nil || e["code"] != "deadline_exceeded" {
		t.Errorf("status %d %v, want 504 deadline_exceeded", status, doc)
	}
}
