package cpu

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/tensor"
	"github.com/ninfer/ninfer-go/runtime/weights"
)

// Kernel selection. The CPU's instruction set picks a kernel level: with
// AVX-512 and VNNI (levelAVX512) every fast kernel runs; with AVX2, FMA and
// F16C only (levelAVX2) the matmul and attention kernels of the
// *_avx2_amd64.s files run and everything else takes the reference loops; otherwise, or with
// NINFER_CPU_KERNELS=ref in the environment, the readable reference loops in
// kernels.go and quantdot.go run. NINFER_CPU_KERNELS=avx2 caps an AVX-512
// machine at levelAVX2 (the tests use it).
//
// The quantized dtypes' results (Q8_0, Q4_0, and the kindBlock dtypes of
// weightkernels.go: K-quants, IQ4, Q4_1, Q5_0, Q5_1) are bit for bit the
// same at every level. For F32, F16 and BF16 the fast kernels use 16 float32
// lanes with fused multiply-adds (reduced as HSUM16 in simd_amd64.s)
// instead of the reference's 8 unfused lanes, so results differ in the last bits; on one machine they never
// depend on the thread count or on how tokens are batched, because each
// output element is always computed by the same sequence of operations.
// Their levelAVX2 versions (simd_avx2_amd64.s) run that same sequence, so
// both levels give the same bits.
//
// The other fast kernels (attn_amd64.s: attention, softmax, SwiGLU, the f16
// rounding and Q8_0 quantization of activations) give bit for bit the
// reference results; they run at levelAVX512 only (useSIMD), except
// attention (attn_avx2_amd64.s) and the f16 rounding and Q8_0 quantization
// of activations (roundF16AVX2, quantQ8AVX2), which have levelAVX2 versions
// too, as has the vision tower's table GELU (geluF16V, geluF16VAVX2).
var level = chooseLevel(os.Getenv("NINFER_CPU_KERNELS"))

// useSIMD reports whether the AVX-512 kernels run.
var useSIMD = level == levelAVX512

// kernelLevel is an instruction-set level of the CPU kernels.
type kernelLevel int

const (
	levelRef    kernelLevel = iota // the Go reference loops
	levelAVX2                      // AVX2, FMA, F16C and BMI2: the matmul kernels of *_avx2_amd64.s
	levelAVX512                    // AVX-512 F, BW and VL with VNNI: every fast kernel
)

func (l kernelLevel) String() string {
	return [...]string{"ref", "avx2", "avx512"}[l]
}

// chooseLevel returns the best level the CPU supports, capped by env
// ("ref" or "avx2"; anything else leaves it uncapped).
func chooseLevel(env string) kernelLevel {
	best := levelRef
	switch {
	case hasAVX512():
		best = levelAVX512
	case hasAVX2():
		best = levelAVX2
	}
	switch env {
	case "ref":
		return levelRef
	case "avx2":
		return min(best, levelAVX2)
	}
	return best
}

// SIMD reports whether the backend uses its AVX-512 matmul kernels.
func SIMD() bool { return useSIMD }

// KernelLevel names the kernel level the backend runs: "avx512", "avx2" or
// "ref".
func KernelLevel() string { return level.String() }

// parallelMACs is the smallest matmul (in multiply-adds) worth splitting
// across workers; smaller ones run on the calling goroutine.
const parallelMACs = 1 << 16

// matmulState is a program's matmul scratch, reused across steps.
type matmulState struct {
	// Reference path.
	xq []q8Blocks
	xr []float32

	// Fast path (and the reference path's kindBlock dtypes, which share aq).
	preparedActs
	task  matmulTask
	group matmulGroup
	tiles [][]float32 // per worker: a panel of weight rows converted to float32 (floatPanel), packed for runPacked
	// unpacked is per worker one LayoutQ4x16 group unpacked into
	// LayoutQ8x16 blocks (runQ4Groups), or a tile of IQ4_XS activations as
	// int16 pairs (runKGroups).
	unpacked [][]byte
}

// preparedActs is one owner's prepared activations, reused across steps:
// the matmul path's (matmulState) and the MoE experts' (moeState), each in
// its own so that neither disturbs the other's caches. setupTask fills it.
type preparedActs struct {
	// For the kindBlock dtypes: the last activation quantized to a dot
	// type other than the Q8_0 of the kindQ8 kernels, keyed by a.
	aq   actQuant
	a    actKey
	aPre blockPrepTask

	// The last activation quantized to Q8_0 (qx, qd) and the last rounded
	// to f16/bf16 (rx), keyed by source tensor and the op index that
	// produced them (see cached).
	qx []int8    // [T*K]
	qd []float32 // [T*K/32]
	qz []byte    // qx and qd in the layout qLayout names, when it is not q8Plain
	q  actKey
	// qLayout is the layout of qz for the activations q names.
	qLayout q8Layout
	rx      []float32 // [T*K]
	// xp is the last activation packed for the packed float GEMM
	// (packedFloat): [ceil(T/4)][chunks16(K)][4][16], rounded as rType
	// says (F32: as is); r keys it with rx.
	xp    []float32
	r     actKey
	rType tensor.DType
	prep  prepTask
}

// addTo adds a's buffers to f.
func (a *preparedActs) addTo(f *footprint) {
	a.aq.addTo(f)
	addSlice(f, a.qx)
	addSlice(f, a.qd)
	addSlice(f, a.qz)
	addSlice(f, a.rx)
	addSlice(f, a.xp)
}

