package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/engine"
	"github.com/ninfer/ninfer-go/runtime/instance"
	"github.com/ninfer/ninfer-go/runtime/node"
)

// hybridTurns extends prompts with longer ones that share their prefixes
// as agent turns do: the three first prompts concatenated, and each of
// the first four prompts followed by its greedy reply (from ref) and the
// next prompt, as a chat's next turn resends the history.
func hybridTurns(t *testing.T, ref *instance.Instance, prompts [][]int32, n int) [][]int32 {
	t.Helper()
	replies, _ := generateAll(t, ref, prompts[:4], n, 4)
	out := append(slices.Clone(prompts), slices.Concat(prompts[0], prompts[1], prompts[2]))
	for i, r := range replies {
		out = append(out, slices.Concat(prompts[i], r, prompts[i+1]))
	}
	return out
}

// tinyHybridCacheOff runs tiny-qwen35-f32 (path m) with the cache off over
// the golden prompts and their turns (hybridTurns), conc at a time: the
// prompts, their n greedy ids each and the bytes of one state slot.
func tinyHybridCacheOff(t *testing.T, n, conc int) (m string, prompts, want [][]int32, slot int64) {
	t.Helper()
	m = modelPath(t, "tiny-qwen35-f32.gguf")
	off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
	prompts = hybridTurns(t, off, goldenPrompts(t, off), n)
	want, _ = generateAll(t, off, prompts, n, conc)
	return m, prompts, want, off.Engine.Snapshot().StateSlotBytes
}

// On a hybrid model the prefix cache resumes from recurrent state
// checkpoints: greedy ids with the cache on equal the cache off on every
// hybrid golden model, at prefill chunks that do and do not align with
// blocks, one and eight sequences at a time; the later passes report
// hits (prompts and next turns through the previous reply), and the
// checkpoints never exceed their budget.
func TestHybridPrefixCacheOnEqualsOff(t *testing.T) {
	const n = 24
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35-f16.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := hybridTurns(t, off, goldenPrompts(t, off), n)
			want, _ := generateAll(t, off, prompts, n, 8)
			if s := off.Engine.Snapshot(); s.PrefixCache || s.CheckpointsMax != 0 {
				t.Fatalf("cache off: %+v", s)
			}
			for _, chunk := range []int{1, 7, 64, 512} {
				on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, CheckpointEvery: 2,
					Set: node.Params{"chunk": int64(chunk)}})
				for pass, conc := range []int{1, 8} {
					got, stats := generateAll(t, on, prompts, n, conc)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("chunk %d pass %d: ids differ with the cache on (-off +on):\n%s", chunk, pass, diff)
					}
					if cached := cachedTokens(stats[len(stats)-4:]); cached == 0 {
						t.Errorf("chunk %d pass %d: no next turn hit the cache", chunk, pass)
					}
				}
				s := on.Engine.Snapshot()
				if !s.PrefixCache || s.PrefixHits == 0 || s.Checkpoints == 0 || s.Checkpoints > s.CheckpointsMax ||
					s.StateSlotsUsed != 0 || s.KVBlocksUsed != 0 || s.StateSlotsTotal != 8 {
					t.Errorf("chunk %d: snapshot after the passes %+v", chunk, s)
				}
				on.Close()
			}
		})
	}
}

// bf16 checkpoints: under the state-bf16 graph the state slots, and so
// the checkpoints (slots of the same storage), hold bf16 in half the
// memory, and the prefix cache hits as with f32. The state is rounded to
// bf16 at the end of every step, and the cache adds step ends (at
// checkpoint positions, at the adopted prefix), so the ids are not the
// cache off's bit for bit: they follow them at first, as bf16 state
// follows f32 (TestHybridBF16State; `ninfer kv-eval --kv state-bf16`
// measures the error).
func TestHybridPrefixCacheBF16Checkpoints(t *testing.T) {
	const n = 24
	m := modelPath(t, "tiny-qwen35-f32.gguf")
	graph := "../../graphs/state-bf16.yaml"
	off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true, Graph: graph})
	prompts := hybridTurns(t, off, goldenPrompts(t, off), n)
	want, _ := generateAll(t, off, prompts, n, 8)
	on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, CheckpointEvery: 2, Graph: graph})
	f32 := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 1})
	for pass := range 2 {
		got, stats := generateAll(t, on, prompts, n, 1)
		same := 0
		for i := range want {
			if want[i][0] == got[i][0] {
				same++
			}
		}
		if same < len(want)*3/4 {
			t.Errorf("pass %d: first tokens: %d of %d agree with the cache off:\noff %v\non  %v", pass, same, len(want), want, got)
		}
		if cached := cachedTokens(stats[len(stats)-4:]); cached == 0 {
			t.Errorf("pass %d: no next turn hit the cache", pass)
		}
	}
	if s, full := on.Engine.Snapshot(), f32.Engine.Snapshot(); !s.PrefixCache || s.Checkpoints == 0 || 2*s.StateSlotBytes != full.StateSlotBytes {
		t.Errorf("bf16 checkpoints: snapshot %+v; f32 state slot %d bytes", s, full.StateSlotBytes)
	}
}

