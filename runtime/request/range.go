package request

import (
	"fmt"
	"math"
)

// Range is the one documented interval of a sampling parameter, which the
// HTTP front and the CLI both check against (docs/sampling.md).
type Range struct {
	// Name is the parameter's OpenAI-style name ("temperature", "top_p").
	Name string
	// Min and Max bound the interval; MinOpen excludes Min.
	Min, Max float64
	MinOpen  bool
}

// The sampling parameters' ranges: OpenAI's where OpenAI has one.
var (
	Temperature       = Range{Name: "temperature", Min: 0, Max: 2}
	TopP              = Range{Name: "top_p", Min: 0, Max: 1, MinOpen: true}
	MinP              = Range{Name: "min_p", Min: 0, Max: 1}
	PresencePenalty   = Range{Name: "presence_penalty", Min: -2, Max: 2}
	FrequencyPenalty  = Range{Name: "frequency_penalty", Min: -2, Max: 2}
	RepetitionPenalty = Range{Name: "repetition_penalty", Min: 0, Max: 10, MinOpen: true}
)

// String is the interval as written in messages: "[0, 2]", "(0, 1]".
func (r Range) String() string {
	open := "["
	if r.MinOpen {
		open = "("
	}
	return fmt.Sprintf("%s%g, %g]", open, r.Min, r.Max)
}

// Contains reports whether v lies in r (NaN never does).
func (r Range) Contains(v float64) bool {
	if math.IsNaN(v) || v > r.Max {
		return false
	}
	if r.MinOpen {
		return v > r.Min
	}
	return v >= r.Min
}
