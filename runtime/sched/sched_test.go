package sched

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ninfer/ninfer-go/runtime/kv"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output in testdata scripts")

// TestScripts runs the scripts in testdata. Each command line is followed by
// "----" and the command's expected output, then a blank line. Commands:
//
//	config chunk=N step=N running=N blocks=N block=N [draft=K maxbatch=M] [prefix=SALT] [slots=N]
//	                    [snapshots=N] (prefix: a prefix cache whose hashes use
//	                     salt SALT; slots: N recurrent state slots, of which
//	                     each running sequence holds 1 + snapshots)
//	                    [checkpoints=N] [every=N] (a pool of N recurrent
//	                     state checkpoints, taken every N blocks of a prompt
//	                     too) [inner=1] (Config.InnerCheckpoints)
//	add ID PROMPT_TOKENS [limit=N] [stop=TOK] [text=B] [diverge=K] [mark=M]
//	                    (stop: Seq.Stop matches token TOK; prompt token i is
//	                     B*1000+i, plus 500 from position K on)
//	accept ID N         (the next update of sequence ID accepts N drafts)
//	yield ID TOK...     (the next step yields these tokens for sequence ID)
//	schedule            (prints one line per work item, then updates with
//	                     the yielded tokens and prints what Update did)
//	gen ID [N]          (appends N generated tokens, default 1, to sequence ID)
//	remove ID
//	state               (prints waiting/running/kv usage)
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScript(t, file) })
	}
}

func runScript(t *testing.T, file string) {
	var sc *Scheduler
	var m *kv.Manager
	seqs := map[uint64]*Seq{}
	accept := map[uint64]int{}
	yield := map[uint64][]int32{}
	runCommands(t, file, func(line string) string { return exec(t, line, &sc, &m, seqs, accept, yield) })
}

// runCommands runs the script file: each command line is followed by
// "----" and the output run gives it, then a blank line. With -rewrite it
// rewrites the file with the outputs run gave.
func runCommands(t *testing.T, file string, run func(line string) string) {
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := bufio.NewScanner(strings.NewReader(string(src)))
	var cmdLine string
	var want []string
	flush := func() {
		if cmdLine == "" {
			return
		}
		got := run(cmdLine)
		if !*rewrite {
			if diff := cmp.Diff(strings.Join(want, "\n"), strings.TrimRight(got, "\n")); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", file, cmdLine, diff)
			}
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n", cmdLine, got)
		cmdLine, want = "", nil
	}
	inWant := false
	for lines.Scan() {
		l := lines.Text()
		switch {
		case inWant && l == "":
			inWant = false
			flush()
		case inWant:
			want = append(want, l)
		case l == "----":
			inWant = true
		case l == "" || strings.HasPrefix(l, "#"):
			if cmdLine == "" {
				fmt.Fprintln(&out, l)
			}
		default:
			cmdLine = l
		}
	}
	flush()
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parseCommand splits a script command line into its fields, its
// key=value arguments and its positional numbers.
func parseCommand(line string) (f []string, args map[string]int, pos []int) {
	f = strings.Fields(line)
	args = map[string]int{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			args[k], _ = strconv.Atoi(v)
		} else {
			n, _ := strconv.Atoi(a)
			pos = append(pos, n)
		}
	}
	return f, args, pos
}

