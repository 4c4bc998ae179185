package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/ninfer/ninfer-go/runtime/tok"
)

const tokenizeUsage = `usage: ninfer tokenize --model FILE|DIR [--json] [--add-special=false] [--parse-special=false] [TEXT...]

Prints the token ids of TEXT (or of standard input when TEXT is not given),
exactly as llama.cpp's llama_tokenize gives them; with several TEXTs, one
result per TEXT in order (one JSON object per line with --json). --model is a GGUF model or
vocab-only GGUF file, a Hugging Face tokenizer.json, or a folder holding one
(with its tokenizer_config.json and config.json when present). By default
BOS is added as the vocabulary says (--add-special) and special tokens such
as <|im_start|> in the text become single tokens (--parse-special).
Without --json each token is printed with its piece.
`

// tokenizeOutput is the --json contract of `ninfer tokenize`.
type tokenizeOutput struct {
	Tokens []int32 `json:"tokens"`
}

func runTokenize(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, tokenizeUsage); fs.PrintDefaults() }
	model := fs.String("model", "", "GGUF file, tokenizer.json, or a Hugging Face folder (required)")
	asJSON := fs.Bool("json", false, `print {"tokens":[...]} instead of a table`)
	addSpecial := fs.Bool("add-special", true, "add BOS/EOS as the vocabulary says")
	parseSpecial := fs.Bool("parse-special", true, "turn special-token text into those tokens")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int { fmt.Fprintf(stderr, "ninfer tokenize: %v\n", err); return 1 }
	if *model == "" {
		return fail(errors.New("--model is required"))
	}
	texts := fs.Args()
	if len(texts) == 0 {
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return fail(fmt.Errorf("read standard input: %w", err))
		}
		texts = []string{string(b)}
	}
	tk, err := tok.Load(*model)
	if err != nil {
		return fail(err)
	}
	for i, text := range texts {
		ids := tk.Encode(text, *addSpecial, *parseSpecial)
		if *asJSON {
			if ids == nil {
				ids = []int32{}
			}
			b, err := json.Marshal(tokenizeOutput{Tokens: ids})
			if err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "%s\n", b)
			continue
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "id\tpiece")
		for _, id := range ids {
			fmt.Fprintf(w, "%d\t%s\n", id, strconv.Quote(string(tk.Piece(id))))
		}
		if err := w.Flush(); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%d tokens\n", len(ids))
	}
	return 0
}
