package grammar

import (
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ninfer/ninfer-go/runtime/tok"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// qwen3Vocab is the Qwen3 tokenizer (151,936 tokens; `just tokenizers`
// makes .cache/qwen3-vocab.gguf) and its grammar vocabulary.
func qwen3Vocab(b testing.TB) (*tok.Tokenizer, *Vocab) {
	f, err := weights.Open(qwen3VocabPath())
	if err != nil {
		b.Skipf("vocabulary: %v (run just tokenizers)", err)
	}
	b.Cleanup(func() { f.Close() })
	tk, err := tok.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	v := NewVocab(tk.VocabSize(), func(id int32) []byte {
		if tk.IsControl(id) || tk.IsEOG(id) {
			return nil
		}
		return tk.Piece(id)
	})
	return tk, v
}

// qwen3Pieces is the piece of each token of tk that NewVocab is given
// ("" for control and end-of-generation tokens).
func qwen3Pieces(tk *tok.Tokenizer) []string {
	pieces := make([]string, tk.VocabSize())
	for id := range pieces {
		if !tk.IsControl(int32(id)) && !tk.IsEOG(int32(id)) {
			pieces[id] = string(tk.Piece(int32(id)))
		}
	}
	return pieces
}

// sampleGrammars yields the schemas whose index is at modulo every, with
// their grammars; the schemas the compiler refuses are left out.
func sampleGrammars(t testing.TB, schemas []benchSchema, every, at int) iter.Seq2[benchSchema, *Grammar] {
	return func(yield func(benchSchema, *Grammar) bool) {
		for i, s := range schemas {
			if i%every != at {
				continue
			}
			src, err := FromSchema(s.Schema)
			if err != nil {
				continue
			}
			g, err := Parse(src)
			if err != nil {
				t.Fatalf("%s: %v", s.ID, err)
			}
			if !yield(s, g) {
				return
			}
		}
	}
}

func qwen3VocabPath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", ".cache", "qwen3-vocab.gguf")
}

// qwen3VocabIfMade is qwen3Vocab, or nils when it has not been made.
func qwen3VocabIfMade(t testing.TB) (*tok.Tokenizer, *Vocab) {
	if _, err := os.Stat(qwen3VocabPath()); err != nil {
		return nil, nil
	}
	return qwen3Vocab(t)
}

// BenchmarkMaskBench measures what MaskBench reports, on one thread with
// the Qwen3 vocabulary: compilation (schema to a grammar's start state)
// p50/p75/p99, time to first mask (compilation and the start state's
// mask) p50/p75/p99, and the time of each token mask (p50/p95/p99, first
// visits of states included: every schema starts from an empty cache)
// while its valid instances are fed token by token. Times are wall clock
// (compile-*, mask-*) and, for compilation p50/p75 and the masks, the CPU
// time of the benchmark's thread (compile-cpu-*, mask-cpu-*: on a shared
// host, what the work cost without the time the thread waited for a
// core). Every 16th schema of maskbench-tests.jsonl (all with
// NINFER_SCHEMABENCH=full).
func BenchmarkMaskBench(b *testing.B) {
	tk, v := qwen3Vocab(b)
	b.Run("byClass", func(b *testing.B) { benchMasks(b, tk, v, true) })
	b.Run("trieWalk", func(b *testing.B) { benchMasks(b, tk, v, false) })
}

// benchMasks is BenchmarkMaskBench with masks by loop class, or by a walk
// of the whole trie from every state.
func benchMasks(b *testing.B, tk *tok.Tokenizer, v *Vocab, byClass bool) {
	schemas := readBench(b, filepath.Join(benchDir(b), "maskbench-tests.jsonl"))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var compile, compileCPU, first, masks, cpu []time.Duration
	for range b.N {
		compile, compileCPU, first, masks, cpu = compile[:0], compileCPU[:0], first[:0], masks[:0], cpu[:0]
		for i, s := range schemas {
			if !fullBench() && i%16 != 0 {
				continue
			}
			start, startCPU := time.Now(), threadCPU()
			src, err := FromSchema(s.Schema)
			if err != nil {
				continue
			}
			g, err := Parse(src)
			if err != nil {
				b.Fatal(err)
			}
			c := g.NewCache()
			st := c.Start()
			compile, compileCPU = append(compile, time.Since(start)), append(compileCPU, threadCPU()-startCPU)
			v.mask(st, 0, byClass)
			first = append(first, time.Since(start))
			c = g.NewCache() // the instances' masks start from an empty cache
			st = c.Start()
			for _, text := range validTexts(s) {
				st := st
				for _, id := range tk.Encode(string(text), false, false) {
					t0, c0 := time.Now(), threadCPU()
					bits := v.mask(st, 0, byClass)
					masks, cpu = append(masks, time.Since(t0)), append(cpu, threadCPU()-c0)
					if bits[id/64]&(1<<(id%64)) == 0 {
						break // outside the grammar (TestMaskBench counts these)
					}
					st = st.AdvanceBytes(tk.Piece(id))
				}
			}
		}
	}
	pct := func(d []time.Duration, p float64) float64 {
		if len(d) == 0 {
			return 0
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Nanoseconds()) / 1e6
	}
	b.ReportMetric(pct(masks, 0.50), "mask-p50-ms")
	b.ReportMetric(pct(masks, 0.95), "mask-p95-ms")
	b.ReportMetric(pct(masks, 0.99), "mask-p99-ms")
	b.ReportMetric(pct(cpu, 0.50), "mask-cpu-p50-ms")
	b.ReportMetric(pct(cpu, 0.95), "mask-cpu-p95-ms")
	b.ReportMetric(pct(cpu, 0.99), "mask-cpu-p99-ms")
	b.ReportMetric(pct(compile, 0.50), "compile-p50-ms")
	b.ReportMetric(pct(compile, 0.75), "compile-p75-ms")
	b.ReportMetric(pct(compile, 0.99), "compile-p99-ms")
	b.ReportMetric(pct(compileCPU, 0.50), "compile-cpu-p50-ms")
	b.ReportMetric(pct(compileCPU, 0.75), "compile-cpu-p75-ms")
	b.ReportMetric(pct(first, 0.50), "first-mask-p50-ms")
	b.ReportMetric(pct(first, 0.75), "first-mask-p75-ms")
	b.ReportMetric(pct(first, 0.99), "first-mask-p99-ms")
	b.ReportMetric(float64(len(masks)), "masks")
	b.ReportMetric(float64(len(compile)), "schemas")
}

// validTexts are s's valid instances as the grammar writes them: compact,
// members in their own order.
func validTexts(s benchSchema) [][]byte {
	var texts [][]byte
	for _, tc := range s.Tests {
		if !tc.Valid {
			continue
		}
		val, _ := decodeOrdered(tc.Data)
		text, _ := canonical(val)
		texts = append(texts, text)
	}
	return texts
}

// threadCPU is the CPU time of the calling OS thread (the benchmark locks
// itself to one).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
