package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ninfer/ninfer-go/runtime/weights"
	"github.com/ninfer/ninfer-go/suites/golden"
)

// visionTolerance bounds the relative difference (against max(1, |v|)) of
// the image embeddings' checksums from llama.cpp's: the vision tower's
// (nodes/vision's TestEncodeMatchesLlamaCpp measures up to 6.7e-4, GELU
// inputs at an fp16 rounding boundary).
const visionTolerance = 2e-3

// logitTolerance bounds the absolute difference of the top logits of the
// first generated positions from llama.cpp's (logits of 30 to 60):
// measured at most 6.0e-4 (two_images; 2.5e-5 for text only). Turning
// image tokens by (w, h) instead of (h, w) moves them by 0.08 to 0.32 and
// fails while every greedy id stays the same.
const logitTolerance = 2e-3

// readVisionGolden reads vision-tiny-qwen35.json from the golden folder dir.
func readVisionGolden(t *testing.T, dir string) *golden.VisionFile {
	t.Helper()
	g, err := golden.LoadVision(filepath.Join(dir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRunImagesMatchLlamaCpp runs every case of the vision golden through
// `ninfer run --json --image ... --mmproj ...` and compares the prompt's
// chunks (text ids, each image's token count, grid and positions), the
// image embeddings' checksums and all 32 greedy ids; the text-only case
// also equals the plain graph's run without a tower.
func TestRunImagesMatchLlamaCpp(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden")
	g := readVisionGolden(t, dir)
	near := cmp.Comparer(func(a, b float64) bool {
		return math.Abs(a-b) <= visionTolerance*max(1, math.Abs(a), math.Abs(b))
	})
	ran := 0
	for _, r := range g.Results {
		if r.Prompt == "" {
			continue // a raw completion case
		}
		ran++
		t.Run(r.ID, func(t *testing.T) {
			args := []string{"run", "--json", "--model", model, "--mmproj", mmproj, "--prompt", r.Prompt,
				"--max-tokens", "32", "--temperature", "0", "--ignore-eos", "--threads", "2", "--top-logits", "5"}
			for _, img := range r.Images {
				args = append(args, "--image", filepath.Join(dir, "images", img))
			}
			code, stdout, stderr := runCLI(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var out struct {
				PromptIDs []int32              `json:"prompt_ids"`
				IDs       []int32              `json:"ids"`
				TopLogits [][][2]float64       `json:"top_logits"`
				Chunks    []golden.VisionChunk `json:"chunks"`
			}
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
			}
			if len(out.PromptIDs) != r.NPromptTokens {
				t.Errorf("%d prompt ids, llama.cpp has %d prompt tokens", len(out.PromptIDs), r.NPromptTokens)
			}
			if diff := cmp.Diff(r.Generated, out.IDs); diff != "" {
				t.Errorf("greedy ids (-llama.cpp +ours):\n%s", diff)
			}
			if n := len(r.TopLogits); n == 0 || len(out.TopLogits) < n {
				t.Fatalf("%d golden and %d reported top-logit positions", n, len(out.TopLogits))
			}
			if diff := cmp.Diff(r.TopLogits, out.TopLogits[:len(r.TopLogits)], cmp.Comparer(func(a, b float64) bool {
				return math.Abs(a-b) <= logitTolerance
			})); diff != "" {
				t.Errorf("top logits of the first positions (-llama.cpp +ours):\n%s", diff)
			}
			if len(r.Images) == 0 {
				plainIDs := runPlain(t, model, r.Prompt)
				if diff := cmp.Diff(plainIDs, out.IDs); diff != "" {
					t.Errorf("text-only ids through the vision graph (-plain graph +vision):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(r.Chunks, out.Chunks, near, cmpopts.IgnoreFields(golden.VisionChunk{}, "Text", "Image", "ImageIndex")); diff != "" {
				t.Errorf("prompt chunks (-llama.cpp +ours):\n%s", diff)
			}
		})
	}
	if ran < 6 {
		t.Errorf("ran %d golden cases, want at least 6", ran)
	}
}

// runPlain runs prompt through the plain graph without a tower: its 32
// greedy ids.
func runPlain(t *testing.T, model, prompt string) []int32 {
	t.Helper()
	code, stdout, stderr := runCLI("run", "--json", "--model", model, "--prompt", prompt,
		"--max-tokens", "32", "--temperature", "0", "--ignore-eos", "--threads", "2")
	if code != 0 {
		t.Fatalf("plain run: exit %d: %s", code, stderr)
	}
	var out struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	return out.IDs
}

// serveForTest runs `ninfer serve` with args on a free port until the test
// ends and returns its URL.
func serveForTest(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr lockedBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- serve(ctx, append([]string{"--port", "0", "--threads", "2"}, args...), &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exit:
		case <-time.After(20 * time.Second):
			t.Error("serve did not exit")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if line, ok := strings.CutPrefix(stdout.String(), serveReady); ok {
			return strings.Fields(line)[0]
		}
		select {
		case code := <-exit:
			t.Fatalf("serve exited %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready line; stderr:\n%s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// postJSON posts body to url and decodes the answer into out: the status.
func postJSON(t *testing.T, url string, body any, out any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %d, body not JSON: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// dataURL is the file at path as a data:image/png;base64 URL.
func dataURL(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
}

// chatAnswer is the part of a chat completion the vision tests read.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Timings struct {
		VisionMS float64 `json:"vision_ms"`
	} `json:"timings"`
}

// TestServeImagesMatchLlamaCpp sends every case of the vision golden to
// /v1/chat/completions as llama-server received it (images as data URLs)
// and compares the generated text (llama.cpp's 32 greedy tokens) and
// usage.prompt_tokens (image tokens included).
func TestServeImagesMatchLlamaCpp(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden")
	g := readVisionGolden(t, dir)
	serverURL := serveForTest(t, "--model", model, "--mmproj", mmproj, "--model-id", "vl")
	for _, r := range g.Results {
		if len(r.Messages) == 0 {
			continue
		}
		t.Run(r.ID, func(t *testing.T) {
			var msgs []map[string]any
			for _, m := range r.Messages {
				var parts []map[string]any
				if json.Unmarshal(m.Content, &parts) != nil {
					msgs = append(msgs, map[string]any{"role": m.Role, "content": m.Content})
					continue
				}
				for _, p := range parts {
					if iu, ok := p["image_url"].(map[string]any); ok {
						iu["url"] = dataURL(t, filepath.Join(dir, "images", iu["url"].(string)))
					}
				}
				msgs = append(msgs, map[string]any{"role": m.Role, "content": parts})
			}
			var out chatAnswer
			body := map[string]any{"model": "vl", "messages": msgs, "max_tokens": 32, "temperature": 0,
				"ignore_eos": true, "skip_special_tokens": false}
			if code := postJSON(t, serverURL+"/v1/chat/completions", body, &out); code != 200 || len(out.Choices) != 1 {
				t.Fatalf("status %d: %+v", code, out)
			}
			if diff := cmp.Diff(r.GeneratedText, out.Choices[0].Message.Content); diff != "" {
				t.Errorf("generated text (-llama.cpp +ours):\n%s", diff)
			}
			if out.Usage.PromptTokens != r.NPromptTokens {
				t.Errorf("usage.prompt_tokens %d, llama.cpp %d", out.Usage.PromptTokens, r.NPromptTokens)
			}
		})
	}
	// The same image through /v1/responses (input_image) and /v1/messages
	// (an Anthropic image block) gives what the chat API gives.
	sq64 := dataURL(t, filepath.Join(dir, "images", "sq64.png"))
	var chat chatAnswer
	postJSON(t, serverURL+"/v1/chat/completions", map[string]any{"model": "vl", "max_tokens": 16, "temperature": 0, "ignore_eos": true,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": sq64}},
			map[string]any{"type": "text", "text": "Describe this image."}}}}}, &chat)
	var resp struct {
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	if code := postJSON(t, serverURL+"/v1/responses", map[string]any{"model": "vl", "max_output_tokens": 16, "temperature": 0, "ignore_eos": true,
		"input": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "input_image", "image_url": sq64},
			map[string]any{"type": "input_text", "text": "Describe this image."}}}}}, &resp); code != 200 || len(resp.Output) == 0 || len(resp.Output[0].Content) == 0 {
		t.Fatalf("/v1/responses: %d %+v", code, resp)
	}
	var msg struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Usage struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	_, b64, _ := strings.Cut(sq64, ",")
	if code := postJSON(t, serverURL+"/v1/messages", map[string]any{"model": "vl", "max_tokens": 16, "temperature": 0, "ignore_eos": true,
		"messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64}},
			map[string]any{"type": "text", "text": "Describe this image."}}}}}, &msg); code != 200 || len(msg.Content) == 0 {
		t.Fatalf("/v1/messages: %d %+v", code, msg)
	}
	want := chat.Choices[0].Message.Content
	if diff := cmp.Diff([]string{want, want}, []string{resp.Output[0].Content[0].Text, msg.Content[0].Text}); diff != "" {
		t.Errorf("responses and messages text (-chat +[responses messages]):\n%s", diff)
	}
	// The messages request repeats the image and text of the requests
	// before it, so the hybrid prefix cache serves part of its prompt.
	if got := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens; resp.Usage.InputTokens != 39 || got != 39 {
		t.Errorf("input tokens: responses %d, messages %d (+ cached), want 39 (sq64_describe's)", resp.Usage.InputTokens, got)
	}
	if msg.Usage.CacheReadInputTokens == 0 {
		t.Error("the third request with the same image read nothing from the prefix cache")
	}
	if chat.Timings.VisionMS <= 0 {
		t.Errorf("timings.vision_ms %g, want the encoding's time", chat.Timings.VisionMS)
	}
	// 6 images in the golden cases, 3 above.
	const images = `ninfer:images_total{model_name="vl"} 9`
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(serverURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if strings.Contains(b.String(), images) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics has no %q:\n%s", images, b.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeImagePrefixCache: a second request with the same image reuses
// the cached prompt (the hybrid model's message-end checkpoint, past the
// image) and answers the same; one with another image reuses nothing past
// the text before its image. So it goes with a draft model (whose cache
// share follows the target's prefix hits), answering as plain does; eagle3
// and dflash answer as plain does with nothing cached (the engine turns
// prefix caching off for a plan that carries $prev values).
func TestServeImagePrefixCache(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden", "images")
	type answers struct{ first, again, other string }
	var plain answers
	var plainTogether []string // plain's answers to three requests at once
	graphs := append([]struct{ graph, drafter string }{{"plain", ""}}, drafterGraphs(t)...)
	for _, g := range graphs {
		t.Run(g.graph, func(t *testing.T) {
			args := []string{"--model", model, "--mmproj", mmproj, "--model-id", "vl", "--graph", g.graph}
			if g.drafter != "" {
				args = append(args, "--model", "draft="+g.drafter)
			}
			serverURL := serveForTest(t, args...)
			var err error
			request := func(image string) map[string]any {
				parts := []any{map[string]any{"type": "text", "text": "What is this?"}}
				if image != "" {
					parts = append([]any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL(t, filepath.Join(dir, image))}}}, parts...)
				}
				return map[string]any{"model": "vl", "max_tokens": 8, "temperature": 0, "ignore_eos": true, "messages": []any{
					map[string]any{"role": "system", "content": "You describe images."},
					map[string]any{"role": "user", "content": parts}}}
			}
			ask := func(image string) chatAnswer {
				t.Helper()
				var out chatAnswer
				if code := postJSON(t, serverURL+"/v1/chat/completions", request(image), &out); code != 200 || len(out.Choices) != 1 {
					t.Fatalf("status %d: %+v", code, out)
				}
				return out
			}
			first, again, other := ask("sq64.png"), ask("sq64.png"), ask("wide160x64.png")
			t.Logf("prompt/cached tokens: first %d/%d, same image %d/%d, other image %d/%d", first.Usage.PromptTokens, first.Usage.PromptTokensDetails.CachedTokens,
				again.Usage.PromptTokens, again.Usage.PromptTokensDetails.CachedTokens, other.Usage.PromptTokens, other.Usage.PromptTokensDetails.CachedTokens)
			// The image's rows and its vision_start/vision_end markers.
			imageTokens := first.Usage.PromptTokens - ask("").Usage.PromptTokens
			if carries := g.graph == "eagle3" || g.graph == "dflash"; carries {
				if c := []int{first.Usage.PromptTokensDetails.CachedTokens, again.Usage.PromptTokensDetails.CachedTokens, other.Usage.PromptTokensDetails.CachedTokens}; c[0]+c[1]+c[2] != 0 {
					t.Errorf("cached tokens %v, want none: prefix caching is off for a plan that carries $prev", c)
				}
			} else {
				if c := again.Usage.PromptTokensDetails.CachedTokens; first.Usage.PromptTokensDetails.CachedTokens != 0 || c <= imageTokens || c >= again.Usage.PromptTokens {
					t.Errorf("same image: %d of %d prompt tokens cached, want the image's rows and more, short of the whole prompt", c, again.Usage.PromptTokens)
				}
				if c := other.Usage.PromptTokensDetails.CachedTokens; c >= again.Usage.PromptTokensDetails.CachedTokens-imageTokens {
					t.Errorf("other image: %d prompt tokens cached, want none of the image's rows (the same image cached %d)", c, again.Usage.PromptTokensDetails.CachedTokens)
				}
			}
			got := answers{first.Choices[0].Message.Content, again.Choices[0].Message.Content, other.Choices[0].Message.Content}
			if g.graph == "plain" {
				plain = got
			}
			if diff := cmp.Diff(answers{plain.first, plain.first, plain.other}, got, cmp.AllowUnexported(answers{})); diff != "" {
				t.Errorf("answers (-plain, the same image twice +%s):\n%s", g.graph, diff)
			}
			// Three images at once: one step drafts for three sequences with
			// images (the draft model's cache holds a share of each).
			batch := []string{"sq64.png", "wide160x64.png", "tall75x100.png"}
			bodies := make([][]byte, len(batch))
			for i, img := range batch {
				if bodies[i], err = json.Marshal(request(img)); err != nil {
					t.Fatal(err)
				}
			}
			together, errs := make([]string, len(batch)), make([]error, len(batch))
			var wg sync.WaitGroup
			for i := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					together[i], errs[i] = chatContent(serverURL, bodies[i])
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if g.graph == "plain" {
				plainTogether = together
			}
			if diff := cmp.Diff(plainTogether, together); diff != "" {
				t.Errorf("three images at once, answers (-plain +%s):\n%s", g.graph, diff)
			}
		})
	}
}

