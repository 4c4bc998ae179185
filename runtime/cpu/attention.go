package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// attnChunk is the number of key positions the score kernels compute at
// once, one per lane.
const attnChunk = 16

// attnFastExact is whether attentionFast computes attentionRef's order.
const attnFastExact = false

// kvPages is the backend's KV cache, reserved once by Reserve.
//
// Direct f32 pages (k, v: format f32 with BlockTokens a multiple of
// attnChunk) hold float32 values that attention reads in place: V as rows
// [slot][KVDim], K transposed within each block, [block][KVDim][BlockTokens],
// so that one key dimension of attnChunk consecutive positions is one vector.
// Every other layout holds rows encoded by codec (quantized on write, decoded
// into per-worker scratch in attention); f32 with other block sizes uses the
// f32 codec.
type kvPages struct {
	k, v     [][]float32 // direct f32: [layer] K [block][KVDim][BlockTokens], V [slot][KVDim]
	kq, vq   [][]byte    // coded: [layer][slot*rowBytes]
	codec    *kv.Codec   // nil for direct f32
	rowBytes int         // bytes of one encoded K or V row
}

// reserved reports whether Reserve has allocated pages.
func (c *kvPages) reserved() bool { return c.k != nil || c.kq != nil }

// Reserve implements exec.Backend. It allocates, for every layer, a K and a
// V page area of l.Slots() rows in l.DType (any kv.Format; "" is f32).
func (b *Backend) Reserve(l exec.KVLayout) error {
	if l.Layers <= 0 || l.KVDim <= 0 || l.BlockTokens <= 0 || l.Blocks <= 0 {
		return fmt.Errorf("cpu: bad kv layout %+v", l)
	}
	c, err := kv.NewCodec(l.DType, l.KVDim)
	if err != nil {
		return fmt.Errorf("cpu: kv dtype: %w", err)
	}
	b.kv = l
	if b.state, err = newStateMemory(l.State); err != nil {
		return err
	}
	if c.Format == kv.F32 && l.BlockTokens%attnChunk == 0 {
		b.cache = kvPages{k: make([][]float32, l.Layers), v: make([][]float32, l.Layers), rowBytes: c.RowBytes()}
		for i := range b.cache.k {
			b.cache.k[i] = make([]float32, l.Slots()*l.KVDim)
			b.cache.v[i] = make([]float32, l.Slots()*l.KVDim)
		}
		return nil
	}
	b.cache = kvPages{kq: make([][]byte, l.Layers), vq: make([][]byte, l.Layers), codec: c, rowBytes: c.RowBytes()}
	for i := range b.cache.kq {
		b.cache.kq[i] = make([]byte, l.Slots()*c.RowBytes())
		b.cache.vq[i] = make([]byte, l.Slots()*c.RowBytes())
	}
	return nil
}

// KVBytes is the memory Reserve allocated for K and V pages (scales
// included): kv.BytesPerToken of the layout's format times its slots.
func (b *Backend) KVBytes() int64 {
	if !b.cache.reserved() {
		return 0
	}
	return 2 * int64(b.kv.Layers) * int64(b.kv.Slots()) * int64(b.cache.rowBytes)
}

// checkAttention reports whether op fits the reserved KV cache.
func (b *Backend) checkAttention(op tensor.Op) error {
	if !b.cache.reserved() {
		return fmt.Errorf("cpu: attention needs a reserved kv cache")
	}
	if op.Attn.Layer < 0 || op.Attn.Layer >= b.kv.Layers || op.Args[1].Cols() != b.kv.KVDim {
		return fmt.Errorf("cpu: attention layer %d width %d does not fit kv layout %+v", op.Attn.Layer, op.Args[1].Cols(), b.kv)
	}
	return nil
}

// attention writes this step's K and V rows into the cache, then computes
// causal attention for every row and head in ggml's order (attentionRef).
func (p *program) attention(out []float32, op tensor.Op, b *exec.Batch) {
	p.writeKV(op, b)
	p.visible = visibleRows(p.visible, op.Attn, b)
	switch {
	case useSIMD && attnFastExact:
		p.attentionFast(out, op, b)
	case p.b.cache.codec != nil:
		p.attentionCodedRef(out, op, b)
	default:
		p.attentionRef(out, op, b)
	}
}