func exec(t *testing.T, line string, sc **Scheduler, m **kv.Manager, seqs map[uint64]*Seq, accept map[uint64]int, yield map[uint64][]int32) string {
	t.Helper()
	f, args, pos := parseCommand(line)
	var b strings.Builder
	switch f[0] {
	case "config":
		clear(seqs)
		var err error
		if *m, err = kv.New(args["blocks"], args["block"]); err != nil {
			return err.Error() + "\n"
		}
		if salt, ok := args["prefix"]; ok {
			(*m).EnablePrefixCache([]byte(strconv.Itoa(salt)))
		}
		if *sc, err = New(Config{Chunk: args["chunk"], StepTokens: args["step"], MaxRunning: args["running"],
			Draft: args["draft"], DraftMaxBatch: args["maxbatch"], StateSlots: args["slots"], Snapshots: args["snapshots"],
			Checkpoints: args["checkpoints"], CheckpointEvery: args["every"], DrafterEntries: args["entries"] > 0,
			InnerCheckpoints: args["inner"] > 0}, *m); err != nil {
			return err.Error() + "\n"
		}
	case "add":
		s := &Seq{ID: uint64(pos[0]), Tokens: make([]int32, pos[1]), Prompt: pos[1], Limit: args["limit"]}
		if mark, ok := args["mark"]; ok {
			s.Marks = []int{mark}
		}
		diverge, ok := args["diverge"]
		if !ok {
			diverge = pos[1]
		}
		for i := range s.Tokens {
			s.Tokens[i] = int32(args["text"]*1000 + i)
			if i >= diverge {
				s.Tokens[i] += 500
			}
		}
		if stop, ok := args["stop"]; ok {
			s.Stop = func(id int32) bool { return id == int32(stop) }
		}
		seqs[s.ID] = s
		(*sc).Add(s)
	case "schedule":
		work := (*sc).Schedule()
		if len(work) == 0 {
			b.WriteString("(nothing)\n")
		}
		res := make([]Result, len(work))
		for i, w := range work {
			res[i] = Result{Tokens: yield[w.Seq.ID], Accepted: accept[w.Seq.ID]}
			delete(accept, w.Seq.ID)
			delete(yield, w.Seq.ID)
		}
		lines := make([]string, len(work))
		for i, w := range work {
			l := fmt.Sprintf("seq %d: [%d,%d)", w.Seq.ID, w.Start, w.Start+w.N)
			if w.Sample {
				l += " sample"
			}
			if w.Draft > 0 {
				l += fmt.Sprintf(" draft=%d", w.Draft)
			}
			if from := w.Seq.StateFrom(); from >= 0 {
				l += fmt.Sprintf(" from=%d", from)
			}
			for _, in := range w.InnerTakes() {
				l += fmt.Sprintf(" take=%d@%d", in.Slot, w.Start+in.Rows)
			}
			if to := w.StateTo(); to >= 0 {
				l += fmt.Sprintf(" take=%d", to)
			}
			if h := w.Seq.TakeResumeHidden(); h != nil {
				l += fmt.Sprintf(" hidden=%v", h)
			}
			lines[i] = l + fmt.Sprintf(" blocks=%v", w.Seq.KV.Blocks)
		}
		outcomes := (*sc).Update(work, res)
		for i, w := range work {
			b.WriteString(lines[i])
			if a := res[i].Accepted; a > 0 || w.Draft > 0 {
				fmt.Fprintf(&b, " -> accepted=%d computed=%d blocks=%v", a, w.Seq.Computed, w.Seq.KV.Blocks)
			}
			for _, o := range outcomes {
				if o.Seq == w.Seq && (len(o.Tokens) > 0 || o.Finish != Running) {
					fmt.Fprintf(&b, " +%v", o.Tokens)
					if o.Finish != Running {
						fmt.Fprintf(&b, " finish=%s", [...]string{"running", "stop", "length"}[o.Finish])
					}
				}
			}
			b.WriteString("\n")
		}
	case "gen":
		s := seqs[uint64(pos[0])]
		n := 1
		if len(pos) > 1 {
			n = pos[1]
		}
		s.Tokens = append(s.Tokens, make([]int32, n)...)
	case "accept":
		accept[uint64(pos[0])] = pos[1]
	case "yield":
		for _, tok := range pos[1:] {
			yield[uint64(pos[0])] = append(yield[uint64(pos[0])], int32(tok))
		}
	case "entered":
		// entered ID FIRST LAST: the drafter entered ID's tokens
		// through LAST with the hidden rows from FIRST; row p is [p].
		(*sc).KeepHidden(seqs[uint64(pos[0])], pos[1], pos[2], func(p int) []float32 { return []float32{float32(p)} })
	case "remove":
		(*sc).Remove(seqs[uint64(pos[0])])
	case "state":
		fmt.Fprintf(&b, "waiting=%d running=%d kv=%d/%d", (*sc).Waiting(), (*sc).Running(), (*m).Used(), (*m).Total())
		if (*m).PrefixCaching() {
			st := (*sc).PrefixStats()
			fmt.Fprintf(&b, " cached=%d queries=%d hits=%d", (*m).Cached(), st.Queries, st.Hits)
		}
		if (*sc).cfg.StateSlots > 0 {
			fmt.Fprintf(&b, " slots_free=%d", (*sc).StateSlotsFree())
		}
		if held, capacity := (*sc).Checkpoints(); capacity > 0 {
			fmt.Fprintf(&b, " checkpoints=%d/%d indexed=%v", held, capacity, indexed((*sc).state))
		}
		b.WriteString("\n")
		for _, id := range slices.Sorted(maps.Keys(seqs)) {
			if s := seqs[id]; s != nil {
				fmt.Fprintf(&b, "seq %d: computed=%d tokens=%d preempted=%d", id, s.Computed, len(s.Tokens), s.Preempted)
				if (*m).PrefixCaching() {
					fmt.Fprintf(&b, " cached=%d blocks=%v", s.Cached, s.KV.Blocks)
				}
				if (*sc).cfg.StateSlots > 0 && slices.Contains((*sc).running, s) {
					fmt.Fprintf(&b, " slot=%d", s.StateSlot)
					if s.Snapshots != nil {
						fmt.Fprintf(&b, " snapshots=%v", s.Snapshots)
					}
				}
				b.WriteString("\n")
			}
		}
	default:
		t.Fatalf("unknown command %q", line)
	}
	return b.String()
}

