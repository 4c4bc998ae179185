package vision_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/vision"
	"github.com/ninfer/ninfer-go/runtime/weights"
	"github.com/ninfer/ninfer-go/suites/golden"
)

// The shared goldens and models, beside the module root.
const (
	goldenDir = "../../../shared/golden"
	modelsDir = "../../../shared/models"
)

// parts returns the parts of a golden chat message whose content is a
// string or a list of text and image_url parts.
func parts(t *testing.T, m golden.VisionMessage) []vision.Part {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []vision.Part{{Text: s}}
	}
	var list []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &list); err != nil {
		t.Fatal(err)
	}
	out := make([]vision.Part, len(list))
	for i, p := range list {
		out[i] = vision.Part{Text: p.Text, Image: p.Type == "image_url"}
	}
	return out
}

// TestSplitPromptMatchesLlamaCpp renders every golden request's messages
// (JoinContent, then the model's chat template) and compares the prompt,
// then splits it with the tiny Qwen3.5-VL tokenizer and compares the chunks (texts, ids, image grids and
// positions), the prompt token count and the first generated position.
func TestSplitPromptMatchesLlamaCpp(t *testing.T) {
	g, err := golden.LoadVision(filepath.Join(goldenDir, "vision-tiny-qwen35.json"))
	if err != nil {
		t.Skipf("vision golden not available: %v", err)
	}
	if g.MediaMarker != vision.MediaMarker {
		t.Fatalf("golden media marker %q, want %q", g.MediaMarker, vision.MediaMarker)
	}
	f, err := weights.Open(filepath.Join(modelsDir, g.Model))
	if err != nil {
		t.Skipf("model not available: %v", err)
	}
	defer f.Close()
	tk, err := tok.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := tok.ChatTemplateFromGGUF(f, tk)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range g.Results {
		t.Run(r.ID, func(t *testing.T) {
			msgs := make([]tok.Message, len(r.Messages))
			for i, m := range r.Messages {
				msgs[i] = tok.Message{Role: m.Role, Content: vision.JoinContent(parts(t, m))}
			}
			rendered, err := tmpl.Render(msgs, tok.RenderOptions{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			if rendered != r.Prompt {
				t.Errorf("rendered prompt:\n got %q\nwant %q", rendered, r.Prompt)
			}
			var grids []vision.Grid
			for _, c := range r.Chunks {
				if c.Type == "image" {
					grids = append(grids, vision.Grid{NX: c.Grid[0], NY: c.Grid[1]})
				}
			}
			chunks, err := vision.SplitPrompt(r.Prompt, grids, tk, true)
			if err != nil {
				t.Fatal(err)
			}
			var got []golden.VisionChunk
			tokens := 0
			for _, c := range chunks {
				tokens += c.Len()
				gc := golden.VisionChunk{Type: "text", Text: c.Text, Tokens: c.Tokens, NTokens: c.Len(), PosStart: c.PosStart, NPos: c.NPos}
				if c.Image >= 0 {
					gc = golden.VisionChunk{Type: "image", ImageIndex: c.Image, NTokens: c.Grid.Tokens(),
						Grid: [2]int{c.Grid.NX, c.Grid.NY}, PosStart: c.PosStart, NPos: c.NPos}
				}
				got = append(got, gc)
			}
			// The tower's file name and checksums are nodes/vision's to check.
			notSplit := cmpopts.IgnoreFields(golden.VisionChunk{}, "Image", "EmbdStats", "EmbdFirst8", "EmbdLastRowFirst8")
			if diff := cmp.Diff(r.Chunks, got, notSplit); diff != "" {
				t.Errorf("chunks (-llama.cpp +ours):\n%s", diff)
			}
			last := chunks[len(chunks)-1]
			if diff := cmp.Diff([2]int{r.NPromptTokens, r.NPromptPos}, [2]int{tokens, last.PosStart + last.NPos}); diff != "" {
				t.Errorf("prompt tokens, first generated position (-llama.cpp +ours):\n%s", diff)
			}
		})
	}
}

func TestSplitPromptRefusesMarkerCountMismatch(t *testing.T) {
	enc := encoderFunc(func(s string) []int32 { return []int32{int32(len(s))} })
	prompt := "a" + vision.MediaMarker + "b" + vision.MediaMarker
	_, err := vision.SplitPrompt(prompt, []vision.Grid{{3, 3}}, enc, false)
	if err == nil || !strings.Contains(err.Error(), "2 image markers for 1 images") {
		t.Errorf("SplitPrompt = %v, want an error naming both counts", err)
	}
}

// encoderFunc adapts a function to Encoder for tests.
type encoderFunc func(string) []int32

func (f encoderFunc) Encode(s string, _, _ bool) []int32 { return f(s) }

func TestJoinContentKeepsNewlinesAwayFromImages(t *testing.T) {
	img, m := vision.Part{Image: true}, vision.MediaMarker
	tests := []struct {
		name  string
		parts []vision.Part
		want  string
	}{
		{"text parts are joined by newlines", []vision.Part{{Text: "a"}, {Text: "b"}}, "a\nb"},
		{"an image then text", []vision.Part{img, {Text: "a"}}, m + "a"},
		{"text then an image", []vision.Part{{Text: "a"}, img}, "a" + m},
		{"text around an image", []vision.Part{{Text: "a"}, img, {Text: "b"}, {Text: "c"}}, "a" + m + "b\nc"},
		{"two images", []vision.Part{img, img}, m + m},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, vision.JoinContent(tt.parts)); diff != "" {
				t.Errorf("JoinContent (-want +got):\n%s", diff)
			}
		})
	}
}