// visibleRows returns, for each row of b, how many positions of its
// sequence it attends to: its position + 1, or with a.NonCausal its
// sequence's last row's position + 1. vis is reused.
func visibleRows(vis []int, a tensor.AttentionArgs, b *exec.Batch) []int {
	vis = vis[:0]
	for _, pos := range b.Positions {
		vis = append(vis, int(pos)+1)
	}
	if !a.NonCausal {
		return vis
	}
	last := map[int32]int{}
	for t, s := range b.RowSeq {
		last[s] = max(last[s], vis[t])
	}
	for t, s := range b.RowSeq {
		vis[t] = last[s]
	}
	return vis
}

// writeKV stores the K and V rows of the step's tokens at their slots.
func (p *program) writeKV(op tensor.Op, b *exec.Batch) {
	a, l, c := op.Attn, p.b.kv, &p.b.cache
	k, v := p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	kvd, bt := l.KVDim, l.BlockTokens
	for t := range op.Out.Rows() {
		pos := int(b.Positions[t])
		blk := int(b.Tables[b.RowSeq[t]][pos/bt])
		s := blk*bt + pos%bt
		kr, vr := k[t*kvd:(t+1)*kvd], v[t*kvd:(t+1)*kvd]
		if c.codec != nil {
			rb := c.rowBytes
			c.codec.Encode(c.kq[a.Layer][s*rb:(s+1)*rb], kr)
			c.codec.Encode(c.vq[a.Layer][s*rb:(s+1)*rb], vr)
			continue
		}
		kb := c.k[a.Layer][blk*bt*kvd+pos%bt : (blk+1)*bt*kvd]
		for i, x := range kr {
			kb[i*bt] = x
		}
		copy(c.v[a.Layer][s*kvd:(s+1)*kvd], vr)
	}
}

// accumulate adds w*v[d] to o[d] for every d, rounding the product before
// the add.
func accumulate(o []float32, w float32, v []float32) {
	v = v[:len(o)]
	for d, x := range v {
		o[d] += float32(w * x)
	}
}

// attnValues writes o[d] = sum over positions j < len(w) of w[j] * v(j)[d]
// in the order of ggml's kqv product over a KV row padded with zero
// weights to a whole number of 64 positions: for a batch of two rows or
// more (tinyBLAS), position j is fused into lane j%16 and the lanes are
// reduced by reduce16; for one row (ggml_vec_dot_f32), into accumulator
// (j/16)%4, lane j%16, reduced by reduce4x16. acc is scratch of at least
// 64*len(o).
func attnValues(o, w []float32, v func(j int) []float32, batch bool, acc []float32) {
	hd := len(o)
	acc = acc[:64*hd]
	clear(acc)
	for j, p := range w {
		vj := v(j)[:hd]
		c := j % 16
		if !batch {
			c = j % 64
		}
		a := acc[c*hd : (c+1)*hd]
		for d, x := range vj {
			a[d] = fma32(x, p, a[d])
		}
	}
	for d := range o {
		if batch {
			var l [16]float32
			for c := range 16 {
				l[c] = acc[c*hd+d]
			}
			o[d] = reduce16(&l)
			continue
		}
		var s [4][16]float32
		for c := range 64 {
			s[c/16][c%16] = acc[c*hd+d]
		}
		o[d] = reduce4x16(&s)
	}
}

// attentionRef is attention over direct f32 pages with the reference
// loops, one (row, head) pair at a time, in ggml's order (the oracle of
// attentionFast): scores (q . k_j) * scale by dotVecF32 over the head's
// dimensions, softmaxInPlace, then attnValues.
func (p *program) attentionRef(out []float32, op tensor.Op, b *exec.Batch) {
	a, l := op.Attn, p.b.kv
	q := p.f32[op.Args[0].ID]
	kc, vc := p.b.cache.k[a.Layer], p.b.cache.v[a.Layer]
	kvd, qd, bt, hd := l.KVDim, a.Heads*a.HeadDim, l.BlockTokens, a.HeadDim
	group := a.Heads / a.KVHeads
	batch := op.Out.Rows() >= 2
	p.b.pool.parallel(op.Out.Rows()*a.Heads, 1, func(worker, lo, hi int) {
		acc := make([]float32, 64*hd)
		for i := lo; i < hi; i++ {
			t, h := i/a.Heads, i%a.Heads
			table, n := b.Tables[b.RowSeq[t]], p.visible[t]
			c0 := h / group * hd // the head's first column of K and V rows
			qh := q[t*qd+h*hd : t*qd+(h+1)*hd]
			scores := p.scratch(p.score, worker, n)
			for j := range scores {
				kb := kc[int(table[j/bt])*bt*kvd+c0*bt+j%bt:] // dimension i at kb[i*bt]
				scores[j] = dotVecF32(kb, bt, qh, hd) * a.Scale
			}
			softmaxInPlace(scores)
			attnValues(out[t*qd+h*hd:t*qd+(h+1)*hd], scores, func(j int) []float32 {
				s := int(table[j/bt])*bt + j%bt
				return vc[s*kvd+c0 : s*kvd+c0+hd]
			}, batch, acc)
		}
	})
}