// chatContent posts a chat completion body to serverURL and returns the
// answer's content (usable from any goroutine).
func chatContent(serverURL string, body []byte) (string, error) {
	resp, err := http.Post(serverURL+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out chatAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		return "", fmt.Errorf("status %d, %d choices, decoding: %v", resp.StatusCode, len(out.Choices), err)
	}
	return out.Choices[0].Message.Content, nil
}

// TestServeImageConversationHitsAtMessageEnds: two conversations that
// share a system message, a user message with an image and the reply, and
// differ in the last user message, share the hybrid model's checkpoint at
// the shared messages' end (the message ends mapped across the image,
// vision.PromptOffsets): the second reports cached at least the block
// before the end of the user message with the image, and answers as a
// server without the cache.
func TestServeImageConversationHitsAtMessageEnds(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	image := dataURL(t, filepath.Join(sharedPath(t, "golden", "images"), "sq64.png"))
	const block = 16 // the default KV block
	args := []string{"--model", model, "--mmproj", mmproj, "--model-id", "vl"}
	cached, uncached := serveForTest(t, args...), serveForTest(t, append(args, "--no-prefix-cache")...)
	shared := []any{
		map[string]any{"role": "system", "content": "You describe images for people who cannot see them, briefly and plainly."},
		map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": image}},
			map[string]any{"type": "text", "text": "What is this?"}}},
	}
	ask := func(serverURL string, messages []any) chatAnswer {
		t.Helper()
		var out chatAnswer
		body := map[string]any{"model": "vl", "max_tokens": 8, "temperature": 0, "ignore_eos": true, "messages": messages}
		if code := postJSON(t, serverURL+"/v1/chat/completions", body, &out); code != 200 || len(out.Choices) != 1 {
			t.Fatalf("status %d: %+v", code, out)
		}
		return out
	}
	conversation := func(last string) []any {
		return append(append([]any{}, shared...),
			map[string]any{"role": "assistant", "content": "A grey square."},
			map[string]any{"role": "user", "content": last})
	}
	// The user message with the image ends before its generation prompt,
	// "<|im_start|>assistant\n" and an empty think block, at most genPrompt tokens.
	const genPrompt = 8
	userEnd := ask(uncached, shared).Usage.PromptTokens - genPrompt
	first := ask(cached, conversation("Is it bright?"))
	second := ask(cached, conversation("How big is it, and what colour are its corners?"))
	t.Logf("prompt/cached tokens: first %d/%d, second %d/%d; the image message ends near %d",
		first.Usage.PromptTokens, first.Usage.PromptTokensDetails.CachedTokens, second.Usage.PromptTokens, second.Usage.PromptTokensDetails.CachedTokens, userEnd+genPrompt)
	if c, want := second.Usage.PromptTokensDetails.CachedTokens, userEnd/block*block; c < want || c >= second.Usage.PromptTokens {
		t.Errorf("second conversation: %d of %d prompt tokens cached, want at least %d (the block before the image message's end) and short of the whole prompt", c, second.Usage.PromptTokens, want)
	}
	if diff := cmp.Diff(ask(uncached, conversation("How big is it, and what colour are its corners?")).Choices[0].Message.Content, second.Choices[0].Message.Content); diff != "" {
		t.Errorf("second conversation, answer (-cache off +cache on):\n%s", diff)
	}
}