// draftLog records the drafts each request's verify steps checked, by
// Request.Tag.
type draftLog struct {
	mu     sync.Mutex
	drafts map[any][][]int32
}

// watchDrafts records e's drafts (engine.SetDraftsChecked).
func watchDrafts(e *engine.Engine) *draftLog {
	l := &draftLog{drafts: map[any][][]int32{}}
	e.SetDraftsChecked(func(tag any, d []int32) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.drafts[tag] = append(l.drafts[tag], slices.Clone(d))
	})
	return l
}

// get returns the drafts of the request tagged tag.
func (l *draftLog) get(tag any) [][]int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.drafts[tag]
}

// take returns and forgets the drafts of the request tagged tag.
func (l *draftLog) take(tag any) [][]int32 {
	d := l.get(tag)
	l.mu.Lock()
	delete(l.drafts, tag)
	l.mu.Unlock()
	return d
}

// specStats are the speculative counts of each request.
func specStats(stats []engine.Stats) []engine.SpecStats {
	out := make([]engine.SpecStats, len(stats))
	for i, st := range stats {
		out[i] = st.Speculative
	}
	return out
}

func cachedTokens(stats []engine.Stats) int {
	n := 0
	for _, st := range stats {
		n += st.CachedTokens
	}
	return n
}

// The hybrid prefix cache keeps speculation and preemption lossless:
// under ngram (snapshot slots beside the checkpoints) and after
// preemption (a cache too small for all the prompts at once, so sequences
// recompute from their best checkpoint), greedy ids equal plain decoding
// with the cache off, and the second pass hits. So under mtp, whose MTP
// head resumes from the target's hidden state a checkpoint keeps beside
// the state, drafting from the hidden rows it carries (and, drafting
// ahead, from this step's), also under preemption.
func TestHybridPrefixCacheSpeculationAndPreemption(t *testing.T) {
	graphs := specGraphs(t)
	const n = 24
	for _, model := range []string{"tiny-qwen35-f32.gguf", "tiny-qwen35moe-f32.gguf"} {
		t.Run(model, func(t *testing.T) {
			m := modelPath(t, model)
			off := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, NoPrefixCache: true})
			prompts := hybridTurns(t, off, goldenPrompts(t, off), n)
			want, _ := generateAll(t, off, prompts, n, 8)
			for _, tc := range []struct {
				name string
				opts instance.Options
			}{
				{"ngram", instance.Options{Graph: graphs["ngram"], Set: node.Params{"k": int64(3), "chunk": int64(7)}}},
				{"preemption", instance.Options{KVTokens: 352}},
				{"ngram under preemption", instance.Options{Graph: graphs["ngram"], KVTokens: 352, Set: node.Params{"k": int64(2)}}},
				{"mtp", instance.Options{Graph: mtpGraph, Set: node.Params{"k": int64(3), "chunk": int64(7)}}},
				{"mtp ahead", instance.Options{Graph: aheadGraph(t, mtpGraph), Set: node.Params{"k": int64(3)}}},
				{"mtp chunk 1", instance.Options{Graph: mtpGraph, Set: node.Params{"k": int64(2), "chunk": int64(1)}}},
				{"mtp under preemption", instance.Options{Graph: mtpGraph, KVTokens: 352, Set: node.Params{"k": int64(2)}}},
			} {
				o := tc.opts
				o.Model, o.MaxRunning, o.Threads, o.CheckpointEvery = m, 8, 2, 1
				var wantSpec []engine.SpecStats  // the counts of each request with the cache off
				var wantDrafts, drafts *draftLog // and its drafts
				if o.KVTokens == 0 {
					specOff := o
					specOff.NoPrefixCache = true
					offIn := open(t, specOff)
					wantDrafts = watchDrafts(offIn.Engine)
					_, offStats := submitAll(t, offIn, prompts, n)
					wantSpec = specStats(offStats)
				}
				on := open(t, o)
				if wantDrafts != nil {
					drafts = watchDrafts(on.Engine)
				}
				preempted := 0
				for pass := range 2 {
					got, stats := submitAll(t, on, prompts, n)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Fatalf("%s pass %d: ids differ with the cache on (-off +on):\n%s", tc.name, pass, diff)
					}
					if diff := cmp.Diff(wantSpec, specStats(stats)); wantSpec != nil && diff != "" {
						t.Errorf("%s pass %d: speculation counts differ with the cache on (-off +on):\n%s", tc.name, pass, diff)
					}
					for i := range prompts {
						if drafts == nil {
							break
						}
						if diff := cmp.Diff(wantDrafts.get(i), drafts.take(i)); diff != "" {
							t.Errorf("%s pass %d, prompt %d: drafts differ with the cache on (-off +on):\n%s", tc.name, pass, i, diff)
						}
					}
					for _, st := range stats {
						preempted += st.Preempted
					}
					if pass == 1 && cachedTokens(stats) == 0 {
						t.Errorf("%s: the second pass hit no checkpoint", tc.name)
					}
				}
				if o.KVTokens > 0 && preempted == 0 {
					t.Errorf("%s: no sequence was preempted", tc.name)
				}
				if s := on.Engine.Snapshot(); s.Checkpoints > s.CheckpointsMax || s.StateSlotsUsed != 0 || s.KVBlocksUsed != 0 {
					t.Errorf("%s: after every request %+v", tc.name, s)
				}
				on.Close()
			}
		})
	}
}