// actKey identifies a prepared activation: the tensor it was made from and
// the matmul op that made it.
type actKey struct {
	src, at int
	ok      bool
}

// cached reports whether k holds what want names: the same tensor for a
// later matmul op (a want that is not ok is never held). Ops run in order
// and each tensor is computed once per run, so a preparation made earlier
// in this run for the tensor is still valid. One made in an earlier run is
// never reused: the graph is the same every run, so the op that made it
// (at <= want.at) runs again first and remakes it.
func (k actKey) cached(want actKey) bool {
	return k.ok && want.ok && k.src == want.src && k.at < want.at
}

// matmul computes out [T, N] = x [T, K] * W^T for W [N, K] in its stored dtype.
func (p *program) matmul(out []float32, op tensor.Op) error {
	w := p.w[op.Args[1].ID]
	if w == nil {
		return fmt.Errorf("cpu: matmul: right operand must be a weight")
	}
	if kernelOf(w.DType).kind == kindNone {
		return fmt.Errorf("cpu: matmul: weight dtype %v not supported", w.DType)
	}
	if !fastMatmul(w.DType) {
		p.matmulRef(out, op)
		return nil
	}
	p.matmulFast(out, op)
	return nil
}

// matmulRef is matmul with the reference kernels.
func (p *program) matmulRef(out []float32, op tensor.Op) {
	p.matmulInto(out, p.f32[op.Args[0].ID], op.Args[0].Rows(), p.w[op.Args[1].ID])
}

// matmulInto writes x [T, K] times the transpose of w [N, K] into out
// [T, N] with the reference kernels (K = w.RowLen(), N = w.Rows()).
func (p *program) matmulInto(out, x []float32, T int, w *weights.Tensor) {
	K, N := w.RowLen(), w.Rows()
	m := &p.mm
	if q8GroupLayout(w) {
		p.matmulGroupsRef(out, x, T, w)
		return
	}
	switch w.DType {
	case tensor.F32:
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := bytesAsF32(w.Row(r))
				for t := 0; t < T; t++ {
					out[t*N+r] = dotF32(x[t*K:(t+1)*K], row)
				}
			}
		})
	case tensor.F16, tensor.BF16:
		if cap(m.xr) < len(x) {
			m.xr = make([]float32, len(x))
		}
		xr := m.xr[:len(x)]
		roundActivations(xr, x, w.DType)
		dot := dotF16
		if w.DType == tensor.BF16 {
			dot = dotBF16
		}
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := w.Row(r)
				for t := 0; t < T; t++ {
					out[t*N+r] = dot(xr[t*K:(t+1)*K], row)
				}
			}
		})
	case tensor.Q8_0, tensor.Q4_0:
		if cap(m.xq) < T {
			m.xq = make([]q8Blocks, T)
		}
		xq := m.xq[:T]
		for t := range xq {
			quantizeQ8(x[t*K:(t+1)*K], &xq[t])
		}
		dot := dotQ8
		if w.DType == tensor.Q4_0 {
			dot = dotQ4
		}
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			for r := lo; r < hi; r++ {
				row := w.Row(r)
				for t := 0; t < T; t++ {
					out[t*N+r] = dot(row, &xq[t])
				}
			}
		})
	default:
		m.a = actKey{} // m.aq no longer holds what m.a names
		m.aq.resize(w.DType.DotType(), T, K)
		m.aq.quantizeRows(x, 0, T)
		k := kernelOf(w.DType)
		p.b.pool.parallel(N, 16, func(_, lo, hi int) {
			buf := make([]byte, w.RowBytes())
			for r := lo; r < hi; r++ {
				row := fileRow(w, r, buf)
				for t := 0; t < T; t++ {
					out[t*N+r] = k.dot(row, m.aq.row(t))
				}
			}
		})
	}
}

// matmulGroupsRef is matmulInto for weights in a group layout
// (LayoutQ8x16, LayoutQ4x16): Q8_0 activations, the layout's reference dot.
func (p *program) matmulGroupsRef(out, x []float32, T int, w *weights.Tensor) {
	K, N := w.RowLen(), w.Rows()
	m := &p.mm
	if cap(m.xq) < T {
		m.xq = make([]q8Blocks, T)
	}
	xq := m.xq[:T]
	sums := make([][]float32, T) // per token the Q8_1 block sums [K/32], for Q4_1 and Q5_1
	for t := range xq {
		quantizeQ8(x[t*K:(t+1)*K], &xq[t])
		if q4HasMins(w.DType) {
			sums[t] = q8_1Sums(x[t*K:(t+1)*K], &xq[t])
		}
	}
	p.b.pool.parallel(N, q8GroupRows, func(_, lo, hi int) {
		row := make([]byte, w.RowBytes())
		for r := lo; r < hi; r++ {
			for t := 0; t < T; t++ {
				if q4HasMins(w.DType) {
					out[t*N+r] = dotQ8_1Group(w, r, row, &xq[t], sums[t])
				} else if w.Layout == weights.LayoutQ4x16 {
					out[t*N+r] = dotQ4Group(w.Data, w.DType, K/32, r, &xq[t])
				} else {
					out[t*N+r] = dotQ8Group(w.Data, K/32, r, &xq[t])
				}
			}
		}
	})
}

// q8Activations reports whether matmuls by w read Q8_0 activations in
// matmulTask.qx and qd (and qz): Q8_0 and Q4_0 weights, and IQ4_NL and
// Q5_0 ones in LayoutQ4x16.
func q8Activations(w *weights.Tensor) bool {
	return w.DType == tensor.Q8_0 || w.DType == tensor.Q4_0 || q8GroupLayout(w)
}