// attentionCodedRef is attentionRef over encoded pages: for every (row, KV
// head) pair, that head's K and V slices of all visible positions are
// decoded, block by block, into float32 scratch, and each query head of the
// group does the same dot products, softmax and accumulation.
func (p *program) attentionCodedRef(out []float32, op tensor.Op, b *exec.Batch) {
	a, l, c := op.Attn, p.b.kv, p.b.cache.codec
	q := p.f32[op.Args[0].ID]
	kc, vc, rb := p.b.cache.kq[a.Layer], p.b.cache.vq[a.Layer], p.b.cache.rowBytes
	qd, bt := a.Heads*a.HeadDim, l.BlockTokens
	group := a.Heads / a.KVHeads
	hd := a.HeadDim
	batch := op.Out.Rows() >= 2
	p.b.pool.parallel(op.Out.Rows()*a.KVHeads, 1, func(worker, lo, hi int) {
		acc := make([]float32, 64*hd)
		for i := lo; i < hi; i++ {
			t, kvh := i/a.KVHeads, i%a.KVHeads
			table, n := b.Tables[b.RowSeq[t]], p.visible[t]
			buf := p.scratch(p.score, worker, n+2*n*hd)
			scores, ks, vs := buf[:n], buf[n:n+n*hd], buf[n+n*hd:] // [n], [n, hd], [n, hd]
			for j := 0; j < n; j += bt {
				base, cnt := int(table[j/bt])*bt, min(bt, n-j)
				c.DecodeRows(ks[j*hd:(j+cnt)*hd], kc[base*rb:(base+cnt)*rb], kvh*hd, hd)
				c.DecodeRows(vs[j*hd:(j+cnt)*hd], vc[base*rb:(base+cnt)*rb], kvh*hd, hd)
			}
			for h := kvh * group; h < (kvh+1)*group; h++ {
				qh := q[t*qd+h*hd : t*qd+(h+1)*hd]
				for j := range scores {
					scores[j] = dotVecF32(ks[j*hd:], 1, qh, hd) * a.Scale
				}
				softmaxInPlace(scores)
				attnValues(out[t*qd+h*hd:t*qd+(h+1)*hd], scores, func(j int) []float32 { return vs[j*hd : (j+1)*hd] }, batch, acc)
			}
		}
	})
}

// scoreArgs is the argument block of attnScores4 and attnScores1 (the
// assembly reads its fields at fixed offsets: keep the layout).
type scoreArgs struct {
	q       [4]unsafe.Pointer // query vectors [hd]
	out     [4]unsafe.Pointer // scores [nc*attnChunk]
	k       unsafe.Pointer    // K base
	koffs   *int              // [nc] float offset from k of chunk c's first key element
	nc      int               // chunks
	kstride uintptr           // bytes from one key dimension of a chunk to the next
	hd      int               // head dimension
	scale   float32
}

// valueArgs is the argument block of the attnValues kernels (the assembly
// reads its fields at fixed offsets: keep the layout).
type valueArgs struct {
	w      [4]unsafe.Pointer // softmax weights by position
	o      [4]unsafe.Pointer // outputs: the dims of this call
	v      unsafe.Pointer    // V base, at the dims of this call
	voffs  *int              // [chunks] float offset from v of chunk c's first row
	vrow   uintptr           // bytes between the rows of one chunk
	j0, j1 int               // positions [j0, j1)
	mask   uint64            // one-vector kernels: the lanes (dims) to compute
}

// attnTile is up to a few rows of one sequence whose query heads attend
// together: rows [t0, t1), positions below n (the largest row position + 1).
type attnTile struct{ t0, t1, n int }

// attnScratch is one worker's attention scratch, grown as needed.
type attnScratch struct {
	scores       []float32 // [4][stride]
	koffs, voffs []int     // [chunks]
	ks, vs, rows []float32 // coded pages: K [chunks][hd][attnChunk], V [positions][hd], one block's K rows
}

