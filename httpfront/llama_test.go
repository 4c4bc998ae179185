package httpfront_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/httpfront"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// TestLlamaCompletion: /completion answers in llama-server's shape with
// the same greedy text /v1/completions gives, and says why it stopped.
func TestLlamaCompletion(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	const prompt = "Once upon a time"
	oai := choices(s.completion(t, "/v1/completions", `{"model":"stories260K","prompt":"`+prompt+`","max_tokens":12,"temperature":0,"ignore_eos":true}`))[0]["text"].(string)
	words := strings.Fields(oai)
	if len(words) < 3 {
		t.Fatalf("greedy text %q has too few words for a stop word", oai)
	}
	stop := words[2]
	nPrompt := len(s.inst.Tokenizer.Encode(prompt, true, true))
	for _, tc := range []struct {
		name, body string
		want       map[string]any
	}{
		{"n_predict bounds the tokens", `{"prompt":"` + prompt + `","n_predict":12,"temperature":0,"ignore_eos":true,"cache_prompt":true}`,
			map[string]any{"content": oai, "stop": true, "stop_type": "limit", "stopping_word": "", "tokens_predicted": 12.0,
				"tokens_evaluated": float64(nPrompt), "prompt": prompt, "model": "stories260K", "n_predict": 12.0, "predicted_n": 12.0}},
		{"a stop word ends it", `{"prompt":"` + prompt + `","n_predict":12,"temperature":0,"ignore_eos":true,"stop":["` + stop + `"]}`,
			map[string]any{"content": oai[:strings.Index(oai, stop)], "stop": true, "stop_type": "word", "stopping_word": stop,
				"tokens_evaluated": float64(nPrompt), "prompt": prompt, "model": "stories260K", "n_predict": 12.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := s.completion(t, "/completion", tc.body)
			got := map[string]any{"n_predict": doc["generation_settings"].(map[string]any)["n_predict"]}
			for k := range tc.want {
				if v, ok := doc[k]; ok {
					got[k] = v
				}
			}
			if _, ok := tc.want["predicted_n"]; ok {
				got["predicted_n"] = doc["timings"].(map[string]any)["predicted_n"]
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("/completion (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("streamed pieces add up to the answer, the last event carries its fields", func(t *testing.T) {
		resp, err := http.Post(s.url+"/completion", "application/json",
			strings.NewReader(`{"prompt":"`+prompt+`","n_predict":12,"temperature":0,"ignore_eos":true,"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := sseEvents(t, resp.Body)
		var text strings.Builder
		var last map[string]any
		for i, e := range events {
			if e == "[DONE]" {
				t.Fatalf("llama-server's stream has no [DONE] line: %q", events)
			}
			var d map[string]any
			if err := json.Unmarshal([]byte(e), &d); err != nil {
				t.Fatal(err)
			}
			if stop, _ := d["stop"].(bool); stop != (i == len(events)-1) {
				t.Fatalf("event %d of %d has stop=%v", i, len(events), stop)
			}
			text.WriteString(d["content"].(string))
			last = d
		}
		got := map[string]any{"content": text.String(), "stop_type": last["stop_type"], "tokens_predicted": last["tokens_predicted"]}
		want := map[string]any{"content": oai, "stop_type": "limit", "tokens_predicted": 12.0}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stream (-want +got):\n%s", diff)
		}
	})
}

// TestLlamaErrors: bad llama-server requests get 4xx naming the field.
func TestLlamaErrors(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		param                    any
	}{
		{"n_predict 0", "POST", "/completion", `{"prompt":"hi","n_predict":0}`, 400, "n_predict"},
		{"n_predict past the context", "POST", "/completion", `{"prompt":"hi","n_predict":100000}`, 400, "n_predict"},
		{"n_predict past the context on /v1/completions", "POST", "/v1/completions", `{"model":"stories260K","prompt":"hi","n_predict":100000}`, 400, "max_tokens"},
		{"n_probs", "POST", "/completion", `{"prompt":"hi","n_probs":3}`, 400, "n_probs"},
		{"two prompts", "POST", "/completion", `{"prompt":["a","b"]}`, 400, "prompt"},
		{"n above 1", "POST", "/completion", `{"prompt":"hi","n":2}`, 400, "n"},
		{"return_tokens", "POST", "/completion", `{"prompt":"hi","return_tokens":true}`, 400, "return_tokens"},
		{"another model", "POST", "/completion", `{"prompt":"hi","model":"gpt-4"}`, 404, "model"},
		{"a null model", "POST", "/completion", `{"prompt":"hi","model":null}`, 400, "model"},
		{"a body that is not an object", "POST", "/completion", `["hi"]`, 400, nil},
		{"n_probs on /infill", "POST", "/infill", `{"input_prefix":"a","model":"stories260K","n_probs":2}`, 400, "n_probs"},
		{"GET /completion", "GET", "/completion", ``, 405, nil},
		{"POST /props", "POST", "/props", `{}`, 405, nil},
		{"infill without FIM tokens", "POST", "/infill", `{"input_prefix":"def f(","input_suffix":"\n"}`, 501, nil},
		{"apply-template without messages", "POST", "/apply-template", `{}`, 400, "messages"},
		{"max_output_tokens past the context", "POST", "/v1/responses", `{"model":"stories260K","input":"hi","max_output_tokens":100000}`, 400, "max_output_tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, doc := s.call(t, tc.method, tc.path, tc.body)
			e := errorOf(doc)
			if diff := cmp.Diff([]any{tc.status, tc.param}, []any{status, e["param"]}); diff != "" {
				t.Errorf("status and param (-want +got):\n%s\n%v", diff, doc)
			}
			if tc.path == "/v1/responses" && strings.Contains(e["message"].(string), "max_tokens") {
				t.Errorf("a Responses error names max_tokens: %q", e["message"])
			}
		})
	}
}

// TestUnprefixedAliases: llama-server's paths without /v1 answer as the
// /v1 ones do.
func TestUnprefixedAliases(t *testing.T) {
	s := start(t, "stories260K.gguf", httpfront.Config{}, 2)
	for _, tc := range []struct{ path, body, object string }{
		{"/completions", `{"model":"stories260K","prompt":"hi","max_tokens":2}`, "text_completion"},
		{"/chat/completions", `{"model":"stories260K","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, "chat.completion"},
		{"/embeddings", `{"model":"stories260K","input":"hi"}`, "list"},
		{"/models", ``, "list"},
	} {
		method := "POST"
		if tc.body == "" {
			method = "GET"
		}
		status, doc := s.call(t, method, tc.path, tc.body)
		if diff := cmp.Diff([]any{200, tc.object}, []any{status, doc["object"]}); diff != "" {
			t.Errorf("%s (-want +got):\n%s\n%v", tc.path, diff, doc)
		}
	}
}

// TestPropsAndSlots: /props describes the server; /slots lists one slot
// per --max-concurrency, a running request's as processing, and both need
// the API key.
func TestPropsAndSlots(t *testing.T) {
	const key = "sk-test"
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{APIKey: key}, 3)
	auth := []string{"Authorization", "Bearer " + key}
	for _, path := range []string{"/props", "/slots"} {
		if status, _ := s.call(t, "GET", path, ""); status != 401 {
			t.Errorf("GET %s without the key: %d, want 401", path, status)
		}
	}
	status, props := s.call(t, "GET", "/props", "", auth...)
	def := props["default_generation_settings"].(map[string]any)
	got := map[string]any{"status": status, "total_slots": props["total_slots"], "model_alias": props["model_alias"],
		"n_ctx": def["n_ctx"], "n_predict": def["params"].(map[string]any)["n_predict"],
		"has chat_template": props["chat_template"] != "" && props["chat_template"] == s.inst.Chat.Source()}
	want := map[string]any{"status": 200, "total_slots": 3.0, "model_alias": "tiny-qwen3-f32",
		"n_ctx": float64(s.inst.Engine.ContextLength()), "n_predict": -1.0, "has chat_template": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("/props (-want +got):\n%s", diff)
	}

	slots := func() []map[string]any {
		req, _ := http.NewRequest("GET", s.url+"/slots", nil)
		req.Header.Set(auth[0], auth[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out []map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	processing := func(ss []map[string]any) (n int) {
		for _, x := range ss {
			if x["is_processing"].(bool) {
				n++
			}
		}
		return n
	}
	if ss := slots(); len(ss) != 3 || processing(ss) != 0 {
		t.Fatalf("idle /slots: %d slots, %d processing; want 3 and 0: %v", len(ss), processing(ss), ss)
	}
	req, _ := http.NewRequest("POST", s.url+"/v1/completions",
		strings.NewReader(`{"model":"tiny-qwen3-f32","prompt":"hi","max_tokens":4000,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(auth[0], auth[1])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var busy []map[string]any
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if busy = slots(); processing(busy) == 1 && busy[0]["next_token"].(map[string]any)["n_decoded"].(float64) > 0 {
			break
		}
	}
	resp.Body.Close() // hang up: the request is aborted
	if processing(busy) != 1 {
		t.Fatalf("/slots during a request: %v", busy)
	}
	nt := busy[0]["next_token"].(map[string]any)
	if decoded, remain := nt["n_decoded"].(float64), nt["n_remain"].(float64); decoded < 1 || decoded+remain != 4000 {
		t.Errorf("running slot's next_token %v: want n_decoded >= 1 and n_decoded + n_remain = 4000", nt)
	}
	s.waitIdle(t)
	if ss := slots(); processing(ss) != 0 {
		t.Errorf("after the request: %d slots processing", processing(ss))
	}
}

// TestApplyTemplate: /apply-template renders what chat completions would
// prompt with, and needs no model name.
func TestApplyTemplate(t *testing.T) {
	s := start(t, "tiny-qwen3-f32.gguf", httpfront.Config{}, 1)
	status, doc := s.call(t, "POST", "/apply-template", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
	if diff := cmp.Diff([]any{200, want}, []any{status, doc["prompt"]}); diff != "" {
		t.Errorf("/apply-template (-want +got):\n%s", diff)
	}
}

// TestInfill: a model with FIM tokens is prompted prefix-suffix-middle, as
// llama.cpp lays it out.
func TestInfill(t *testing.T) {
	path := fimModel(t)
	s := startWith(t, instance.Options{Model: path, Threads: threads(t), MaxRunning: 1}, httpfront.Config{})
	tk := s.inst.Tokenizer
	pre, suf, mid, ok := tk.FIM()
	if !ok {
		t.Fatal("the FIM model has no FIM tokens")
	}
	doc := s.completion(t, "/infill", `{"input_prefix":"def add(a, b):\n","input_suffix":"\n\nprint(add(1, 2))","prompt":"    return","n_predict":4,"temperature":0}`)
	var ids []int32
	if tk.AddBOS() {
		ids = append(ids, tk.BOS())
	}
	ids = append(append(append(ids, pre), tk.Encode("def add(a, b):\n", false, false)...), suf)
	ids = append(append(append(ids, tk.Encode("\n\nprint(add(1, 2))", false, false)...), mid), tk.Encode("    return", false, false)...)
	got := map[string]any{"tokens_evaluated": doc["tokens_evaluated"], "stop": doc["stop"]}
	if diff := cmp.Diff(map[string]any{"tokens_evaluated": float64(len(ids)), "stop": true}, got); diff != "" {
		t.Errorf("/infill (-want +got):\n%s", diff)
	}
	// The same ids through /completion give the same text.
	b, _ := json.Marshal(map[string]any{"prompt": ids, "n_predict": 4, "temperature": 0})
	if want := s.completion(t, "/completion", string(b))["content"]; doc["content"] != want {
		t.Errorf("/infill content %q, /completion of its prompt ids %q", doc["content"], want)
	}
}

// fimModel writes tiny-qwen3 with three of its tokens named as the FIM
// prefix, suffix and middle tokens in the GGUF metadata.
func fimModel(t *testing.T) string {
	t.Helper()
	f, err := weights.Open(modelPath(t, "tiny-qwen3-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kvs := slices.Clone(f.KV)
	for i, key := range []string{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id"} {
		kvs = append(kvs, weights.KV{Key: key, Value: weights.U32(uint32(100 + i))})
	}
	var ts []*weights.Tensor
	for _, tt := range f.Tensors {
		ts = append(ts, &weights.Tensor{Name: tt.Name, Shape: tt.Shape, DType: tt.DType, Data: slices.Clone(tt.Data)})
	}
	var buf bytes.Buffer
	if err := weights.Write(&buf, 3, kvs, ts); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fim.gguf")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