// q8GroupLayout reports whether w is in a group layout whose kernels read
// Q8_0 activations in the group layout (q8GroupActs): LayoutQ8x16 and
// LayoutQ4x16. The K-quant group layouts read the dtype's dot activations
// (matmulTask.aq).
func q8GroupLayout(w *weights.Tensor) bool {
	return w.Layout == weights.LayoutQ8x16 || w.Layout == weights.LayoutQ4x16
}

// roundActivations writes x rounded to the values of dtype dt (f16 or bf16)
// into dst, as ggml converts activations to the weight's dot type before the
// dot product.
func roundActivations(dst, x []float32, dt tensor.DType) {
	if dt == tensor.F16 {
		i := 0
		if level != levelRef && len(x) >= 16 {
			if useSIMD {
				roundF16(&dst[0], &x[0], len(x))
			} else {
				roundF16AVX2(&dst[0], &x[0], len(x))
			}
			i = len(x) &^ 15
		}
		for ; i < len(x); i++ {
			dst[i] = f16tab[tensor.F32ToF16(x[i])]
		}
		return
	}
	for i, v := range x {
		dst[i] = math.Float32frombits(uint32(tensor.F32ToBF16(v)) << 16)
	}
}

// matmulFast is matmul with the fast kernels of the level: activations are prepared
// once (quantized to Q8_0 or rounded to f16/bf16, shared by the matmuls that
// read the same tensor), then rows are split across workers in quads.
func (p *program) matmulFast(out []float32, op tensor.Op) {
	t := &p.mm.task
	parts := p.setupMatmul(t, out, op)
	p.b.pool.run(t.N, t.grain(), parts, t)
}

// setupMatmul prepares op's activations (or finds them prepared) and fills
// t to compute op into out; it returns how many workers the op is worth.
func (p *program) setupMatmul(t *matmulTask, out []float32, op tensor.Op) int {
	key := actKey{src: op.Args[0].ID, at: op.Out.ID, ok: true}
	return p.setupTask(t, &p.mm.preparedActs, key, out, p.f32[op.Args[0].ID], op.Args[0].Rows(), p.w[op.Args[1].ID])
}

// setupTask prepares x [T, K] for the weight w [N, K] in acts, unless acts
// holds them prepared already under key (a key that is not ok never is),
// and fills t to compute x w^T into out [T, N]; it returns how many
// workers the matmul is worth.
func (p *program) setupTask(t *matmulTask, acts *preparedActs, key actKey, out, x []float32, T int, w *weights.Tensor) int {
	K, N := w.RowLen(), w.Rows()
	x, out = x[:T*K], out[:T*N]
	m, c := &p.mm, acts
	parts := p.b.pool.n
	if T*K*N < parallelMACs {
		parts = 1
	}
	*t = matmulTask{dt: w.DType, w: w.Data, rowBytes: w.RowBytes(), out: out, T: T, K: K, N: N, x: x, tiles: m.tiles,
		layout: w.Layout}
	switch {
	case w.DType == tensor.F32 || w.DType == tensor.F16 || w.DType == tensor.BF16:
		pack := packedFloat(T)
		if w.DType == tensor.F32 && !pack {
			break // the kernels read x as it is
		}
		if !c.r.cached(key) || c.rType != w.DType {
			c.prep = prepTask{dt: w.DType, x: x, K: K, T: T}
			if w.DType != tensor.F32 {
				c.rx = grow(c.rx, len(x))
				c.prep.rx = c.rx
			}
			grain := 1
			if pack {
				c.xp = grow(c.xp, (T+3)/4*packedQuadLen(K))
				c.prep.xp, grain = c.xp, 4
			}
			p.b.pool.run(T, grain, min(parts, (T+grain-1)/grain), &c.prep)
			c.r, c.rType = key, w.DType
		}
		if w.DType != tensor.F32 {
			t.x = c.rx[:len(x)]
		}
		if pack {
			t.xp = c.xp
		}
		if pack || w.DType != tensor.F32 && T >= 4 {
			m.tiles = growTiles(m.tiles, p.b.pool.n, K)
			t.tiles = m.tiles
		}
	case q8Activations(w):
		if unpacksQ4(w, T) {
			m.unpacked = growUnpacked(m.unpacked, p.b.pool.n, K/32*q8GroupBlock)
			t.unpacked = m.unpacked
		}
		lay := q8LayoutFor(w, T)
		if !c.q.cached(key) || lay != q8Plain && c.qLayout != lay {
			p.quantizeQ8(&c.prep, &c.qx, &c.qd, &c.qz, x, T, K, parts, lay)
			c.q, c.qLayout = key, lay
		}
		t.qx, t.qd = c.qx, c.qd
		if lay != q8Plain {
			t.qz = c.qz
		}
	}
	if kernelOf(w.DType).kind == kindBlock && !q8GroupLayout(w) {
		dot := w.DType.DotType()
		fresh := c.a.cached(key) && c.aq.dt == dot
		p.prepareBlock(&c.aPre, &c.aq, x, dot, T, K, parts, fresh, blockKernels(w))
		if !fresh {
			c.a = key
		}
		t.aq = &c.aq
		if size := kGroupActBytes(w, T, K); size > 0 {
			m.unpacked = growUnpacked(m.unpacked, p.b.pool.n, size)
			t.unpacked = m.unpacked
		}
	}
	return parts
}

