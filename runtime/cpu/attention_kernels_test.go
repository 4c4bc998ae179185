package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

func needSIMD(t testing.TB) {
	t.Helper()
	if !useSIMD {
		t.Skip("no AVX-512 kernels on this machine (or NINFER_CPU_KERNELS=ref)")
	}
}

// TestSoftmaxFast checks softmaxV against softmaxInPlace, bit for bit, on
// lengths around whole 16s and spreads out to where expfV underflows, and
// on rows with ties, zeros and -Inf.
func TestSoftmaxFast(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(s []float32, what string) {
		t.Helper()
		want := append([]float32(nil), s...)
		softmaxInPlace(want)
		softmaxV(&s[0], len(s))
		for i := range s {
			if math.Float32bits(s[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s n=%d: [%d] = %v, want %v", what, len(s), i, s[i], want[i])
			}
		}
	}
	for _, n := range []int{1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 512, 1000, 4097} {
		for _, spread := range []float32{0.1, 5, 30, 120, 1e4} {
			s := make([]float32, n)
			for i := range s {
				s[i] = float32(rng.NormFloat64()) * spread
			}
			check(s, fmt.Sprintf("spread=%v", spread))
		}
		s := make([]float32, n)
		for i := range s {
			switch rng.IntN(4) {
			case 0:
				s[i] = float32(math.Inf(-1))
			case 1:
				s[i] = float32(math.Copysign(0, -1))
			case 2:
				s[i] = -87 - rng.Float32()*20
			}
		}
		s[rng.IntN(n)] = 0
		check(s, "special")
	}
}

// attnCase is one attention configuration for TestAttentionFastMatchesRef.
type attnCase struct {
	heads, kvHeads, hd, bt int
	dtype                  string
	seqs                   [][2]int // per sequence: first position of this step's rows, row count
	nonCausal              bool     // rows also see their sequence's later rows of the step
}

// fastLevels are the kernel levels above the reference that this CPU runs.
func fastLevels() []kernelLevel {
	var ls []kernelLevel
	for _, lv := range testLevels() {
		if lv != levelRef {
			ls = append(ls, lv)
		}
	}
	return ls
}

// needFast skips tests of the fast attention kernels on a CPU without them.
func needFast(t testing.TB) {
	t.Helper()
	if len(fastLevels()) == 0 {
		t.Skip("no AVX2 or AVX-512 kernels on this machine")
	}
}

// runAttention computes attention for c (random q, k, v; KV pages filled
// by earlier steps with random rows) at kernel level lv (levelRef: the
// reference loops), on a pool of threads workers.
func runAttention(t *testing.T, c attnCase, lv kernelLevel, threads int) []float32 {
	t.Helper()
	defer setLevel(lv)()
	p, op, b, out := setupAttention(t, c, threads)
	defer p.b.Close()
	p.attention(out, op, b)
	return out
}

// setupAttention builds a backend of threads workers and an attention op
// for c, with earlier positions' K and V already in the pages; the caller
// runs p.attention(out, op, b) and closes p.b.
func setupAttention(t testing.TB, c attnCase, threads int) (*program, tensor.Op, *exec.Batch, []float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, uint64(c.hd)))
	kvd, qd := c.kvHeads*c.hd, c.heads*c.hd
	be := New(exec.Options{Threads: threads})
	// Every sequence gets blocks for its positions, in a scattered order.
	total := 0
	for _, s := range c.seqs {
		total += (s[0] + s[1] + c.bt - 1) / c.bt
	}
	perm := rng.Perm(total + 3)
	if err := be.Reserve(exec.KVLayout{Layers: 2, KVDim: kvd, BlockTokens: c.bt, Blocks: total + 3, DType: c.dtype}); err != nil {
		t.Fatal(err)
	}
	b := &exec.Batch{}
	next := 0
	for si, s := range c.seqs {
		blocks := (s[0] + s[1] + c.bt - 1) / c.bt
		tab := make([]int32, blocks)
		for i := range tab {
			tab[i] = int32(perm[next])
			next++
		}
		b.Tables = append(b.Tables, tab)
		for r := range s[1] {
			b.Positions = append(b.Positions, int32(s[0]+r))
			b.RowSeq = append(b.RowSeq, int32(si))
			b.Tokens = append(b.Tokens, 0)
		}
	}
	T := len(b.Tokens)
	rnd := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	// Earlier positions: written through attention steps of one row each
	// would be slow; write the pages directly with writeKV instead.
	p := &program{b: be, f32: make([][]float32, 4), score: make([][]float32, be.pool.n), attnScr: make([]attnScratch, be.pool.n)}
	op := tensor.Op{Kind: tensor.OpAttention, Out: tensor.Tensor{ID: 3, Shape: [2]int{T, qd}},
		Args: []tensor.Tensor{{ID: 0, Shape: [2]int{T, qd}}, {ID: 1, Shape: [2]int{T, kvd}}, {ID: 2, Shape: [2]int{T, kvd}}},
		Attn: tensor.AttentionArgs{Layer: 1, Heads: c.heads, KVHeads: c.kvHeads, HeadDim: c.hd, Scale: float32(1 / math.Sqrt(float64(c.hd))),
			NonCausal: c.nonCausal}}
	for si, s := range c.seqs {
		if s[0] == 0 {
			continue
		}
		pre := &exec.Batch{Tables: b.Tables}
		for pos := range s[0] {
			pre.Positions = append(pre.Positions, int32(pos))
			pre.RowSeq = append(pre.RowSeq, int32(si))
		}
		preOp := op
		preOp.Out.Shape[0] = s[0]
		p.f32[1], p.f32[2] = rnd(s[0]*kvd, 1), rnd(s[0]*kvd, 1)
		p.writeKV(preOp, pre)
	}
	p.f32[0], p.f32[1], p.f32[2] = rnd(T*qd, 2), rnd(T*kvd, 1), rnd(T*kvd, 1)
	if err := p.checkBatch(b); err != nil {
		t.Fatal(err)
	}
	return p, op, b, make([]float32, T*qd)
}

