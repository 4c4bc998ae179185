// Command toolmodel writes a copy of a GGUF model whose chat template is
// another (the SDK suite gives the tiny random model Qwen3's template,
// which uses tools and thinks): toolmodel -in MODEL -template FILE -out OUT.
// With -open-thinking the template is Qwen3's changed so that its
// generation prompt opens a <think> block unless enable_thinking is false,
// as thinking-only templates do: the random-weight model never writes
// <think> itself, so its whole reply is then reasoning (the Anthropic SDK
// suite's thinking blocks, the web UI's reasoning view).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func main() {
	in := flag.String("in", "", "the model GGUF")
	tmpl := flag.String("template", "", "the Jinja chat template file")
	out := flag.String("out", "", "where to write the copy")
	openThinking := flag.Bool("open-thinking", false, "change Qwen3's template (-template) to open a <think> block in the generation prompt unless enable_thinking is false")
	flag.Parse()
	if err := run(*in, *tmpl, *out, *openThinking); err != nil {
		fmt.Fprintln(os.Stderr, "toolmodel:", err)
		os.Exit(1)
	}
}

// Qwen3's generation prompt, and the same opening a <think> block unless
// enable_thinking is false (-open-thinking).
const (
	qwen3Prompt = "{{- '<|im_start|>assistant\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '<think>\\n\\n</think>\\n\\n' }}"
	openPrompt  = "{{- '<|im_start|>assistant\\n<think>\\n' }}\n    {%- if enable_thinking is defined and enable_thinking is false %}\n        {{- '\\n</think>\\n\\n' }}"
)

func run(in, tmpl, out string, openThinking bool) error {
	if in == "" || tmpl == "" || out == "" {
		return fmt.Errorf("-in, -template and -out are required")
	}
	src, err := os.ReadFile(tmpl)
	if err != nil {
		return err
	}
	if openThinking {
		if !bytes.Contains(src, []byte(qwen3Prompt)) {
			return fmt.Errorf("-open-thinking: %s does not hold Qwen3's generation prompt %q", tmpl, qwen3Prompt)
		}
		src = []byte(strings.Replace(string(src), qwen3Prompt, openPrompt, 1))
	}
	f, err := weights.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	kvs := slices.DeleteFunc(slices.Clone(f.KV), func(kv weights.KV) bool { return kv.Key == tok.KeyChatTemplate })
	kvs = append(kvs, weights.KV{Key: tok.KeyChatTemplate, Value: weights.Str(string(src))})
	var buf bytes.Buffer
	if err := weights.Write(&buf, f.Version, kvs, f.Tensors); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}