// maxFused is the most matmuls run as one parallel job.
const maxFused = 4

// matmulGroup is matmuls reading the same activations (q, k and v; gate and
// up), run as one parallel job over all their output columns so that the
// workers meet once instead of once per matmul. Every output element is
// computed as the matmul alone computes it.
type matmulGroup struct {
	tasks [maxFused]matmulTask
	ends  [maxFused]int // cumulative output columns
	n     int
}

func (g *matmulGroup) run(worker, lo, hi int) {
	base := 0
	for i := range g.n {
		if end := g.ends[i]; lo < end && hi > base {
			g.tasks[i].run(worker, max(lo, base)-base, min(hi, end)-base)
		}
		base = g.ends[i]
	}
}

// fuseMatmuls returns, per op index, the matmul ops run together with it:
// for the first matmul of a group, the ops of the group (itself included),
// for the others an empty non-nil slice, otherwise nil. A group is up to
// maxFused matmuls with the same activations and the same supported weight
// dtype, separated only by weight ops.
func fuseMatmuls(g *tensor.Graph, w []*weights.Tensor) [][]int {
	fused := make([][]int, len(g.Ops))
	ok := func(i int) bool {
		op := g.Ops[i]
		if op.Kind != tensor.OpMatMul || w[op.Args[1].ID] == nil {
			return false
		}
		return fastMatmul(w[op.Args[1].ID].DType)
	}
	for i := 0; i < len(g.Ops); i++ {
		if !ok(i) {
			continue
		}
		grp := []int{i}
		j := i + 1
		for ; j < len(g.Ops) && len(grp) < maxFused; j++ {
			if g.Ops[j].Kind == tensor.OpWeight {
				continue
			}
			// Same activations, dtype and layout: one preparation serves all.
			if !ok(j) || g.Ops[j].Args[0].ID != g.Ops[i].Args[0].ID {
				break
			}
			if wi, wj := w[g.Ops[i].Args[1].ID], w[g.Ops[j].Args[1].ID]; wj.DType != wi.DType || wj.Layout != wi.Layout {
				break
			}
			grp = append(grp, j)
		}
		if len(grp) > 1 {
			fused[i] = grp
			for _, k := range grp[1:] {
				fused[k] = []int{}
			}
			i = grp[len(grp)-1]
		}
	}
	return fused
}

// matmulFused computes the matmul ops ops (a group from fuseMatmuls) with
// the fast kernels as one parallel job.
func (p *program) matmulFused(ops []int) {
	g := &p.mm.group
	g.n = len(ops)
	parts, total := 1, 0
	for k, i := range ops {
		parts = max(parts, p.setupMatmul(&g.tasks[k], p.f32[i], p.g.Ops[i]))
		total += g.tasks[k].N
		g.ends[k] = total
	}
	p.b.pool.run(total, g.tasks[0].grain(), parts, g)
}

// usesPairs reports whether a matmul of T tokens by weights of dtype dt
// runs the pair kernels (Q8_0, 2 tokens or more; Q4_0, 8 tokens or more,
// whose 4x8 tiles alone have a pair kernel), which read the pair layout of
// the activations.
func usesPairs(dt tensor.DType, T int) bool {
	return level == levelAVX512 && (dt == tensor.Q8_0 && T >= 2 || dt == tensor.Q4_0 && T >= 8)
}

// q8Layout is a layout of Q8_0 activations that kernels read besides qx
// and qd.
type q8Layout uint8

const (
	q8Plain  q8Layout = iota // qx and qd alone
	q8Pairs                  // the pair kernels' (q8PairLayout)
	q8Groups                 // the LayoutQ8x16 and LayoutQ4x16 kernels' (q8GroupActs)
	q8Sums                   // q8Groups, then the Q8_1 block sums (q8GroupActSums): Q4_1, Q5_1 in LayoutQ4x16
)

// q8LayoutFor returns the activation layout the fast kernels read for T
// tokens times w (Q8_0 or Q4_0).
func q8LayoutFor(w *weights.Tensor, T int) q8Layout {
	switch {
	case q8GroupLayout(w) && q4HasMins(w.DType):
		return q8Sums
	case q8GroupLayout(w):
		return q8Groups
	case usesPairs(w.DType, T):
		return q8Pairs
	}
	return q8Plain
}

// quantizeQ8 quantizes x [T, K] to Q8_0 into *qx and *qd, and unless lay
// is q8Plain also into *qz in that layout, reusing their memory, on up to
// parts workers (in pairs of tokens, which the pair layout keeps together).
func (p *program) quantizeQ8(prep *prepTask, qx *[]int8, qd *[]float32, qz *[]byte, x []float32, T, K, parts int, lay q8Layout) {
	*qx, *qd = grow(*qx, len(x)), grow(*qd, len(x)/32)
	*prep = prepTask{dt: tensor.Q8_0, x: x, K: K, qx: *qx, qd: *qd, layout: lay, T: T}
	switch lay {
	case q8Pairs:
		*qz = grow64(*qz, (T+7)/8*4*(K/32)*q8PairBlock) // whole 4x8 tiles: runQuant pads a tail of 6 or 7 tokens
		prep.qz = *qz
	case q8Groups:
		*qz = grow64(*qz, T*(K/32)*q8ActBlock)
		prep.qz = *qz
	case q8Sums:
		*qz = grow64(*qz, T*(K/32)*(q8ActBlock+4))
		prep.qz = *qz
	}
	p.b.pool.run(T, 2, min(parts, T/2+T%2), prep)
}

