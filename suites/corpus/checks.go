package corpus

import (
	"fmt"
	"strings"
)

// Check labels, each naming one failed check of a request.
const (
	LabelFailed           = "failed"            // transport, HTTP or stream error
	LabelNoUsage          = "usage_missing"     // no usage chunk
	LabelUsageMismatch    = "usage_mismatch"    // usage.completion_tokens != streamed tokens
	LabelTimingsMismatch  = "timings_mismatch"  // timings prompt_n/predicted_n != usage
	LabelFinishUnexpected = "finish_unexpected" // finish_reason neither stop nor length
	LabelLengthMismatch   = "length_mismatch"   // "length" before max_tokens, or more than max_tokens
	LabelRepetition       = "repetition"        // obvious repetition in the output
)

// Check runs the seed's performance-run checks on one result and sets its
// labels: execution failure, token accounting (usage against the streamed
// token count and the server's timings), termination reason, and obvious
// repetition. Labelled results stay in every statistic.
func Check(r *Result) {
	r.Labels = []string{}
	if r.Error != "" {
		r.Labels = append(r.Labels, LabelFailed)
		return
	}
	if r.Usage == nil {
		r.Labels = append(r.Labels, LabelNoUsage)
	} else {
		if r.Usage.CompletionTokens != r.StreamedTokens {
			r.Labels = append(r.Labels, LabelUsageMismatch)
		}
		if t := r.Timings; t != nil && (t.PredictedN != r.Usage.CompletionTokens || t.PromptN != r.Usage.PromptTokens) {
			r.Labels = append(r.Labels, LabelTimingsMismatch)
		}
		if (r.Finish == "length" && r.Usage.CompletionTokens != r.MaxTokens) || r.Usage.CompletionTokens > r.MaxTokens {
			r.Labels = append(r.Labels, LabelLengthMismatch)
		}
	}
	if r.Finish != "stop" && r.Finish != "length" {
		r.Labels = append(r.Labels, LabelFinishUnexpected)
	}
	if ok, _ := Repetitive(r.Text); ok {
		r.Labels = append(r.Labels, LabelRepetition)
	}
}

// Repetitive reports obvious repetition in text and why: its last words
// are one phrase of 1 to 16 words repeated at least 4 times in a row (4
// for one word, 3 for longer phrases), or, for 40 words or more, fewer
// than a third of its word trigrams are distinct.
func Repetitive(text string) (bool, string) {
	words := strings.Fields(text)
	for p := 1; p <= 16; p++ {
		reps := 3
		if p == 1 {
			reps = 4
		}
		n := p * reps
		if n > len(words) {
			break
		}
		tail := words[len(words)-n:]
		periodic := true
		for i := p; i < n && periodic; i++ {
			periodic = tail[i] == tail[i-p]
		}
		if periodic {
			return true, fmt.Sprintf("ends with %q repeated %d times", strings.Join(tail[:p], " "), reps)
		}
	}
	if len(words) >= 40 {
		seen := map[[3]string]bool{}
		for i := 2; i < len(words); i++ {
			seen[[3]string{words[i-2], words[i-1], words[i]}] = true
		}
		if total := len(words) - 2; len(seen)*3 < total {
			return true, fmt.Sprintf("%d distinct of %d word trigrams", len(seen), total)
		}
	}
	return false, ""
}
