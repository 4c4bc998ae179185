package cpu

import (
	"math"

	"github.com/ninfer/ninfer-go/runtime/exec"
	"github.com/ninfer/ninfer-go/runtime/tensor"
)

// The fast paths of the hybrid ops: the stateful ops split across the
// worker pool (delta_rule by (sequence, value head), short_conv by
// channel), their inner loops on the AVX-512 kernels of hybrid_amd64.s,
// and the delta rule's chunked form for prefill rows.
//
// Exactness: the recurrent delta rule and short_conv compute every output
// with the same float32 operations, in the same order, as the reference
// loops of hybrid.go (the kernels equal the Go references below bit for
// bit), so the fast path gives the reference's results whatever the thread
// count. The chunked form reassociates the recurrence (see deltaChunk) and
// agrees with it within a tolerance (hybrid_fast_test.go).

// hybridState is a program's scratch for the hybrid ops, reused across
// steps.
type hybridState struct {
	seqStart []int       // [S+1]: rows of sequence s are seqRows[seqStart[s]:seqStart[s+1]]
	seqRows  []int       // the batch's rows grouped by sequence, in order
	scr      [][]float32 // per worker scratch
	delta    deltaTask
	conv     convTask
	unary    unaryTask
	ones     []float32 // all 1: the up operand that turns the SwiGLU kernels into SiLU
	taps     []float32 // short_conv's taps tap-major (convTask.taps)
	// recurrent turns the chunked form off (tests compare the two forms).
	recurrent bool
}

// deltaChunkLen is the chunk of the delta rule's chunked form (as
// llama.cpp and flash-linear-attention); deltaChunkMin is the fewest
// consecutive rows of one sequence the chunked form is used for.
const (
	deltaChunkLen = 64
	deltaChunkMin = 16
)

// groupRows fills h.seqStart and h.seqRows for b's rows.
func (h *hybridState) groupRows(b *exec.Batch, rows int) {
	s := len(b.StateSlots)
	for _, q := range b.RowSeq[:rows] {
		s = max(s, int(q)+1)
	}
	h.seqStart = grow(h.seqStart, s+1)
	clear(h.seqStart)
	for _, q := range b.RowSeq[:rows] {
		h.seqStart[q+1]++
	}
	for i := 1; i <= s; i++ {
		h.seqStart[i] += h.seqStart[i-1]
	}
	h.seqRows = grow(h.seqRows, rows)
	fill := h.seqStart[:s] // reused as write cursors, then restored
	for r, q := range b.RowSeq[:rows] {
		h.seqRows[fill[q]] = r
		fill[q]++
	}
	for i := s; i > 0; i-- {
		h.seqStart[i] = h.seqStart[i-1]
	}
	h.seqStart[0] = 0
}

// sizeScratch gives h.scr one slot per worker; it runs on the calling
// goroutine before the pool does, so the workers only touch their own slot.
func (h *hybridState) sizeScratch(workers int) {
	if len(h.scr) < workers {
		h.scr = append(h.scr, make([][]float32, workers-len(h.scr))...)
	}
}

// scratch is worker's scratch of n floats; the caller sized h.scr for the
// pool's workers (sizeScratch) before the workers started.
func (h *hybridState) scratch(workers, worker, n int) []float32 {
	h.scr[worker] = grow(h.scr[worker], n)
	return h.scr[worker]
}

// deltaRule runs the gated delta rule (see deltaRuleRef) on the worker
// pool: one item per (sequence, value head).
func (p *program) deltaRule(out []float32, op tensor.Op, batch *exec.Batch) {
	h := &p.hy
	h.sizeScratch(p.b.pool.n)
	h.groupRows(batch, op.Out.Rows())
	s := len(h.seqStart) - 1
	t := &h.delta
	*t = deltaTask{p: p, a: op.State, out: out, pos: batch.Positions,
		q: p.f32[op.Args[0].ID], k: p.f32[op.Args[1].ID], v: p.f32[op.Args[2].ID],
		g: p.f32[op.Args[3].ID], beta: p.f32[op.Args[4].ID],
		mem: p.b.state.delta[op.State.Layer], chunk: level != levelRef && !h.recurrent}
	p.b.pool.run(s*op.State.ValueHeads, 1, p.b.pool.n, t)
}

