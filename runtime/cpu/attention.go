package cpu

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv/page"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// attnChunk is the number of key positions the score kernels compute at
// once, one per lane.
const attnChunk = 16

// kvPages is the backend's KV cache, reserved once by Reserve.
//
// Direct f32 pages (k, v: format f32 with BlockTokens a multiple of
// attnChunk) hold float32 values that attention reads in place, both
// head-major within each block so that one KV head's keys or values of a
// block are one contiguous run (hardware prefetchers stream it; a decode
// batch's blocks are scattered): V as [block][KVHead][BlockTokens][HeadDim],
// K transposed, [block][KVDim][BlockTokens], so that one key dimension of
// attnChunk consecutive positions is one vector.
// Every other layout holds rows encoded by codec (quantized on write, decoded
// into per-worker scratch in attention); f32 with other block sizes uses the
// f32 codec.
type kvPages struct {
	k, v     [][]float32 // direct f32: [layer] K [block][KVDim][BlockTokens], V [block][KVHead][BlockTokens][HeadDim]
	kq, vq   [][]byte    // coded: [layer][slot*rowBytes]
	codec    *page.Codec // nil for direct f32
	rowBytes int         // bytes of one encoded K or V row
}

// reserved reports whether Reserve has allocated pages.
func (c *kvPages) reserved() bool { return c.k != nil || c.kq != nil }

// vRow is the offset in a layer's direct V page of the hd values of KV head
// kvh at position r of block blk (l.KVDim = KV heads * hd).
func vRow(l exec.KVLayout, blk, r, kvh, hd int) int {
	return blk*l.BlockTokens*l.KVDim + (kvh*l.BlockTokens+r)*hd
}

