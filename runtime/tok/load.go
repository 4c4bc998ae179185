package tok

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Load builds the tokenizer at path: a GGUF file (a model or a vocab-only
// file, recognized by its magic) through FromGGUF, or a Hugging Face
// tokenizer.json or a folder holding one through FromHF.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tok: %w", err)
	}
	if st.IsDir() {
		return FromHF(path)
	}
	gguf, err := isGGUF(path)
	if err != nil {
		return nil, err
	}
	if !gguf {
		return FromHF(path)
	}
	f, err := weights.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t, err := FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// isGGUF reports whether the file at path starts with the GGUF magic.
func isGGUF(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("tok: %w", err)
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, fmt.Errorf("tok: %s: %w", path, err)
	}
	return bytes.Equal(magic[:], []byte("GGUF")), nil
}
