package weights

// ContextLength is the model's training context: the GGUF metadata key
// <arch>.context_length, the one place it is read. A file that does not
// say gives an error wrapping ErrNotFound; each caller decides what that
// means (the engine refuses such a model, the model config assumes 2048).
func (f *File) ContextLength() (int, error) {
	c, err := f.Uint(f.Arch() + ".context_length")
	return int(c), err
}