// prepTask prepares activation rows [lo, hi) for a matmul: quantizes them to
// Q8_0 (dt Q8_0) or rounds them to f16/bf16 values, and for the packed
// float GEMM packs them (xp; dt F32: as they are).
type prepTask struct {
	dt tensor.DType
	x  []float32 // [T, K]
	K  int
	qx []int8    // [T, K]
	qd []float32 // [T, K/32]
	qz []byte    // nil, or qx and qd in layout
	rx []float32 // [T, K]
	xp []float32 // nil, or the packed float GEMM's activations (packTokens) of T tokens
	T  int
	// layout is qz's: q8Pairs [T/2, K/32, q8PairBlock] (q8PairLayout),
	// q8Groups [T, K/32, q8ActBlock] (q8GroupActs), or q8Sums: those,
	// then [T, K/32] float32 (q8GroupActSums).
	layout q8Layout
}

func (t *prepTask) run(_, lo, hi int) {
	K := t.K
	if t.dt != tensor.Q8_0 {
		x := t.x
		if t.dt != tensor.F32 {
			roundActivations(t.rx[lo*K:hi*K], t.x[lo*K:hi*K], t.dt)
			x = t.rx
		}
		if t.xp != nil {
			packTokens(t.xp, x, K, t.T, lo, hi)
		}
		return
	}
	nb := K / 32
	switch {
	case useSIMD && nb > 0:
		quantQ8(&t.x[lo*K], (hi-lo)*nb, (*byte)(unsafe.Pointer(&t.qx[lo*K])), &t.qd[lo*nb])
	case level == levelAVX2 && nb > 0:
		quantQ8AVX2(&t.x[lo*K], (hi-lo)*nb, (*byte)(unsafe.Pointer(&t.qx[lo*K])), &t.qd[lo*nb])
	default:
		for r := lo; r < hi; r++ {
			q := q8Blocks{d: t.qd[r*nb : (r+1)*nb : (r+1)*nb], qs: t.qx[r*K : (r+1)*K : (r+1)*K]}
			quantizeQ8(t.x[r*K:(r+1)*K], &q)
			for i, v := range q.qs {
				q.qs[i] = v ^ -0x80 // the kernels take x+128 as an unsigned byte
			}
		}
	}
	switch t.layout {
	case q8Pairs:
		q8PairLayout(t.qz, t.qx, t.qd, lo, hi, K)
	case q8Groups:
		q8GroupActs(t.qz, t.qx, t.qd, lo, hi, K)
	case q8Sums:
		q8GroupActs(t.qz, t.qx, t.qd, lo, hi, K)
		q8GroupActSums(t.qz[t.T*nb*q8ActBlock:], t.x, t.qx, lo, hi, K)
	}
}

// matmulTask computes output columns (weight rows) [lo, hi) of one matmul
// with the fast kernels of the level.
type matmulTask struct {
	dt       tensor.DType
	w        []byte // [N rows of rowBytes]
	rowBytes int
	x        []float32      // [T, K] activations (f16/bf16: rounded)
	qx       []int8         // [T, K] Q8_0 activations plus 128, as unsigned bytes
	qd       []float32      // [T, K/32] their scales
	qz       []byte         // qx and qd as q8LayoutFor says: [whole 4x8 tiles of pairs, K/32, q8PairBlock] (q8Pairs), [T, K/32, q8ActBlock] (q8Groups)
	layout   weights.Layout // w's: LayoutRows, or 16-row groups: LayoutQ8x16 (runQ8Groups), LayoutQ4x16 (runQ4Groups), a K-quant group layout (runKGroups)
	out      []float32      // [T, N]
	T, K, N  int
	tiles    [][]float32 // per worker [floatPanel(K)/4*packedQuadLen(K) + packedAccLen(K)]; set when T >= 4 for f16/bf16, or packed
	xp       []float32   // packed activations (packedFloat), else nil
	unpacked [][]byte    // per worker: [K/32*q8GroupBlock] for LayoutQ4x16 where unpacksQ4, [kGroupActBytes(w, T, K)] for LayoutIQ4XSx16 and LayoutQ3Kx16
	aq       *actQuant   // kindBlock dtypes: the activations in the weight's dot type
}

// tokenBlock is the number of tokens whose activations a worker keeps hot in
// cache while it sweeps its weight rows: about 256 KiB of them.
func tokenBlock(rowBytes int) int {
	return max(4, (256<<10)/rowBytes/4*4)
}

// grain is the granularity of the output columns workers take: whole
// groups for weights in 16-row groups, quads otherwise.
func (t *matmulTask) grain() int {
	if t.layout != weights.LayoutRows {
		return q8GroupRows
	}
	return 4
}

func (t *matmulTask) run(worker, lo, hi int) {
	switch t.layout {
	case weights.LayoutRows:
	case weights.LayoutQ8x16:
		t.runQ8Groups(lo, hi)
		return
	case weights.LayoutQ4x16:
		t.runQ4Groups(worker, lo, hi)
		return
	default:
		t.runKGroups(worker, lo, hi)
		return
	}
	switch kernelOf(t.dt).kind {
	case kindQ8:
		t.runQuant(lo, hi)
	case kindBlock:
		t.runBlock(lo, hi)
	default:
		t.runFloat(worker, lo, hi)
	}
}

// floatPanel is the number of weight rows runFloat converts to float32 at
// once (f16/bf16) and sweeps for each token block: about 256 KiB of them, in
// quads, so that the panel and the token block stay in L2 together.
func floatPanel(K int) int {
	return max(4, (256<<10)/(4*K)/4*4)
}

