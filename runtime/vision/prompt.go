package vision

import (
	"errors"
	"fmt"
	"strings"
)

// MediaMarker is the text that stands for one image in a rendered prompt
// (llama.cpp's default media marker).
const MediaMarker = "<__media__>"

// Qwen3-VL's image delimiters: each image's tokens sit between them.
const (
	VisionStart = "<|vision_start|>"
	VisionEnd   = "<|vision_end|>"
	// ImagePad is the token an image's rows hold in a prompt's ids
	// (their embeddings are the tower's, whatever the id).
	ImagePad = "<|image_pad|>"
)

// Part is one content part of a chat message: text, or an image (which the
// rendered prompt holds as a MediaMarker).
type Part struct {
	Text  string
	Image bool
}

// JoinContent joins a message's content parts into the string a chat
// template sees, as llama-server does: text parts separated by "\n", each
// image as MediaMarker with no "\n" directly before or after it.
func JoinContent(parts []Part) string {
	var b strings.Builder
	lastWasImage := true // no separator before the first part
	for _, p := range parts {
		switch {
		case p.Image:
			b.WriteString(MediaMarker)
		case !lastWasImage:
			b.WriteString("\n")
			fallthrough
		default:
			b.WriteString(p.Text)
		}
		lastWasImage = p.Image
	}
	return b.String()
}

// Encoder tokenizes text; *tok.Tokenizer satisfies it.
type Encoder interface {
	Encode(text string, addSpecial, parseSpecial bool) []int32
}

// Chunk is one piece of a multimodal prompt in evaluation order: text
// tokens, or the image tokens of one image.
type Chunk struct {
	// Image is the index of the chunk's image in the request, or -1 for a
	// text chunk.
	Image int
	// Text and Tokens are a text chunk's text and ids.
	Text   string
	Tokens []int32
	// Grid is an image chunk's token grid.
	Grid Grid
	// PosStart is the chunk's first position; NPos how many positions it
	// takes (len(Tokens) for text, Grid.Positions() for an image).
	PosStart, NPos int
}

// Len returns the number of prompt tokens of the chunk.
func (c Chunk) Len() int {
	if c.Image < 0 {
		return len(c.Tokens)
	}
	return c.Grid.Tokens()
}

// ErrMarkerCount is SplitPrompt's error when the prompt's markers are not
// one per image (a chat template that drops or repeats an image's place).
var ErrMarkerCount = errors.New("vision: image markers do not match the images")

// SplitPrompt cuts a rendered prompt at each MediaMarker into chunks as
// llama.cpp's mtmd tokenizer does for Qwen3-VL: every text piece is
// tokenized on its own (special tokens added to the first piece only,
// special-token text parsed), VisionStart ends the text before an image and
// VisionEnd starts the text after it (each tokenized on its own), and an
// image takes grids[i].Positions() positions. The prompt must hold exactly
// len(grids) markers.
func SplitPrompt(prompt string, grids []Grid, enc Encoder, addSpecial bool) ([]Chunk, error) {
	parts := strings.Split(prompt, MediaMarker)
	if n := len(parts) - 1; n != len(grids) {
		return nil, fmt.Errorf("%w: the prompt holds %d image markers for %d images", ErrMarkerCount, n, len(grids))
	}
	var chunks []Chunk
	pos := 0
	text := Chunk{Image: -1}
	first := true // special tokens (BOS) go with the first piece only
	addText := func(s string) {
		text.Text += s
		text.Tokens = append(text.Tokens, enc.Encode(s, addSpecial && first, true)...)
		first = false
	}
	flush := func() {
		if len(text.Tokens) > 0 {
			text.PosStart, text.NPos = pos, len(text.Tokens)
			pos += text.NPos
			chunks = append(chunks, text)
		}
		text = Chunk{Image: -1}
	}
	for i, part := range parts {
		if i > 0 {
			addText(VisionEnd)
		}
		addText(part)
		if i == len(grids) {
			break
		}
		addText(VisionStart)
		flush()
		g := grids[i]
		chunks = append(chunks, Chunk{Image: i, Grid: g, PosStart: pos, NPos: g.Positions()})
		pos += g.Positions()
	}
	flush()
	return chunks, nil
}

// ImageError is an error of one of a request's images (a corrupt or
// unsupported file, one over the limits): the caller's fault, Index
// counting the request's images from 0.
type ImageError struct {
	Index int
	Err   error
}

func (e *ImageError) Error() string { return fmt.Sprintf("image %d: %v", e.Index, e.Err) }
func (e *ImageError) Unwrap() error { return e.Err }

// TokenMapper maps byte offsets into a text to offsets into its token ids
// (tok.Tokenizer.TokenOffsets).
type TokenMapper interface {
	TokenOffsets(ids []int32, text string, offsets []int) []int
}

// PromptOffsets maps byte offsets into prompt (ascending), the rendered
// prompt SplitPrompt cut into chunks, to offsets into the prompt's ids
// (each text chunk's tokens, then Grid.Tokens() rows per image): the
// number of leading ids that spell prompt[:offset], an image's
// VisionStart, rows and VisionEnd standing for its marker. An offset
// inside an image's marker maps to where the text before the image ends,
// before its VisionStart; one inside a token is left out. The result is
// ascending without repeats; chunks that are not SplitPrompt's for prompt
// give none past the first text that disagrees.
func PromptOffsets(prompt string, chunks []Chunk, offsets []int, tm TokenMapper) []int {
	parts := strings.Split(prompt, MediaMarker)
	var out []int
	base, ci, next := 0, 0, 0 // ids before chunk ci; the next offset to map
	partStart := 0            // prompt bytes before parts[i]
	for i, part := range parts {
		for ci < len(chunks) && chunks[ci].Image >= 0 {
			base += chunks[ci].Len()
			ci++
		}
		if ci == len(chunks) {
			break
		}
		lead, partEnd := "", partStart+len(part)
		if i > 0 {
			lead = VisionEnd
		}
		spanEnd := partEnd // offsets up to here belong to this part
		if i < len(parts)-1 {
			spanEnd += len(MediaMarker) - 1
		}
		var local []int // offsets into the chunk's text
		for ; next < len(offsets) && offsets[next] <= spanEnd; next++ {
			if o := offsets[next]; o >= partStart {
				local = append(local, len(lead)+min(o, partEnd)-partStart)
			}
		}
		c := chunks[ci]
		if !strings.HasPrefix(c.Text, lead+part) {
			break
		}
		for _, k := range tm.TokenOffsets(c.Tokens, c.Text, local) {
			if len(out) == 0 || base+k > out[len(out)-1] {
				out = append(out, base+k)
			}
		}
		base += c.Len()
		ci++
		partStart = partEnd + len(MediaMarker)
	}
	return out
}