// BenchmarkAttention times one attention op of the 0.6B-shape model's
// layer shape (16 query heads, 8 KV heads of 128) and of stories260K's (8
// and 4 heads of 8), f32 pages on 2 threads: pp512 (a 512-row prompt
// chunk), tg (one row after 4096 or 511 positions) and tg8 (a decode batch:
// 8 sequences, one row each after 63 or 15 positions, one work item per
// sequence and KV head), with the AVX-512 kernels, the AVX2 ones and the
// reference loops (the levels the CPU has). Compare them as ratios from
// one run.
func BenchmarkAttention(b *testing.B) {
	shapes := []struct {
		name               string
		heads, kvHeads, hd int
	}{{"0.6B", 16, 8, 128}, {"stories", 8, 4, 8}}
	for _, sh := range shapes {
		for _, w := range []struct {
			name string
			seqs [][2]int
		}{{"pp512", [][2]int{{0, 512}}}, {"tg@512", [][2]int{{511, 1}}}, {"tg@4096", [][2]int{{4095, 1}}},
			{"tg8@64", slices.Repeat([][2]int{{63, 1}}, 8)}, {"tg8@16", slices.Repeat([][2]int{{15, 1}}, 8)}} {
			for _, lv := range testLevels() {
				b.Run(sh.name+"/"+w.name+"/"+lv.String(), func(b *testing.B) {
					defer setLevel(lv)()
					c := attnCase{heads: sh.heads, kvHeads: sh.kvHeads, hd: sh.hd, bt: 16, dtype: "f32", seqs: w.seqs}
					p, op, batch, out := setupAttention(b, c, 2)
					defer p.b.Close()
					b.ResetTimer()
					for range b.N {
						p.attention(out, op, batch)
					}
				})
			}
		}
	}
}