// Speculation with images: the graphs ngram and mtp, run with --mmproj
// (the tower wired in, instance.LoadPlanWithImages), give at temperature 0
// the ids the vision graph gives for the golden's image prompts, and draft
// and accept tokens doing so. tiny-qwen35-vl has
// no MTP block, so the test makes one with it (make_random_gguf.py's
// tiny-qwen35-vl with n_nextn 1); the MTP head reads each image row's
// hidden state with <|image_pad|>'s embedding, ngram drafts stop before
// image rows (speculative.Lookup).
func TestRunSpeculationWithImages(t *testing.T) {
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	tool := sharedPath(t, "tools", "make_random_gguf.py")
	dir := sharedPath(t, "golden")
	tmp := t.TempDir()
	model := filepath.Join(tmp, "tiny-qwen35-vl-mtp-f32.gguf")
	if out, err := exec.Command("/usr/bin/python3", tool, "--preset", "tiny-qwen35-vl", "--dtype", "f32",
		"--param", "n_nextn=1", "--param", "mtp_eye=1.0", "--param", "mtp_out_gain=0.3", "-o", model).CombinedOutput(); err != nil {
		t.Skipf("cannot make the model (python3 with numpy): %v\n%s", err, out)
	}
	g := readVisionGolden(t, dir)
	graphs := map[string]string{"ngram": "ngram", "mtp": "mtp"}
	accepted := map[string]int{}
	for _, r := range g.Results {
		if len(r.Images) == 0 {
			continue
		}
		run := func(graph string) (ids []int32, accepted int) {
			t.Helper()
			args := []string{"run", "--json", "--model", model, "--mmproj", mmproj, "--graph", graph, "--prompt", r.Prompt,
				"--max-tokens", "32", "--temperature", "0", "--ignore-eos", "--threads", "2"}
			for _, img := range r.Images {
				args = append(args, "--image", filepath.Join(dir, "images", img))
			}
			ids, accepted, _ = runSpeculative(t, args...)
			return ids, accepted
		}
		want, _ := run("vision")
		if len(want) != 32 {
			t.Fatalf("%s: vision gave %d ids, want 32", r.ID, len(want))
		}
		for name, graph := range graphs {
			got, n := run(graph)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %s with images (-vision +%s):\n%s", r.ID, name, name, diff)
			}
			accepted[name] += n
		}
	}
	for name := range graphs {
		if accepted[name] == 0 {
			t.Errorf("%s accepted no drafts over the image prompts: the test did not speculate", name)
		}
	}
}