// deltaTask runs the delta rule for items [lo, hi) = sequence*ValueHeads +
// value head.
type deltaTask struct {
	p            *program
	a            tensor.StateArgs
	out, q, k, v []float32
	g, beta, mem []float32
	pos          []int32
	chunk        bool // use the chunked form where it applies
}

// A sequence's rows are taken in runs that keep the state in one slot
// (slotRun), each as a step of its own would be: a run of deltaChunkMin
// rows or more in the chunked form, chunks counted from its first row,
// shorter ones row by row. So a step whose rows write a checkpoint's pool
// slot up to some row and the sequence's slot after it (a checkpoint taken
// inside the step, exec.InnerStateTaker) gives what the step cut there
// gives; a verify step's rows, each writing a snapshot, are runs of one.
func (t *deltaTask) run(worker, lo, hi int) {
	h, a := &t.p.hy, t.a
	dk, dv := a.KeyDim, a.ValueDim
	per, hd := a.DeltaStateFloats(), dk*dv
	for it := lo; it < hi; it++ {
		s, vh := it/a.ValueHeads, it%a.ValueHeads
		rows := h.seqRows[h.seqStart[s]:h.seqStart[s+1]]
		for len(rows) > 0 {
			n := 1
			if t.chunk {
				n = t.slotRun(rows)
			}
			run := rows[:n]
			rows = rows[n:]
			if n >= deltaChunkMin {
				st := t.headState(run[0], vh, per, hd)
				scr := h.scratch(t.p.b.pool.n, worker, deltaChunkScratch(dk, dv))
				for c := 0; c < n; c += deltaChunkLen {
					t.headChunk(st, vh, run[c:min(c+deltaChunkLen, n)], scr)
				}
				continue
			}
			pred := h.scratch(t.p.b.pool.n, worker, dv)
			for _, r := range run {
				t.headStep(t.headState(r, vh, per, hd), r, vh, pred)
			}
		}
	}
}

// headState returns value head vh's state (hd floats of a slot of per) in
// the slot row r writes: zero at position 0, else a copy of the one the
// row reads.
func (t *deltaTask) headState(r, vh, per, hd int) []float32 {
	src, dst := int(t.p.stateRead[r]), int(t.p.stateWrite[r])
	st := t.mem[dst*per+vh*hd:][:hd]
	switch {
	case t.pos[r] == 0:
		clear(st)
	case src != dst:
		copy(st, t.mem[src*per+vh*hd:][:hd])
	}
	return st
}

// slotRun is how many leading rows of rows (one sequence's, in order) keep
// their state in the first one's slot: the first reads any slot (a
// checkpoint, exec.Batch.StateFrom, or the slot the previous run wrote)
// or starts at position 0, the others read and write that slot.
func (t *deltaTask) slotRun(rows []int) int {
	slot := t.p.stateWrite[rows[0]]
	for i, r := range rows[1:] {
		if t.p.stateRead[r] != slot || t.p.stateWrite[r] != slot || t.pos[r] == 0 {
			return i + 1
		}
	}
	return len(rows)
}

// headStep advances value head vh's state st [dk, dv] by row r and writes
// the row's output: the reference's loop, in two passes over st.
func (t *deltaTask) headStep(st []float32, r, vh int, pred []float32) {
	a := t.a
	kd, vd, dk, dv := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim, a.KeyDim, a.ValueDim
	kh := vh % a.KeyHeads
	qh, kr := t.q[r*kd+kh*dk:][:dk], t.k[r*kd+kh*dk:][:dk]
	v, o := t.v[r*vd+vh*dv:][:dv], t.out[r*vd+vh*dv:][:dv]
	decay := float32(math.Exp(float64(t.g[r*a.ValueHeads+vh])))
	b := t.beta[r*a.ValueHeads+vh]
	fast := useSIMD && dv%16 == 0 && dk > 0
	if fast {
		deltaDecayPred(&st[0], &kr[0], &pred[0], dk, dv, decay)
	} else {
		deltaDecayPredGo(st, kr, pred, dk, dv, decay)
	}
	for j := range pred {
		pred[j] = b * (v[j] - pred[j])
	}
	if fast {
		deltaUpdateOut(&st[0], &kr[0], &qh[0], &pred[0], &o[0], dk, dv, a.Scale)
	} else {
		deltaUpdateOutGo(st, kr, qh, pred, o, dk, dv, a.Scale)
	}
}

