package httpfront_test

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/ninfer/ninfer-go/httpfront"
)

// /v1/embeddings: one unit-length embedding per input (text or token ids),
// the same whichever way it is asked for and encoded, usage counting the
// input tokens, and 400s naming the field at fault.
func TestEmbeddings(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 4)
	width := s.inst.Engine.EmbeddingLength()
	ids := s.inst.Tokenizer.Encode("hello world", true, true)
	status, doc := s.call(t, "POST", httpfront.EmbeddingsPath, `{"model":"tiny-qwen3-f32","input":["hello world","a second input"]}`)
	if status != 200 || doc["object"] != "list" || doc["model"] != "tiny-qwen3-f32" {
		t.Fatalf("status %d %v", status, doc)
	}
	data := doc["data"].([]any)
	if len(data) != 2 {
		t.Fatalf("%d embeddings for 2 inputs", len(data))
	}
	first := data[0].(map[string]any)["embedding"].([]any)
	var norm float64
	for _, v := range first {
		norm += v.(float64) * v.(float64)
	}
	if len(first) != width || math.Abs(norm-1) > 1e-4 || data[1].(map[string]any)["index"] != 1.0 {
		t.Errorf("embedding of %d values (want %d), norm^2 %g, second %v", len(first), width, norm, data[1])
	}
	u := doc["usage"].(map[string]any)
	second := s.inst.Tokenizer.Encode("a second input", true, true)
	if u["prompt_tokens"] != float64(len(ids)+len(second)) || u["total_tokens"] != u["prompt_tokens"] {
		t.Errorf("usage %v", u)
	}
	// The same input as token ids, base64-encoded.
	body := `{"model":"tiny-qwen3-f32","input":[` + idsJSON(ids) + `],"encoding_format":"base64","dimensions":` + strconv.Itoa(width) + `}`
	status, doc = s.call(t, "POST", httpfront.EmbeddingsPath, body)
	if status != 200 {
		t.Fatalf("base64: status %d %v", status, doc)
	}
	raw, err := base64.StdEncoding.DecodeString(doc["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if err != nil || len(raw) != 4*width {
		t.Fatalf("base64 embedding: %d bytes, %v", len(raw), err)
	}
	for i := range width {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != float32(first[i].(float64)) {
			t.Fatalf("value %d: %g as base64 token ids, %g as float text", i, got, first[i])
		}
	}
	for _, tc := range []struct{ body, param string }{
		{`{"model":"tiny-qwen3-f32"}`, "input"},
		{`{"model":"tiny-qwen3-f32","input":5}`, "input"},
		{`{"model":"tiny-qwen3-f32","input":"x","encoding_format":"int8"}`, "encoding_format"},
		{`{"model":"tiny-qwen3-f32","input":"x","dimensions":3}`, "dimensions"},
		{`{"model":"tiny-qwen3-f32","input":[[999999]]}`, "input"},
		{`{"model":"other","input":"x"}`, "model"},
	} {
		status, doc := s.call(t, "POST", httpfront.EmbeddingsPath, tc.body)
		if status == 200 || errorOf(doc)["param"] != tc.param {
			t.Errorf("%s: status %d %v, want an error naming %s", tc.body, status, doc, tc.param)
		}
	}
	s.waitIdle(t)
}
