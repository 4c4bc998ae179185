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

// pieceTokenizer is a toy tokenizer for vision.PromptOffsets: vision.VisionStart,
// vision.VisionEnd and "ab" are one token each, any other byte is a token.
type pieceTokenizer struct{ pieces []string }

func (p *pieceTokenizer) Encode(s string, _, _ bool) []int32 {
	var ids []int32
	for s != "" {
		n := 1
		for _, w := range []string{vision.VisionStart, vision.VisionEnd, "ab"} {
			if strings.HasPrefix(s, w) {
				n = len(w)
				break
			}
		}
		ids = append(ids, int32(len(p.pieces)))
		p.pieces, s = append(p.pieces, s[:n]), s[n:]
	}
	return ids
}

func (p *pieceTokenizer) TokenOffsets(ids []int32, text string, offsets []int) []int {
	var out []int
	at, next := 0, 0
	for k := 0; k <= len(ids) && next < len(offsets); k++ {
		for ; next < len(offsets) && offsets[next] <= at; next++ {
			if offsets[next] == at {
				out = append(out, k)
			}
		}
		if k < len(ids) {
			at += len(p.pieces[ids[k]])
		}
	}
	return out
}

// TestPromptOffsetsMapsBytesAcrossImages maps message ends of a rendered
// prompt with two images of 2 rows each to prompt ids. The ids:
//
//	0 "ab", 1 ".", 2 vision.VisionStart, 3-4 image 0, 5 vision.VisionEnd, 6 "c", 7 "d",
//	8 vision.VisionStart, 9-10 image 1, 11 vision.VisionEnd, 12 "e"; 13 in all.
//
// Prompt bytes: "ab." is 0-3, the first marker 3-14, "cd" 14-16, the
// second marker 16-27, "e" 27-28.
func TestPromptOffsetsMapsBytesAcrossImages(t *testing.T) {
	prompt := "ab." + vision.MediaMarker + "cd" + vision.MediaMarker + "e"
	tk := &pieceTokenizer{}
	chunks, err := vision.SplitPrompt(prompt, []vision.Grid{{2, 1}, {1, 2}}, tk, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		offsets []int
		want    []int
	}{
		{"prompt start", []int{0}, []int{0}},
		{"text before the images", []int{2}, []int{1}},
		{"inside a token: left out", []int{1}, nil},
		{"just before an image: before its vision.VisionStart", []int{3}, []int{2}},
		{"inside the image's marker: before the image", []int{4}, []int{2}},
		{"last byte of the marker: before the image", []int{13}, []int{2}},
		{"just after an image: after its vision.VisionEnd", []int{14}, []int{6}},
		{"text between the images", []int{15, 16}, []int{7, 8}},
		{"after the last image", []int{27, 28}, []int{12, 13}},
		{"a message holding an image, and its neighbours", []int{2, 3, 10, 16, 28}, []int{1, 2, 8, 13}},
		{"past the prompt", []int{29}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, vision.PromptOffsets(prompt, chunks, tc.offsets, tk)); diff != "" {
				t.Errorf("vision.PromptOffsets(%v) (-want +got):\n%s", tc.offsets, diff)
			}
		})
	}
	n := 0
	for _, c := range chunks {
		n += c.Len()
	}
	if n != 13 {
		t.Fatalf("the prompt has %d ids, want 13 (the test's layout is stale)", n)
	}

	plain, err := vision.SplitPrompt("abc", nil, tk, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, 2}, vision.PromptOffsets("abc", plain, []int{0, 1, 3}, tk)); diff != "" {
		t.Errorf("no images (-want +got):\n%s", diff)
	}
	if got := vision.PromptOffsets("xyz"+vision.MediaMarker, chunks, []int{1, 3}, tk); got != nil {
		t.Errorf("chunks of another prompt: %v, want none", got)
	}
}
