package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ninfer/ninfer-go/runtime/graphdef/hint"
)

// parseFlags parses a command's flags, which take no positional arguments.
// When ok is false the command returns code: 0 after --help (the flags
// are listed on stderr), 2 for a flag error (reported with the closest
// flag's name when one is near, not the whole usage), 1 for stray
// arguments. fail reports an error as "ninfer NAME: err" (NAME is the flag
// set's name) and returns 1.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (fail func(error) int, code int, ok bool) {
	fail = func(err error) int {
		fmt.Fprintf(stderr, "ninfer %s: %v\n", fs.Name(), err)
		return 1
	}
	fs.SetOutput(io.Discard) // the flag package would print the whole usage on every error
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(stderr, "usage: ninfer %s [flags]\n\nflags:\n", fs.Name())
		fs.PrintDefaults()
		return fail, 0, false
	case err != nil:
		fail(err)
		if name, found := strings.CutPrefix(err.Error(), "flag provided but not defined: "); found {
			var names []string
			fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
			if near := closest(strings.TrimLeft(name, "-"), names); near != "" {
				fmt.Fprintf(stderr, "did you mean --%s?\n", near)
			}
		}
		fmt.Fprintf(stderr, "run 'ninfer %s --help' to list its flags\n", fs.Name())
		return fail, 2, false
	}
	if fs.NArg() > 0 {
		return fail, fail(fmt.Errorf("unexpected arguments %q", fs.Args())), false
	}
	return fail, 0, true
}

// closest is the name in names nearest to typed (hint.Closest), or else
// the one typed begins or is the beginning of (3 characters at least); ""
// when none is near.
func closest(typed string, names []string) string {
	if c := hint.Closest(typed, names); c != "" {
		return c
	}
	for _, n := range names {
		if len(typed) >= 3 && (strings.HasPrefix(n, typed) || strings.HasPrefix(typed, n)) {
			return n
		}
	}
	return ""
}
