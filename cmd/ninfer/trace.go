package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/ninfer/ninfer-go/traces"
)

// runTrace prints a terminal waterfall of one trace fetched from Jaeger.
func runTrace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	jaeger := fs.String("jaeger", "http://127.0.0.1:16686", "Jaeger query service URL")
	width := fs.Int("width", 40, "width of the duration bars in characters")
	// Accept the trace id before or after the flags.
	var id string
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		id, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 || id == "" {
		fmt.Fprintln(stderr, "usage: ninfer trace TRACE_ID [--jaeger URL] [--width N]")
		return 2
	}
	if *width < 10 || *width > 400 {
		fmt.Fprintf(stderr, "ninfer trace: --width %d must be in [10, 400]\n", *width)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spans, err := traces.FetchTrace(ctx, *jaeger, id)
	if err != nil {
		fmt.Fprintf(stderr, "ninfer trace: %v\n", err)
		return 1
	}
	traces.RenderWaterfall(stdout, spans, *width)
	return 0
}
