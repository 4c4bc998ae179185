package bench

import "fmt"

// Test kinds.
const (
	KindPP   = "pp"    // prompt processing: n_prompt tokens, the prefill's one token
	KindTG   = "tg"    // text generation: a one-token prompt, then n_gen decode tokens
	KindPPTG = "pp+tg" // n_prompt tokens, then n_gen decode tokens
)

// Label is the llama-bench style test label: pp{P}, tg{G} or pp{P}+tg{G}.
func Label(kind string, nPrompt, nGen int) string {
	switch kind {
	case KindPP:
		return fmt.Sprintf("pp%d", nPrompt)
	case KindTG:
		return fmt.Sprintf("tg%d", nGen)
	default:
		return fmt.Sprintf("pp%d+tg%d", nPrompt, nGen)
	}
}

func ptr[T any](v T) *T { return &v }

// meanStd sets *mean and *std from xs (std nil below two values).
func meanStd(xs []float64) (*float64, *float64) {
	if len(xs) == 0 {
		return nil, nil
	}
	m := Mean(xs)
	if s, ok := SampleStdDev(xs); ok {
		return &m, &s
	}
	return &m, nil
}

// Aggregate fills t's means, deviations and summed speculative block from
// t.Reps, as the seed's report does: a rate is each repetition's ratio
// (prefill: the prompt tokens it sent, image rows included (PromptTokens,
// at least n_prompt), x batch / prefill_seconds; decode: decode tokens /
// decode_seconds), then averaged. Prefill fields are null for tg tests and
// decode fields null for pp tests. Bandwidth fields are left alone.
func Aggregate(t *Test) {
	var prep, pre, dec, tot, preRate, outRate, engRate []float64
	for _, r := range t.Reps {
		tm := r.Timings
		prep = append(prep, tm.PrepareSeconds)
		pre = append(pre, tm.PrefillSeconds)
		dec = append(dec, tm.DecodeSeconds)
		tot = append(tot, tm.TotalSeconds)
		if tm.PrefillSeconds > 0 {
			preRate = append(preRate, float64(max(r.PromptTokens, t.NPrompt)*max(t.Batch, 1))/tm.PrefillSeconds)
		}
		if tm.DecodeSeconds > 0 {
			outRate = append(outRate, float64(r.DecodeOutputTokens)/tm.DecodeSeconds)
			engRate = append(engRate, float64(r.DecodeEngineTokens)/tm.DecodeSeconds)
		}
	}
	var m *float64
	m, t.PrepareSecondsStddev = meanStd(prep)
	t.PrepareSecondsMean = deref(m)
	m, t.TotalSecondsStddev = meanStd(tot)
	t.TotalSecondsMean = deref(m)
	t.PrefillTokSMean, t.PrefillTokSStddev, t.PrefillSecondsMean, t.PrefillSecondsStddev = nil, nil, nil, nil
	t.DecodeOutputTokSMean, t.DecodeOutputTokSStd, t.DecodeEngineTokSMean, t.DecodeEngineTokSStd = nil, nil, nil, nil
	t.DecodeSecondsMean, t.DecodeSecondsStddev = nil, nil
	if t.Kind != KindTG {
		t.PrefillTokSMean, t.PrefillTokSStddev = meanStd(preRate)
		t.PrefillSecondsMean, t.PrefillSecondsStddev = meanStd(pre)
	}
	if t.Kind != KindPP {
		t.DecodeOutputTokSMean, t.DecodeOutputTokSStd = meanStd(outRate)
		t.DecodeEngineTokSMean, t.DecodeEngineTokSStd = meanStd(engRate)
		t.DecodeSecondsMean, t.DecodeSecondsStddev = meanStd(dec)
	}
	specs := make([]Speculative, len(t.Reps))
	for i, r := range t.Reps {
		specs[i] = r.Speculative
	}
	t.Speculative = SumSpeculative(specs)
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

// SumSpeculative sums speculative blocks (a test's repetitions): counts and
// accepted-per-position add up; the ratios are recomputed from the sums
// (corpus aggregation), never averaged. Backend, Enabled and DraftWindow
// come from the first block.
func SumSpeculative(ss []Speculative) Speculative {
	if len(ss) == 0 {
		return Disabled()
	}
	out := Speculative{Backend: ss[0].Backend, Enabled: ss[0].Enabled, DraftWindow: ss[0].DraftWindow, AcceptedPerPosition: []int{}}
	for _, s := range ss {
		out.Rounds += s.Rounds
		out.DraftedTokens += s.DraftedTokens
		out.AcceptedTokens += s.AcceptedTokens
		out.FallbackSteps += s.FallbackSteps
		for i, a := range s.AcceptedPerPosition {
			if i == len(out.AcceptedPerPosition) {
				out.AcceptedPerPosition = append(out.AcceptedPerPosition, 0)
			}
			out.AcceptedPerPosition[i] += a
		}
	}
	SetRatios(&out)
	return out
}

// SetRatios sets s's acceptance rate (accepted / drafted) and acceptance
// length (1 + accepted / rounds) from its counts; each is null when its
// denominator is zero.
func SetRatios(s *Speculative) {
	s.AcceptanceRate, s.AcceptanceLength = nil, nil
	if r, ok := CorpusAcceptance([]SpecCounts{{Drafted: s.DraftedTokens, Accepted: s.AcceptedTokens}}); ok {
		s.AcceptanceRate = &r
	}
	if l, ok := TokensPerRound([]SpecCounts{{Rounds: s.Rounds, Accepted: s.AcceptedTokens}}); ok {
		s.AcceptanceLength = &l
	}
}

// SetBandwidth fills t's bandwidth fields from the mean bytes read per
// decoded token and the peak (nil if unknown). pp tests have none.
func SetBandwidth(t *Test, bytesPerToken float64, peak *float64) {
	t.DecodeBytesPerToken, t.DecodeBandwidthBytesPerSecond, t.DecodeBandwidthFractionOfPeak = nil, nil, nil
	if t.Kind == KindPP || t.DecodeOutputTokSMean == nil {
		return
	}
	t.DecodeBytesPerToken = ptr(bytesPerToken)
	bw := bytesPerToken * *t.DecodeOutputTokSMean
	t.DecodeBandwidthBytesPerSecond = &bw
	if peak != nil && *peak > 0 {
		t.DecodeBandwidthFractionOfPeak = ptr(bw / *peak)
	}
}