// BenchmarkAttentionDecodeBatch times one attention op of a serving decode
// step on the 0.6B-shape layer (16 query heads, 8 KV heads of 128): 16
// sequences, one row each after 63 or 127 positions, 2 threads, at the
// fastest kernel level, per KV format. "cold" evicts the caches before each
// op, as a real step's weight reads do between two layers' attention, so
// it measures how well the KV pages stream from memory; "warm" leaves them
// where the previous op left them.
func BenchmarkAttentionDecodeBatch(b *testing.B) {
	evict := make([]byte, 256<<20)
	for _, pos := range []int{63, 127} {
		for _, f := range []string{"f32", "f16", "bf16", "int8-g64"} {
			for _, cold := range []bool{false, true} {
				name := fmt.Sprintf("tg16@%d/%s/warm", pos+1, f)
				if cold {
					name = fmt.Sprintf("tg16@%d/%s/cold", pos+1, f)
				}
				b.Run(name, func(b *testing.B) {
					c := attnCase{heads: 16, kvHeads: 8, hd: 128, bt: 16, dtype: f, seqs: slices.Repeat([][2]int{{pos, 1}}, 16)}
					p, op, batch, out := setupAttention(b, c, 2)
					defer p.b.Close()
					b.ResetTimer()
					for i := range b.N {
						if cold {
							b.StopTimer()
							for j := 0; j < len(evict); j += 64 {
								evict[j] = byte(i)
							}
							b.StartTimer()
						}
						p.attention(out, op, batch)
					}
				})
			}
		}
	}
}

