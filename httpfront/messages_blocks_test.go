package httpfront

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A reply's pieces become content blocks, and the streamed events carry
// exactly the blocks' content: thinking, text (whitespace before a tool
// call dropped), tool_use with its input from the argument pieces.
func TestBlockBuilder(t *testing.T) {
	type piece struct {
		reasoning, content string
		calls              []toolDelta
	}
	for _, tc := range []struct {
		name   string
		pieces []piece
		single bool
		blocks []any
		events []string
	}{
		{"text", []piece{{content: "Hel"}, {content: "lo"}}, false,
			[]any{map[string]any{"type": "text", "text": "Hello"}},
			[]string{"start text", "delta text_delta Hel", "delta text_delta lo", "stop"}},
		{"thinking then text", []piece{{reasoning: "Hm"}, {reasoning: "m.", content: "Yes"}}, false,
			[]any{map[string]any{"type": "thinking", "thinking": "Hmm.", "signature": ""}, map[string]any{"type": "text", "text": "Yes"}},
			[]string{"start thinking", "delta thinking_delta Hm", "delta thinking_delta m.", "stop", "start text", "delta text_delta Yes", "stop"}},
		{"whitespace before a tool call makes no text block", []piece{{content: "\n\n"}, {calls: []toolDelta{{name: "f"}, {args: `{"a":`}}}, {calls: []toolDelta{{args: `1}`}}}}, false,
			[]any{map[string]any{"type": "tool_use", "name": "f", "input": map[string]any{"a": float64(1)}}},
			[]string{"start tool_use", `delta input_json_delta {"a":`, "delta input_json_delta 1}", "stop"}},
		{"two calls, each with its input", []piece{{calls: []toolDelta{{index: 0, name: "f", args: `{"a":1}`}, {index: 1, name: "g", args: "{}"}}}}, false,
			[]any{map[string]any{"type": "tool_use", "name": "f", "input": map[string]any{"a": float64(1)}}, map[string]any{"type": "tool_use", "name": "g", "input": map[string]any{}}},
			[]string{"start tool_use", `delta input_json_delta {"a":1}`, "stop", "start tool_use", "delta input_json_delta {}", "stop"}},
		{"two calls, only the first with disable_parallel_tool_use", []piece{{calls: []toolDelta{{index: 0, name: "f", args: "{}"}, {index: 1, name: "g", args: "{}"}}}}, true,
			[]any{map[string]any{"type": "tool_use", "name": "f", "input": map[string]any{}}},
			[]string{"start tool_use", "delta input_json_delta {}", "stop"}},
		{"whitespace alone is the text", []piece{{content: " "}}, false,
			[]any{map[string]any{"type": "text", "text": " "}},
			[]string{"start text", "delta text_delta  ", "stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var events []string
			b := &blockBuilder{single: tc.single}
			b.emit = func(typ string, ev map[string]any) bool {
				switch typ {
				case "content_block_start":
					events = append(events, "start "+blockType(ev["content_block"]))
				case "content_block_delta":
					d := ev["delta"].(map[string]string)
					events = append(events, "delta "+d["type"]+" "+d["text"]+d["thinking"]+d["partial_json"])
				case "content_block_stop":
					events = append(events, "stop")
				}
				return true
			}
			for _, p := range tc.pieces {
				b.add(p.reasoning, p.content, p.calls)
			}
			b.end()
			var got []any
			if err := json.Unmarshal(mustJSON(b.blocks), &got); err != nil {
				t.Fatal(err)
			}
			for _, blk := range got {
				delete(blk.(map[string]any), "id")
			}
			if d := cmp.Diff(tc.blocks, got); d != "" {
				t.Errorf("blocks (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.events, events); d != "" {
				t.Errorf("events (-want +got):\n%s", d)
			}
		})
	}
}

func blockType(b any) string {
	switch b.(type) {
	case textBlock:
		return "text"
	case thinkingBlock:
		return "thinking"
	case toolUseBlock:
		return "tool_use"
	}
	return "?"
}

func TestStopReason(t *testing.T) {
	seq := "END"
	for _, tc := range []struct {
		finish, stopSeq string
		calls           int
		reason          string
		seq             *string
	}{
		{"stop", "", 0, "end_turn", nil},
		{"length", "", 0, "max_tokens", nil},
		{"length", "", 1, "max_tokens", nil},
		{"stop", "", 1, "tool_use", nil},
		{"stop", "END", 0, "stop_sequence", &seq},
	} {
		reason, s := stopReason(tc.finish, tc.stopSeq, tc.calls)
		if d := cmp.Diff([]any{tc.reason, tc.seq}, []any{reason, s}); d != "" {
			t.Errorf("stopReason(%q, %q, %d) (-want +got):\n%s", tc.finish, tc.stopSeq, tc.calls, d)
		}
	}
}

// Every status the server answers maps to Anthropic's error type (and a
// 503 to Anthropic's 529).
func TestAnthropicError(t *testing.T) {
	for _, tc := range []struct {
		status, wantStatus int
		typ                string
	}{
		{400, 400, "invalid_request_error"},
		{401, 401, "authentication_error"},
		{403, 403, "permission_error"},
		{404, 404, "not_found_error"},
		{405, 405, "invalid_request_error"},
		{413, 413, "request_too_large"},
		{415, 415, "invalid_request_error"},
		{429, 429, "rate_limit_error"},
		{500, 500, "api_error"},
		{http.StatusServiceUnavailable, 529, "overloaded_error"},
		{502, 502, "api_error"},
		{504, 504, "timeout_error"},
	} {
		status, body := anthropicError(&Error{Status: tc.status, Type: typeInvalid, Message: "m"})
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"type": "error", "error": map[string]any{"type": tc.typ, "message": "m"}}
		if d := cmp.Diff([]any{tc.wantStatus, want}, []any{status, got}); d != "" {
			t.Errorf("status %d (-want +got):\n%s", tc.status, d)
		}
	}
}
