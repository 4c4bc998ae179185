package corpus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/ninfer/ninfer-go/httpfront/wire"
)

// Sampling are the sampling parameters every request sends.
type Sampling struct {
	Temperature      float64 `json:"temperature"`
	TopP             float64 `json:"top_p"`
	TopK             int     `json:"top_k"`
	MinP             float64 `json:"min_p"`
	PresencePenalty  float64 `json:"presence_penalty"`
	FrequencyPenalty float64 `json:"frequency_penalty"`
}

// SeedSampling is the seed's stochastic sampling: temperature 0.6, top-p
// 0.95, top-k 20, min-p 0, presence penalty 1.0, frequency penalty 0.
func SeedSampling() Sampling {
	return Sampling{Temperature: 0.6, TopP: 0.95, TopK: 20, PresencePenalty: 1.0}
}

// Greedy is exact argmax sampling.
func Greedy() Sampling { return Sampling{Temperature: 0, TopP: 1} }

// Client sends corpus requests to an OpenAI-compatible server, streaming
// (SSE, stream_options.include_usage) with per-token logprobs so that the
// streamed tokens can be counted exactly against usage.
type Client struct {
	BaseURL  string // "http://127.0.0.1:8080"
	Model    string
	Chat     bool // /v1/chat/completions (messages) or /v1/completions (prompt)
	Sampling Sampling
	HTTP     *http.Client
}

// Cached is the prompt tokens the server reports it reused from its
// prefix cache: usage.prompt_tokens_details.cached_tokens, else the
// timings' cache_n (llama-server reports only that); 0 when neither.
func (r *Result) Cached() int {
	if r.Usage != nil && r.Usage.PromptTokensDetails != nil {
		return r.Usage.PromptTokensDetails.CachedTokens
	}
	if r.Timings != nil {
		return r.Timings.CacheN
	}
	return 0
}

// Result is one request's measurement. Times are seconds; Start, FirstToken
// and End are offsets from the release of the workers.
type Result struct {
	Request
	Worker     int     `json:"worker"`
	Start      float64 `json:"start_s"`
	FirstToken float64 `json:"first_token_s"` // first chunk with content or a token
	End        float64 `json:"end_s"`         // the whole response read
	TTFT       float64 `json:"ttft_s"`        // FirstToken - Start
	E2E        float64 `json:"e2e_s"`         // End - Start
	// ITL are the gaps between successive token-bearing chunks.
	ITL []float64 `json:"itl_s"`
	// StreamedTokens counts the per-token logprob entries streamed.
	StreamedTokens int           `json:"streamed_tokens"`
	Chunks         int           `json:"chunks"` // token-bearing chunks
	Usage          *wire.Usage   `json:"usage"`
	Timings        *wire.Timings `json:"timings"`
	Finish         string        `json:"finish_reason"`
	Text           string        `json:"text"`
	Status         int           `json:"http_status"`
	Error          string        `json:"error,omitempty"`
	// Labels name the checks this request failed (see Check).
	Labels []string `json:"labels"`
}

// TPOT is the client's time per output token after the first:
// (E2E - TTFT) / (completion tokens - 1); false with fewer than two tokens.
func (r *Result) TPOT() (float64, bool) {
	if r.Usage == nil || r.Usage.CompletionTokens < 2 {
		return 0, false
	}
	return (r.E2E - r.TTFT) / float64(r.Usage.CompletionTokens-1), true
}

// body is the request document.
func (c *Client) body(r Request) ([]byte, string) {
	doc := map[string]any{
		"model": c.Model, "max_tokens": r.MaxTokens, "stream": true,
		"stream_options": map[string]any{"include_usage": true}, "seed": r.Seed,
		"temperature": c.Sampling.Temperature, "top_p": c.Sampling.TopP, "top_k": c.Sampling.TopK,
		"min_p": c.Sampling.MinP, "presence_penalty": c.Sampling.PresencePenalty,
		"frequency_penalty": c.Sampling.FrequencyPenalty,
	}
	path := "/v1/completions"
	if c.Chat {
		path = "/v1/chat/completions"
		doc["messages"] = []Message{{Role: "user", Content: r.Prompt}}
		if r.Messages != nil {
			doc["messages"] = r.Messages
		}
		doc["logprobs"] = true
	} else {
		doc["prompt"] = r.Prompt
		doc["logprobs"] = 0
	}
	b, _ := json.Marshal(doc)
	return b, path
}

// chunk is the union of the chat and text streaming documents' fields the
// client reads.
type chunk struct {
	Choices []struct {
		Delta *struct {
			Content *string `json:"content"`
		} `json:"delta"`
		Text     *string `json:"text"`
		Logprobs *struct {
			Content []json.RawMessage `json:"content"` // chat
			Tokens  []string          `json:"tokens"`  // completions
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage   *wire.Usage   `json:"usage"`
	Timings *wire.Timings `json:"timings"`
	Error   *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Send runs one request and measures it against release, the instant the
// workers were released. Transport and protocol failures are recorded in
// Result.Error, never returned.
func (c *Client) Send(ctx context.Context, r Request, release time.Time) Result {
	res := Result{Request: r, Labels: []string{}}
	since := func() float64 { return time.Since(release).Seconds() }
	body, path := c.body(r)
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		res.Error = err.Error()
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	// Marks the POST as safe to resend, so that net/http retries it on a
	// fresh connection when the kept-alive one it picked dies before any
	// response byte (llama-server closes idle connections between
	// requests); once a response has begun nothing is resent.
	req.Header.Set("X-Idempotency-Key", fmt.Sprintf("%s-%d-%d", r.Fixture, r.Seed, time.Now().UnixNano()))
	res.Start = since()
	resp, err := hc.Do(req)
	if err != nil {
		res.Error, res.End = err.Error(), since()
		res.E2E = res.End - res.Start
		return res
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		res.Error, res.End = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(msg))), since()
		res.E2E = res.End - res.Start
		return res
	}
	var text strings.Builder
	last := 0.0
	done := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue // blank separators, comments
		}
		if data == "[DONE]" {
			done = true
			break
		}
		now := since()
		var ch chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			res.Error = fmt.Sprintf("bad chunk %q: %v", data, err)
			break
		}
		if ch.Error != nil {
			res.Error = "stream error: " + ch.Error.Message
			break
		}
		if ch.Usage != nil {
			res.Usage = ch.Usage
		}
		if ch.Timings != nil {
			res.Timings = ch.Timings
		}
		for _, choice := range ch.Choices {
			tokens, content := 0, ""
			if choice.Logprobs != nil {
				tokens = len(choice.Logprobs.Content) + len(choice.Logprobs.Tokens)
			}
			if choice.Delta != nil && choice.Delta.Content != nil {
				content = *choice.Delta.Content
			} else if choice.Text != nil {
				content = *choice.Text
			}
			if choice.FinishReason != nil {
				res.Finish = *choice.FinishReason
			}
			if tokens == 0 && content == "" {
				continue // the role chunk, the finish chunk
			}
			res.StreamedTokens += tokens
			text.WriteString(content)
			res.Chunks++
			if res.Chunks == 1 {
				res.FirstToken = now
			} else {
				res.ITL = append(res.ITL, now-last)
			}
			last = now
		}
	}
	if err := sc.Err(); err != nil && res.Error == "" {
		res.Error = "read: " + err.Error()
	}
	if !done && res.Error == "" {
		res.Error = "stream ended without [DONE]"
	}
	res.End = since()
	res.E2E = res.End - res.Start
	if res.Chunks > 0 {
		res.TTFT = res.FirstToken - res.Start
	}
	res.Text = text.String()
	return res
}