// TestAttentionFastMatchesRef checks the fast attention (at every level
// the CPU has) against the reference loops bit for bit, over head shapes,
// block sizes, KV formats, batches of several sequences and thread counts.
func TestAttentionFastMatchesRef(t *testing.T) {
	needFast(t)
	cases := []attnCase{
		{heads: 8, kvHeads: 4, hd: 8, bt: 16, dtype: "f32", seqs: [][2]int{{0, 37}}},
		{heads: 8, kvHeads: 4, hd: 8, bt: 16, dtype: "f32", seqs: [][2]int{{40, 1}, {3, 5}, {0, 1}}},
		{heads: 16, kvHeads: 8, hd: 128, bt: 16, dtype: "f32", seqs: [][2]int{{0, 70}, {100, 1}}},
		{heads: 4, kvHeads: 4, hd: 64, bt: 32, dtype: "f32", seqs: [][2]int{{17, 9}, {0, 3}}},
		{heads: 8, kvHeads: 1, hd: 80, bt: 16, dtype: "f32", seqs: [][2]int{{5, 6}}},
		{heads: 6, kvHeads: 2, hd: 24, bt: 8, dtype: "f32", seqs: [][2]int{{0, 30}, {9, 2}}},
		{heads: 4, kvHeads: 2, hd: 48, bt: 16, dtype: "f16", seqs: [][2]int{{20, 20}}},
		{heads: 4, kvHeads: 2, hd: 64, bt: 16, dtype: "int8-g64", seqs: [][2]int{{0, 33}, {50, 1}}},
		{heads: 4, kvHeads: 2, hd: 64, bt: 16, dtype: "fp8-e4m3-row256", seqs: [][2]int{{0, 2}, {60, 4}}},
		{heads: 2, kvHeads: 1, hd: 16, bt: 4, dtype: "bf16", seqs: [][2]int{{0, 19}}},
		{heads: 16, kvHeads: 8, hd: 128, bt: 32, dtype: "bf16", seqs: [][2]int{{70, 1}, {0, 1}, {33, 2}}},
		{heads: 4, kvHeads: 2, hd: 32, bt: 8, dtype: "f16", seqs: [][2]int{{13, 1}, {0, 20}}},
		{heads: 4, kvHeads: 2, hd: 20, bt: 16, dtype: "f16", seqs: [][2]int{{21, 3}}},
		{heads: 4, kvHeads: 2, hd: 64, bt: 32, dtype: "int8-g64", seqs: [][2]int{{40, 1}, {2, 3}}},
		{heads: 4, kvHeads: 2, hd: 32, bt: 16, dtype: "f32", seqs: [][2]int{{20, 4}, {3, 9}}, nonCausal: true},
		{heads: 4, kvHeads: 2, hd: 32, bt: 16, dtype: "int8-g64", seqs: [][2]int{{7, 4}}, nonCausal: true},
		// Prompt chunks over a long cached context: tiles of several rows,
		// keys scored in several blocks (attnKeyBlockBytes), an odd group.
		{heads: 8, kvHeads: 2, hd: 256, bt: 16, dtype: "f32", seqs: [][2]int{{300, 40}}},
		{heads: 6, kvHeads: 2, hd: 256, bt: 16, dtype: "f32", seqs: [][2]int{{290, 23}, {500, 1}}},
		{heads: 8, kvHeads: 2, hd: 64, bt: 16, dtype: "int8-g64", seqs: [][2]int{{1100, 30}}},
		{heads: 8, kvHeads: 2, hd: 128, bt: 16, dtype: "f32", seqs: [][2]int{{520, 17}}, nonCausal: true},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("h%d-kv%d-hd%d-bt%d-%s-%v-noncausal=%v", c.heads, c.kvHeads, c.hd, c.bt, c.dtype, c.seqs, c.nonCausal), func(t *testing.T) {
			want := runAttention(t, c, levelRef, 2)
			for _, lv := range fastLevels() {
				for _, threads := range []int{1, 2, 3} {
					got := runAttention(t, c, lv, threads)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%v threads=%d: out[%d] = %v, want %v", lv, threads, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}

// TestAttentionFastPositions checks the fast attention (at every level the
// CPU has) against the reference loops bit for bit for every head
// dimension the kernels treat
// differently (no whole 64, whole 64s, 64s and a rest), visible positions
// around multiples of 16 and 64 up to 300, one row (the single-row value
// order) and batches of rows (tinyBLAS's), GQA groups of 1, 2 and 4 (odd
// and even query vectors per tile), f32 and int8-g64 pages.
func TestAttentionFastPositions(t *testing.T) {
	needFast(t)
	ns := []int{1, 2, 15, 16, 17, 33, 63, 64, 65, 100, 127, 128, 129, 191, 257, 300}
	if testing.Short() {
		ns = []int{1, 17, 64, 129, 300}
	}
	type shape struct{ heads, kvHeads, hd int }
	shapes := []shape{{4, 4, 16}, {4, 2, 64}, {8, 2, 128}, {2, 2, 256}, {6, 2, 80}, {3, 1, 24}}
	for _, sh := range shapes {
		for _, dtype := range []string{"f32", "int8-g64"} {
			if dtype != "f32" && sh.hd%64 != 0 {
				continue
			}
			for _, n := range ns {
				rows := []int{1, 3}
				if n >= 6 {
					rows = append(rows, 6)
				}
				for _, r := range rows {
					if r > n {
						continue
					}
					c := attnCase{heads: sh.heads, kvHeads: sh.kvHeads, hd: sh.hd, bt: 16, dtype: dtype, seqs: [][2]int{{n - r, r}}}
					if r == 3 {
						// a second sequence in the batch, with a single row
						c.seqs = append(c.seqs, [2]int{n/2 + 1, 1})
						c.bt = 32
					}
					want := runAttention(t, c, levelRef, 1)
					for _, lv := range fastLevels() {
						got := runAttention(t, c, lv, 2)
						for i := range got {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%v heads %d/%d hd %d %s seqs %v: out[%d] = %v, want %v", lv, sh.heads, sh.kvHeads, sh.hd, dtype, c.seqs, i, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

// Non-causal attention lets a row see its sequence's later rows of the
// step: its first row's output changes with the last row's value, which
// causal attention never reads.
func TestAttentionNonCausalSeesLaterRows(t *testing.T) {
	for _, nonCausal := range []bool{false, true} {
		c := attnCase{heads: 2, kvHeads: 1, hd: 16, bt: 16, dtype: "f32", seqs: [][2]int{{3, 4}}, nonCausal: nonCausal}
		p, op, b, out := setupAttention(t, c, 1)
		p.attention(out, op, b)
		first := slices.Clone(out[:c.heads*c.hd])
		v := p.f32[2]
		for i := 3 * c.kvHeads * c.hd; i < len(v); i++ {
			v[i] += 1 // the last row's value
		}
		p.attention(out, op, b)
		p.b.Close()
		if changed := !slices.Equal(first, out[:c.heads*c.hd]); changed != nonCausal {
			t.Errorf("nonCausal=%v: the first row's output changed with the last row's value: %v", nonCausal, changed)
		}
	}
}

// TestKVTranspose16 checks kvTranspose16 against the definition for each
// value type: 16 rows a stride apart (wider than the values read), dst
// [value][row] as float32, dims 16 and 128.
func TestKVTranspose16(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(7, 16))
	for _, n16 := range []int{1, 8} {
		for kind, size := range []int{4, 2, 2} {
			stride := (16*n16 + 5) * size
			src := make([]byte, 16*stride)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			value := func(r, j int) float32 {
				b := src[r*stride+j*size:]
				switch kind {
				case 0:
					return math.Float32frombits(binary.LittleEndian.Uint32(b))
				case 1:
					return tensor.F16ToF32(binary.LittleEndian.Uint16(b))
				}
				return tensor.BF16ToF32(binary.LittleEndian.Uint16(b))
			}
			got := make([]float32, 16*16*n16)
			kvTranspose16(&got[0], unsafe.Pointer(&src[0]), uintptr(stride), n16, kind)
			var bad []string
			for j := range 16 * n16 {
				for r := range 16 {
					if w := value(r, j); math.Float32bits(got[16*j+r]) != math.Float32bits(w) && !(w != w && got[16*j+r] != got[16*j+r]) {
						bad = append(bad, fmt.Sprintf("value %d row %d: got %v, want %v", j, r, got[16*j+r], w))
					}
				}
			}
			if len(bad) > 0 {
				t.Errorf("kind %d n16 %d: %d wrong, first %v", kind, n16, len(bad), bad[:min(4, len(bad))])
			}
		}
	}
}

// TestSwiGLUFast checks swigluFast against swigluRows bit for bit at every
// fast level, over
// row widths with and without a tail past their last whole 16 and ranges
// that start and end inside rows, on values out to where expfV saturates.
func TestSwiGLUFast(t *testing.T) {
	for _, lv := range fastLevels() {
		t.Run(lv.String(), func(t *testing.T) {
			defer setLevel(lv)()
			testSwiGLUFast(t)
		})
	}
}

func testSwiGLUFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	g := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 3e-39, 80, -80, 88.8, -88.8, 100, -100, 200, -200,
		float32(math.Inf(1)), float32(math.Inf(-1)), 1, -1}
	for len(g) < 1<<16 {
		g = append(g, float32(rng.NormFloat64()*math.Ldexp(1, rng.IntN(16)-8)))
	}
	u := make([]float32, len(g))
	for i := range u {
		u[i] = float32(rng.NormFloat64())
	}
	for _, cols := range []int{768, 16, 17, 40, 1, 3072} {
		for _, r := range [][2]int{{0, len(g)}, {5, 1000}, {17, 18}, {cols - 1, 3 * cols}} {
			lo, hi := r[0], min(r[1], len(g))
			if lo >= hi {
				continue
			}
			got, want := make([]float32, len(g)), make([]float32, len(g))
			swigluFast(got, g, u, lo, hi, cols)
			swigluRows(want[lo:hi], g[lo:hi], u[lo:hi], lo, cols)
			for i := lo; i < hi; i++ {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("cols %d [%d,%d): silu(%v)*%v = %v, want %v", cols, lo, hi, g[i], u[i], got[i], want[i])
				}
			}
		}
	}
}

// TestRMSNormFast checks rmsNormFast against rmsNorm bit for bit, on rows
// of every length up to 70 and the 0.6B-shape widths, with magnitudes
// spread widely enough that the float64 sum rounds.
func TestRMSNormFast(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(21, 22))
	lens := []int{128, 1024, 3072}
	for n := 1; n <= 70; n++ {
		lens = append(lens, n)
	}
	for _, n := range lens {
		for _, eps := range []float32{1e-6, 1e-5, 0} {
			x, w := make([]float32, n), make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20))
				w[i] = float32(rng.NormFloat64())
			}
			if n > 3 {
				x[n/2] = 0
			}
			want, got := make([]float32, n), make([]float32, n)
			rmsNorm(want, x, w, eps)
			rmsNormFast(got, x, w, eps)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("n=%d eps=%g: out[%d] = %v, want %v", n, eps, i, got[i], want[i])
				}
			}
		}
	}
}

// TestSwiGLUExhaustive checks every float32 g with u = 1 (minutes; set
// NINFER_EXHAUSTIVE=1).
func TestSwiGLUExhaustive(t *testing.T) {
	needSIMD(t)
	if os.Getenv("NINFER_EXHAUSTIVE") == "" {
		t.Skip("set NINFER_EXHAUSTIVE=1")
	}
	g, u, out := make([]float32, 1<<16), make([]float32, 1<<16), make([]float32, 1<<16)
	for i := range u {
		u[i] = 1
	}
	for hi := uint64(0); hi < 1<<32; hi += 1 << 16 {
		for i := range g {
			g[i] = math.Float32frombits(uint32(hi) + uint32(i))
		}
		swigluFast(out, g, u, 0, len(g), len(g))
		for i, x := range g {
			if want := siluV(x); math.Float32bits(out[i]) != math.Float32bits(want) && x == x {
				t.Fatalf("silu(%v) = %v, want %v", x, out[i], want)
			}
		}
	}
}

// TestRoundF16 checks the VCVTPS2PH rounding against tensor.F32ToF16 for
// every float32 bit pattern's neighbourhood of f16 (a sample of all exponents).
func TestRoundF16(t *testing.T) {
	needSIMD(t)
	src := make([]float32, 0, 1<<20)
	for b := uint64(0); b < 1<<32; b += 4093 {
		src = append(src, math.Float32frombits(uint32(b)))
	}
	for len(src)%16 != 0 {
		src = append(src, 1)
	}
	dst := make([]float32, len(src))
	roundF16(&dst[0], &src[0], len(src))
	for i, v := range src {
		want := tensor.F16ToF32(tensor.F32ToF16(v))
		if math.Float32bits(dst[i]) != math.Float32bits(want) && !(v != v && dst[i] != dst[i]) {
			t.Fatalf("round %v (%#x) = %v, want %v", v, math.Float32bits(v), dst[i], want)
		}
	}
}

// TestQuantQ8 checks quantQ8 against quantizeQ8 (quants plus 128) bit for bit.
func TestQuantQ8(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const nb = 4096
	x := make([]float32, nb*32)
	for b := range nb {
		scale := math.Ldexp(1, rng.IntN(60)-40)
		for i := range 32 {
			switch {
			case b%7 == 0:
				x[b*32+i] = 0
			case b%11 == 0 && i == 5:
				x[b*32+i] = float32(math.Copysign(0, -1))
			default:
				x[b*32+i] = float32(rng.NormFloat64() * scale)
			}
		}
		if b%13 == 0 {
			x[b*32+rng.IntN(32)] = float32(rng.NormFloat64()) * 1e-40
		}
	}
	xu, d := make([]byte, len(x)), make([]float32, nb)
	quantQ8(&x[0], nb, &xu[0], &d[0])
	var q q8Blocks
	quantizeQ8(x, &q)
	for b := range nb {
		if math.Float32bits(d[b]) != math.Float32bits(q.d[b]) {
			t.Fatalf("block %d: d = %v, want %v", b, d[b], q.d[b])
		}
	}
	for i := range x {
		if xu[i] != byte(q.qs[i])^0x80 {
			t.Fatalf("x[%d] = %v: quant %d, want %d", i, x[i], int8(xu[i]^0x80), q.qs[i])
		}
	}
}

// TestQuantQ8K checks the AVX-512 and AVX2 Q8_K quantizers (those the CPU
// runs) against quantizeQ8K bit for bit: zero blocks, a largest magnitude
// that occurs twice (the first one wins, with its sign), negative and tiny
// maxima, spreads of magnitude.
func TestQuantQ8K(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const nb = 64
	x := make([]float32, nb*256)
	for b := range nb {
		scale := math.Ldexp(1, rng.IntN(40)-20)
		for i := range 256 {
			x[b*256+i] = float32(rng.NormFloat64() * scale)
		}
		switch b % 5 {
		case 0:
			clear(x[b*256 : b*256+256])
		case 1:
			x[b*256+17], x[b*256+200] = -1e3, 1e3 // equal magnitudes: the first, negative, one is m
		case 2:
			x[b*256+255] = float32(-scale * 9)
		}
	}
	var want, got actQuant
	want.resize(tensor.Q8_K, 1, len(x))
	got.resize(tensor.Q8_K, 1, len(x))
	quantizeQ8K(x, want.row(0))
	w, g := want.row(0), got.row(0)
	kernels := map[string]func(x *float32, nb int, qs *int8, d *float32, bsums *int16){}
	if hasAVX512() {
		kernels["avx512"] = quantQ8K
	}
	if hasAVX2() {
		kernels["avx2"] = quantQ8KAVX2
	}
	for name, quant := range kernels {
		for i := range g.qs {
			g.qs[i] = 0x55
		}
		for i := range g.d {
			g.d[i] = -1
		}
		for i := range g.bsums {
			g.bsums[i] = 0x5555
		}
		quant(&x[0], nb, &g.qs[0], &g.d[0], &g.bsums[0])
		if d := cmp.Diff(w.d, g.d); d != "" {
			t.Errorf("%s: scales (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff(w.qs, g.qs); d != "" {
			t.Errorf("%s: quants (-want +got):\n%s", name, d)
		}
		if d := cmp.Diff(w.bsums, g.bsums); d != "" {
			t.Errorf("%s: sums (-want +got):\n%s", name, d)
		}
	}
}

// TestAttentionNoAllocs checks that the fast attention path does not
// allocate once its scratch has grown.
func TestAttentionNoAllocs(t *testing.T) {
	needFast(t)
	c := attnCase{heads: 16, kvHeads: 8, hd: 128, bt: 16, dtype: "f32", seqs: [][2]int{{0, 40}, {70, 1}}}
	for _, lv := range fastLevels() {
		restore := setLevel(lv)
		for _, dtype := range []string{"f32", "int8-g64"} {
			c.dtype = dtype
			p, op, b, out := setupAttention(t, c, 2)
			p.attention(out, op, b)
			if n := testing.AllocsPerRun(20, func() { p.attention(out, op, b) }); n != 0 {
				t.Errorf("%v %s: %v allocations per attention op", lv, dtype, n)
			}
			p.b.Close()
		}
		restore()
	}
}

// TestRoPENeoxFast checks ropeRow's AVX-512 NEOX rotation against its Go
// loop bit for bit, for rotary widths with and without pairs past the last
// 16 and several heads per row.
func TestRoPENeoxFast(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(23, 24))
	for _, hd := range []int{16, 32, 64, 80, 128, 256} {
		for _, pos := range []int32{0, 1, 7, 300, 4000} {
			a := tensor.RoPEArgs{Dims: hd, HeadDim: hd, Base: 1e6, Mode: tensor.RoPENeox}
			x := make([]float32, 3*hd)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 3)
			}
			want, got := slices.Clone(x), slices.Clone(x)
			trig := make([]float32, hd)
			func() {
				defer func(u bool) { useSIMD = u }(useSIMD)
				useSIMD = false
				ropeRow(want, pos, a, nil, trig[:hd/2], trig[hd/2:])
			}()
			ropeRow(got, pos, a, nil, trig[:hd/2], trig[hd/2:])
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("hd %d pos %d: x[%d] = %v, want %v", hd, pos, i, got[i], want[i])
				}
			}
		}
	}
}

