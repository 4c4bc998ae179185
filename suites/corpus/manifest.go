// Package corpus is the serving-corpus runner of ../shared/seeds/000_*: a
// fixture manifest (fixtures.json), the fixed shuffled send order, a
// streaming OpenAI-API client, C persistent workers per concurrency point,
// and the report (corpus and phase tables, client latency percentiles,
// checks, PNG plots). Starting the server for each point is the caller's
// job (`ninfer corpus` starts a fresh `ninfer serve`).
package corpus

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
)

// Fixture is one prompt of the corpus.
type Fixture struct {
	ID        string `json:"id"`
	Category  string `json:"category"` // Code, Story, Translation, Structured, Reasoning
	Prompt    string `json:"prompt"`
	MaxTokens int    `json:"max_tokens"` // output budget; actual lengths are measurements
}

// Manifest is a fixture set with its seeds and send-order shuffle seed.
type Manifest struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Seeds       []uint64  `json:"seeds"`        // every fixture runs once per seed
	ShuffleSeed uint64    `json:"shuffle_seed"` // the send order's shuffle
	Fixtures    []Fixture `json:"fixtures"`
}

//go:embed fixtures.json
var builtin []byte

// Builtin is the bundled manifest, fixtures.json.
func Builtin() (*Manifest, error) { return parseManifest(builtin, "suites/corpus/fixtures.json") }

// LoadManifest reads a manifest file.
func LoadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseManifest(data, path)
}

func parseManifest(data []byte, name string) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	if len(m.Seeds) == 0 {
		errs = append(errs, fmt.Errorf("%s: no seeds", name))
	}
	if len(m.Fixtures) == 0 {
		errs = append(errs, fmt.Errorf("%s: no fixtures", name))
	}
	ids := map[string]bool{}
	for i, f := range m.Fixtures {
		switch {
		case f.ID == "" || ids[f.ID]:
			errs = append(errs, fmt.Errorf("%s: fixture %d: missing or duplicate id %q", name, i, f.ID))
		case f.Category == "" || f.Prompt == "":
			errs = append(errs, fmt.Errorf("%s: fixture %s: category and prompt are required", name, f.ID))
		case f.MaxTokens < 1:
			errs = append(errs, fmt.Errorf("%s: fixture %s: max_tokens %d < 1", name, f.ID, f.MaxTokens))
		}
		ids[f.ID] = true
	}
	return &m, errors.Join(errs...)
}

// Request is one request of the corpus: a fixture with a seed.
type Request struct {
	Index     int    `json:"index"` // position in the send order
	Fixture   string `json:"fixture"`
	Category  string `json:"category"`
	Seed      uint64 `json:"seed"`
	Prompt    string `json:"-"`
	MaxTokens int    `json:"max_tokens"`
	// Messages, when set, are a chat request's whole conversation
	// (Prompt is then unused).
	Messages []Message `json:"-"`
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// SendOrder expands every fixture with every seed (fixture-major) and
// shuffles the list once with the manifest's shuffle seed (Fisher-Yates
// driven by PCG(shuffle_seed, 0)). The order is the same at every
// concurrency; Index is the position in it.
func (m *Manifest) SendOrder() []Request {
	var rs []Request
	for _, f := range m.Fixtures {
		for _, s := range m.Seeds {
			rs = append(rs, Request{Fixture: f.ID, Category: f.Category, Seed: s, Prompt: f.Prompt, MaxTokens: f.MaxTokens})
		}
	}
	rng := rand.New(rand.NewPCG(m.ShuffleSeed, 0))
	rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	for i := range rs {
		rs[i].Index = i
	}
	return rs
}

// Categories lists the manifest's categories in first-appearance order.
func (m *Manifest) Categories() []string {
	var cs []string
	seen := map[string]bool{}
	for _, f := range m.Fixtures {
		if !seen[f.Category] {
			seen[f.Category] = true
			cs = append(cs, f.Category)
		}
	}
	return cs
}