// runSpeculative runs `ninfer run --json` with args: the generated ids and
// the speculative counters (zero without speculation).
func runSpeculative(t *testing.T, args ...string) (ids []int32, accepted, drafted int) {
	t.Helper()
	code, stdout, stderr := runCLI(args...)
	if code != 0 {
		t.Fatalf("run %v: exit %d: %s", args, code, stderr)
	}
	var out struct {
		IDs         []int32 `json:"ids"`
		Speculative *struct {
			Accepted int `json:"accepted_tokens"`
			Drafted  int `json:"drafted_tokens"`
		} `json:"speculative"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Speculative != nil {
		accepted, drafted = out.Speculative.Accepted, out.Speculative.Drafted
	}
	return out.IDs, accepted, drafted
}

// makeVisionDraftModel writes a draft model for tiny-qwen35-vl into a
// test folder: make_random_gguf.py's tiny-qwen3 (a dense model: 2 layers,
// 1-D RoPE, no tower) with the Qwen vision special tokens, so its
// vocabulary is tiny-qwen35-vl's (weights.SameVocabulary).
func makeVisionDraftModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-qwen3-vl-vocab-f32.gguf")
	if out, err := exec.Command("/usr/bin/python3", sharedPath(t, "tools", "make_random_gguf.py"), "--preset", "tiny-qwen3",
		"--param", "vision_specials=true", "-o", path).CombinedOutput(); err != nil {
		t.Skipf("cannot make the draft model (python3 with numpy): %v\n%s", err, out)
	}
	return path
}

// drafterGraphs are the speculative graphs whose drafter is a model of
// its own, each with a drafter that fits tiny-qwen35-vl: a draft model of
// its vocabulary, and the tiny-qwen3 EAGLE-3 and DFlash drafters (width
// 64, target layers 0 and 1, the output head's 2048 rows), which read
// tiny-qwen35-vl's tapped hidden states as they read tiny-qwen3's.
func drafterGraphs(t *testing.T) []struct{ graph, drafter string } {
	return []struct{ graph, drafter string }{
		{"draft", makeVisionDraftModel(t)},
		{"eagle3", sharedPath(t, "models", "tiny-qwen3-eagle3-f32.gguf")},
		{"dflash", sharedPath(t, "models", "tiny-qwen3-dflash-f32.gguf")},
	}
}

// Speculation with images through a drafter of its own: draft (a
// separate draft model fed <|image_pad|> at the image rows), eagle3 and
// dflash (reading the image rows' tapped hidden states beside
// <|image_pad|>'s embedding) give, at temperature 0, llama.cpp's 32
// greedy ids for every image prompt of the vision golden, and on an image
// the golden lacks (made here) the ids of plain with the tower; each of
// them drafts doing so.
func TestRunDrafterGraphsWithImages(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden")
	g := readVisionGolden(t, dir)
	stripes := filepath.Join(t.TempDir(), "stripes.png")
	writeStripes(t, stripes, 130, 70)
	run := func(t *testing.T, graph, drafter, prompt string, images ...string) (ids []int32, drafted int) {
		t.Helper()
		args := []string{"run", "--json", "--model", model, "--mmproj", mmproj, "--graph", graph, "--prompt", prompt,
			"--max-tokens", "32", "--temperature", "0", "--ignore-eos", "--threads", "2"}
		if drafter != "" {
			args = append(args, "--model", "draft="+drafter)
		}
		for _, img := range images {
			args = append(args, "--image", img)
		}
		ids, _, drafted = runSpeculative(t, args...)
		return ids, drafted
	}
	const stripesPrompt = "<|im_start|>user\n<__media__>What is this?<|im_end|>\n<|im_start|>assistant\n"
	plainStripes, _ := run(t, "plain", "", stripesPrompt, stripes)
	for _, d := range drafterGraphs(t) {
		t.Run(d.graph, func(t *testing.T) {
			drafted, cases := 0, 0
			for _, r := range g.Results {
				if len(r.Images) == 0 || r.Prompt == "" {
					continue
				}
				var images []string
				for _, img := range r.Images {
					images = append(images, filepath.Join(dir, "images", img))
				}
				got, n := run(t, d.graph, d.drafter, r.Prompt, images...)
				if diff := cmp.Diff(r.Generated, got); diff != "" {
					t.Errorf("%s: greedy ids (-llama.cpp +%s):\n%s", r.ID, d.graph, diff)
				}
				drafted, cases = drafted+n, cases+1
			}
			got, n := run(t, d.graph, d.drafter, stripesPrompt, stripes)
			if diff := cmp.Diff(plainStripes, got); diff != "" {
				t.Errorf("stripes.png: greedy ids (-plain +%s):\n%s", d.graph, diff)
			}
			t.Logf("%d golden image cases and stripes.png: %d tokens drafted", cases, drafted+n)
			if cases < 5 || drafted+n == 0 {
				t.Errorf("%d golden image cases, %d tokens drafted: the test did not speculate over images", cases, drafted+n)
			}
		})
	}
}

// writeStripes writes a w x h PNG of diagonal colour stripes to path.
func writeStripes(t *testing.T, path string, w, h int) {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			v := uint8((x + 2*y) * 7)
			img.Set(x, y, color.RGBA{v, 255 - v, uint8(x * 255 / w), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeHFVisionFolder writes the mmproj GGUF at path as the vision tower of
// a Hugging Face Qwen3.5 checkpoint folder in dir, inverting llama.cpp's
// converter: config.json (vision_config, text_config), preprocessor_config.json
// (image mean and std), model.safetensors with the model.visual.* tensors
// (the two Conv2D patch kernels joined into the Conv3D [E, 3, 2, p, p])
// beside a text-model, an lm_head and an MTP tensor that the tower leaves out.
func writeHFVisionFolder(t *testing.T, path, dir string) {
	t.Helper()
	config, pre, out := hfVisionParts(t, path)
	for _, name := range []string{"model.language_model.embed_tokens.weight", "lm_head.weight", "mtp.fc.weight"} {
		out = append(out, &weights.SafeTensor{Name: name, DType: "F32", Shape: []int{2, 4}, Data: make([]byte, 32)})
	}
	writeJSONFile(t, filepath.Join(dir, "config.json"), config)
	writeJSONFile(t, filepath.Join(dir, "preprocessor_config.json"), pre)
	writeSafetensorsFile(t, filepath.Join(dir, "model.safetensors"), out)
}

// writeJSONFile writes v as JSON to path.
func writeJSONFile(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeSafetensorsFile writes ts as a safetensors file at path.
func writeSafetensorsFile(t *testing.T, path string, ts []*weights.SafeTensor) {
	t.Helper()
	var buf bytes.Buffer
	if err := weights.WriteSafetensors(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// hfVisionParts inverts llama.cpp's converter for the mmproj GGUF at path:
// the config.json (vision_config, text_config's hidden size and epsilon)
// and preprocessor_config.json of a Qwen3.5 folder, and the model.visual.*
// tensors.
func hfVisionParts(t *testing.T, path string) (config, pre map[string]any, out []*weights.SafeTensor) {
	t.Helper()
	f, err := weights.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := func(key string) uint64 {
		v, err := f.Uint(key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	floats := func(key string) []float32 {
		v, err := f.Float32s(key)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	eps, err := f.Float("clip.vision.attention.layer_norm_epsilon")
	if err != nil {
		t.Fatal(err)
	}
	side := u("clip.vision.image_size") / u("clip.vision.patch_size")
	config = map[string]any{
		"architectures": []string{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
		"text_config": map[string]any{"hidden_size": u("clip.vision.projection_dim"), "rms_norm_eps": eps},
		"vision_config": map[string]any{"hidden_size": u("clip.vision.embedding_length"), "intermediate_size": u("clip.vision.feed_forward_length"),
			"depth": u("clip.vision.block_count"), "num_heads": u("clip.vision.attention.head_count"), "patch_size": u("clip.vision.patch_size"),
			"spatial_merge_size": u("clip.vision.spatial_merge_size"), "num_position_embeddings": side * side,
			"out_hidden_size": u("clip.vision.projection_dim"), "deepstack_visual_indexes": []int{}},
	}
	pre = map[string]any{"image_mean": floats("clip.vision.image_mean"), "image_std": floats("clip.vision.image_std")}
	hfNames := map[string]string{"ln1": "norm1", "attn_qkv": "attn.qkv", "attn_out": "attn.proj", "ln2": "norm2",
		"ffn_up": "mlp.linear_fc1", "ffn_down": "mlp.linear_fc2"}
	outside := map[string]string{"v.patch_embd.bias": "patch_embed.proj.bias", "v.position_embd.weight": "pos_embed.weight",
		"v.post_ln.weight": "merger.norm.weight", "v.post_ln.bias": "merger.norm.bias", "mm.0.weight": "merger.linear_fc1.weight",
		"mm.0.bias": "merger.linear_fc1.bias", "mm.2.weight": "merger.linear_fc2.weight", "mm.2.bias": "merger.linear_fc2.bias"}
	pytorch := func(t *weights.Tensor) []int { // ggml order reversed
		s := slices.Clone(t.Shape)
		slices.Reverse(s)
		return s
	}
	for _, gt := range f.Tensors {
		var name string
		switch rest, isBlock := strings.CutPrefix(gt.Name, "v.blk."); {
		case gt.Name == "v.patch_embd.weight.1":
			continue // joined with v.patch_embd.weight
		case gt.Name == "v.patch_embd.weight":
			second, err := f.Tensor("v.patch_embd.weight.1")
			if err != nil {
				t.Fatal(err)
			}
			p, e := gt.Shape[0], gt.Shape[3]
			plane := p * p * 4
			data := make([]byte, 0, 2*len(gt.Data))
			for ec := range e * 3 {
				data = append(data, gt.Data[ec*plane:(ec+1)*plane]...)
				data = append(data, second.Data[ec*plane:(ec+1)*plane]...)
			}
			out = append(out, &weights.SafeTensor{Name: "model.visual.patch_embed.proj.weight", DType: "F32", Shape: []int{e, 3, 2, p, p}, Data: data})
			continue
		case isBlock:
			layer, part, _ := strings.Cut(rest, ".")
			kind, suffix, _ := strings.Cut(part, ".")
			name = "blocks." + layer + "." + hfNames[kind] + "." + suffix
		default:
			name = outside[gt.Name]
		}
		if name == "" || strings.Contains(name, "..") {
			t.Fatalf("tensor %s has no Hugging Face name", gt.Name)
		}
		out = append(out, &weights.SafeTensor{Name: "model.visual." + name, DType: "F32", Shape: pytorch(gt), Data: bytes.Clone(gt.Data)}) // f is unmapped on return
	}
	return config, pre, out
}

// visionRun is the part of `ninfer run --json` the folder tests compare.
type visionRun struct {
	IDs    []int32              `json:"ids"`
	Chunks []golden.VisionChunk `json:"chunks"`
}

// runVisionCase runs the golden case r (images in dir/images) with
// `ninfer run --json` and the model arguments args: 32 greedy tokens.
func runVisionCase(t *testing.T, dir string, r golden.VisionResult, args ...string) visionRun {
	t.Helper()
	args = append(append([]string{"run", "--json"}, args...), "--prompt", r.Prompt, "--max-tokens", "32",
		"--temperature", "0", "--ignore-eos", "--threads", "2")
	for _, img := range r.Images {
		args = append(args, "--image", filepath.Join(dir, "images", img))
	}
	code, stdout, stderr := runCLI(args...)
	if code != 0 {
		t.Fatalf("%s: %v: exit %d: %s", r.ID, args, code, stderr)
	}
	var out visionRun
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// --mmproj DIR reads a Hugging Face checkpoint folder's vision tower as
// llama.cpp's converter would write it: the tiny mmproj written as a
// Qwen3.5 folder gives, for every golden image case, the same chunks
// (image embedding checksums to the last bit) and ids as the GGUF, and
// graph check --mmproj DIR accepts the vision graph.
func TestMMProjFromHFFolder(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden")
	folder := filepath.Join(t.TempDir(), "Qwen3.5-tiny")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	writeHFVisionFolder(t, mmproj, folder)
	cases := 0
	for _, r := range readVisionGolden(t, dir).Results {
		if len(r.Images) == 0 || r.Prompt == "" {
			continue
		}
		want := runVisionCase(t, dir, r, "--model", model, "--mmproj", mmproj)
		got := runVisionCase(t, dir, r, "--model", model, "--mmproj", folder)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-GGUF mmproj +folder):\n%s", r.ID, diff)
		}
		if diff := cmp.Diff(r.Generated, got.IDs); diff != "" {
			t.Errorf("%s: greedy ids (-llama.cpp +folder):\n%s", r.ID, diff)
		}
		cases++
	}
	if cases < 5 {
		t.Errorf("%d golden image cases, want 5", cases)
	}
	if code, stdout, stderr := runCLI("graph", "check", "--model", model, "--mmproj", folder, "vision"); code != 0 || !strings.Contains(stdout, "vision: ok") {
		t.Errorf("graph check --mmproj DIR: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// --model DIR reads a Qwen3.5 checkpoint folder's hybrid text model and
// opens its vision tower with no --mmproj: tiny-qwen35-vl and its mmproj
// written as one folder (text shards from `convert --to hf`, the tower in a
// shard of its own that the index names) give, for every golden prompt
// (text-only included), the GGUF pair's chunks (image embedding checksums
// to the last bit) and ids, which are llama.cpp's.
func TestModelFromHFQwen35Folder(t *testing.T) {
	model := sharedPath(t, "models", "tiny-qwen35-vl-f32.gguf")
	mmproj := sharedPath(t, "models", "tiny-qwen35-mmproj-f32.gguf")
	dir := sharedPath(t, "golden")
	folder := filepath.Join(t.TempDir(), "Qwen3.5-tiny")
	if code, stdout, stderr := runCLI("convert", "--model", model, "--to", "hf", "--out", folder, "--shard-bytes", "200000"); code != 0 {
		t.Fatalf("convert: exit %d: %s%s", code, stdout, stderr)
	}
	config, pre, tower := hfVisionParts(t, mmproj)
	readJSON := func(name string) map[string]any {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(folder, name))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	cfg := readJSON(weights.HFConfigFile)
	if got, want := cfg["text_config"].(map[string]any)["hidden_size"], float64(config["text_config"].(map[string]any)["hidden_size"].(uint64)); got != want {
		t.Fatalf("text hidden_size %v, the tower projects to %v", got, want)
	}
	cfg["vision_config"] = config["vision_config"]
	writeJSONFile(t, filepath.Join(folder, weights.HFConfigFile), cfg)
	writeJSONFile(t, filepath.Join(folder, weights.HFPreprocessorFile), pre)
	writeSafetensorsFile(t, filepath.Join(folder, "model-visual.safetensors"), tower)
	index := readJSON(weights.HFIndexFile)
	for _, st := range tower {
		index["weight_map"].(map[string]any)[st.Name] = "model-visual.safetensors"
	}
	writeJSONFile(t, filepath.Join(folder, weights.HFIndexFile), index)

	cases := 0
	for _, r := range readVisionGolden(t, dir).Results {
		if r.Prompt == "" {
			continue
		}
		want := runVisionCase(t, dir, r, "--model", model, "--mmproj", mmproj)
		got := runVisionCase(t, dir, r, "--model", folder)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: (-GGUF model and mmproj +folder):\n%s", r.ID, diff)
		}
		if diff := cmp.Diff(r.Generated, got.IDs); diff != "" {
			t.Errorf("%s: greedy ids (-llama.cpp +folder):\n%s", r.ID, diff)
		}
		cases++
	}
	if cases < 6 {
		t.Errorf("%d golden cases, want the 5 image prompts and the text-only one", cases)
	}
}