// A row's attention does not depend on how many rows share its step: each
// row of a prompt chunk, run again alone as a step of one row (a chunk of
// one token, or a decode step of one sequence) over the same pages, gives
// the same output bit for bit, at every level.
func TestAttentionRowAloneMatchesChunk(t *testing.T) {
	for _, dtype := range []string{"f32", "int8-g64"} {
		for _, n := range []int{5, 70, 300} {
			c := attnCase{heads: 4, kvHeads: 2, hd: 64, bt: 16, dtype: dtype, seqs: [][2]int{{n - 5, 5}}}
			for _, lv := range append([]kernelLevel{levelRef}, fastLevels()...) {
				func() {
					defer setLevel(lv)()
					p, op, b, out := setupAttention(t, c, 2)
					defer p.b.Close()
					p.attention(out, op, b)
					q, k, v := p.f32[0], p.f32[1], p.f32[2]
					qd, kvd := c.heads*c.hd, c.kvHeads*c.hd
					for r := range 5 {
						one := &exec.Batch{Tables: b.Tables, Positions: b.Positions[r : r+1], RowSeq: b.RowSeq[r : r+1], Tokens: b.Tokens[r : r+1]}
						op1 := op
						op1.Out.Shape[0] = 1
						op1.Args = []tensor.Tensor{{ID: 0, Shape: [2]int{1, qd}}, {ID: 1, Shape: [2]int{1, kvd}}, {ID: 2, Shape: [2]int{1, kvd}}}
						p.f32[0], p.f32[1], p.f32[2] = q[r*qd:(r+1)*qd], k[r*kvd:(r+1)*kvd], v[r*kvd:(r+1)*kvd]
						got := make([]float32, qd)
						p.attention(got, op1, one)
						for i, g := range got {
							if want := out[r*qd+i]; math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("%v %s n %d: row %d alone: out[%d] = %v, in the chunk %v", lv, dtype, n, r, i, g, want)
							}
						}
					}
				}()
			}
		}
	}
}

