// Command ninfer is the ninfer inference engine: run a model on a prompt,
// serve it over an OpenAI-compatible API, check and inspect decoding graphs,
// measure it (bench, corpus, kv-eval), read traces, and record or verify
// golden outputs.
package main

import (
	"fmt"
	"io"
	"os"

	_ "github.com/ninfer/ninfer-go/nodes/kvquant"
	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/nodes/speculative"
	_ "github.com/ninfer/ninfer-go/nodes/vision"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
)

const usage = `usage: ninfer <command> [flags]

commands:
  run      generate from a prompt (ninfer run --model FILE --prompt TEXT --max-tokens N [--json])
  serve    OpenAI-compatible HTTP server (ninfer serve --model FILE [--host 127.0.0.1] [--port 8080])
  graph    check | plan | docs | dot: inspect decoding graphs
  bench    measure prompt processing and generation speed (ninfer bench --model FILE -p 512 -n 128)
  corpus   run the serving corpus against fresh ninfer serve processes at each concurrency
  multiturn  multi-turn chat workload: per-turn TTFT and prefix cache hit rate (ninfer multiturn --model FILE)
  golden   record | verify: lock a model's greedy outputs in a JSON file
  kv-eval  compare KV cache formats with f32 (ninfer kv-eval --model FILE --kv FORMAT --prompts FILE)
  trace    print a request's phase waterfall from Jaeger (ninfer trace TRACE_ID)
  tokenize print a text's token ids (ninfer tokenize --model FILE|DIR [--json] TEXT)
  convert  write a GGUF model as a Hugging Face folder (ninfer convert --model FILE --to hf --out DIR)

--model takes a GGUF file or a Hugging Face checkpoint folder (config.json,
model.safetensors or its shards, tokenizer.json, tokenizer_config.json).
`

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// commands are the names dispatch serves.
var commands = []string{"run", "serve", "graph", "bench", "corpus", "multiturn", "golden", "kv-eval", "trace", "tokenize", "convert", "help"}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return runRun(args[1:], stdout, stderr)
	case "graph":
		return runGraph(args[1:], stdout, stderr)
	case "serve":
		return runServe(args[1:], stdout, stderr)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "corpus":
		return runCorpus(args[1:], stdout, stderr)
	case "multiturn":
		return runMultiTurn(args[1:], stdout, stderr)
	case "golden":
		return runGolden(args[1:], stdout, stderr)
	case "kv-eval":
		return runKVEval(args[1:], stdout, stderr)
	case "trace":
		return runTrace(args[1:], stdout, stderr)
	case "tokenize":
		return runTokenize(args[1:], stdout, stderr)
	case "convert":
		return runConvert(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ninfer: unknown command %q\n", args[0])
		if near := closest(args[0], commands); near != "" {
			fmt.Fprintf(stderr, "did you mean 'ninfer %s'?\n", near)
		}
		fmt.Fprintln(stderr, "run 'ninfer help' to list the commands")
		return 2
	}
}