// attnTask computes attention for items (KV head, tile) with the AVX-512
// kernels; see attentionFast.
type attnTask struct {
	p      *program
	b      *exec.Batch
	a      tensor.AttentionArgs
	q, out []float32
	tiles  []attnTile
}

// attentionFast is attention with the AVX-512 kernels, bit for bit the
// reference loops. Rows of one sequence are grouped in tiles of up to 4
// query vectors per KV head (rows x the heads sharing it); a work item is
// one (KV head, tile) pair, whose key and value rows are read once for all
// its query vectors, 16 positions at a time (located through the block
// table). Scratch is per worker and O(positions): scores of at most 4 query
// vectors, and for encoded pages one KV head's decoded K and V.
func (p *program) attentionFast(out []float32, op tensor.Op, b *exec.Batch) {
	t := &p.attn
	a := op.Attn
	*t = attnTask{p: p, b: b, a: a, q: p.f32[op.Args[0].ID], out: out, tiles: t.tiles[:0]}
	rows := max(1, 4/(a.Heads/a.KVHeads))
	T, work := op.Out.Rows(), 0
	for r := 0; r < T; {
		e, n := r+1, p.visible[r]
		for e < T && e-r < rows && b.RowSeq[e] == b.RowSeq[r] {
			n = max(n, p.visible[e])
			e++
		}
		t.tiles = append(t.tiles, attnTile{t0: r, t1: e, n: n})
		work += (e - r) * n
		r = e
	}
	workers := p.b.pool.n
	if work*a.Heads*a.HeadDim*2 < parallelMACs {
		workers = 1
	}
	p.b.pool.run(len(t.tiles)*a.KVHeads, 1, workers, t)
}

// run handles items [lo, hi). Item i is KV head i/tiles and a tile taken
// alternately from the start and the end of the step (costs grow with the
// position), so every contiguous range of items has a similar cost.
func (t *attnTask) run(worker, lo, hi int) {
	w := &t.p.attnScr[worker]
	nt := len(t.tiles)
	for i := lo; i < hi; i++ {
		k := i % nt
		tile := k / 2
		if k%2 == 1 {
			tile = nt - 1 - k/2
		}
		t.item(w, t.tiles[tile], i/nt)
	}
}

// grow returns s[:n], reallocated if it is shorter.
func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		s = make([]E, n)
	}
	return s[:n]
}

