package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// TestScore4ArgsLayout checks score4Args' field offsets against those
// attn_scores4q_amd64.s reads (S4_*) and that its tree can be 64-byte
// aligned within treeBuf.
func TestScore4ArgsLayout(t *testing.T) {
	var a score4Args
	got := []uintptr{unsafe.Offsetof(a.q), unsafe.Offsetof(a.out), unsafe.Offsetof(a.k), unsafe.Offsetof(a.koffs),
		unsafe.Offsetof(a.nc), unsafe.Offsetof(a.kstride), unsafe.Offsetof(a.steps), unsafe.Offsetof(a.scale),
		unsafe.Offsetof(a.pfoffs), unsafe.Offsetof(a.pfn), unsafe.Offsetof(a.ka), unsafe.Offsetof(a.kb),
		unsafe.Offsetof(a.ra), unsafe.Offsetof(a.rb), unsafe.Offsetof(a.da), unsafe.Offsetof(a.db), unsafe.Offsetof(a.tree)}
	want := []uintptr{0, 32, 64, 72, 80, 88, 96, 104, 112, 120, 128, 136, 144, 152, 160, 168, 176}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("field %d at offset %d, the assembly reads %d", i, got[i], want[i])
		}
	}
	if len(a.treeBuf)*4 < 4*8*16*4+63 {
		t.Fatalf("treeBuf of %d floats cannot hold an aligned tree", len(a.treeBuf))
	}
}

// TestAttnScores4q checks attnScores4q against dotVecF32 * scale, bit for
// bit, for 4 query vectors over chunks in scattered order, head
// dimensions of 1 to 4 steps of 64, values with zeros of both signs.
func TestAttnScores4q(t *testing.T) {
	needSIMD(t)
	rng := rand.New(rand.NewPCG(9, 9))
	val := func() float32 {
		switch rng.IntN(8) {
		case 0:
			return 0
		case 1:
			return float32(math.Copysign(0, -1))
		}
		return float32(rng.NormFloat64() * 3)
	}
	for _, hd := range []int{64, 128, 192, 256} {
		for _, nc := range []int{2, 6} {
			t.Run(fmt.Sprintf("hd=%d/chunks=%d", hd, nc), func(t *testing.T) {
				k := make([]float32, (nc+1)*hd*attnChunk) // chunk c at c*hd*attnChunk: [hd][attnChunk]
				for i := range k {
					k[i] = val()
				}
				q := make([]float32, 4*hd)
				for i := range q {
					q[i] = val()
				}
				koffs := make([]int, nc)
				for c, p := range rng.Perm(nc + 1)[:nc] {
					koffs[c] = p * hd * attnChunk
				}
				out := make([]float32, 4*nc*attnChunk)
				var a score4Args
				a.tree = alignUp(unsafe.Pointer(&a.treeBuf[0]), 64)
				a.k, a.koffs, a.nc, a.kstride, a.steps, a.scale = unsafe.Pointer(&k[0]), &koffs[0], nc, 4*attnChunk, hd/64, 0.37
				for u := range 4 {
					a.q[u], a.out[u] = unsafe.Pointer(&q[u*hd]), unsafe.Pointer(&out[u*nc*attnChunk])
				}
				attnScores4q(&a)
				for u := range 4 {
					for c := range nc {
						for l := range attnChunk {
							want := dotVecF32(k[koffs[c]+l:], attnChunk, q[u*hd:(u+1)*hd], hd) * a.scale
							got := out[(u*nc+c)*attnChunk+l]
							if math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("query %d chunk %d lane %d: %v (%#x), want %v (%#x)", u, c, l, got, math.Float32bits(got), want, math.Float32bits(want))
							}
						}
					}
				}
			})
		}
	}
}