// Reserve implements exec.Backend. It allocates, for every layer, a K and a
// V page area of l.Slots() rows in l.DType (any page.Format; "" is f32).
func (b *Backend) Reserve(l exec.KVLayout) error {
	if l.Layers <= 0 || l.KVDim <= 0 || l.BlockTokens <= 0 || l.Blocks <= 0 {
		return fmt.Errorf("cpu: bad kv layout %+v", l)
	}
	c, err := page.NewCodec(l.DType, l.KVDim)
	if err != nil {
		return fmt.Errorf("cpu: kv dtype: %w", err)
	}
	b.kv = l
	if b.state, err = newStateMemory(l.State); err != nil {
		return err
	}
	if c.Format == page.F32 && l.BlockTokens%attnChunk == 0 {
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
// included): page.BytesPerToken of the layout's format times its slots.
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
	a := op.Attn
	if a.Layer < 0 || a.Layer >= b.kv.Layers || op.Args[1].Cols() != b.kv.KVDim || a.KVHeads < 1 || a.KVHeads*a.HeadDim != b.kv.KVDim {
		return fmt.Errorf("cpu: attention layer %d width %d does not fit kv layout %+v", op.Attn.Layer, op.Args[1].Cols(), b.kv)
	}
	return nil
}

// attention writes this step's K and V rows into the cache, then computes
// causal attention for every row and head in ggml's order (attentionRef;
// attentionFast above the reference level).
func (p *program) attention(out []float32, op tensor.Op, b *exec.Batch) {
	if p.b.opTimes != nil {
		start := time.Now()
		p.writeKV(op, b)
		p.b.opTimes.add(len(b.Tokens), "attention.kv_write", time.Since(start))
	} else {
		p.writeKV(op, b)
	}
	p.visible = visibleRows(p.visible, op.Attn, b)
	switch {
	case level != levelRef:
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

// writeKV stores the K and V rows of the step's tokens at their slots, one
// KV head per work item: a direct K page is [KVDim][BlockTokens], so a
// row's K is KVDim stores a cache line apart, and one goroutine writing a
// decode batch's rows took 2% of its step; encoded pages quantize each
// head's slice on its own (page.Codec.EncodeSlice) unless a head is not
// whole scale groups. Each item writes its head's slice of every row in
// row order, so rows that share a slot (a padded bucket's) end as the
// serial loop left them.
func (p *program) writeKV(op tensor.Op, b *exec.Batch) {
	c := &p.b.cache
	p.kvWrite = kvWriteTask{b: b, kv: p.b.kv, c: c, layer: op.Attn.Layer, heads: op.Attn.KVHeads, rows: op.Out.Rows(),
		k: p.f32[op.Args[1].ID], v: p.f32[op.Args[2].ID]}
	if c.codec != nil && !c.codec.SliceAligned(0, op.Attn.HeadDim) {
		p.kvWrite.heads = 1 // a head's slice is not whole scale groups: whole rows
	}
	// Even one row's scattered K stores outlast a dispatch to the pool.
	p.b.pool.run(p.kvWrite.heads, 1, p.b.pool.n, &p.kvWrite)
}

// kvWriteTask is writeKV's work: item h writes KV head h's K and V of every
// row, or with heads 1 the whole rows.
type kvWriteTask struct {
	b                  *exec.Batch
	kv                 exec.KVLayout
	c                  *kvPages
	layer, heads, rows int
	k, v               []float32 // [rows, KVDim]
}

func (t *kvWriteTask) run(_, lo, hi int) {
	kvd, bt, c := t.kv.KVDim, t.kv.BlockTokens, t.c
	w := kvd / t.heads
	runs := c.codec == nil && useSIMD && w%attnChunk == 0
	for h := lo; h < hi; h++ {
		for row := 0; row < t.rows; row++ {
			pos := int(t.b.Positions[row])
			blk := int(t.b.Tables[t.b.RowSeq[row]][pos/bt])
			s := blk*bt + pos%bt
			kr, vr := t.k[row*kvd:(row+1)*kvd], t.v[row*kvd:(row+1)*kvd]
			if c.codec != nil {
				rb := c.rowBytes
				c.codec.EncodeSlice(c.kq[t.layer][s*rb:(s+1)*rb], kr[h*w:(h+1)*w], h*w)
				c.codec.EncodeSlice(c.vq[t.layer][s*rb:(s+1)*rb], vr[h*w:(h+1)*w], h*w)
				continue
			}
			kb := c.k[t.layer][blk*bt*kvd+pos%bt : (blk+1)*bt*kvd]
			if runs && t.chunkRun(row) {
				t.writeKChunk(kb, row, h*w, w)
				for r := range attnChunk {
					vo := vRow(t.kv, blk, pos%bt+r, h, w)
					copy(c.v[t.layer][vo:vo+w], t.v[(row+r)*kvd+h*w:][:w])
				}
				row += attnChunk - 1
				continue
			}
			for j := h * w; j < (h+1)*w; j++ {
				kb[j*bt] = kr[j]
			}
			vo := vRow(t.kv, blk, pos%bt, h, w)
			copy(c.v[t.layer][vo:vo+w], vr[h*w:(h+1)*w])
		}
	}
}

// chunkRun reports whether rows [row, row+attnChunk) are consecutive
// positions of one sequence within one block, which writeKChunk stores
// together (their slots are distinct, so the rows' order among them does
// not matter).
func (t *kvWriteTask) chunkRun(row int) bool {
	if row+attnChunk > t.rows {
		return false
	}
	bt, seq, pos := t.kv.BlockTokens, t.b.RowSeq[row], t.b.Positions[row]
	if int(pos)%bt+attnChunk > bt {
		return false
	}
	for r := 1; r < attnChunk; r++ {
		if t.b.RowSeq[row+r] != seq || t.b.Positions[row+r] != pos+int32(r) {
			return false
		}
	}
	return true
}

// writeKChunk stores values [j0, j0+w) of the K rows [row, row+attnChunk)
// of a chunkRun into kb, the direct K page from the first row's slot
// (kb[j*BlockTokens + r] = value j of row r): kvTranspose16 turns 16
// values of the 16 rows into 16 dimensions' 16 positions, straight into
// the page with 16-token blocks, else through a 16x16 tile.
func (t *kvWriteTask) writeKChunk(kb []float32, row, j0, w int) {
	kvd, bt := t.kv.KVDim, t.kv.BlockTokens
	src := t.k[row*kvd+j0 : (row+attnChunk-1)*kvd+j0+w]
	if bt == attnChunk {
		dst := kb[j0*bt : (j0+w)*bt]
		kvTranspose16(&dst[0], unsafe.Pointer(&src[0]), uintptr(4*kvd), w/16, 0)
		return
	}
	var tile [attnChunk * 16]float32
	for jc := 0; jc < w; jc += 16 {
		kvTranspose16(&tile[0], unsafe.Pointer(&src[jc]), uintptr(4*kvd), 1, 0)
		for j := range 16 {
			copy(kb[(j0+jc+j)*bt:][:attnChunk], tile[j*attnChunk:(j+1)*attnChunk])
		}
	}
}

// attnValues writes o[d] = sum over positions j < len(w) of w[j] * v(j)[d]
// in the order of ggml's kqv product for a batch of two rows or more
// (tinyBLAS) over a KV row padded with zero weights to a whole number of 64
// positions: position j is fused into lane j%16 and the lanes are reduced
// by reduce16. Every step takes this order, one row too (where ggml's
// ggml_vec_dot_f32 keeps 64 lanes), so that a row's result does not depend
// on how many rows share its step (a prompt cut into chunks of one token,
// a decode step of one sequence). acc is scratch of at least 16*len(o).
func attnValues(o, w []float32, v func(j int) []float32, acc []float32) {
	hd := len(o)
	acc = acc[:16*hd]
	clear(acc)
	for j, p := range w {
		vj := v(j)[:hd]
		c := j % 16
		a := acc[c*hd : (c+1)*hd]
		for d, x := range vj {
			a[d] = fma32(x, p, a[d])
		}
	}
	for d := range o {
		var l [16]float32
		for c := range 16 {
			l[c] = acc[c*hd+d]
		}
		o[d] = reduce16(&l)
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
	p.b.pool.parallel(op.Out.Rows()*a.Heads, 1, func(worker, lo, hi int) {
		acc := make([]float32, 16*hd)
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
				vo := vRow(l, int(table[j/bt]), j%bt, h/group, hd)
				return vc[vo : vo+hd]
			}, acc)
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
	p.b.pool.parallel(op.Out.Rows()*a.KVHeads, 1, func(worker, lo, hi int) {
		acc := make([]float32, 16*hd)
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
				attnValues(out[t*qd+h*hd:t*qd+(h+1)*hd], scores, func(j int) []float32 { return vs[j*hd : (j+1)*hd] }, acc)
			}
		}
	})
}

// scoreArgs is the argument block of attnScores (the assembly reads its
// fields at fixed offsets: keep the layout). The kernel computes 4 (query,
// chunk) pairs at a time: pairs 0 and 1 take q[0], pairs 2 and 3 q[1]; at
// chunk step c, pair p scores chunk c+pchunk[p] into out[p].
type scoreArgs struct {
	q       [2]unsafe.Pointer // query vectors [hd]
	out     [4]unsafe.Pointer // scores by pair [nc*attnChunk]
	pchunk  [4]int            // chunk of each pair, from the step's first
	k       unsafe.Pointer    // K base
	koffs   *int              // [nc] float offset from k of chunk c's first key element
	nc      int               // chunks, a multiple of cstep
	cstep   int               // chunks per step (2 or 4)
	kstride uintptr           // bytes from one key dimension of a chunk to the next
	steps   int               // hd / 64
	rest    int               // hd % 64
	scale   float32
}

// score4Args is the argument block of attnScores4q, the score kernel of
// tiles of 4 or more query vectors of hd a multiple of 64 (the assembly
// reads its fields at fixed offsets: keep the layout): 4 query vectors
// over 2 chunks at a time, chunk c's scores of query u into out[u][16c:].
type score4Args struct {
	q       [4]unsafe.Pointer    // query vectors [hd]
	out     [4]unsafe.Pointer    // scores by query [nc*attnChunk]
	k       unsafe.Pointer       // K base
	koffs   *int                 // [nc] float offset from k of chunk c's first key element
	nc      int                  // chunks, even
	kstride uintptr              // bytes from one key dimension of a chunk to the next
	steps   int                  // hd / 64, at least 1
	scale   float32              // applied to each dot product
	_       float32              // padding
	pfoffs  *int                 // [pfn] offsets (as koffs') of the chunks to prefetch while chunk c is scored
	pfn     int                  // chunks with a chunk to prefetch, even
	ka, kb  uintptr              // the kernel's: the current chunks' K
	ra, rb  uintptr              // the kernel's: their current residue row
	da, db  uintptr              // the kernel's: from ka, kb to the chunks to prefetch
	tree    unsafe.Pointer       // the kernel's reduce16 partials of the 8 (query, chunk) pairs: [4][8][16]float32, 64-byte aligned in treeBuf
	treeBuf [4*8*16 + 16]float32 // tree's backing
}

// valueArgs is the argument block of the value kernels (the assembly reads
// its fields at fixed offsets: keep the layout). attnValues4q takes 4 query
// vectors, attnValues2q 2, attnValues4 and attnValues1 the first.
type valueArgs struct {
	w          [4]unsafe.Pointer // softmax weights by position
	acc        [4]unsafe.Pointer // class accumulators of the call's first dim vector
	n          [4]int            // positions [0, n)
	v          unsafe.Pointer    // V base, at the dims of this call
	voffs      *int              // [chunks] float offset from v of chunk c's first row
	vrow       uintptr           // bytes between the rows of one chunk
	nmin, nmax int               // the smallest and largest n
	accStride  uintptr           // bytes from one dim vector's accumulators to the next
	mask       uint64            // attnValues1: the lanes (dims) to compute
}

// attnTile is up to a few rows of one sequence whose query heads attend
// together: rows [t0, t1), positions below n (the largest row position + 1).
type attnTile struct{ t0, t1, n int }

// attnScratch is one worker's attention scratch, grown as needed.
type attnScratch struct {
	scores       []float32 // [4][stride]
	acc          []float32 // value class accumulators [4 query vectors][4 dim vectors][16 classes][16]
	koffs, voffs []int     // [chunks]
	ks, vs, rows []float32 // coded pages: K [chunks][hd][attnChunk], V [positions][hd], one block's K rows
	s4           score4Args
}

// attnTask computes attention for items (KV head, tile) with the AVX-512
// or AVX2 kernels; see attentionFast.
type attnTask struct {
	p      *program
	b      *exec.Batch
	a      tensor.AttentionArgs
	q, out []float32
	tiles  []attnTile
	avx2   bool // levelAVX2: the kernels of attn_avx2_amd64.s
}

// The kernels of an attnTask at its level.

func (t *attnTask) scores(a *scoreArgs) {
	if t.avx2 {
		attnScoresAVX2(a)
	} else {
		attnScores(a)
	}
}

func (t *attnTask) softmax(s *float32, n int) {
	if t.avx2 {
		softmaxVAVX2(s, n)
	} else {
		softmaxV(s, n)
	}
}

// values runs attnValues4, attnValues2q or attnValues4q for m = 1, 2 or
// more query vectors.
func (t *attnTask) values(a *valueArgs, m int) {
	switch {
	case m == 1 && t.avx2:
		attnValues4AVX2(a)
	case m == 1:
		attnValues4(a)
	case m == 2 && t.avx2:
		attnValues2qAVX2(a)
	case m == 2:
		attnValues2q(a)
	case t.avx2:
		attnValues4qAVX2(a)
	default:
		attnValues4q(a)
	}
}

func (t *attnTask) values1(a *valueArgs) {
	if t.avx2 {
		attnValues1AVX2(a)
	} else {
		attnValues1(a)
	}
}

func (t *attnTask) reduce(acc, out *float32, nvec int, mask uint64) {
	if t.avx2 {
		attnReduceAVX2(acc, out, nvec, mask)
	} else {
		attnReduce(acc, out, nvec, mask)
	}
}

// attentionFast is attention with the AVX-512 kernels (the AVX2 ones of
// attn_avx2_amd64.s at levelAVX2), bit for bit
// attentionRef (f32 pages) and attentionCodedRef (encoded pages, decoded
// into float scratch first). Rows of one sequence are grouped in tiles
// (attnTileRows: up to attnTileVecs query vectors per KV head, rows x the
// heads sharing it); a work item is one (KV head, tile) pair. Its key rows
// are scored a block at a time (attnKeyBlock) for every query vector of
// the tile, four at a time over two chunks (attnScores4q, AVX-512, hd a
// multiple of 64) or two at a time, 16 positions a vector (located
// through the block table), in dotVecF32's order, so a prompt chunk over a
// long cached context reads each key block from memory once per tile, not
// once per query vector; softmaxV normalises each query vector's scores;
// the value kernels then read each V row's 64 dims at a time for up to 4
// query vectors, every query vector of the tile in turn before the next 64
// dims, keeping one fma chain per position class (attnValues' j%16) and
// dim, which attnReduce folds in reduce16's order right after each call.
// A score is one dot product and a call of a value kernel owns its dims'
// accumulators, so the order of the calls changes no bit. Scratch is per
// worker and O(positions): a tile's query vectors' scores, one value
// call's class accumulators, and for encoded pages one KV head's decoded K
// and V. docs/cpu-attention.md has the measurements.
func (p *program) attentionFast(out []float32, op tensor.Op, b *exec.Batch) {
	t := &p.attn
	a := op.Attn
	*t = attnTask{p: p, b: b, a: a, q: p.f32[op.Args[0].ID], out: out, tiles: t.tiles[:0],
		avx2: level == levelAVX2}
	T, work := op.Out.Rows(), 0
	rows := attnTileRows(a.Heads/a.KVHeads, a.KVHeads, T, p.b.pool.n, p.visible)
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

// attnTileVecs bounds a tile's query vectors (rows x the query heads of
// one KV head): the score pass reads each key block once for all of them.
// attnTileScoreBytes bounds the scores a tile keeps per worker.
// attnKeyBlockBytes bounds the K bytes of one KV head a score block of a
// tile of many query vectors reads: a core's L1 data cache, so that the
// query vector pairs after the first read the block from there (the score
// kernel's two K loads per four fmas outrun L2), and attnKeyBlockL2Bytes
// that of a tile of at most attnKeyBlockL2Vecs (a decode row's query
// heads), whose second pair alone rereads the block, where the longer
// block saves kernel calls.
const (
	attnTileVecs        = 32
	attnTileScoreBytes  = 2 << 20
	attnKeyBlockBytes   = 32 << 10
	attnKeyBlockL2Bytes = 256 << 10
	attnKeyBlockL2Vecs  = 4
)

// attnKeyBlock is the chunks of one score block of a tile of nq query
// vectors of head dimension hd: even (query vector pairs take the chunks
// two at a time), a multiple of 4 where nq is odd (the last query vector
// takes them four at a time), at least one step.
func attnKeyBlock(nq, hd int) int {
	bytes := attnKeyBlockBytes
	if nq <= attnKeyBlockL2Vecs {
		bytes = attnKeyBlockL2Bytes
	}
	kb := max(2, bytes/(4*hd*attnChunk)&^1)
	if nq%2 == 1 {
		kb = (kb + 3) &^ 3
	}
	return kb
}

// attnTileRows is how many rows of one sequence a tile of a step of T rows
// takes, with group query heads per KV head and visible[r] positions for
// row r: at least enough for 4 query vectors, more (up to attnTileVecs
// query vectors, attnTileScoreBytes of scores) while the step still has 4
// items (tiles x kvHeads) per worker.
func attnTileRows(group, kvHeads, T, workers int, visible []int) int {
	rows := max(1, 4/group)
	most := 0
	for _, n := range visible[:T] {
		most = max(most, n)
	}
	stride := (most + 4*attnChunk - 1) &^ (4*attnChunk - 1)
	for next := 2 * rows; next*group <= attnTileVecs && next*group*stride*4 <= attnTileScoreBytes &&
		(T+next-1)/next*kvHeads >= 4*workers; next *= 2 {
		rows = next
	}
	return rows
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

// alignUp returns the first address from p that is a multiple of align (a
// power of 2).
func alignUp(p unsafe.Pointer, align uintptr) unsafe.Pointer {
	return unsafe.Add(p, (align-uintptr(p)%align)%align)
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
	ncPad := (nc + 3) &^ 3 // attnScores takes 2 or 4 chunks at a time
	stride := ncPad * attnChunk
	table := t.b.Tables[t.b.RowSeq[tile.t0]]
	nq := (tile.t1 - tile.t0) * group
	w.koffs, w.voffs = grow(w.koffs, ncPad), grow(w.voffs, ncPad)
	w.scores = grow(w.scores, max(4, nq)*stride)
	const classes = 16 // attnValues' order: position classes j%16

	var kbase, vbase unsafe.Pointer
	var kstride, vrow uintptr
	if c.codec == nil {
		kbase, vbase = unsafe.Pointer(&c.k[a.Layer][0]), unsafe.Pointer(&c.v[a.Layer][0])
		kstride, vrow = uintptr(4*bt), uintptr(4*hd)
		for ch := range nc {
			pos := ch * attnChunk
			blk, r0 := int(table[pos/bt]), pos%bt
			w.koffs[ch] = blk*bt*kvd + kvh*hd*bt + r0
			w.voffs[ch] = vRow(l, blk, r0, kvh, hd)
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

	// qvec returns query vector v's offset in t.q and its visible positions.
	qvec := func(v int) (int, int) {
		row, h := tile.t0+v/group, kvh*group+v%group
		return row*qd + h*hd, t.p.visible[row]
	}
	// Scores [nq][stride], a key block of kb chunks at a time for every
	// query vector: with the AVX-512 kernels and hd a multiple of 64, 4 at
	// a time (attnScores4q), the last nq%4 (all of them otherwise) in pairs
	// (attnScores) over blocks of their own size.
	quads := 0 // query vectors attnScores4q takes, 4 at a time
	if !t.avx2 && hd%64 == 0 {
		quads = nq &^ 3
	}
	kb := attnKeyBlock(nq, hd)
	for c0 := 0; c0 < nc && quads > 0; c0 += kb {
		n := min(kb, nc-c0)
		for v := 0; v < quads; v += 4 {
			s4 := &w.s4
			s4.tree = alignUp(unsafe.Pointer(&s4.treeBuf[0]), 64)
			s4.k, s4.koffs, s4.kstride, s4.steps, s4.scale = kbase, &w.koffs[c0], kstride, hd/64, a.Scale
			s4.nc = (n + 1) &^ 1
			// The first query vectors of a block read its keys from L2 or
			// memory: the last ones of the block before prefetch them.
			s4.pfoffs, s4.pfn = nil, 0
			switch {
			case v == quads-4 && c0+kb < nc:
				s4.pfoffs, s4.pfn = &w.koffs[c0+kb], min(s4.nc, (min(kb, nc-c0-kb)+1)&^1)
			case v == 0 && c0 == 0:
				s4.pfoffs, s4.pfn = &w.koffs[2], s4.nc-2
			}
			for u := range 4 {
				off, _ := qvec(v + u)
				s4.q[u], s4.out[u] = unsafe.Pointer(&t.q[off]), unsafe.Pointer(&w.scores[(v+u)*stride+c0*attnChunk])
			}
			attnScores4q(s4)
		}
	}
	kb = attnKeyBlock(nq-quads, hd)
	for c0 := 0; c0 < nc && quads < nq; c0 += kb {
		n := min(kb, nc-c0)
		for v := quads; v < nq; v += 2 {
			sa := scoreArgs{k: kbase, koffs: &w.koffs[c0], kstride: kstride, steps: hd / 64, rest: hd % 64, scale: a.Scale}
			off0, _ := qvec(v)
			sc0 := unsafe.Pointer(&w.scores[v*stride+c0*attnChunk])
			q0 := unsafe.Pointer(&t.q[off0])
			if v+1 < nq {
				// Two query vectors take the chunks in pairs: pad to 2 only.
				off1, _ := qvec(v + 1)
				sa.nc = (n + 1) &^ 1
				sc1 := unsafe.Pointer(&w.scores[(v+1)*stride+c0*attnChunk])
				sa.q = [2]unsafe.Pointer{q0, unsafe.Pointer(&t.q[off1])}
				sa.out, sa.pchunk, sa.cstep = [4]unsafe.Pointer{sc0, sc0, sc1, sc1}, [4]int{0, 1, 0, 1}, 2
			} else {
				sa.nc = (n + 3) &^ 3
				sa.q = [2]unsafe.Pointer{q0, q0}
				sa.out, sa.pchunk, sa.cstep = [4]unsafe.Pointer{sc0, sc0, sc0, sc0}, [4]int{0, 1, 2, 3}, 4
			}
			t.scores(&sa)
		}
	}
	// Values, 64 dims (attnValues') at a time for every query vector, 4 at
	// a time, so that the tile's query vectors read those dims of the V rows
	// from cache after the first 4; each call's class accumulators (4 query
	// vectors x up to 4 dim vectors x 16 classes) are reduced into out
	// while they are in L1.
	const accQ = 4 * classes * 16 // one query vector's accumulators of 64 dims
	w.acc = grow(w.acc, 4*accQ)
	for v := range nq {
		_, n := qvec(v)
		t.softmax(&w.scores[v*stride], n)
	}
	for d0 := 0; d0 < hd; {
		dims := min(64, hd-d0)
		if dims < 64 {
			dims = min(16, dims)
		}
		for v0 := 0; v0 < nq; v0 += 4 {
			m := min(4, nq-v0)
			_, n0 := qvec(v0)
			va := valueArgs{voffs: &w.voffs[0], vrow: vrow, accStride: uintptr(64 * classes), nmin: n0, v: unsafe.Add(vbase, 4*d0)}
			for u := range 4 {
				x := v0 + min(u, m-1) // fewer than 4: repeat the last one
				_, n := qvec(x)
				va.w[u], va.n[u], va.acc[u] = unsafe.Pointer(&w.scores[x*stride]), n, unsafe.Pointer(&w.acc[u*accQ])
				va.nmin, va.nmax = min(va.nmin, n), max(va.nmax, n)
			}
			if dims == 64 {
				t.values(&va, m)
			} else {
				va.mask = 1<<dims - 1
				for u := range m {
					one := va
					one.w[0], one.acc[0], one.n[0] = va.w[u], va.acc[u], va.n[u]
					t.values1(&one)
				}
			}
			for u := range m {
				off, _ := qvec(v0 + u)
				t.reduce(&w.acc[u*accQ], &t.out[off+d0], (dims+15)/16, 1<<(dims-16*((dims+15)/16-1))-1)
			}
		}
		d0 += dims
	}
}

// decode writes KV head kvh's K and V of positions [0, n) of a sequence
// with block table table from encoded pages into w.ks (in chunks laid out
// like direct K pages, [ncPad][hd][attnChunk]) and w.vs ([n][hd]). Binary16
// and bfloat16 rows convert straight from the pages (cvtF16, cvtBF16), and
// with the AVX-512 kernels and blocks of whole chunks kvTranspose16 turns
// 16 key rows at a time into a chunk; other formats decode through the
// codec. A chunk's lanes past n hold whatever the block's later rows (or
// the scratch) held: attention never reads their scores or values.
func (t *attnTask) decode(w *attnScratch, table []int32, n, ncPad, kvh int) {
	a, l, c := t.a, t.p.b.kv, &t.p.b.cache
	hd, bt, rb := a.HeadDim, l.BlockTokens, c.rowBytes
	kc, vc := c.kq[a.Layer], c.vq[a.Layer]
	w.ks = grow(w.ks, ncPad*attnChunk*hd)
	w.vs = grow(w.vs, ncPad*attnChunk*hd)
	w.rows = grow(w.rows, bt*hd)
	kind := 0 // kvTranspose16's value type of the pages: 1 f16, 2 bf16, 0 decoded float32 rows
	switch c.codec.Format.Name {
	case page.F16.Name:
		kind = 1
	case page.BF16.Name:
		kind = 2
	}
	if hd%16 != 0 {
		kind = 0
	}
	transpose := !t.avx2 && bt%attnChunk == 0 && hd%16 == 0
	// rows decodes head kvh of cnt page rows from slot base into dst.
	rows := func(dst []float32, pages []byte, base, cnt int) {
		if kind == 0 {
			c.codec.DecodeRows(dst[:cnt*hd], pages[base*rb:(base+cnt)*rb], kvh*hd, hd)
			return
		}
		for r := range cnt {
			t.cvt16(&dst[r*hd], unsafe.Pointer(&pages[(base+r)*rb+2*kvh*hd]), hd, kind)
		}
	}
	for j := 0; j < n; j += bt {
		base, cnt := int(table[j/bt])*bt, min(bt, n-j)
		rows(w.vs[j*hd:], vc, base, cnt)
		if transpose {
			// j is a whole number of chunks: each chunk's 16 rows lie in this block.
			for r0 := 0; r0 < cnt; r0 += attnChunk {
				dst := &w.ks[(j+r0)*hd]
				if kind != 0 {
					kvTranspose16(dst, unsafe.Pointer(&kc[(base+r0)*rb+2*kvh*hd]), uintptr(rb), hd/16, kind)
					continue
				}
				rows(w.rows, kc, base+r0, min(attnChunk, cnt-r0))
				kvTranspose16(dst, unsafe.Pointer(&w.rows[0]), uintptr(4*hd), hd/16, 0)
			}
			continue
		}
		rows(w.rows, kc, base, cnt)
		for r := range cnt {
			pos := j + r
			dst := w.ks[pos/attnChunk*attnChunk*hd+pos%attnChunk:]
			for i, x := range w.rows[r*hd : (r+1)*hd] {
				dst[i*attnChunk] = x
			}
		}
	}
}

// cvt16 converts n (a multiple of 16) binary16 (kind 1) or bfloat16 (2)
// values at src to float32 at dst.
func (t *attnTask) cvt16(dst *float32, src unsafe.Pointer, n, kind int) {
	switch {
	case kind == 1 && t.avx2:
		cvtF16AVX2(dst, src, n)
	case kind == 1:
		cvtF16(dst, src, n)
	case t.avx2:
		cvtBF16AVX2(dst, src, n)
	default:
		cvtBF16(dst, src, n)
	}
}
