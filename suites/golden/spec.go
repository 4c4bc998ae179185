package golden

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/request"
)

// SpecFile is a speculative golden (../shared/golden/spec-*.json):
// llama-server's greedy /completion of each prompt with a drafter
// (SpecArgs, e.g. --spec-type draft-mtp --spec-draft-n-max 3), its tokens
// (equal to plain decoding's) and how many tokens it drafted and accepted.
type SpecFile struct {
	Model    string     `json:"model"`
	SpecArgs []string   `json:"spec_args"`
	Banned   []int32    `json:"banned_token_ids"` // given a -inf logit bias
	Results  []SpecCase `json:"results"`
}

// SpecCase is one prompt of a SpecFile.
type SpecCase struct {
	ID          string  `json:"id"`
	Prompt      string  `json:"prompt"`
	TokensPlain []int32 `json:"tokens_plain"`
	DraftN      int     `json:"draft_n"`
	Accepted    int     `json:"draft_n_accepted"`
}

// LoadSpec reads a speculative golden.
func LoadSpec(path string) (*SpecFile, error) {
	var f SpecFile
	if err := readJSON(path, "speculative golden", &f); err != nil {
		return nil, err
	}
	if len(f.Results) == 0 {
		return nil, fmt.Errorf("%s: no results (not a speculative golden)", path)
	}
	return &f, nil
}

// DraftMax is the golden's --spec-draft-n-max: the drafts per step the
// graph's k must be set to (0 when the file does not say).
func (f *SpecFile) DraftMax() int {
	i := slices.Index(f.SpecArgs, "--spec-draft-n-max")
	if i < 0 || i+1 >= len(f.SpecArgs) {
		return 0
	}
	n, err := strconv.Atoi(f.SpecArgs[i+1])
	if err != nil {
		return 0
	}
	return n
}

// VerifySpec runs every prompt of f on in (a speculative graph at k =
// f.DraftMax(), one request at a time) and compares the tokens and the
// drafted and accepted counts with llama-server's, exactly.
func VerifySpec(ctx context.Context, in *instance.Instance, f *SpecFile) ([]Mismatch, error) {
	var bias map[int32]float32
	if len(f.Banned) > 0 {
		bias = map[int32]float32{}
		for _, id := range f.Banned {
			bias[id] = float32(math.Inf(-1))
		}
	}
	var out []Mismatch
	for _, c := range f.Results {
		res, err := in.Generate(ctx, engine.Request{Prompt: in.Tokenizer.Encode(c.Prompt, true, true),
			MaxTokens: len(c.TokensPlain), Sampling: request.Sampling{LogitBias: bias}}, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.ID, err)
		}
		if i := firstDiff(c.TokensPlain, res.IDs, max(len(c.TokensPlain), len(res.IDs))); i >= 0 {
			out = append(out, Mismatch{Case: c.ID, Detail: fmt.Sprintf("token %d: %v, llama-server %v", i, window(res.IDs, i), window(c.TokensPlain, i))})
			continue
		}
		if s := res.Stats.Speculative; s.Drafted != c.DraftN || s.Accepted != c.Accepted {
			out = append(out, Mismatch{Case: c.ID, Detail: fmt.Sprintf("drafted %d, accepted %d; llama-server drafted %d, accepted %d",
				s.Drafted, s.Accepted, c.DraftN, c.Accepted)})
		}
	}
	return out, nil
}