// checkpointWatch records the most checkpoints any step left held.
type checkpointWatch struct {
	eng  atomic.Pointer[engine.Engine]
	most atomic.Int64
}

func (w *checkpointWatch) ObserveStep(engine.StepInfo) {
	if e := w.eng.Load(); e != nil {
		if n := int64(e.Snapshot().Checkpoints); n > w.most.Load() {
			w.most.Store(n)
		}
	}
}

// Checkpoint memory never exceeds its budget: with room for three
// checkpoints and one taken every block, eight sequences at once (each
// also holding a rolling one) never hold more than three after any step
// (evicting least recently used ones), the ids still equal the cache
// off, and a budget too small for one
// checkpoint turns the model's prefix cache off and says why.
func TestHybridCheckpointMemoryBudget(t *testing.T) {
	const n = 24
	m, prompts, want, slot := tinyHybridCacheOff(t, n, 8)
	watch := &checkpointWatch{}
	budget := 3*slot + slot/2
	on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, CheckpointMemory: budget, CheckpointEvery: 1, Observer: watch})
	watch.eng.Store(on.Engine)
	for pass := range 2 {
		got, _ := submitAll(t, on, prompts, n)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("pass %d: ids differ with the cache on (-off +on):\n%s", pass, diff)
		}
	}
	s := on.Engine.Snapshot()
	if s.CheckpointsMax != 3 || int64(s.CheckpointsMax)*s.StateSlotBytes > budget || watch.most.Load() > 3 || watch.most.Load() == 0 {
		t.Errorf("budget of 3.5 checkpoints: at most %d held after a step; snapshot %+v", watch.most.Load(), s)
	}
	tiny := open(t, instance.Options{Model: m, MaxRunning: 1, Threads: 1, CheckpointMemory: slot - 1})
	if s := tiny.Engine.Snapshot(); s.PrefixCache || !strings.Contains(tiny.Engine.PrefixCacheOff(), "checkpoint") {
		t.Errorf("a budget below one checkpoint: %+v, off because %q", s, tiny.Engine.PrefixCacheOff())
	}
}