// deltaDecayPredGo is deltaDecayPred: s *= decay, then pred = s^T k.
func deltaDecayPredGo(s, k, pred []float32, dk, dv int, decay float32) {
	clear(pred[:dv])
	for i := range dk {
		ki, row := k[i], s[i*dv:(i+1)*dv]
		for j := range row {
			row[j] *= decay
			pred[j] += float32(row[j] * ki)
		}
	}
}

// deltaUpdateOutGo is deltaUpdateOut: s += k d^T, then o = s^T (scale q).
func deltaUpdateOutGo(s, k, q, d, o []float32, dk, dv int, scale float32) {
	clear(o[:dv])
	for i := range dk {
		ki, qi, row := k[i], q[i]*scale, s[i*dv:(i+1)*dv]
		for j := range row {
			row[j] += float32(ki * d[j])
			o[j] += float32(row[j] * qi)
		}
	}
}

// gemmF32Go is gemmF32: C[i,j] = fma(A[i,p], B[p,j], c) for p < k in
// order, from c = beta*C[i,j] (rounded), for i < m, j < n; A [m, k],
// B [k, n] and C [m, n] are row-major with row strides lda, ldb and ldc.
func gemmF32Go(c, a, b []float32, m, k, n, lda, ldb, ldc int, beta float32) {
	for i := range m {
		ci, ai := c[i*ldc:][:n], a[i*lda:][:k]
		for j := range ci {
			s := ci[j] * beta
			for p, x := range ai {
				s = fma32(x, b[p*ldb+j], s)
			}
			ci[j] = s
		}
	}
}

// gemm is gemmF32Go on the kernel of the level where it applies (n a
// multiple of 16).
func gemm(c, a, b []float32, m, k, n, lda, ldb, ldc int, beta float32) {
	if m == 0 || n == 0 || (k == 0 && beta == 1) {
		return
	}
	if level == levelRef || n%16 != 0 || k == 0 {
		gemmF32Go(c, a, b, m, k, n, lda, ldb, ldc, beta)
		return
	}
	_ = c[(m-1)*ldc+n-1]
	_ = a[(m-1)*lda+k-1]
	_ = b[(k-1)*ldb+n-1]
	if useSIMD {
		gemmF32(&c[0], &a[0], &b[0], m, k, n, lda, ldb, ldc, beta)
		return
	}
	gemmF32AVX2(&c[0], &a[0], &b[0], m, k, n, lda, ldb, ldc, beta)
}

// deltaChunkPad is n rounded up to the kernels' 16 columns.
func deltaChunkPad(n int) int { return (n + 15) &^ 15 }

// deltaChunkScratch is the scratch headChunk needs, in floats.
func deltaChunkScratch(dk, dv int) int {
	const c, cp = deltaChunkLen, (deltaChunkLen + 15) &^ 15
	return 2*c*dk + // kq [2c, dk]
		dk*cp + // kT [dk, cp]
		2*c*dv + // ws [2c, dv]
		2*c*cp + // kk [2c, cp]
		cp*c + // decay [c, cp]
		2*c*dv + // u, o [c, dv]
		dk*cp // sc [dk, cp]
}

