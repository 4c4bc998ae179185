package wire

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Usage reads ninfer's usage (with prompt_tokens_details) and
// llama-server's (without: no details, Cached 0), and writes ninfer's back
// as it came.
func TestUsage(t *testing.T) {
	tests := []struct {
		name, doc  string
		want       Usage
		wantCached int
	}{
		{"ninfer", `{"prompt_tokens":5,"completion_tokens":8,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":4}}`,
			Usage{PromptTokens: 5, CompletionTokens: 8, TotalTokens: 13, PromptTokensDetails: &PromptTokensDetails{CachedTokens: 4}}, 4},
		{"llama-server", `{"completion_tokens":8,"prompt_tokens":5,"total_tokens":13}`,
			Usage{PromptTokens: 5, CompletionTokens: 8, TotalTokens: 13}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Usage
			if err := json.Unmarshal([]byte(tt.doc), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("decoded (-want +got):\n%s", diff)
			}
			if got.Cached() != tt.wantCached {
				t.Errorf("Cached() = %d, want %d", got.Cached(), tt.wantCached)
			}
			if tt.want.PromptTokensDetails != nil {
				out, err := json.Marshal(got)
				if err != nil || string(out) != tt.doc {
					t.Errorf("encoded %s (%v), want %s", out, err, tt.doc)
				}
			}
		})
	}
	if (*Usage)(nil).Cached() != 0 {
		t.Error("a missing usage has cached tokens")
	}
}