// NextDrafts gives a sequence's next decode step Config.Draft slots, none
// past its limit, and none while more than DraftMaxBatch sequences run.
func TestNextDrafts(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		draft, maxBatch, running  int
		tokens, limit, wantDrafts int
	}{
		{name: "no limit", draft: 3, running: 1, tokens: 10, wantDrafts: 3},
		{name: "far from the limit", draft: 3, running: 1, tokens: 10, limit: 20, wantDrafts: 3},
		{name: "two tokens left", draft: 3, running: 1, tokens: 18, limit: 20, wantDrafts: 1},
		{name: "last token", draft: 3, running: 1, tokens: 19, limit: 20, wantDrafts: 0},
		{name: "at max batch", draft: 3, maxBatch: 2, running: 2, tokens: 10, wantDrafts: 3},
		{name: "over max batch", draft: 3, maxBatch: 2, running: 3, tokens: 10, wantDrafts: 0},
		{name: "plan does not draft", running: 1, tokens: 10, wantDrafts: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := kv.New(64, 16)
			if err != nil {
				t.Fatal(err)
			}
			sc, err := New(Config{Chunk: 64, StepTokens: 64, MaxRunning: 4, Draft: tc.draft, DraftMaxBatch: tc.maxBatch}, m)
			if err != nil {
				t.Fatal(err)
			}
			s := &Seq{Tokens: make([]int32, tc.tokens), Prompt: 4, Limit: tc.limit}
			for range tc.running {
				sc.running = append(sc.running, s)
			}
			if got := sc.NextDrafts(s); got != tc.wantDrafts {
				t.Errorf("NextDrafts = %d, want %d", got, tc.wantDrafts)
			}
		})
	}
}

// indexed lists the indexed checkpoints as blocks@slot, by blocks then slot.
func indexed(g *StateGroup) []string {
	var out []string
	for _, c := range g.index {
		l := fmt.Sprintf("%d@%d", c.Blocks, c.Slot)
		if c.Hidden != nil {
			l += fmt.Sprintf("+h%v", c.Hidden)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b string) int {
		if len(a) != len(b) {
			return len(a) - len(b)
		}
		return strings.Compare(a, b)
	})
	return out
}