// Under mtp a chat's next turn resumes through the previous reply, one
// request at a time: each golden prompt, then the prompt with its reply
// and the next prompt, twice. The MTP head's drafts equal the cache off's
// on every run: a resumed sequence's head starts from the hidden state
// its checkpoint keeps, and a block is shared only once the head's own
// entries of its tokens are written (a reply's last step writes none).
func TestHybridPrefixCacheMTPTurns(t *testing.T) {
	opts := instance.Options{Model: modelPath(t, "tiny-qwen35-f32.gguf"), Graph: mtpGraph, MaxRunning: 1, Threads: 2,
		CheckpointEvery: 1, Set: node.Params{"k": int64(3)}}
	offOpts := opts
	offOpts.NoPrefixCache = true
	off, on := open(t, offOpts), open(t, opts)
	offDrafts, onDrafts := watchDrafts(off.Engine), watchDrafts(on.Engine)
	generate := func(in *instance.Instance, tag string, prompt []int32, n int) *instance.Result {
		t.Helper()
		res, err := in.Generate(context.Background(), engine.Request{Prompt: prompt, MaxTokens: n, Tag: tag}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	prompts := goldenPrompts(t, on)
	cached := 0
	for i := 0; i+1 < len(prompts); i++ {
		for _, n := range []int{17, 19, 23, 26} {
			first := fmt.Sprintf("prompt %d, %d tokens", i, n)
			next := first + ", next turn"
			want := generate(off, first, prompts[i], n)
			turn := slices.Concat(prompts[i], want.IDs, prompts[i+1])
			wantNext := generate(off, next, turn, n)
			for pass, tc := range []struct {
				tag    string
				prompt []int32
				want   *instance.Result
			}{{first, prompts[i], want}, {next, turn, wantNext}, {next, turn, wantNext}} {
				got := generate(on, tc.tag, tc.prompt, n)
				cached += got.Stats.CachedTokens
				if diff := cmp.Diff(tc.want.IDs, got.IDs); diff != "" {
					t.Fatalf("%s, run %d: ids differ with the cache on (-off +on):\n%s", tc.tag, pass, diff)
				}
				if diff := cmp.Diff(offDrafts.get(tc.tag), onDrafts.take(tc.tag)); diff != "" {
					t.Errorf("%s, run %d (%d tokens cached): drafts differ with the cache on (-off +on):\n%s", tc.tag, pass, got.Stats.CachedTokens, diff)
				}
			}
		}
	}
	if cached == 0 {
		t.Error("no turn hit the prefix cache")
	}
}

// bf16 checkpoints beside f32 running state (Config.CheckpointDType): a
// checkpoint slot holds half the bytes, the budget counts them, and the
// running state is rounded to bf16 exactly where a checkpoint is taken
// (or would be, were it not cached), so a hit, which widens the
// checkpoint back, gives the ids of the run that took it bit for bit: the
// second pass (hits) equals the first (misses). Against the cache off the
// ids follow f32 as closely as one rounding per checkpoint lets them; the
// test prints how closely (docs/prefix-cache.md). A speculative graph is
// refused by name.
func TestHybridCheckpointBF16F32State(t *testing.T) {
	const n = 24
	m, prompts, want, slot := tinyHybridCacheOff(t, n, 1)
	budget := 40*slot/2 + slot/4 // 40 bf16 checkpoints, 20 f32 ones
	on := open(t, instance.Options{Model: m, MaxRunning: 8, Threads: 2, CheckpointEvery: 2, CheckpointMemory: budget, CheckpointDType: "bf16"})
	first, _ := generateAll(t, on, prompts, n, 1)
	again, stats := generateAll(t, on, prompts, n, 1)
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("ids of hits on bf16 checkpoints differ from the run that took them (-first +hits):\n%s", diff)
	}
	if cached := cachedTokens(stats); cached == 0 {
		t.Error("the second pass hit no checkpoint")
	}
	s := on.Engine.Snapshot()
	if 2*s.CheckpointSlotBytes != s.StateSlotBytes || s.StateSlotBytes != slot || s.CheckpointsMax != 40 ||
		s.Checkpoints == 0 || s.CheckpointBytes() > budget {
		t.Errorf("bf16 checkpoints of a %d-byte f32 slot in %d bytes: snapshot %+v", slot, budget, s)
	}
	same, tokens, agree := 0, 0, 0
	var firstDiverged []int
	for i := range want {
		k := 0
		for k < len(want[i]) && k < len(first[i]) && want[i][k] == first[i][k] {
			k++
		}
		if k == len(want[i]) && len(want[i]) == len(first[i]) {
			same++
		} else {
			firstDiverged = append(firstDiverged, k)
		}
		tokens += len(want[i])
		agree += k
	}
	t.Logf("bf16 checkpoints vs cache off, %d prompts x %d greedy tokens: %d identical, tokens before the first divergence %d of %d (%.3f), diverged at %v",
		len(want), n, same, agree, tokens, float64(agree)/float64(tokens), firstDiverged)
	if same < len(want)/2 {
		t.Errorf("only %d of %d prompts give the cache off's ids with bf16 checkpoints", same, len(want))
	}
	_, err := instance.Open(instance.Options{Model: m, Graph: "ngram", MaxRunning: 1, Threads: 1, CheckpointDType: "bf16"})
	if err == nil || !strings.Contains(err.Error(), "--checkpoint-dtype") {
		t.Errorf("bf16 checkpoints under ngram: %v, want an error naming --checkpoint-dtype", err)
	}
}