// runFloat handles F32, F16 and BF16 weights. Every output element is
// computed by the same kernel arithmetic (f32Dot4x1 and f32Dot4x4 agree lane
// for lane, and converting f16/bf16 weights to float32 is exact). Batches
// of 4 tokens or more take the rows in quads, converted to float32 (f16,
// bf16) into the worker's tile; batches of more than one token block take
// them in panels (floatPanel), so that each row is converted once and
// reused by every block. At levelAVX512 such batches take the packed GEMM
// (runPacked), the same arithmetic on packed rows and tokens.
func (t *matmulTask) runFloat(worker, lo, hi int) {
	T, K, N, rb := t.T, t.K, t.N, t.rowBytes
	if T < 4 {
		t.gemvFloat(lo, hi, 0, T)
		return
	}
	if t.xp != nil {
		t.runPacked(worker, lo, hi)
		return
	}
	tb := tokenBlock(K * 4)
	pr := 4 // one block: the quad's tile stays in L1
	if T > tb {
		pr = floatPanel(K)
	}
	for p0 := lo; p0 < hi; p0 += pr {
		p1 := min(p0+pr, hi)
		q1 := p0 + (p1-p0)&^3 // rows [p0, q1) go in quads
		var wp unsafe.Pointer
		ws, dt := uintptr(rb), t.dt
		if q1 > p0 {
			wp = unsafe.Pointer(&t.w[p0*rb])
			if dt != tensor.F32 {
				tile := t.tiles[worker][:(q1-p0)*K]
				for i := range q1 - p0 {
					convertRow(dt, tile[i*K:(i+1)*K], t.w[(p0+i)*rb:(p0+i+1)*rb])
				}
				wp, ws, dt = unsafe.Pointer(&tile[0]), uintptr(4*K), tensor.F32
			}
		}
		for t0 := 0; t0 < T; t0 += tb {
			t1 := min(t0+tb, T)
			for r := p0; r < q1; r += 4 {
				w := unsafe.Add(wp, uintptr(r-p0)*ws)
				tt := t0
				for ; tt+4 <= t1; tt += 4 {
					floatDot4x4(w, ws, unsafe.Pointer(&t.x[tt*K]), uintptr(4*K), K, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*N))
				}
				for ; tt < t1; tt++ {
					floatDot4x1(dt, w, ws, unsafe.Pointer(&t.x[tt*K]), K, unsafe.Pointer(&t.out[tt*N+r]), 4)
				}
			}
			for r := q1; r < p1; r++ {
				t.floatRow(r, t0, t1)
			}
		}
	}
}

// floatRow computes output column (weight row) r for tokens [t0, t1).
func (t *matmulTask) floatRow(r, t0, t1 int) {
	K, N, rb := t.K, t.N, t.rowBytes
	var one [4]float32
	for tt := t0; tt < t1; tt++ {
		floatDot4x1(t.dt, unsafe.Pointer(&t.w[r*rb]), 0, unsafe.Pointer(&t.x[tt*K]), K, unsafe.Pointer(&one[0]), 4)
		t.out[tt*N+r] = one[0]
	}
}

// gemvFloat is runFloat for tokens [t0, t1), fewer than 4 (decode), where
// reading the weights is the whole cost. Each kernel call takes one row from
// each quarter of [lo, hi), so the worker reads its weights as four
// sequential streams, each in pages of its own: the hardware prefetchers
// follow that far better than four adjacent rows, which interleave several
// streams within each page.
func (t *matmulTask) gemvFloat(lo, hi, t0, t1 int) {
	K, N, rb := t.K, t.N, t.rowBytes
	q := (hi - lo) / 4
	for r := lo; r < lo+q; r++ {
		for tt := t0; tt < t1; tt++ {
			floatDot4x1(t.dt, unsafe.Pointer(&t.w[r*rb]), uintptr(q*rb), unsafe.Pointer(&t.x[tt*K]), K,
				unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*q))
		}
	}
	for r := lo + 4*q; r < hi; r++ {
		t.floatRow(r, t0, t1)
	}
}

// floatDot4x1 calls the level's 4-row decode kernel for rows of dtype dt
// (called directly, not through a function value, so out does not escape).
func floatDot4x1(dt tensor.DType, w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, k int, out unsafe.Pointer, ostride uintptr) {
	if level == levelAVX2 {
		switch dt {
		case tensor.F16:
			f16Dot4x1AVX2(w, wstride, x, k, out, ostride)
		case tensor.BF16:
			bf16Dot4x1AVX2(w, wstride, x, k, out, ostride)
		default:
			f32Dot4x1AVX2(w, wstride, x, k, out, ostride)
		}
		return
	}
	switch dt {
	case tensor.F16:
		f16Dot4x1(w, wstride, x, k, out, ostride)
	case tensor.BF16:
		bf16Dot4x1(w, wstride, x, k, out, ostride)
	default:
		f32Dot4x1(w, wstride, x, k, out, ostride)
	}
}

// floatDot4x4 calls the level's 4-row, 4-token kernel for float32 rows
// (f32Dot4x4).
func floatDot4x4(w unsafe.Pointer, wstride uintptr, x unsafe.Pointer, xstride uintptr, k int, out unsafe.Pointer, ostride uintptr) {
	if level == levelAVX2 {
		f32Dot4x4AVX2(w, wstride, x, xstride, k, out, ostride)
		return
	}
	f32Dot4x4(w, wstride, x, xstride, k, out, ostride)
}

