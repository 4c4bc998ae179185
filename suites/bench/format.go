package bench

import (
	"fmt"
	"strings"
)

// The seed's display rules: phase rates and their deviations to one
// decimal, seconds to two, acceptance to one percentage decimal,
// tokens/round and speedups to two; token totals and counts exact. They
// apply to display only: statistics are computed from unrounded values.

// Missing is printed for a value that does not apply or was not measured.
const Missing = "—"

// Rate formats a rate (tok/s, GB/s, requests/s) to one decimal.
func Rate(x float64) string { return fmt.Sprintf("%.1f", x) }

// Seconds formats seconds to two decimals.
func Seconds(x float64) string { return fmt.Sprintf("%.2f", x) }

// Millis formats milliseconds (latencies: TTFT, TPOT, ITL) to one decimal.
func Millis(x float64) string { return fmt.Sprintf("%.1f", x) }

// Percent formats a ratio (0.5079) as a percentage with one decimal ("50.8%").
func Percent(ratio float64) string { return fmt.Sprintf("%.1f%%", ratio*100) }

// Ratio formats tokens/round and speedups to two decimals.
func Ratio(x float64) string { return fmt.Sprintf("%.2f", x) }

// Count formats a token total or sample count exactly.
func Count(n int) string { return fmt.Sprint(n) }

// PM formats a mean ± sample standard deviation with f; a nil deviation
// (one sample) prints the mean alone, a nil mean prints Missing.
func PM(mean, std *float64, f func(float64) string) string {
	if mean == nil {
		return Missing
	}
	if std == nil {
		return f(*mean)
	}
	return f(*mean) + " ± " + f(*std)
}

// Opt formats an optional value with f, Missing when nil.
func Opt(x *float64, f func(float64) string) string {
	if x == nil {
		return Missing
	}
	return f(*x)
}

// Table renders a GitHub Markdown table; align has one entry per column,
// 'l' or 'r'.
func Table(header []string, align string, rows [][]string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n|")
	for i := range header {
		if i < len(align) && align[i] == 'r' {
			b.WriteString("---:|")
		} else {
			b.WriteString("---|")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("| " + strings.Join(r, " | ") + " |\n")
	}
	return b.String()
}

// GB is 10^9 bytes, the unit bandwidths are printed in.
const GB = 1e9

// Markdown renders the report: a header naming model, backend and
// configuration, one row per test, and the memory and bandwidth figures.
func (r *Report) Markdown() string {
	var b strings.Builder
	e, c, m := r.Environment, r.Config, r.Memory
	fmt.Fprintf(&b, "## ninfer bench: %s (%s)\n\n", r.Load.Name, r.Load.Architecture)
	cpu := e.CPUModel
	if cpu == "" {
		cpu = "unknown CPU"
	}
	if e.CPUKernels != "" {
		cpu += ", " + e.CPUKernels + " kernels"
	}
	threads := "all cores"
	if e.Threads > 0 {
		threads = fmt.Sprintf("%d threads", e.Threads)
	}
	fmt.Fprintf(&b, "%s backend, %s (%d cores), %s, %s; graph %s, prefill chunk %d, KV %s, %d measured and %d discarded warm-up repetitions per test, prompts from %s (%d tokens), prefix reuse off, %s.\n\n",
		e.Backend, cpu, e.CPUCores, threads, e.GoVersion, c.Graph, c.PrefillChunk, c.KVCache, c.Repetitions, c.Warmup, c.CorpusPath, c.CorpusTokens, c.Sampling)
	var rows [][]string
	for _, t := range r.Tests {
		gbs := func(x float64) string { return Rate(x / GB) }
		rows = append(rows, []string{t.Label, Count(t.NPrompt), Count(t.NGen), Count(len(t.Reps)),
			PM(t.PrefillTokSMean, t.PrefillTokSStddev, Rate), PM(t.DecodeOutputTokSMean, t.DecodeOutputTokSStd, Rate),
			PM(t.PrefillSecondsMean, t.PrefillSecondsStddev, Seconds), PM(t.DecodeSecondsMean, t.DecodeSecondsStddev, Seconds),
			PM(&t.TotalSecondsMean, t.TotalSecondsStddev, Seconds),
			Opt(t.DecodeBandwidthBytesPerSecond, gbs), Opt(t.DecodeBandwidthFractionOfPeak, Percent)})
	}
	b.WriteString(Table([]string{"test", "prompt", "gen", "reps", "prefill tok/s", "decode tok/s", "prefill s", "decode s", "total s", "decode GB/s", "of peak"},
		"lrrrrrrrrrr", rows))
	fmt.Fprintf(&b, "\nMemory: weights %d bytes; KV %s, %d tokens (%d blocks of %d), %d bytes (%d bytes/token, %d tokens/GiB; %s), peak used %d bytes.\n",
		m.Weights.CapacityBytes, m.KVCache, m.KVCapacity, m.KVCapacityPageGroups, m.KVBlockTokens, m.KVPayloadBytes,
		m.KVBytesPerToken, m.KVTokensPerGiB, m.KVAccounting, m.Sequence.PeakUsedBytes)
	if w := m.Workspace; w != nil {
		fmt.Fprintf(&b, "Workspace: %d bytes held, %d used by the last step, %d at the peak.\n", w.CapacityBytes, w.UsedBytes, w.PeakUsedBytes)
	}
	switch r.Bandwidth.PeakSource {
	case "triad":
		fmt.Fprintf(&b, "Peak bandwidth %s GB/s, measured by a %d-byte triad on %d goroutines.\n", Rate(*r.Bandwidth.PeakBytesPerSecond/GB), r.Bandwidth.TriadBytes, r.Bandwidth.TriadThreads)
	case "given":
		fmt.Fprintf(&b, "Peak bandwidth %s GB/s, as given.\n", Rate(*r.Bandwidth.PeakBytesPerSecond/GB))
	default:
		b.WriteString("Peak bandwidth not measured.\n")
	}
	b.WriteString("Rates and deviations: mean ± sample standard deviation over repetitions. Decode GB/s: mean bytes read per decoded token (weights, shared by the sequences of a @bB batch, + KV of the context) × mean decode tok/s. Speculation: ")
	spec := "off (no speculative graph).\n"
	for _, t := range r.Tests {
		if t.Speculative.Enabled {
			spec = fmt.Sprintf("%s, see the JSON report.\n", t.Speculative.Backend)
			break
		}
	}
	b.WriteString(spec)
	return b.String()
}