// headChunk advances value head vh's state st [dk, dv] over rows (at most
// deltaChunkLen consecutive rows of one sequence) with the chunked form of
// the gated delta rule, writing the rows' outputs. With G_t the
// cumulative sum of g over the chunk up to row t, S0 the state before it,
// and u_t = beta_t (v_t - exp(g_t) S_{t-1}^T k_t) (the recurrence's
// delta):
//
//	u_t = beta_t (v_t - exp(G_t) S0^T k_t) - sum_{i<t} beta_t exp(G_t-G_i) (k_t.k_i) u_i
//	o_t = Scale (exp(G_t) S0^T q_t + sum_{i<=t} exp(G_t-G_i) (q_t.k_i) u_i)
//	S   = exp(G_last) S0 + sum_t exp(G_last-G_t) k_t u_t^T
//
// which is the recurrence unrolled over the chunk, as matrix products on
// gemm: K S0 and Q S0, K K^T and Q K^T, the triangular solve for U in
// blocks, the masked (Q K^T) U and K^T U. Every value depends only on the
// chunk's rows and S0, never on the batch's other rows.
func (t *deltaTask) headChunk(st []float32, vh int, rows []int, scr []float32) {
	a := t.a
	kd, vd, dk, dv := a.KeyHeads*a.KeyDim, a.ValueHeads*a.ValueDim, a.KeyDim, a.ValueDim
	kh := vh % a.KeyHeads
	n := len(rows)
	np := deltaChunkPad(n)
	kq, scr := scr[:2*n*dk], scr[2*n*dk:] // K, Q rows [2n, dk] when not in place
	kT, scr := scr[:dk*np], scr[dk*np:]   // K^T [dk, np], zero past n
	ws, scr := scr[:2*n*dv], scr[2*n*dv:] // [K; Q] S0 [2n, dv]
	kk, scr := scr[:2*n*np], scr[2*n*np:] // [K; Q] K^T [2n, np]
	dec, scr := scr[:n*np], scr[n*np:]    // exp(G_c-G_i) masked (Q K^T) [n, np]
	u, scr := scr[:n*dv], scr[n*dv:]      // [n, dv]
	o, scr := scr[:n*dv], scr[n*dv:]      // [n, dv]
	sc := scr[:dk*np]                     // exp(G_last-G_c) K^T [dk, np]
	// The rows' keys, queries and outputs: in place when the rows are
	// consecutive (a prompt's), else gathered (and scattered).
	r0 := rows[0]
	kRows, qRows, ld := t.k[r0*kd+kh*dk:], t.q[r0*kd+kh*dk:], kd
	oRows, ldo := t.out[r0*vd+vh*dv:], vd // O [n, dv], in place too
	inPlace := rows[n-1]-r0 == n-1
	if !inPlace {
		kRows, qRows, ld = kq[:n*dk], kq[n*dk:], dk
		oRows, ldo = o, dv
		for c, r := range rows {
			copy(kRows[c*dk:(c+1)*dk], t.k[r*kd+kh*dk:][:dk])
			copy(qRows[c*dk:(c+1)*dk], t.q[r*kd+kh*dk:][:dk])
		}
	}
	var G [deltaChunkLen]float64
	var gexp [deltaChunkLen]float32
	var acc float64
	clear(kT)
	for c, r := range rows {
		acc += float64(t.g[r*a.ValueHeads+vh])
		G[c] = acc
		gexp[c] = float32(math.Exp(acc))
		kr := kRows[c*ld:][:dk]
		for i, x := range kr {
			kT[i*np+c] = x
		}
	}
	clear(ws)
	gemm(ws, kRows, st, n, dk, dv, ld, dv, dv, 1)
	gemm(ws[n*dv:], qRows, st, n, dk, dv, ld, dv, dv, 1)
	// kk: K K^T and Q K^T, only the 16-column blocks at or left of each
	// 16-row block's diagonal (the rest is masked out below).
	clear(kk)
	for c0 := 0; c0 < n; c0 += 16 {
		m := min(16, n-c0)
		w := deltaChunkPad(c0 + m)
		gemm(kk[c0*np:], kRows[c0*ld:], kT, m, dk, w, ld, np, np, 1)
		gemm(kk[(n+c0)*np:], qRows[c0*ld:], kT, m, dk, w, ld, np, np, 1)
	}
	deltaDecays(dec, G[:n], np)
	// U = diag(beta) (V - diag(exp(G)) K S0) + C U with C strictly lower
	// triangular, C[c,i] = -beta_c exp(G_c-G_i) (k_c.k_i), held in kk's K
	// rows; solved in blocks of 16 rows: the rows before the block in one
	// product, then the block's own rows one by one (each element's fused
	// chain still runs over i in order).
	for c, r := range rows {
		v := t.v[r*vd+vh*dv:][:dv]
		b := t.beta[r*a.ValueHeads+vh]
		uc, wc := u[c*dv:(c+1)*dv], ws[c*dv:(c+1)*dv]
		for j := range uc {
			uc[j] = b * (v[j] - gexp[c]*wc[j])
		}
		cc, dc := kk[c*np:c*np+c], dec[c*np:c*np+c]
		for i := range cc {
			cc[i] = -b * dc[i] * cc[i]
		}
	}
	for c0 := 0; c0 < n; c0 += 16 {
		m := min(16, n-c0)
		gemm(u[c0*dv:], kk[c0*np:], u, m, c0, dv, np, dv, dv, 1)
		for c := c0 + 1; c < c0+m; c++ {
			gemm(u[c*dv:], kk[c*np+c0:], u[c0*dv:], 1, c-c0, dv, np, dv, dv, 1)
		}
	}
	// O = diag(Scale exp(G)) Q S0 + Scale (decay-masked Q K^T) U, in
	// blocks of 16 rows over the U rows at or before them.
	for c := range n {
		dc, qk := dec[c*np:c*np+c+1], kk[(n+c)*np:]
		for i := range dc {
			dc[i] *= qk[i] * a.Scale
		}
		oc, xc := oRows[c*ldo:][:dv], ws[(n+c)*dv:(n+c+1)*dv]
		gs := gexp[c] * a.Scale
		for j := range oc {
			oc[j] = gs * xc[j]
		}
	}
	for c0 := 0; c0 < n; c0 += 16 {
		m := min(16, n-c0)
		gemm(oRows[c0*ldo:], dec[c0*np:], u, m, c0+m, dv, np, dv, ldo, 1)
	}
	if !inPlace {
		for c, r := range rows {
			copy(t.out[r*vd+vh*dv:][:dv], o[c*dv:(c+1)*dv])
		}
	}
	// S = exp(G_last) S0 + (K^T diag(exp(G_last-G))) U.
	last := G[n-1]
	var coef [deltaChunkLen]float32
	for c := range n {
		coef[c] = float32(math.Exp(last - G[c]))
	}
	for i := range dk {
		ci, ki := sc[i*np:i*np+n], kT[i*np:i*np+n]
		for c := range ci {
			ci[c] = coef[c] * ki[c]
		}
	}
	gemm(st, sc, u, dk, n, dv, np, dv, dv, gexp[n-1])
}

