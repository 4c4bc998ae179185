package golden

import (
	"encoding/json"
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/vision"
)

// VisionFile is the vision golden (../shared/golden/vision-tiny-qwen35.json):
// llama.cpp's (mtmd) run of each prompt with images on a model and its
// mmproj: the prompt's chunks, the greedy tokens and text, and the top
// logits of the first positions.
type VisionFile struct {
	Model       string         `json:"model"`
	MMProj      string         `json:"mmproj"`
	MediaMarker string         `json:"media_marker"` // the image placeholder in Prompt
	Results     []VisionResult `json:"results"`
	// Embeddings holds the whole projector output of some images, by file
	// name: [n_tokens * n_embd] values.
	Embeddings map[string]struct {
		Values []float64 `json:"values"`
	} `json:"image_embeddings"`
}

// VisionResult is one case of a VisionFile. A case without Messages is a
// raw completion of Prompt; a case without Prompt has only Messages.
type VisionResult struct {
	ID            string          `json:"id"`
	Messages      []VisionMessage `json:"request_messages"` // as llama-server's /v1/chat/completions received them
	Prompt        string          `json:"prompt"`           // the rendered prompt, one MediaMarker an image
	Images        []string        `json:"images"`           // file names under the golden folder's images/
	NPromptTokens int             `json:"n_prompt_tokens"`  // image tokens included
	NPromptPos    int             `json:"n_prompt_pos"`
	Chunks        []VisionChunk   `json:"chunks"`
	Generated     []int32         `json:"generated_tokens"`
	GeneratedText string          `json:"generated_text"`
	TopLogits     [][][2]float64  `json:"top_logits"` // [position][rank] (id, logit)
}

// VisionMessage is an OpenAI chat message: Content is a string or a list
// of text and image_url parts (the url a file name under images/).
type VisionMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// VisionChunk is a prompt chunk: a text's ids, or an image's token count,
// grid, positions and embedding checksums (`ninfer run --json` reports
// chunks in the same fields, less Text and Image; its text chunks'
// image_index is -1 where the golden's is absent).
type VisionChunk struct {
	Type              string        `json:"type"` // "text" or "image"
	Text              string        `json:"text"`
	Tokens            []int32       `json:"tokens"`
	Image             string        `json:"image"` // file name
	ImageIndex        int           `json:"image_index"`
	NTokens           int           `json:"n_tokens"`
	Grid              [2]int        `json:"grid_tokens"` // [nx, ny]
	PosStart          int           `json:"pos_start"`
	NPos              int           `json:"n_pos"`
	EmbdStats         *vision.Stats `json:"embd_stats"`
	EmbdFirst8        []float64     `json:"embd_first8"`          // of the first image token
	EmbdLastRowFirst8 []float64     `json:"embd_last_row_first8"` // of the last image token
}

// LoadVision reads a vision golden.
func LoadVision(path string) (*VisionFile, error) {
	var f VisionFile
	if err := readJSON(path, "vision golden", &f); err != nil {
		return nil, err
	}
	if len(f.Results) == 0 || f.MMProj == "" {
		return nil, fmt.Errorf("%s: no results or no mmproj (not a vision golden)", path)
	}
	return &f, nil
}