// BenchmarkAttentionPrefillCached is one prompt chunk of 150 rows after
// 2,000 cached positions (a chat turn resumed from the prefix cache) in the
// 0.8B-width Qwen3.5 hybrid's attention shape (8 query heads of 256 on 2 KV
// heads, f32 pages), on 2 threads.
func BenchmarkAttentionPrefillCached(b *testing.B) {
	c := attnCase{heads: 8, kvHeads: 2, hd: 256, bt: 16, dtype: "f32", seqs: [][2]int{{2000, 150}}}
	p, op, batch, out := setupAttention(b, c, 2)
	defer p.b.Close()
	for b.Loop() {
		p.attention(out, op, batch)
	}
}

// TestAttnKeyBlock checks the score blocks' chunk counts: a prompt tile's
// K block fits attnKeyBlockBytes, a decode tile's attnKeyBlockL2Bytes,
// even for query vector pairs and a multiple of 4 for an odd tile's last
// query vector, at least one step.
func TestAttnKeyBlock(t *testing.T) {
	cases := []struct{ nq, hd, want int }{
		{32, 256, 2},  // the 0.8B-width hybrid's prompt tiles: 32 KiB
		{12, 128, 4},  // the 0.6B shape's
		{9, 256, 4},   // odd: the last query vector takes 4 chunks a step
		{4, 256, 16},  // a decode row's 4 query heads: 256 KiB
		{2, 128, 32},  // a decode row's 2
		{3, 256, 16},  // odd decode tile
		{32, 8, 64},   // tiny heads: 32 KiB still
		{32, 2048, 2}, // a chunk over the block: one step
		{5, 2048, 4},
	}
	var got, want []int
	for _, c := range cases {
		got = append(got, attnKeyBlock(c.nq, c.hd))
		want = append(want, c.want)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("attnKeyBlock (-want +got), cases %v:\n%s", cases, d)
	}
}
