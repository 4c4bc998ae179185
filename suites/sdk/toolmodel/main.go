// Command toolmodel writes a copy of a GGUF model whose chat template is
// another (the SDK suite gives the tiny random model Qwen3's template,
// which uses tools and thinks): toolmodel -in MODEL -template FILE -out OUT.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

func main() {
	in := flag.String("in", "", "the model GGUF")
	tmpl := flag.String("template", "", "the Jinja chat template file")
	out := flag.String("out", "", "where to write the copy")
	flag.Parse()
	if err := run(*in, *tmpl, *out); err != nil {
		fmt.Fprintln(os.Stderr, "toolmodel:", err)
		os.Exit(1)
	}
}

func run(in, tmpl, out string) error {
	if in == "" || tmpl == "" || out == "" {
		return fmt.Errorf("-in, -template and -out are required")
	}
	src, err := os.ReadFile(tmpl)
	if err != nil {
		return err
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
