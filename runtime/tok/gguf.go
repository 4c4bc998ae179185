package tok

import "github.com/ninfer/ninfer-go/runtime/weights"

// FromGGUF builds the tokenizer described by f's tokenizer.ggml.* metadata,
// with llama.cpp's defaults for keys that are absent.
//
// Supported tokenizer.ggml.model values are "llama" (SentencePiece: tokens,
// scores, token types) and "gpt2" (byte-level BPE: tokens, token types,
// merges) with a tokenizer.ggml.pre of the Qwen2 family ("qwen2",
// "deepseek-r1-qwen", ...), the Llama 3 family ("llama-bpe", "llama3", ...)
// or the GPT-2 family ("gpt-2", "olmo", ...). Other models or pre-tokenizers
// give an error wrapping ErrUnsupported; malformed metadata (missing tokens,
// short score or type arrays, duplicate tokens, add_bos_token without a BOS
// id) gives an error naming the key.
//
// Special token ids outside the vocabulary (0xFFFFFFFF) mean none. The
// Tokenizer copies what it needs, so f may be closed afterwards.
func FromGGUF(f *weights.File) (*Tokenizer, error) {
	return fromSource(f)
}