// deltaDecays writes exp(G[c]-G[i]) to dec[c*ld+i] for i <= c and 0 past
// the diagonal, for the chunk's cumulative gates G (non-increasing: the
// model's gates are <= 0). Each value is exp(G[c]-M) * exp(M-G[i]) in
// float64 around the midpoint M of G's range, so a chunk takes 2n
// exponentials instead of n^2/2; a range too wide for float64's exponents
// takes the direct form.
func deltaDecays(dec []float32, G []float64, ld int) {
	n := len(G)
	lo, hi := G[0], G[0]
	for _, x := range G {
		lo, hi = min(lo, x), max(hi, x)
	}
	direct := hi-lo > 1200 || math.IsNaN(hi-lo)
	var up, down [deltaChunkLen]float64
	mid := (lo + hi) / 2
	if !direct {
		for c, x := range G {
			up[c], down[c] = math.Exp(x-mid), math.Exp(mid-x)
		}
	}
	for c := range n {
		row := dec[c*ld : (c+1)*ld]
		for i := 0; i <= c; i++ {
			if direct {
				row[i] = float32(math.Exp(G[c] - G[i]))
			} else {
				row[i] = float32(up[c] * down[i])
			}
		}
		clear(row[c+1:])
	}
}

// convTapRows is the fewest rows for which short_conv runs on the convRow
// kernels: they read the taps tap-major, transposed once per op.
const convTapRows = 8

