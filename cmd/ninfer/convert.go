package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

const convertUsage = `usage: ninfer convert --model FILE.gguf --to hf --out DIR [--dtype f32|f16|bf16] [--shard-bytes N]

Writes a GGUF model (llama, qwen2 or qwen3 with a byte-level BPE vocabulary)
as a Hugging Face checkpoint folder: config.json, model.safetensors (or
shards with model.safetensors.index.json when --shard-bytes is given),
tokenizer.json and tokenizer_config.json, undoing llama.cpp's converter
(tensor names, llama's q/k row order, PyTorch shapes). ninfer reads the
folder back with --model DIR. Weights keep their float dtype unless --dtype
is given (quantized ones become f32); norms and biases are always f32.
`

func runConvert(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, convertUsage); fs.PrintDefaults() }
	model := fs.String("model", "", "GGUF model file to convert (required)")
	to := fs.String("to", "", `output format: "hf" (required)`)
	out := fs.String("out", "", "folder to write (required; created if needed)")
	dtype := fs.String("dtype", "", "dtype of the 2-D weights: f32, f16 or bf16 (default: as stored)")
	shard := fs.Int64("shard-bytes", 0, "split the weights into safetensors shards of at most about N bytes (0: one file)")
	fail, code, ok := parseFlags(fs, args, stderr)
	if !ok {
		return code
	}
	switch {
	case *model == "":
		return fail(errors.New("--model is required"))
	case *out == "":
		return fail(errors.New("--out is required"))
	case *to != "hf":
		return fail(fmt.Errorf("--to %q: only hf is supported", *to))
	case *shard < 0:
		return fail(fmt.Errorf("--shard-bytes %d is negative", *shard))
	}
	o := weights.HFWriteOptions{ShardBytes: *shard}
	switch *dtype {
	case "":
	case "f32":
		o.DType = tensor.F32
	case "f16":
		o.DType = tensor.F16
	case "bf16":
		o.DType = tensor.BF16
	default:
		return fail(fmt.Errorf("--dtype %q: want f32, f16 or bf16", *dtype))
	}
	f, err := weights.Open(*model)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if err := weights.WriteHF(f, *out, o); err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %d tensors)\n", *out, f.Arch(), len(f.Tensors))
	return 0
}