// item computes the attention of one tile's query heads of KV head kvh.
func (t *attnTask) item(w *attnScratch, tile attnTile, kvh int) {
	a, l, c := t.a, t.p.b.kv, &t.p.b.cache
	hd, group, qd := a.HeadDim, a.Heads/a.KVHeads, a.Heads*a.HeadDim
	kvd, bt := l.KVDim, l.BlockTokens
	nc := (tile.n + attnChunk - 1) / attnChunk
	ncPad := (nc + 3) &^ 3 // attnScores1 takes 4 chunks at a time
	stride := ncPad * attnChunk
	table := t.b.Tables[t.b.RowSeq[tile.t0]]
	w.koffs, w.voffs = grow(w.koffs, ncPad), grow(w.voffs, ncPad)
	w.scores = grow(w.scores, 4*stride)

	var kbase, vbase unsafe.Pointer
	var kstride, vrow uintptr
	if c.codec == nil {
		kbase, vbase = unsafe.Pointer(&c.k[a.Layer][0]), unsafe.Pointer(&c.v[a.Layer][0])
		kstride, vrow = uintptr(4*bt), uintptr(4*kvd)
		for ch := range nc {
			pos := ch * attnChunk
			blk, r0 := int(table[pos/bt]), pos%bt
			w.koffs[ch] = blk*bt*kvd + kvh*hd*bt + r0
			w.voffs[ch] = (blk*bt+r0)*kvd + kvh*hd
		}
	} else {
		t.decode(w, table, tile.n, ncPad, kvh)
		kbase, vbase = unsafe.Pointer(&w.ks[0]), unsafe.Pointer(&w.vs[0])
		kstride, vrow = 4*attnChunk, uintptr(4*hd)
		for ch := range nc {
			w.koffs[ch] = ch * attnChunk * hd
			w.voffs[ch] = ch * attnChunk * hd
		}
	}
	for ch := nc; ch < ncPad; ch++ {
		w.koffs[ch], w.voffs[ch] = w.koffs[nc-1], w.voffs[nc-1]
	}

	nq := (tile.t1 - tile.t0) * group
	for v0 := 0; v0 < nq; v0 += 4 {
		m := min(4, nq-v0)
		sa := scoreArgs{k: kbase, koffs: &w.koffs[0], nc: ncPad, kstride: kstride, hd: hd, scale: a.Scale}
		va := valueArgs{voffs: &w.voffs[0], vrow: vrow}
		var qoff, ns [4]int
		for u := range 4 {
			v := v0 + min(u, m-1) // fewer than 4: repeat the last one
			row, h := tile.t0+v/group, kvh*group+v%group
			qoff[u], ns[u] = row*qd+h*hd, t.p.visible[row]
			sc := unsafe.Pointer(&w.scores[min(u, m-1)*stride])
			sa.q[u], sa.out[u], va.w[u] = unsafe.Pointer(&t.q[qoff[u]]), sc, sc
		}
		if m == 1 {
			attnScores1(&sa)
		} else {
			attnScores4(&sa)
		}
		nmin := ns[0]
		for u := range m {
			softmaxFast(w.scores[u*stride : u*stride+ns[u]])
			clear(t.out[qoff[u] : qoff[u]+hd])
			nmin = min(nmin, ns[u])
		}
		for d0 := 0; d0 < hd; {
			dims := min(64, hd-d0)
			if dims < 64 {
				dims = min(16, dims)
			}
			va.v = unsafe.Add(vbase, 4*d0)
			va.mask = 1<<dims - 1
			for u := range 4 {
				va.o[u] = unsafe.Pointer(&t.out[qoff[u]+d0])
			}
			j0 := 0
			if m > 1 {
				// All query vectors together up to the shortest, then each alone.
				va.j0, va.j1, j0 = 0, nmin, nmin
				if dims == 64 {
					attnValues4x4(&va)
				} else {
					attnValues4x1(&va)
				}
			}
			for u := range m {
				if ns[u] <= j0 {
					continue
				}
				one := va
				one.w[0], one.o[0], one.j0, one.j1 = va.w[u], va.o[u], j0, ns[u]
				if dims == 64 {
					attnValues1x4(&one)
				} else {
					attnValues1x1(&one)
				}
			}
			d0 += dims
		}
	}
}

// decode writes KV head kvh's K and V of positions [0, n) of a sequence
// with block table table from encoded pages into w.ks (in chunks laid out
// like direct K pages, [ncPad][hd][attnChunk]) and w.vs ([n][hd]).
func (t *attnTask) decode(w *attnScratch, table []int32, n, ncPad, kvh int) {
	a, l, c := t.a, t.p.b.kv, &t.p.b.cache
	hd, bt, rb := a.HeadDim, l.BlockTokens, c.rowBytes
	kc, vc := c.kq[a.Layer], c.vq[a.Layer]
	w.ks = grow(w.ks, ncPad*attnChunk*hd)
	w.vs = grow(w.vs, ncPad*attnChunk*hd)
	w.rows = grow(w.rows, bt*hd)
	for j := 0; j < n; j += bt {
		base, cnt := int(table[j/bt])*bt, min(bt, n-j)
		c.codec.DecodeRows(w.vs[j*hd:(j+cnt)*hd], vc[base*rb:(base+cnt)*rb], kvh*hd, hd)
		c.codec.DecodeRows(w.rows[:cnt*hd], kc[base*rb:(base+cnt)*rb], kvh*hd, hd)
		for r := range cnt {
			pos := j + r
			dst := w.ks[pos/attnChunk*attnChunk*hd+pos%attnChunk:]
			for i, x := range w.rows[r*hd : (r+1)*hd] {
				dst[i*attnChunk] = x
			}
		}
	}
}

// softmaxFast is softmaxInPlace with the AVX-512 kernels, bit for bit: the
// exponentials softmaxExp cannot guarantee are computed with math.Exp.
func softmaxFast(s []float32) {
	n := len(s)
	m := maxF32(&s[0], n)
	var sum float64
	for i := 0; i < n; {
		i += softmaxExp(&s[i], n-i, m, &sum)
		if i == n {
			break
		}
		for end := min(i+attnChunk, n); i < end; i++ {
			e := float32(math.Exp(float64(s[i] - m)))
			s[i] = e
			sum += float64(e)
		}
	}
	mulF32(&s[0], n, float32(1/sum))
}
