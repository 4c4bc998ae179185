// Package wire holds the JSON shapes of the OpenAI-compatible API that
// both sides read: the server (httpfront) writes them, clients
// (suites/corpus) decode them, from ninfer or from llama-server. It
// imports nothing of ninfer.
package wire

// Usage is OpenAI's token accounting of a completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails breaks the prompt tokens down; ninfer always
	// sends it, llama-server does not (nil when decoded from it).
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails is OpenAI's breakdown of the prompt tokens:
// CachedTokens came from the prefix cache.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// Cached is the prompt tokens the prefix cache held (0 without details).
func (u *Usage) Cached() int {
	if u == nil || u.PromptTokensDetails == nil {
		return 0
	}
	return u.PromptTokensDetails.CachedTokens
}

// Timings are llama.cpp's per-response timings block (llama-server sends
// it, and so does ninfer).
type Timings struct {
	// CacheN is how many prompt tokens came from the prefix cache (their
	// prefill was skipped); PromptN counts the rest, as llama-server does.
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	// DraftN and DraftNAccepted are llama.cpp's speculative counts (draft
	// tokens verified, and accepted), summed over choices; absent when the
	// server does not speculate.
	DraftN         *int `json:"draft_n,omitempty"`
	DraftNAccepted *int `json:"draft_n_accepted,omitempty"`
	// VisionMS is the time the request's images took to decode and
	// encode (before the prefill); absent without images.
	VisionMS float64 `json:"vision_ms,omitempty"`
}
