package httpfront

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/nodes/sample/grammar"
)

// With a thinking template the constraint starts after the </think>
// block: required when the prompt opened it, optional otherwise.
func TestConstraintAfterThinking(t *testing.T) {
	src := "root ::= \"{\" item* \"}\"\nitem ::= \"root\" | [a-z]\n" // "root" in a string must stay
	for _, tc := range []struct {
		mode Reasoning
		yes  []string
		no   []string
	}{
		{ReasoningOff, []string{"{}", "{root}"}, []string{"<think>x</think>{}"}},
		{ReasoningTagged, []string{"{}", "<think>\nplan <b>\n</think>\n\n{ab}", "{root}"}, []string{"<think>x{}", "x{}"}},
		{ReasoningOpen, []string{"plan</think>\n\n{}", "</think>{root}"}, []string{"{}", "plan{}"}},
	} {
		wrapped := withThinking(src, tc.mode)
		g, err := grammar.Parse(wrapped)
		if err != nil {
			t.Fatalf("mode %d: %v\n%s", tc.mode, err, wrapped)
		}
		for _, s := range tc.yes {
			if st := g.Start().AdvanceBytes([]byte(s)); st == nil || !st.Accepting() {
				t.Errorf("mode %d: %q rejected", tc.mode, s)
			}
		}
		for _, s := range tc.no {
			if st := g.Start().AdvanceBytes([]byte(s)); st != nil && st.Accepting() {
				t.Errorf("mode %d: %q accepted", tc.mode, s)
			}
		}
	}
}

// A mask whose choice's context has ended (abort, deadline, shutdown)
// stops at once: it allows only end-of-generation and leaves the failure
// to the engine's abort. A mask past its work limit fails the choice with
// a 400 naming the constraint's field.
func TestGrammarMaskStops(t *testing.T) {
	tk := tinyTokenizer(t)
	a := tk.Encode("a", false, false)
	for _, tc := range []struct {
		name, src   string
		cancel      bool
		wantFailure bool
	}{
		{"the choice's context ended", `root ::= "a"+`, true, false},
		{"the grammar became too ambiguous", "root ::= x \"z\"\nx ::= a1 x \"b\" | a2 x \"c\" | \"\"\na1 ::= \"a\"\na2 ::= \"a\"", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := grammar.Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			m, e := newGrammarMask(ctx, cancel, &Params{Grammar: g, ConstraintField: "grammar"}, tk, 200)
			if e != nil {
				t.Fatal(e.Message)
			}
			if tc.cancel {
				cancel(nil)
			}
			logits := make([]float32, tk.VocabSize())
			var gen []int32
			for range 40 {
				m.mask(gen, logits)
				if ctx.Err() != nil {
					break
				}
				gen = append(gen, a...)
			}
			for id, l := range logits {
				if !math.IsInf(float64(l), -1) && !tk.IsEOG(int32(id)) {
					t.Fatalf("token %d (%q) allowed after the mask stopped", id, tk.Piece(int32(id)))
				}
			}
			var failed constraintFailure
			if got := errors.As(context.Cause(ctx), &failed); got != tc.wantFailure {
				t.Fatalf("cause %v, want a constraintFailure: %v", context.Cause(ctx), tc.wantFailure)
			}
			if tc.wantFailure && (failed.e.Param != "grammar" || failed.e.Code != "constraint_too_complex" || failed.e.Status != 400) {
				t.Errorf("failure %+v, want a 400 constraint_too_complex naming grammar", failed.e)
			}
		})
	}
}

// A choice whose context ends while its first mask is computed fails as
// any aborted request does: 504 past the deadline, 503 shutting_down when
// Shutdown aborted it, 499 when cancelled.
func TestGrammarMaskAbortReportsItsCause(t *testing.T) {
	tk := tinyTokenizer(t)
	g, err := grammar.Parse(`root ::= "a"+`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		end    func(generations context.CancelCauseFunc) context.Context
		status int
		code   string
	}{
		{"past the deadline", func(context.CancelCauseFunc) context.Context {
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			t.Cleanup(cancel)
			return ctx
		}, http.StatusGatewayTimeout, "deadline_exceeded"},
		{"aborted by shutdown", func(generations context.CancelCauseFunc) context.Context {
			generations(errShuttingDown)
			return nil
		}, http.StatusServiceUnavailable, "shutting_down"},
		{"cancelled", func(context.CancelCauseFunc) context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, 499, "client_closed_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// As the server nests them: generations, the request's timeout, the choice.
			generations, stop := context.WithCancelCause(context.Background())
			defer stop(nil)
			parent, cancelJob := context.WithTimeout(generations, time.Hour)
			defer cancelJob()
			if ended := tc.end(stop); ended != nil {
				parent = ended
			}
			ctx, cancel := context.WithCancelCause(parent)
			defer cancel(nil)
			_, e := newGrammarMask(ctx, cancel, &Params{Grammar: g, ConstraintField: "grammar"}, tk, 200)
			if e == nil {
				t.Fatal("no error from a mask whose context ended")
			}
			if diff := cmp.Diff([]any{tc.status, tc.code}, []any{e.Status, e.Code}); diff != "" {
				t.Errorf("status and code (-want +got):\n%s", diff)
			}
		})
	}
}

// A large constraint's compilation polls its interrupt (and yields the
// processor) at least once per compilePollEvery units of its work, in
// every phase: the JSON Schema compile, the GBNF parse (charged before it
// runs) and its checks. An interrupt returning an error partway through
// stops the compilation with that error.
func TestCompilePollsAtBoundedIntervals(t *testing.T) {
	const n = 20000
	items, alts := make([]string, n), make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("item%06d", i)
		alts[i] = strconv.Quote(items[i])
	}
	asJSON := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	enum := `{"type":"json_schema","json_schema":{"name":"s","schema":{"enum":` + string(asJSON(items)) + `}}}`
	for _, tc := range []struct {
		name string
		f    fields
	}{
		{"enum", fields{"response_format": json.RawMessage(enum)}},
		{"guided_choice", fields{"guided_choice": asJSON(items)}},
		{"grammar", fields{"grammar": asJSON("root ::= " + strings.Join(alts, " | "))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			polls := 0
			interrupt := func() error { polls++; return nil }
			src, field, e := constraintOf(tc.f, interrupt)
			if e != nil {
				t.Fatal(e)
			}
			compiledMu.Lock()
			delete(compiled, src)
			compiledMu.Unlock()
			if _, e := compileConstraint(src, field, interrupt); e != nil {
				t.Fatal(e)
			}
			// Each alternative costs more than one unit of the parse alone.
			if polls < n/compilePollEvery {
				t.Errorf("%d polls compiling %d alternatives, want at least %d (one per %d units)", polls, n, n/compilePollEvery, compilePollEvery)
			}
			stopAt := polls / 2
			stop := &Error{Status: http.StatusServiceUnavailable, Message: "stopped"}
			polls = 0
			interruptHalfway := func() error {
				if polls++; polls >= stopAt {
					return interrupted{stop}
				}
				return nil
			}
			src, field, e = constraintOf(tc.f, interruptHalfway)
			if e == nil {
				compiledMu.Lock()
				delete(compiled, src)
				compiledMu.Unlock()
				_, e = compileConstraint(src, field, interruptHalfway)
			}
			if e != stop {
				t.Errorf("interrupted after %d of %d polls: got %v, want the interrupt's error", stopAt, 2*stopAt, e)
			}
		})
	}
}
