package sched

import (
	"slices"

	"fmt"
	"github.com/google/go-cmp/cmp"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ninfer/ninfer-go/runtime/kv"
)

// TestGroupScripts runs the scripts in testdata/groups, one cache group
// each, driven as the scheduler drives it. Commands:
//
//	kv blocks=N block=N [prefix=SALT]  (a KVGroup; prefix: with a prefix cache)
//	state slots=N snapshots=N          (a StateGroup)
//	draft blocks=N block=N             (a DraftKVGroup)
//	seq ID TOKENS [text=B]             (a sequence of TOKENS tokens B*1000+i)
//	admit ID                           (CanAdmit, then Admit when it can)
//	grow ID N                          (CanGrow, then Grow when it can)
//	commit ID COMPUTED [draft=D] [accepted=A]  (Computed = COMPUTED, Commit)
//	publish ID
//	release ID
//	usage                              (Usage, then each sequence's share)
//	reserve ID N loop=L step=S         (draft loop L's share of ID marked
//	                                    used in its step S, Reserve N tokens)
//	truncate ID N loop=L               (Truncate draft loop L's share of ID)
func TestGroupScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/groups/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			var g Group
			var seqs []*Seq
			loops := map[uint64][]string{} // the draft loops that reserved in each sequence
			runCommands(t, file, func(line string) string {
				if out := groupCommand(t, line, &g, &seqs, loops); out != "" {
					return out + "\n"
				}
				return ""
			})
		})
	}
}

func groupCommand(t *testing.T, line string, g *Group, seqs *[]*Seq, loops map[uint64][]string) string {
	t.Helper()
	f, args, pos := parseCommand(line)
	seq := func() *Seq {
		for _, s := range *seqs {
			if s.ID == uint64(pos[0]) {
				return s
			}
		}
		t.Fatalf("%s: no sequence %d", line, pos[0])
		return nil
	}
	switch f[0] {
	case "kv":
		m, err := kv.New(args["blocks"], args["block"])
		if err != nil {
			return err.Error()
		}
		if salt, ok := args["prefix"]; ok {
			m.EnablePrefixCache([]byte(strconv.Itoa(salt)))
		}
		*g, *seqs = NewKVGroup(m), nil
	case "state":
		*g, *seqs = NewStateGroup(args["slots"], args["snapshots"]), nil
	case "draft":
		m, err := kv.New(args["blocks"], args["block"])
		if err != nil {
			return err.Error()
		}
		*g, *seqs = NewDraftKVGroup(kv.NewShares(m)), nil
		clear(loops)
	case "reserve":
		c, loop, s := (*g).(*DraftKVGroup).c, fmt.Sprintf("loop%d", args["loop"]), seq()
		if !slices.Contains(loops[s.ID], loop) {
			loops[s.ID] = append(loops[s.ID], loop)
		}
		sh := c.Share(loop, s.ID)
		sh.Used = uint64(args["step"])
		if !c.Reserve(loop, sh, pos[1], sh.Used) {
			return "does not fit"
		}
		return "reserved"
	case "truncate":
		c := (*g).(*DraftKVGroup).c
		c.Truncate(c.Share(fmt.Sprintf("loop%d", args["loop"]), seq().ID), pos[1])
	case "seq":
		s := &Seq{ID: uint64(pos[0]), Tokens: make([]int32, pos[1]), Prompt: pos[1]}
		for i := range s.Tokens {
			s.Tokens[i] = int32(args["text"]*1000 + i)
		}
		*seqs = append(*seqs, s)
	case "admit":
		s := seq()
		cached, caches := agree([]Group{*g}, s)
		if !(*g).CanAdmit(s, cached) {
			return "does not fit"
		}
		(*g).Admit(s, cached)
		s.Computed = cached
		return fmt.Sprintf("admitted cached=%d caches=%t", cached, caches)
	case "grow":
		s := seq()
		if !(*g).CanGrow(s, pos[1]) {
			return "does not fit"
		}
		(*g).Grow(s, pos[1])
		return "grown"
	case "commit":
		s := seq()
		s.Computed = pos[1]
		(*g).Commit(s, Work{Seq: s, Draft: args["draft"]}, args["accepted"])
	case "publish":
		(*g).Publish(seq())
	case "release":
		(*g).Release(seq())
	case "usage":
		used, total := (*g).Usage()
		var b strings.Builder
		fmt.Fprintf(&b, "used=%d total=%d", used, total)
		for _, s := range *seqs {
			fmt.Fprintf(&b, "\nseq %d: computed=%d blocks=%v len=%d slot=%d snapshots=%v", s.ID, s.Computed, s.KV.Blocks, s.KV.Len, s.StateSlot, s.Snapshots)
			if d, ok := (*g).(*DraftKVGroup); ok {
				for _, loop := range slices.Sorted(slices.Values(loops[s.ID])) {
					sh := d.c.Share(loop, s.ID) // empty once released or evicted
					fmt.Fprintf(&b, " %s: blocks=%v len=%d", loop, sh.Seq.Blocks, sh.Seq.Len)
				}
			}
		}
		return b.String()
	default:
		t.Fatalf("unknown command %q", line)
	}
	return ""
}

// The checkpoint pool evicts a checkpoint whose last KV block is no longer
// cached (it can never be adopted) before the least recently used one,
// never one a sequence is about to read, and then nothing.
func TestCheckpointEvictionFollowsBlocks(t *testing.T) {
	m, err := kv.New(8, 4)
	if err != nil {
		t.Fatal(err)
	}
	m.EnablePrefixCache([]byte("salt"))
	g := NewStateGroup(1, 0)
	g.EnableCheckpoints(m, 3, 0)
	cached := &Seq{Tokens: []int32{1, 2, 3, 4, 5}}
	if err := m.Grow(&cached.KV, 4); err != nil {
		t.Fatal(err)
	}
	m.Publish(&cached.KV, cached.Tokens, 4)
	keys := map[string]kv.BlockHash{
		"blocks cached, least recently used": m.Hashes(cached.Tokens, 1)[0],
		"blocks evicted":                     m.Hashes([]int32{9, 9, 9, 9}, 1)[0],
		"read by a sequence":                 m.Hashes([]int32{7, 7, 7, 7}, 1)[0],
	}
	for i, name := range []string{"blocks cached, least recently used", "blocks evicted", "read by a sequence"} {
		c := &checkpoint{Slot: int32(1 + i), Blocks: 1, Key: keys[name], indexed: true}
		g.touch(c)
		g.index[c.Key] = c
		g.held++
		if name == "read by a sequence" {
			c.pins = 1
		}
	}
	var evicted []string
	for g.evict() {
		for name, k := range keys {
			if _, ok := g.index[k]; !ok && !slices.Contains(evicted, name) {
				evicted = append(evicted, name)
			}
		}
	}
	if diff := cmp.Diff([]string{"blocks evicted", "blocks cached, least recently used"}, evicted); diff != "" {
		t.Errorf("eviction order (-want +got):\n%s", diff)
	}
	if held, _ := g.Checkpoints(); held != 1 {
		t.Errorf("held %d after evicting all but the pinned one", held)
	}
}
