package cpu

import (
	"fmt"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/kv"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// kvPages is the backend's KV cache, reserved once by Reserve. f32 pages
// hold float32 rows that attention reads in place; every other format holds
// rows encoded by codec (quantized on write, dequantized in attention).
type kvPages struct {
	k, v     [][]float32 // f32: [layer][slot*KVDim]
	kq, vq   [][]byte    // other formats: [layer][slot*rowBytes]
	codec    *kv.Codec   // nil for f32
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
	if c.Format == kv.F32 {
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
// causal attention for every (row, head) pair in parallel.
func (p *program) attention(out []float32, op tensor.Op, b *exec.Batch) {
	if p.b.cache.codec != nil {
		p.attentionCoded(out, op, b)
		return
	}
	a, kv := op.Attn, p.b.kv
	q, k, v := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	kc, vc := p.b.cache.k[a.Layer], p.b.cache.v[a.Layer]
	kvd, qd := kv.KVDim, a.Heads*a.HeadDim
	slot := func(seq int32, pos int) int {
		return int(b.Tables[seq][pos/kv.BlockTokens])*kv.BlockTokens + pos%kv.BlockTokens
	}
	T := op.Out.Rows()
	for t := 0; t < T; t++ {
		s := slot(b.RowSeq[t], int(b.Positions[t]))
		copy(kc[s*kvd:(s+1)*kvd], k[t*kvd:(t+1)*kvd])
		copy(vc[s*kvd:(s+1)*kvd], v[t*kvd:(t+1)*kvd])
	}
	group := a.Heads / a.KVHeads
	hd := a.HeadDim
	p.b.pool.parallel(T*a.Heads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/a.Heads, i%a.Heads
			seq, n := b.RowSeq[t], int(b.Positions[t])+1
			kvh := h / group
			qh := q[t*qd+h*hd : t*qd+(h+1)*hd]
			scores := p.scratch(p.score, worker, n)
			for j := 0; j < n; j++ {
				s := slot(seq, j)
				scores[j] = dotFMA(qh, kc[s*kvd+kvh*hd:s*kvd+(kvh+1)*hd]) * a.Scale
			}
			softmaxInPlace(scores)
			o := out[t*qd+h*hd : t*qd+(h+1)*hd]
			clear(o)
			for j := 0; j < n; j++ {
				s := slot(seq, j)
				vr := vc[s*kvd+kvh*hd : s*kvd+(kvh+1)*hd]
				wj := scores[j]
				for d, v := range vr {
					o[d] += wj * v
				}
			}
		}
	})
}

// attentionCoded is attention over encoded pages: each row is encoded as it
// is written; then for every (row, KV head) pair, that head's K and V slices
// of all visible positions are decoded once, block by block, into float32
// scratch, and each query head of the group does the same dot products,
// softmax and accumulation as the f32 path.
func (p *program) attentionCoded(out []float32, op tensor.Op, b *exec.Batch) {
	a, l, c := op.Attn, p.b.kv, p.b.cache.codec
	q, k, v := p.f32[op.Args[0].ID], p.f32[op.Args[1].ID], p.f32[op.Args[2].ID]
	kc, vc, rb := p.b.cache.kq[a.Layer], p.b.cache.vq[a.Layer], p.b.cache.rowBytes
	kvd, qd, bt := l.KVDim, a.Heads*a.HeadDim, l.BlockTokens
	T := op.Out.Rows()
	for t := 0; t < T; t++ {
		pos := int(b.Positions[t])
		s := int(b.Tables[b.RowSeq[t]][pos/bt])*bt + pos%bt
		c.Encode(kc[s*rb:(s+1)*rb], k[t*kvd:(t+1)*kvd])
		c.Encode(vc[s*rb:(s+1)*rb], v[t*kvd:(t+1)*kvd])
	}
	group := a.Heads / a.KVHeads
	hd := a.HeadDim
	p.b.pool.parallel(T*a.KVHeads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			t, kvh := i/a.KVHeads, i%a.KVHeads
			table, n := b.Tables[b.RowSeq[t]], int(b.Positions[t])+1
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
					scores[j] = dotFMA(qh, ks[j*hd:(j+1)*hd]) * a.Scale
				}
				softmaxInPlace(scores)
				o := out[t*qd+h*hd : t*qd+(h+1)*hd]
				clear(o)
				for j, wj := range scores {
					for d, v := range vs[j*hd : (j+1)*hd] {
						o[d] += wj * v
					}
				}
			}
		}
	})
}
