package cpu

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkPromptAttention times the compute of one attention op of a
// 512-row prompt chunk over a fresh cache in the 0.6B-shape model's layer
// (16 query heads, 8 KV heads of 128, f32 pages of 16 positions) on 2
// threads, at each fast level, without the KV write (done once before the
// timer). It reports GMAC/s of the causal work (scores and values: 2 x
// heads x hd x T(T+1)/2 multiply-adds) and pct_peak, its share of the
// level's measured f32 FMA peak (per thread: GMAC/cpu-s, the rate per
// second of the process's CPU time, less noisy on a busy host than the
// wall-clock rate, against half of pct_peak's two-thread peak) (Peak, PeakF32), the ceiling of kernels
// that are all f32 fma.
func BenchmarkPromptAttention(b *testing.B) {
	const heads, kvHeads, hd, T = 16, 8, 128, 512
	for _, lv := range fastLevels() {
		b.Run(fmt.Sprintf("pp%d/%v/t1", T, lv), func(b *testing.B) {
			defer setLevel(lv)()
			c := attnCase{heads: heads, kvHeads: kvHeads, hd: hd, bt: 16, dtype: "f32", seqs: [][2]int{{0, T}}}
			p, op, batch, out := setupAttention(b, c, 1)
			defer p.b.Close()
			p.writeKV(op, batch)
			p.visible = visibleRows(p.visible, op.Attn, batch)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPUSeconds()
			b.ResetTimer()
			for range b.N {
				p.attentionFast(out, op, batch)
			}
			b.StopTimer()
			b.ReportMetric(float64(2*heads*hd*T*(T+1)/2)*float64(b.N)/(threadCPUSeconds()-cpu0)/1e9, "GMAC/cpu-s")
		})
		b.Run(fmt.Sprintf("pp%d/%v", T, lv), func(b *testing.B) {
			defer setLevel(lv)()
			peak := cachedPeak(PeakF32)
			c := attnCase{heads: heads, kvHeads: kvHeads, hd: hd, bt: 16, dtype: "f32", seqs: [][2]int{{0, T}}}
			p, op, batch, out := setupAttention(b, c, 2)
			defer p.b.Close()
			p.writeKV(op, batch)
			p.visible = visibleRows(p.visible, op.Attn, batch)
			cpu0 := processCPUSeconds()
			b.ResetTimer()
			for range b.N {
				p.attentionFast(out, op, batch)
			}
			b.StopTimer()
			macs := float64(2*heads*hd*T*(T+1)/2) * float64(b.N)
			gmacs := macs / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(gmacs, "GMAC/s")
			b.ReportMetric(macs/(processCPUSeconds()-cpu0)/1e9, "GMAC/cpu-s")
			if peak > 0 {
				b.ReportMetric(100*gmacs*1e9/peak, "pct_peak")
			}
		})
	}
}