// shortConv runs short_conv (see shortConvRef) on the worker pool, split
// by channel: each channel's outputs and window are computed as the
// reference does, rows in order.
func (p *program) shortConv(out []float32, op tensor.Op, batch *exec.Batch) {
	t := &p.hy.conv
	*t = convTask{p: p, out: out, x: p.f32[op.Args[0].ID], w: p.f32[op.Args[1].ID],
		c: op.Out.Cols(), k: op.State.Kernel, rows: op.Out.Rows(), pos: batch.Positions,
		mem: p.b.state.conv[op.State.Layer]}
	if level != levelRef && t.rows >= convTapRows {
		p.hy.taps = grow(p.hy.taps, t.c*t.k)
		t.taps = p.hy.taps
		for ch := range t.c {
			for j := range t.k {
				t.taps[j*t.c+ch] = t.w[ch*t.k+j]
			}
		}
	}
	workers := p.b.pool.n
	if len(out) < parallelElems {
		workers = 1
	}
	p.b.pool.run(t.c, 64, workers, t)
}

// convTask runs short_conv for channels [lo, hi).
type convTask struct {
	p          *program
	out, x, w  []float32
	taps       []float32 // w tap-major [K, C] for convRow; nil: the Go loop
	mem        []float32
	c, k, rows int
	pos        []int32
}

func (t *convTask) run(_, lo, hi int) {
	c, k := t.c, t.k
	per := (k - 1) * c
	for r := range t.rows {
		src, dst := int(t.p.stateRead[r]), int(t.p.stateWrite[r])
		win := t.mem[dst*per : (dst+1)*per] // [K-1, C]
		switch {
		case t.pos[r] == 0:
			for j := 0; j < k-1; j++ {
				clear(win[j*c+lo : j*c+hi])
			}
		case src != dst:
			from := t.mem[src*per : (src+1)*per]
			for j := 0; j < k-1; j++ {
				copy(win[j*c+lo:j*c+hi], from[j*c+lo:j*c+hi])
			}
		}
		xr, o := t.x[r*c:(r+1)*c], t.out[r*c:(r+1)*c]
		if t.taps != nil {
			convRows(o[lo:hi], win[lo:], xr[lo:hi], t.taps[lo:], c, k)
		} else {
			for ch := lo; ch < hi; ch++ {
				taps := t.w[ch*k : (ch+1)*k]
				var sum float32
				for j := 0; j < k-1; j++ {
					sum += win[j*c+ch] * taps[j]
				}
				o[ch] = sum + xr[ch]*taps[k-1]
			}
		}
		if k > 1 {
			for j := 0; j < k-2; j++ {
				copy(win[j*c+lo:j*c+hi], win[(j+1)*c+lo:(j+1)*c+hi])
			}
			copy(win[(k-2)*c+lo:(k-2)*c+hi], xr[lo:hi])
		}
	}
}

// convRowGo is convRow: for i < len(o), o[i] = (sum over j < k-1 in order,
// from 0, of win[j*c+i]*taps[j*c+i]) + x[i]*taps[(k-1)*c+i], the
// reference's operations for one row with the taps tap-major.
func convRowGo(o, win, x, taps []float32, c, k int) {
	for i := range o {
		var sum float32
		for j := 0; j < k-1; j++ {
			sum += win[j*c+i] * taps[j*c+i]
		}
		o[i] = sum + x[i]*taps[(k-1)*c+i]
	}
}

// convRows is convRowGo on the level's kernel for the channels in whole
// 16s, the Go loop for the rest.
func convRows(o, win, x, taps []float32, c, k int) {
	n := len(o) &^ 15
	if n > 0 {
		_ = taps[(k-1)*c+n-1]
		_ = x[n-1]
		if k > 1 {
			_ = win[(k-2)*c+n-1]
		}
		if useSIMD {
			convRow(&o[0], &win[0], &x[0], &taps[0], n, c, k)
		} else {
			convRowAVX2(&o[0], &win[0], &x[0], &taps[0], n, c, k)
		}
	}
	if n < len(o) {
		convRowGo(o[n:], win[n:], x[n:], taps[n:], c, k)
	}
}

