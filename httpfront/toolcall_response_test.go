package httpfront

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
	"github.com/ninfer/ninfer-go/runtime/instance"
)

// cannedJob is a job of one chat choice whose model output is pieces, as
// the runner would deliver them; it reads an engine only for accounting.
func cannedJob(t *testing.T, p Params, pieces []string) *job {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	inst, err := instance.Open(instance.Options{Model: filepath.Join(filepath.Dir(file), "..", "..", "shared", "models", "tiny-qwen3-f32.gguf"), Threads: 1, MaxRunning: 1})
	if err != nil {
		t.Skipf("model: %v", err)
	}
	t.Cleanup(func() { inst.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	j := &job{ctx: ctx, cancel: cancel, m: &Model{Engine: inst.Engine, Tokenizer: inst.Tokenizer}, p: p,
		prompts: [][]int32{{1}}, choices: 1, out: make(chan delta, len(pieces)+1), gone: make(chan struct{})}
	for i, piece := range pieces {
		j.out <- delta{text: piece, final: i == len(pieces)-1, finish: "stop"}
	}
	return j
}

// Canned replies with tool calls come out as OpenAI gives them: tool_calls
// with ids and JSON-string arguments, content null (non-streaming) or no
// markup (streaming), finish_reason "tool_calls"; the reasoning block is
// split off first.
func TestToolCallResponses(t *testing.T) {
	p := Params{N: 1, ToolFormat: "hermes", Reasoning: ReasoningTagged}
	reply := []string{"<think>\nplan", "</think>\n\n", "<tool_", "call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", "ris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"}
	wantCalls := []toolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}, {Name: "get_time", Arguments: "{}"}}

	t.Run("non-streaming", func(t *testing.T) {
		j := cannedJob(t, p, reply)
		res, e := j.collect()
		if e != nil {
			t.Fatal(e)
		}
		r := &response{chat: true, tk: j.m.Tokenizer}
		b, _ := marshal(r.complete(j, res))
		var doc struct {
			Choices []struct {
				Message struct {
					Content          *string `json:"content"`
					ReasoningContent string  `json:"reasoning_content"`
					ToolCalls        []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		m := doc.Choices[0].Message
		var got []toolCall
		for _, c := range m.ToolCalls {
			if !strings.HasPrefix(c.ID, "call_") || c.Type != "function" {
				t.Errorf("call %+v lacks an id or type", c)
			}
			got = append(got, toolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		if diff := cmp.Diff(wantCalls, got, cmp.AllowUnexported(toolCall{})); diff != "" || m.Content != nil ||
			m.ReasoningContent != "plan" || doc.Choices[0].FinishReason != "tool_calls" {
			t.Errorf("%s\ncalls (-want +got):\n%s", b, diff)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		for _, single := range []bool{false, true} {
			p := p
			p.SingleToolCall = single
			j := cannedJob(t, p, reply)
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			r := &response{chat: true, tk: j.m.Tokenizer}
			if !r.stream(w, j) {
				t.Fatal("stream failed")
			}
			type callDelta struct {
				Index    *int   `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			}
			var content, reasoning strings.Builder
			var calls []toolCall
			finish := ""
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n\n") {
				data := strings.TrimPrefix(line, "data: ")
				if data == "[DONE]" {
					break
				}
				var chunk struct {
					Choices []struct {
						Delta struct {
							Content          *string     `json:"content"`
							ReasoningContent *string     `json:"reasoning_content"`
							ToolCalls        []callDelta `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &chunk); err != nil {
					t.Fatalf("%q: %v", data, err)
				}
				d := chunk.Choices[0].Delta
				if d.Content != nil {
					content.WriteString(*d.Content)
				}
				if d.ReasoningContent != nil {
					reasoning.WriteString(*d.ReasoningContent)
				}
				for _, tc := range d.ToolCalls {
					// Accumulate as the OpenAI SDK does: a new index opens a
					// call (id and name), argument pieces append.
					if *tc.Index == len(calls) {
						if tc.ID == "" || tc.Function.Name == "" {
							t.Errorf("first delta of call %d lacks id or name: %s", *tc.Index, data)
						}
						calls = append(calls, toolCall{Name: tc.Function.Name})
					}
					if tc.Function.Arguments != nil {
						calls[*tc.Index].Arguments += *tc.Function.Arguments
					}
				}
				if f := chunk.Choices[0].FinishReason; f != nil {
					finish = *f
				}
			}
			want := wantCalls
			if single {
				want = wantCalls[:1]
			}
			if diff := cmp.Diff(want, calls, cmp.AllowUnexported(toolCall{})); diff != "" || content.String() != "" ||
				reasoning.String() != "plan" || finish != "tool_calls" {
				t.Errorf("single %v: content %q reasoning %q finish %q, calls (-want +got):\n%s\n%s", single, content.String(), reasoning.String(), finish, diff, buf.String())
			}
		}
	})
}