// convertRow converts an f16 or bf16 row to float32 (exactly) with the
// level's kernels.
func convertRow(dt tensor.DType, dst []float32, src []byte) {
	n := len(dst)
	avx2 := level == levelAVX2
	if dt == tensor.F16 {
		if avx2 {
			cvtF16AVX2(&dst[0], unsafe.Pointer(&src[0]), n)
		} else {
			cvtF16(&dst[0], unsafe.Pointer(&src[0]), n)
		}
		for i := n &^ 15; i < n; i++ {
			dst[i] = f16tab[uint16(src[2*i])|uint16(src[2*i+1])<<8]
		}
		return
	}
	if avx2 {
		cvtBF16AVX2(&dst[0], unsafe.Pointer(&src[0]), n)
	} else {
		cvtBF16(&dst[0], unsafe.Pointer(&src[0]), n)
	}
	for i := n &^ 15; i < n; i++ {
		dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
	}
}

// runQuant handles Q8_0 and Q4_0 weights against Q8_0 activations. The
// kernels agree bit for bit with dotQ8/dotQ4 whatever the tile shape.
func (t *matmulTask) runQuant(lo, hi int) {
	T, K, N, rb := t.T, t.K, t.N, t.rowBytes
	nb := K / 32
	tb := tokenBlock(2 * K)
	for t0 := 0; t0 < T; t0 += tb {
		t1 := min(t0+tb, T)
		if t.qz == nil {
			if (level == levelAVX2 || t.dt == tensor.Q4_0) && t1-t0 >= 2 {
				t.tileQuant(lo, hi, t0, t1)
			} else {
				t.gemvQuant(lo, hi, t0, t1)
			}
			continue
		}
		// The pair kernels take the quads of rows q8Scales4 groups.
		r := lo
		for ; r < hi && r%4 != 0; r++ {
			t.quantRow(r, t0, t1)
		}
		pair := func(tt int) unsafe.Pointer { return unsafe.Pointer(&t.qz[tt/2*nb*q8PairBlock]) }
		for ; r+4 <= hi; r += 4 {
			wp := unsafe.Pointer(&t.w[r*rb])
			tt := t0
			for ; tt+8 <= t1; tt += 8 {
				pairGemm4x8(t.dt, wp, uintptr(rb), pair(tt), uintptr(nb*q8PairBlock), nb, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*N))
			}
			if n := t1 - tt; n >= 5 {
				// Five tokens or more: one 4x8 tile over padding (quantizeQ8
				// allocates whole tiles) costs less than 4x2 tiles and a
				// single token; the padding tokens' outputs are dropped.
				var tile [8 * 4]float32
				pairGemm4x8(t.dt, wp, uintptr(rb), pair(tt), uintptr(nb*q8PairBlock), nb, unsafe.Pointer(&tile[0]), 16)
				for j := range n {
					copy(t.out[(tt+j)*N+r:(tt+j)*N+r+4], tile[4*j:4*j+4])
				}
				tt += n
			}
			if t.dt == tensor.Q4_0 {
				// No smaller Q4_0 pair kernels: pairs of tokens, then one.
				for ; tt+2 <= t1; tt += 2 {
					q4Dot4x2AVX2(wp, uintptr(rb), unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb, unsafe.Pointer(&t.out[tt*N+r]), 4, uintptr(4*N))
				}
				if tt < t1 {
					quantDot4x1(t.dt, wp, uintptr(rb), unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb, unsafe.Pointer(&t.out[tt*N+r]), 4)
				}
				continue
			}
			if n := t1 - tt; n == 4 {
				q8Gemm4x4(wp, uintptr(rb), pair(tt), uintptr(nb*q8PairBlock), nb, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*N))
				tt += 4
			}
			for ; tt+2 <= t1; tt += 2 {
				q8Gemm4x2(wp, uintptr(rb), pair(tt), 0, nb, unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*N))
			}
			for ; tt < t1; tt++ {
				quantDot4x1(t.dt, wp, uintptr(rb), unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb, unsafe.Pointer(&t.out[tt*N+r]), 4)
			}
		}
		for ; r < hi; r++ {
			t.quantRow(r, t0, t1)
		}
	}
}

// pairGemm4x8 calls the 4x8 pair kernel of dt (Q8_0 or Q4_0), directly
// rather than through a function value, so out does not escape.
func pairGemm4x8(dt tensor.DType, w unsafe.Pointer, wstride uintptr, xp unsafe.Pointer, pstride uintptr, nb int, out unsafe.Pointer, ostride uintptr) {
	if dt == tensor.Q4_0 {
		q4Gemm4x8(w, wstride, xp, pstride, nb, out, ostride)
		return
	}
	q8Gemm4x8(w, wstride, xp, pstride, nb, out, ostride)
}

// quantRow computes output column (weight row) r for tokens [t0, t1).
func (t *matmulTask) quantRow(r, t0, t1 int) {
	K, N, rb := t.K, t.N, t.rowBytes
	nb := K / 32
	var one [4]float32
	for tt := t0; tt < t1; tt++ {
		quantDot4x1(t.dt, unsafe.Pointer(&t.w[r*rb]), 0, unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb, unsafe.Pointer(&one[0]), 4)
		t.out[tt*N+r] = one[0]
	}
}