// unaryTask runs the element-wise hybrid ops over items [lo, hi):
// elements for unary and mul, rows for mul_row, groups for l2_norm; each
// element is computed as the reference loop of runHybrid does.
type unaryTask struct {
	kind  tensor.OpKind
	fn    func(float32) float32 // unary; nil for SiLU (by rows, as ggml)
	ones  []float32             // SiLU: len(out) ones (hybridState.ones)
	out   []float32
	x, y  []float32
	d     int // mul with y [T, 1], mul_row: row width; l2_norm: group
	eps   float32
	scale bool // mul: y scales rows
}

func (t *unaryTask) run(_, lo, hi int) {
	switch t.kind {
	case tensor.OpUnary:
		out, x := t.out[lo:hi], t.x[lo:hi]
		if t.fn == nil { // SiLU: ggml_vec_silu_f32, by rows of d
			if level != levelRef {
				// The SwiGLU kernels times 1: siluV and siluTail exactly.
				swigluFast(t.out, t.x, t.ones, lo, hi, t.d)
				break
			}
			whole := t.d - t.d%16
			for i, v := range x {
				if (lo+i)%t.d < whole {
					out[i] = siluV(v)
				} else {
					out[i] = siluTail(v)
				}
			}
			break
		}
		for i, v := range x {
			out[i] = t.fn(v)
		}
	case tensor.OpMul:
		if t.scale {
			for i := lo; i < hi; i++ {
				t.out[i] = t.x[i] * t.y[i/t.d]
			}
			return
		}
		out, x, y := t.out[lo:hi], t.x[lo:hi], t.y[lo:hi]
		for i := range out {
			out[i] = x[i] * y[i]
		}
	case tensor.OpMulRow:
		d := t.d
		for r := lo; r < hi; r++ {
			o, xr := t.out[r*d:(r+1)*d], t.x[r*d:(r+1)*d]
			for j := range o {
				o[j] = xr[j] * t.y[j]
			}
		}
	case tensor.OpL2Norm:
		g := t.d
		for s := lo; s < hi; s++ {
			l2Norm(t.out[s*g:(s+1)*g], t.x[s*g:(s+1)*g], t.eps)
		}
	}
}

// elementwiseHybrid runs a unary, mul, mul_row or l2_norm op, split across
// workers when it is large.
func (p *program) elementwiseHybrid(out []float32, op tensor.Op) {
	t := &p.hy.unary
	*t = unaryTask{kind: op.Kind, out: out, x: p.f32[op.Args[0].ID]}
	n, grain := len(out), 1024
	switch op.Kind {
	case tensor.OpUnary:
		t.fn, t.d = unaryFn(op.Fn), op.Out.Cols()
		if t.fn == nil {
			if len(p.hy.ones) < len(out) {
				p.hy.ones = make([]float32, len(out))
				for i := range p.hy.ones {
					p.hy.ones[i] = 1
				}
			}
			t.ones = p.hy.ones
		}
	case tensor.OpMul:
		t.y = p.f32[op.Args[1].ID]
		if op.Args[1].Cols() == 1 && op.Out.Cols() != 1 {
			t.scale, t.d = true, op.Out.Cols()
		}
	case tensor.OpMulRow:
		t.y, t.d = p.f32[op.Args[1].ID], op.Out.Cols()
		n, grain = len(out)/t.d, max(1, 1024/t.d)
	case tensor.OpL2Norm:
		t.d, t.eps = op.Group, op.Eps
		n, grain = len(out)/op.Group, max(1, 1024/op.Group)
	}
	workers := p.b.pool.n
	if len(out) < parallelElems {
		workers = 1
	}
	p.b.pool.run(n, grain, workers, t)
}
