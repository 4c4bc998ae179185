package weights

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ContextLength is the model's training context: the GGUF metadata key
// <arch>.context_length, the one place it is read. A file that does not
// say gives an error wrapping ErrNotFound; each caller decides what that
// means (Info leaves it 0, the model config assumes 2048). A value above
// MaxContextLength is an error (checked on the uint64, which int would
// wrap).
func (f *File) ContextLength() (int, error) {
	key := f.Arch() + ".context_length"
	c, err := f.Uint(key)
	if err == nil && c > MaxContextLength {
		return 0, fmt.Errorf("%s = %d out of range [1, %d]", key, c, MaxContextLength)
	}
	return int(c), err
}

// MaxContextLength is the largest context length a model file may declare.
const MaxContextLength = 1 << 24

// Info are the facts of a model file that the engine, serve, bench,
// kv-eval and the HF writer report or size by, read once by File.Info.
// The cache shapes (KV layers and width, recurrent state) are the nodes'
// to say (engine.ModelInfo adds them).
type Info struct {
	Arch string
	// Name is general.name, or the file's name without its extension.
	Name string
	// ContextLength is the training context (File.ContextLength), in
	// [1, MaxContextLength]; 0 when the file does not say.
	ContextLength int
	// Layers is <arch>.block_count; 0 when the file does not say.
	Layers int
	// Vocab and Embed are token_embd.weight's rows and row length, the
	// vocabulary and the hidden size; 0 without that tensor.
	Vocab, Embed int
}

// Info reads the file's Info. A key that is present but of the wrong type
// or out of range is an error; a missing one leaves its field 0.
func (f *File) Info() (Info, error) {
	arch := f.Arch()
	info := Info{Arch: arch, Name: strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))}
	if name, err := f.String("general.name"); err == nil && name != "" {
		info.Name = name
	}
	var errs []error
	switch n, err := f.ContextLength(); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		errs = append(errs, err)
	case n == 0:
		errs = append(errs, fmt.Errorf("%s.context_length = 0 out of range [1, %d]", arch, MaxContextLength))
	default:
		info.ContextLength = n
	}
	switch n, err := f.Uint(arch + ".block_count"); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		errs = append(errs, err)
	case n > 1<<24:
		errs = append(errs, fmt.Errorf("%s.block_count = %d out of range", arch, n))
	default:
		info.Layers = int(n)
	}
	if t, err := f.Tensor("token_embd.weight"); err == nil {
		info.Vocab, info.Embed = t.Rows(), t.RowLen()
	}
	return info, errors.Join(errs...)
}