// tileQuant is runQuant for tokens [t0, t1), two or more, at levelAVX2
// and for Q4_0 at both levels:
// quads of adjacent rows take the tokens in pairs (q8Dot4x2AVX2,
// q4Dot4x2AVX2), each weight block loaded once for both, and an odd last
// token alone.
func (t *matmulTask) tileQuant(lo, hi, t0, t1 int) {
	K, N, rb := t.K, t.N, t.rowBytes
	nb := K / 32
	r := lo
	for ; r+4 <= hi; r += 4 {
		wp := unsafe.Pointer(&t.w[r*rb])
		tt := t0
		for ; tt+2 <= t1; tt += 2 {
			xq, xd, out := unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), unsafe.Pointer(&t.out[tt*N+r])
			if t.dt == tensor.Q4_0 {
				q4Dot4x2AVX2(wp, uintptr(rb), xq, xd, nb, out, 4, uintptr(4*N))
			} else {
				q8Dot4x2AVX2(wp, uintptr(rb), xq, xd, nb, out, 4, uintptr(4*N))
			}
		}
		if tt < t1 {
			quantDot4x1(t.dt, wp, uintptr(rb), unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb, unsafe.Pointer(&t.out[tt*N+r]), 4)
		}
	}
	for ; r < hi; r++ {
		t.quantRow(r, t0, t1)
	}
}

// gemvQuant is runQuant for tokens [t0, t1) with the 4x1 kernels, walking
// the rows as four streams like gemvFloat.
func (t *matmulTask) gemvQuant(lo, hi, t0, t1 int) {
	K, N, rb := t.K, t.N, t.rowBytes
	nb := K / 32
	q := (hi - lo) / 4
	for r := lo; r < lo+q; r++ {
		for tt := t0; tt < t1; tt++ {
			quantDot4x1(t.dt, unsafe.Pointer(&t.w[r*rb]), uintptr(q*rb), unsafe.Pointer(&t.qx[tt*K]), unsafe.Pointer(&t.qd[tt*nb]), nb,
				unsafe.Pointer(&t.out[tt*N+r]), uintptr(4*q))
		}
	}
	for r := lo + 4*q; r < hi; r++ {
		t.quantRow(r, t0, t1)
	}
}

// q8PairBlock is the bytes of one block of one pair of tokens in the pair
// kernels' activation layout (see simd_amd64.s): 64 of quants, 64 of
// corrections, 64 of scales.
const q8PairBlock = 192

// q8PairLayout writes tokens [t0, t1) (t0 even) of Q8_0 activations qx
// [T, K] (stored as x+128, unsigned) and qd [T, K/32] into dst
// [T/2 rounded up, K/32, q8PairBlock] in the pair kernels' layout
// (q8PairToken; q8PairLayoutRef spells it out). An odd last token fills
// half of its pair; the other half is left as it was (its outputs are
// dropped).
func q8PairLayout(dst []byte, qx []int8, qd []float32, t0, t1, K int) {
	nb := K / 32
	if nb == 0 {
		return
	}
	for tok := t0; tok < t1; tok++ {
		q8PairToken((*byte)(unsafe.Pointer(&qx[tok*K])), &qd[tok*nb], nb, &dst[tok/2*nb*q8PairBlock+32*(tok%2)])
	}
}

// grow64 is grow for bytes the kernels read in 64-byte pieces: the result
// starts on a 64-byte boundary, so none of them straddles two cache lines.
func grow64(s []byte, n int) []byte {
	if cap(s) >= n && uintptr(unsafe.Pointer(unsafe.SliceData(s)))%64 == 0 {
		return s[:n]
	}
	buf := make([]byte, n+63)
	off := (64 - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%64)) % 64
	return buf[off : off+n : off+n]
}

// quantDot4x1 calls the level's 4-row decode kernel for Q8_0 or Q4_0
// rows. Q4_0 takes the AVX2 kernel at both levels: the VPMADDUBSW of its
// nibbles against the unsigned activations needs no sign trick, and it
// ran 1.5x an AVX-512 VNNI kernel.
func quantDot4x1(dt tensor.DType, w unsafe.Pointer, wstride uintptr, xq, xd unsafe.Pointer, nb int, out unsafe.Pointer, ostride uintptr) {
	if dt == tensor.Q4_0 {
		q4Dot4x1AVX2(w, wstride, xq, xd, nb, out, ostride)
		return
	}
	if level == levelAVX2 {
		q8Dot4x1AVX2(w, wstride, xq, xd, nb, out, ostride)
		return
	}
	q8Dot4x1(w, wstride, xq, xd, nb, out, ostride)
}

// growUnpacked returns per-worker buffers, workers of them, each of at least
// size bytes (matmulTask.unpacked), reusing bufs where they already fit.
func growUnpacked(bufs [][]byte, workers, size int) [][]byte {
	if len(bufs) != workers {
		bufs = make([][]byte, workers)
	}
	for i := range bufs {
		bufs[i] = grow64(bufs[i], size)
	}
	return bufs
}

// growTiles returns per-worker tile buffers, workers of them, each holding at
// least a panel (floatPanel) of weight rows of K floats, packed, and the
// packed GEMM's accumulators (packedAccLen), reusing tiles where
// it already fits.
func growTiles(tiles [][]float32, workers, K int) [][]float32 {
	if len(tiles) != workers {
		tiles = make([][]float32, workers)
	}
	n := floatPanel(K)/4*packedQuadLen(K) + packedAccLen(K)
	for i := range tiles {
		if len(tiles[i]) < n {
			tiles[i] = make([]float32, n)
		}
	}
	return tiles
}
