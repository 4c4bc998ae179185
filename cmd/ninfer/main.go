// Command ninfer is the ninfer inference engine: run a model on a prompt,
// check and inspect decoding graphs, and record or verify golden outputs.
package main

import (
	"fmt"
	"io"
	"os"

	_ "github.com/ninfer/ninfer-go/nodes/model"
	_ "github.com/ninfer/ninfer-go/nodes/prefill"
	_ "github.com/ninfer/ninfer-go/nodes/sample"
	_ "github.com/ninfer/ninfer-go/runtime/cpu"
)

const usage = `usage: ninfer <command> [flags]

commands:
  run      generate from a prompt (ninfer run --model FILE --prompt TEXT --max-tokens N [--json])
  graph    check | plan | docs | dot: inspect decoding graphs
  golden   record | verify: lock a model's greedy outputs in a JSON file
  trace    print a request's phase waterfall from Jaeger (ninfer trace TRACE_ID)
`

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

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
	case "golden":
		return runGolden(args[1:], stdout, stderr)
	case "trace":
		return runTrace(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ninfer: unknown command %q\n%s", args[0], usage)
		return 2
	}
}
