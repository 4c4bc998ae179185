package vision

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/tok"
)

// goldenChunk is a chunk of a vision golden result as the file states it.
type goldenChunk struct {
	Type       string  `json:"type"`
	Text       string  `json:"text"`
	Tokens     []int32 `json:"tokens"`
	ImageIndex int     `json:"image_index"`
	NTokens    int     `json:"n_tokens"`
	GridTokens [2]int  `json:"grid_tokens"`
	PosStart   int     `json:"pos_start"`
	NPos       int     `json:"n_pos"`
}

// TestSplitPromptMatchesLlamaCpp splits every golden prompt with the tiny
// Qwen3.5-VL tokenizer and compares the chunks (texts, ids, image grids and
// positions), the prompt token count and the first generated position.
func TestSplitPromptMatchesLlamaCpp(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(goldenDir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Skipf("vision golden not available: %v", err)
	}
	var g struct {
		Model   string `json:"model"`
		Results []struct {
			ID         string        `json:"id"`
			Prompt     string        `json:"prompt"`
			NPromptTok int           `json:"n_prompt_tokens"`
			NPromptPos int           `json:"n_prompt_pos"`
			Chunks     []goldenChunk `json:"chunks"`
		} `json:"results"`
		MediaMarker string `json:"media_marker"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if g.MediaMarker != MediaMarker {
		t.Fatalf("golden media marker %q, want %q", g.MediaMarker, MediaMarker)
	}
	tk, err := tok.Load(filepath.Join(modelsDir, g.Model))
	if err != nil {
		t.Skipf("model not available: %v", err)
	}
	for _, r := range g.Results {
		t.Run(r.ID, func(t *testing.T) {
			var grids []Grid
			for _, c := range r.Chunks {
				if c.Type == "image" {
					grids = append(grids, Grid{NX: c.GridTokens[0], NY: c.GridTokens[1]})
				}
			}
			chunks, err := SplitPrompt(r.Prompt, grids, tk, true)
			if err != nil {
				t.Fatal(err)
			}
			var got []goldenChunk
			tokens := 0
			for _, c := range chunks {
				tokens += c.Len()
				gc := goldenChunk{Type: "text", Text: c.Text, Tokens: c.Tokens, NTokens: c.Len(), PosStart: c.PosStart, NPos: c.NPos}
				if c.Image >= 0 {
					gc = goldenChunk{Type: "image", ImageIndex: c.Image, NTokens: c.Grid.Tokens(),
						GridTokens: [2]int{c.Grid.NX, c.Grid.NY}, PosStart: c.PosStart, NPos: c.NPos}
				}
				got = append(got, gc)
			}
			if diff := cmp.Diff(r.Chunks, got); diff != "" {
				t.Errorf("chunks (-llama.cpp +ours):\n%s", diff)
			}
			last := chunks[len(chunks)-1]
			if diff := cmp.Diff([2]int{r.NPromptTok, r.NPromptPos}, [2]int{tokens, last.PosStart + last.NPos}); diff != "" {
				t.Errorf("prompt tokens, first generated position (-llama.cpp +ours):\n%s", diff)
			}
		})
	}
}

func TestSplitPromptRefusesMarkerCountMismatch(t *testing.T) {
	enc := encoderFunc(func(s string) []int32 { return []int32{int32(len(s))} })
	prompt := "a" + MediaMarker + "b" + MediaMarker
	_, err := SplitPrompt(prompt, []Grid{{3, 3}}, enc, false)
	if err == nil || !strings.Contains(err.Error(), "2 image markers for 1 images") {
		t.Errorf("SplitPrompt = %v, want an error naming both counts", err)
	}
}

// encoderFunc adapts a function to Encoder for tests.
type encoderFunc func(string) []int32

func (f encoderFunc) Encode(s string, _, _ bool) []int32 { return f(s) }
